"""Small pure helpers of ``_stages``: the inputs a program was captured on, the names of
tied dims, the report's dim ranges and op counts, and quantized boundary leaves."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.capture import CaptureResult
from pt2onnx.errors import InvalidInputError


def quantized_leaf(t: torch.Tensor, where: str, with_qparams: bool) -> Any:
    """A quantized tensor's boundary form for passes/quantized_io.py; None for others."""
    from pt2onnx.passes import quantized_io

    if not t.is_quantized:
        return None
    name = str(t.dtype).removeprefix("torch.")
    if not quantized_io.supported(name) or t.qscheme() not in (
            torch.per_tensor_affine, torch.per_tensor_symmetric):
        raise InvalidInputError(
            f"an {where} is a {name} {t.qscheme()} tensor; quantized_io='triple' takes "
            "per-tensor quint8 and qint8 tensors. Next step: leave quantized_io at its "
            "default ('float'), where it travels as its dequantized values.")
    if not with_qparams:
        return quantized_io.QuantizedLeaf(name)
    return quantized_io.QuantizedLeaf(name, float(t.q_scale()), int(t.q_zero_point()))


def tie_names(dim_names: list[dict[int, str]], ties: list[Any],
               ) -> dict[str, list[tuple[int, int]]]:
    """Dims that broadcast against each other (``ties``): each input keeps its own name
    in ``dim_names`` (changed in place); returns the tie's symbol -> its positions."""
    sizes = {}
    for tie in ties:
        for name, positions in tie.names.items():
            for i, axis in positions:
                if i < len(dim_names):
                    dim_names[i][axis] = name
        sizes[str(tie.symbol)] = [p for ps in tie.names.values() for p in ps]
    return sizes


def example_of(
    captured: CaptureResult, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The inputs the program was captured on: a doubled example, or the user's."""
    if captured.example is None:
        return args, kwargs
    return tuple(captured.example[0]), dict(captured.example[1])


def dynamic_dims(program: torch.export.ExportedProgram, names: dict[Any, Any]) -> dict[str, str]:
    """Each symbolic dim with the range torch.export guarded it to."""
    dims = {}
    for sym, vr in program.range_constraints.items():
        # A derived dim (2*s44) shows in the user's names (2*half).
        shown = str(names[sym] if sym in names else sym.xreplace(names)
                    if hasattr(sym, "xreplace") else sym)
        dims[shown] = f"[{vr.lower}, {vr.upper}]"
    return dims


def histogram(model: ir.Model) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in model.graph:
        key = node.op_type if not node.domain else f"{node.domain}::{node.op_type}"
        counts[key] = counts.get(key, 0) + 1
    return counts
