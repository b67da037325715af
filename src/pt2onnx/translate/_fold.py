"""Values known at export time, and constant folding during the translator's walk.

A node whose inputs are all known at export time (Python values, folded results, small
buffers) is run in torch and never becomes an ONNX node; its result is kept as a
``Const`` and becomes an initializer only where a rule needs it as a value.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.translate._registry import KEEP_UNFOLDED, load_deferred

# Buffers and lifted constants up to this many elements take part in constant
# folding; a folded result larger than this is not materialised.
FOLD_LIMIT = 1 << 16
_FOLDABLE_PY = frozenset(
    {operator.getitem, operator.add, operator.sub, operator.mul, operator.floordiv,
     operator.truediv, operator.mod, operator.neg, operator.pow}
)


@dataclass
class Const:
    """A tensor known at export time (a folded value or a small buffer)."""

    tensor: torch.Tensor
    name: str | None = None


def foldable(target: Any, args: list[Any], kwargs: dict[str, Any]) -> bool:
    """Whether a node with these (translated) arguments can run in torch at export time."""
    load_deferred(target)  # its rules' module may add it to KEEP_UNFOLDED
    if target in KEEP_UNFOLDED:
        return False
    if isinstance(target, torch._ops.OpOverload):
        if torch.Tag.nondeterministic_seeded in target.tags or target._schema.is_mutable:
            return False
    elif target not in _FOLDABLE_PY:
        return False
    return not _contains_value((args, kwargs))


def fold(node: torch.fx.Node, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Runs the node in torch: its result with tensors as ``Const``, or None."""
    real_args = _unwrap(args)
    real_kwargs = _unwrap(kwargs)
    try:
        with torch.no_grad():
            out = node.target(*real_args, **real_kwargs)  # type: ignore[operator]
        return _wrap(out)
    except Exception:
        # Not foldable here (too big, or the op needs real inputs): translate it.
        return None


def empty_result(node: torch.fx.Node, target: Any) -> Const | None:
    """The result of a functional op whose one output has a static shape with a 0 in it."""
    if not isinstance(target, torch._ops.OpOverload) or target._schema.is_mutable:
        return None
    if len(target._schema.returns) != 1:
        return None
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.is_complex():
        return None
    if not all(isinstance(d, int) for d in val.shape) or 0 not in val.shape:
        return None
    return Const(torch.empty(tuple(val.shape), dtype=val.dtype))


def get_attr(gm: torch.fx.GraphModule, target: str) -> Any:
    """The object a ``get_attr`` node reads; a tensor as a ``Const``."""
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, torch.Tensor):
        return Const(obj, target)
    return obj


def _contains_value(x: Any) -> bool:
    if isinstance(x, ir.Value):
        return True
    if isinstance(x, (list, tuple)):
        return any(_contains_value(v) for v in x)
    if isinstance(x, dict):
        return any(_contains_value(v) for v in x.values())
    return False


_CPU = torch.device("cpu")


def _unwrap(x: Any) -> Any:
    if isinstance(x, Const):
        return x.tensor
    if isinstance(x, torch.device):
        # Fold on the CPU: a model on the meta device would otherwise fold to no data.
        return _CPU
    if isinstance(x, list):
        return [_unwrap(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_unwrap(v) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _wrap(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        if out.numel() > FOLD_LIMIT:
            raise _TooBig
        return Const(out)
    if isinstance(out, (list, tuple)):
        return type(out)(_wrap(o) for o in out)
    return out


class _TooBig(Exception):
    pass
