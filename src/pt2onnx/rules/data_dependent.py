"""Ops whose output shape depends on the data: masked_select, unique."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from pt2onnx._builder import RuleContext
from pt2onnx._registry import translation
from pt2onnx.rules._common import aten


@translation(aten.masked_select.default)
def masked_select(g: RuleContext, x: ir.Value, mask: ir.Value) -> ir.Value:
    """masked_select(Tensor self, Tensor mask) -> Tensor"""
    # Broadcast both to a common shape, then gather the positions where mask holds.
    zeros = g.op.Mul(g.cast(mask, x.dtype), g.const(0, x.dtype))  # type: ignore[arg-type]
    xb = g.op.Add(x, zeros)
    # GatherND needs rank >= 1: view 0-d operands as 1-element vectors.
    xb = g.op.Reshape(xb, g.const([1])) if _both_scalar(x, mask) else xb
    mb = g.op.Expand(g.cast(mask, ir.DataType.BOOL), g.op.Shape(xb))
    positions = g.op.Transpose(g.op.NonZero(mb), perm=[1, 0])
    return g.op.GatherND(xb, positions)


def _both_scalar(x: ir.Value, mask: ir.Value) -> bool:
    return all(v.shape is not None and len(v.shape) == 0 for v in (x, mask))


@translation(aten._unique2.default)
def unique2(g: RuleContext, x: ir.Value, sorted: bool = True, return_inverse: bool = False,
            return_counts: bool = False) -> tuple[Any, ...]:
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)"""
    flat = g.op.Reshape(x, g.const([-1]))
    # torch sorts on CPU whatever `sorted` says; ONNX Unique keeps first-occurrence order
    # unless sorted=1, so always sort to match.
    values, _, inverse, counts = g.op.Unique(flat, sorted=1, _outputs=4)
    inverse = g.op.Reshape(inverse, g.op.Shape(x)) if return_inverse else g.const([], ir.DataType.INT64)
    counts = counts if return_counts else g.const([], ir.DataType.INT64)
    return values, inverse, counts
