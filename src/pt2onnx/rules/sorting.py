"""Sorting and data-dependent selection: sort, topk, nonzero."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, normalize_dim, rank

# onnxruntime's TopK has kernels for float, double, int32 and int64 only.
_TOPK_TYPES = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.INT32, ir.DataType.INT64}
)


def _topk(g: RuleContext, x: ir.Value, k: ir.Value, axis: int, largest: bool,
          sorted_: bool = True) -> tuple[ir.Value, ir.Value]:
    dtype = x.dtype
    work = x if dtype in _TOPK_TYPES else g.cast(
        x, ir.DataType.INT32 if dtype in (ir.DataType.BOOL, ir.DataType.UINT8, ir.DataType.INT8,
                                          ir.DataType.INT16) else ir.DataType.FLOAT)
    values, indices = g.op.TopK(work, k, axis=axis, largest=int(largest), sorted=int(sorted_),
                                _outputs=2)
    if work is not x:
        values = g.op.Cast(values, to=dtype)
    return values, indices


@translation(aten.sort.default)
def sort(g: RuleContext, x: ir.Value, dim: int = -1,
         descending: bool = False) -> tuple[ir.Value, ir.Value]:
    """sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)"""
    if rank(x) == 0:
        return g.op.Identity(x), g.const(0)
    axis = normalize_dim(dim, rank(x))
    size = x.shape[axis]  # type: ignore[index]
    k = g.const([size]) if isinstance(size, int) else g.op.Shape(x, start=axis, end=axis + 1)
    return _topk(g, x, k, axis, descending)


@translation(aten.sort.stable)
def sort_stable(g: RuleContext, x: ir.Value, *, stable: bool | None = None, dim: int = -1,
                descending: bool = False) -> tuple[ir.Value, ir.Value]:
    """sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)"""
    # TopK breaks ties by the lower index, so its order is already stable.
    return sort(g, x, dim, descending)


@translation(aten.topk.default)
def topk(g: RuleContext, x: ir.Value, k: Any, dim: int = -1, largest: bool = True,
         sorted: bool = True) -> tuple[ir.Value, ir.Value]:
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)"""
    if rank(x) == 0:
        return g.op.Identity(x), g.const(0)
    kv = g.const([int(k)]) if isinstance(k, int) else g.op.Reshape(k, g.const([1]))
    # torch's unsorted order is unspecified; a sorted result is one valid answer.
    return _topk(g, x, kv, normalize_dim(dim, rank(x)), largest, True)


@translation(aten.nonzero.default)
def nonzero(g: RuleContext, x: ir.Value) -> ir.Value:
    """nonzero(Tensor self) -> Tensor"""
    if rank(x) == 0:
        x = g.op.Reshape(x, g.const([1]))
        found = g.op.NonZero(x)
        return g.op.Transpose(g.op.Slice(found, g.const([0]), g.const([0]), g.const([0])),
                              perm=[1, 0])
    return g.op.Transpose(g.op.NonZero(x), perm=[1, 0])
