"""Ops whose output shape depends on the data: masked_select, unique (also along a dim),
unique_consecutive, nonzero_static (a static shape, padded)."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import INT64_MAX, aten


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


@translation(aten.unique_dim.default)
def unique_dim(g: RuleContext, x: ir.Value, dim: int, sorted: bool = True,
               return_inverse: bool = False, return_counts: bool = False) -> tuple[Any, ...]:
    """unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)

    The distinct slices along ``dim``. torch sorts them (lexicographically, whatever
    ``sorted`` says), as ONNX Unique does with ``axis`` and ``sorted=1``."""
    d = dim + len(x.shape or ()) if dim < 0 else dim
    values, _, inverse, counts = g.op.Unique(x, axis=d, sorted=1, _outputs=4)
    empty = g.const([], ir.DataType.INT64)
    return values, inverse if return_inverse else empty, counts if return_counts else empty


@translation(aten.unique_consecutive.default)
def unique_consecutive(g: RuleContext, x: ir.Value, return_inverse: bool = False,
                       return_counts: bool = False, dim: int | None = None) -> tuple[Any, ...]:
    """unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, int? dim=None) -> (Tensor, Tensor, Tensor)"""
    if dim is None:
        x_in, d = g.op.Reshape(x, g.const([-1])), 0
    else:
        x_in, d = x, dim + len(x.shape) if dim < 0 else dim  # type: ignore[arg-type]
    head = g.op.Slice(x_in, g.const([1]), g.const([INT64_MAX]), g.const([d]))
    tail = g.op.Slice(x_in, g.const([0]), g.const([-1]), g.const([d]))
    changed = g.op.Not(g.op.Equal(head, tail))  # NaN != NaN, as in torch
    others = [a for a in range(len(x.shape or ())) if a != d] if dim is not None else []
    if others:
        # A slice along dim starts a new run when any of its elements differs.
        counted = g.op.Cast(changed, to=ir.DataType.INT64)
        counted = (g.op.ReduceMax(counted, g.const(others), keepdims=0) if g.opset >= 18
                   else g.op.ReduceMax(counted, axes=others, keepdims=0))
        changed = g.op.Cast(counted, to=ir.DataType.BOOL)
    n = g.op.Shape(x_in, start=d, end=d + 1)
    # Position 0 starts a run; the Slice keeps the mask empty for an empty input.
    starts = g.op.Slice(g.op.Concat(g.const([True]), changed, axis=0), g.const([0]), n)
    values = g.op.Compress(x_in, starts, axis=d)
    empty = g.const([], ir.DataType.INT64)
    inverse = counts = empty
    if return_inverse:
        run = g.op.Sub(g.op.CumSum(g.op.Cast(starts, to=ir.DataType.INT64), g.const(0)),
                       g.const(1))
        inverse = g.op.Reshape(run, g.op.Shape(x)) if dim is None else run
    if return_counts:
        first = g.op.Reshape(g.op.NonZero(starts), g.const([-1]))
        following = g.op.Concat(g.op.Slice(first, g.const([1]), g.const([INT64_MAX])), n, axis=0)
        counts = g.op.Sub(following, first)
    return values, inverse, counts


@translation(aten.nonzero_static.default)
def nonzero_static(g: RuleContext, x: ir.Value, *, size: Any, fill_value: int = -1) -> ir.Value:
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor"""
    r = len(x.shape or ())
    rows = size if isinstance(size, ir.Value) else g.const(int(size))
    rows = g.op.Reshape(rows, g.const([1]))
    if r == 0:
        return g.op.Expand(g.const(0), g.op.Concat(rows, g.const([0]), axis=0))
    found = g.op.Transpose(g.op.NonZero(x), perm=[1, 0])
    # Pad with fill_value rows, then keep the first `size` rows.
    fill = g.op.Expand(g.const(int(fill_value)), g.op.Concat(rows, g.const([r]), axis=0))
    both = g.op.Concat(found, fill, axis=0)
    return g.op.Slice(both, g.const([0]), rows, g.const([0]))
