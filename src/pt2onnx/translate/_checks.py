"""Checks on what the model and the rules hand the translator."""

from __future__ import annotations

import operator
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.errors import InvalidInputError, TranslationError
from pt2onnx.translate._fold import Const
from pt2onnx.translate._fx_meta import Source
from pt2onnx.translate._registry import op_name


def _has_complex(val: Any) -> bool:
    if isinstance(val, torch.Tensor):
        return val.is_complex()
    if isinstance(val, (tuple, list)):
        return any(_has_complex(v) for v in val)
    return False


def touches_complex(node: torch.fx.Node) -> bool:
    """Whether ``node`` reads or writes a complex tensor (by its FX metadata)."""
    return _has_complex(node.meta.get("val")) or any(
        _has_complex(arg.meta.get("val")) for arg in node.all_input_nodes)


def _check_output(index: int, value: Any) -> None:
    if not isinstance(value, (Const, torch.Tensor, bool, int, float)):
        raise InvalidInputError(
            f"output {index} of the model is a {type(value).__name__} ({value!r:.60}), which "
            "ONNX cannot represent: graph outputs are tensors. Next step: return only tensors "
            "(and containers of tensors) from forward, or drop this output."
        )


def _check_result(node: torch.fx.Node, result: Any, fn: Any, src: Source) -> None:
    """A rule must return one value per output of its FX node."""
    val = node.meta.get("val")
    if not isinstance(val, (torch.Tensor, tuple, list)) or node.target is operator.getitem:
        return
    want = len(val) if isinstance(val, (tuple, list)) else 1
    is_seq = isinstance(result, (tuple, list))
    if isinstance(val, torch.Tensor):
        if result is not None and not is_seq:
            return
    elif is_seq and len(result) == want:
        return
    where = f"\n  at {src.source}" if src.source else ""
    shown = f"{len(result)} output(s)" if is_seq else (
        "a single value" if isinstance(result, ir.Value) else repr(result))
    raise TranslationError(
        f"the rule {getattr(fn, '__qualname__', fn)} for {op_name(node.target)} returned "
        f"{shown}, but node {node.name} has {want} tensor output(s){where}\n"
        "Next step: return one onnx_ir.Value per output of the op (a tuple when there are "
        "several; g.op.X(..., _outputs=n) makes n outputs)."
    )
