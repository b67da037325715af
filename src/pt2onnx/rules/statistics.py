"""Order statistics and counting: median, nanmedian, kthvalue, mode, histc, searchsorted.

Sorting goes through TopK (sorting.py); NaN sorts last, as in torch. Counting is exact:
comparisons and integer sums, or ScatterElements with add.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, torch_dtype, translation
from pt2onnx.rules._common import aten, is_float, normalize_dim, rank, result_dtype
from pt2onnx.rules.sorting import _topk

I64 = ir.DataType.INT64


def _reduce(g: RuleContext, onnx_op: str, x: ir.Value, axis: int, keepdims: bool) -> ir.Value:
    if onnx_op == "ReduceSum" or g.opset >= 18:
        return getattr(g.op, onnx_op)(x, g.const([axis]), keepdims=int(keepdims))
    return getattr(g.op, onnx_op)(x, axes=[axis], keepdims=int(keepdims))


def _axis_len(g: RuleContext, x: ir.Value, axis: int) -> ir.Value:
    return g.op.Shape(x, start=axis, end=axis + 1)


def _nan_last(g: RuleContext, x: ir.Value) -> ir.Value:
    """A sort key with NaN replaced by +inf, so ascending TopK puts NaN at the end."""
    if not is_float(x.dtype):
        return x
    return g.op.Where(g.op.IsNaN(x), g.const(math.inf, x.dtype), x)


def _sorted(g: RuleContext, x: ir.Value, axis: int) -> ir.Value:
    """Ascending order indices of x along axis (NaN last)."""
    _, order = _topk(g, _nan_last(g, x), _axis_len(g, x, axis), axis, largest=False)
    return order


def _pick(g: RuleContext, x: ir.Value, order: ir.Value, pos: ir.Value, axis: int,
          keepdim: bool) -> tuple[ir.Value, ir.Value]:
    """Value and index of the element at sorted position ``pos`` (broadcastable, keepdims)."""
    index = g.op.GatherElements(order, pos, axis=axis)
    value = g.op.GatherElements(x, index, axis=axis)
    if not keepdim:
        squeeze = g.const([axis])
        index, value = g.op.Squeeze(index, squeeze), g.op.Squeeze(value, squeeze)
    return value, index


def _position_like(g: RuleContext, x: ir.Value, axis: int, pos: ir.Value) -> ir.Value:
    """``pos`` (a scalar or keepdims-shaped) expanded to x's shape with axis of size 1."""
    shape = g.op.Shape(x)
    one = g.op.ScatterElements(shape, g.const([axis]), g.const([1]), axis=0)
    return g.op.Expand(pos, one)


def _median_dim(g: RuleContext, x: ir.Value, dim: int, keepdim: bool,
                ignore_nan: bool) -> tuple[ir.Value, ir.Value]:
    if rank(x) == 0:
        return g.op.Identity(x), g.const(0)
    axis = normalize_dim(dim, rank(x))
    order = _sorted(g, x, axis)
    n = g.op.Reshape(_axis_len(g, x, axis), g.const([], I64))
    if ignore_nan and is_float(x.dtype):
        valid = g.op.Cast(g.op.Not(g.op.IsNaN(x)), to=I64)
        count = g.op.ReduceSum(valid, g.const([axis]), keepdims=1)
        # An all-NaN row picks position 0, which holds NaN.
        pos = g.op.Max(g.op.Div(g.op.Sub(count, g.const(1)), g.const(2)), g.const(0))
    else:
        pos = _position_like(g, x, axis, g.op.Div(g.op.Sub(n, g.const(1)), g.const(2)))
    value, index = _pick(g, x, order, pos, axis, keepdim)
    if not ignore_nan and is_float(x.dtype):
        # median propagates NaN: the value is NaN and the index is that of the first NaN.
        nan = g.op.IsNaN(x)
        has_nan = g.op.Cast(_reduce(g, "ReduceMax", g.op.Cast(nan, to=ir.DataType.INT32),
                                    axis, keepdim), to=ir.DataType.BOOL)
        first = g.op.ArgMax(g.op.Cast(nan, to=ir.DataType.INT32), axis=axis,
                            keepdims=int(keepdim))
        value = g.op.Where(has_nan, g.const(math.nan, x.dtype), value)
        index = g.op.Where(has_nan, first, index)
    return value, index


@translation(aten.median.dim)
def median_dim(g: RuleContext, x: ir.Value, dim: int, keepdim: bool = False) -> Any:
    """median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _median_dim(g, x, dim, keepdim, ignore_nan=False)


@translation(aten.nanmedian.dim)
def nanmedian_dim(g: RuleContext, x: ir.Value, dim: int, keepdim: bool = False) -> Any:
    """nanmedian.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _median_dim(g, x, dim, keepdim, ignore_nan=True)


def _median_all(g: RuleContext, x: ir.Value, ignore_nan: bool) -> ir.Value:
    flat = g.op.Reshape(x, g.const([-1]))
    flat.type, flat.shape = x.type, ir.Shape([None])
    value, _ = _median_dim(g, flat, 0, False, ignore_nan)
    return value


@translation(aten.median.default)
def median(g: RuleContext, x: ir.Value) -> ir.Value:
    """median(Tensor self) -> Tensor"""
    return _median_all(g, x, ignore_nan=False)


@translation(aten.nanmedian.default)
def nanmedian(g: RuleContext, x: ir.Value) -> ir.Value:
    """nanmedian(Tensor self) -> Tensor"""
    return _median_all(g, x, ignore_nan=True)


@translation(aten.kthvalue.default)
def kthvalue(g: RuleContext, x: ir.Value, k: int, dim: int = -1,
             keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    """kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    if rank(x) == 0:
        return g.op.Identity(x), g.const(0)
    axis = normalize_dim(dim, rank(x))
    kv = g.const([int(k)]) if isinstance(k, int) else g.op.Reshape(k, g.const([1]))
    _, order = _topk(g, _nan_last(g, x), kv, axis, largest=False)
    pos = _position_like(g, x, axis, g.op.Sub(kv, g.const(1)))
    return _pick(g, x, order, pos, axis, keepdim)


@translation(aten.mode.default)
def mode(g: RuleContext, x: ir.Value, dim: int = -1,
         keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    """mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    if rank(x) == 0:
        return g.op.Identity(x), g.const(0)
    if x.dtype == ir.DataType.BOOL:  # False < True: as uint8, then back
        value, index = mode(g, g.cast(x, ir.DataType.UINT8), dim, keepdim)
        return g.op.Cast(value, to=ir.DataType.BOOL), index
    r = rank(x)
    axis = normalize_dim(dim, r)
    # counts[i] = #{j : x[j] == x[i]} from an (.., n, n) comparison along the axis.
    a = g.op.Unsqueeze(x, g.const([axis + 1]))
    b = g.op.Unsqueeze(x, g.const([axis]))
    counts = g.op.ReduceSum(g.op.Cast(g.op.Equal(a, b), to=I64), g.const([axis + 1]),
                            keepdims=0)
    best = _reduce(g, "ReduceMax", counts, axis, True)
    # The most frequent value; ties go to the smallest value, as torch's sort-based kernel.
    assert x.dtype is not None
    big = g.const(math.inf if is_float(x.dtype) else torch.iinfo(torch_dtype(x.dtype)).max,
                  x.dtype)
    value = _reduce(g, "ReduceMin", g.op.Where(g.op.Equal(counts, best), x, big), axis, True)
    # torch returns the last index holding that value.
    n = _axis_len(g, x, axis)
    positions = g.op.Range(g.const(0), g.op.Reshape(n, g.const([], I64)), g.const(1))
    positions = g.op.Reshape(positions, g.const([-1] + [1] * (r - axis - 1)))
    index = _reduce(g, "ReduceMax", g.op.Where(g.op.Equal(x, value), positions, g.const(-1)),
                    axis, True)
    if not keepdim:
        squeeze = g.const([axis])
        value, index = g.op.Squeeze(value, squeeze), g.op.Squeeze(index, squeeze)
    return value, index


@translation(aten.histc.default)
def histc(g: RuleContext, x: ir.Value, bins: int = 100, min: Any = 0, max: Any = 0) -> ir.Value:
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor"""
    out_dtype = g.dtype
    # Integer input (CUDA's histc takes it; transformers' MoE routing counts expert ids
    # that way on GPU) is counted in float64, exact for integers below 2**52.
    dtype = out_dtype if is_float(out_dtype) else ir.DataType.DOUBLE
    if not is_float(out_dtype):
        x, min, max = g.cast(x, dtype), int(min), int(max)
    flat = g.op.Reshape(x, g.const([-1]))
    if min == max:
        lo, hi = g.op.ReduceMin(flat, keepdims=0), g.op.ReduceMax(flat, keepdims=0)
        # torch widens an empty range by one on each side.
        same = g.op.Equal(lo, hi)
        lo = g.op.Where(same, g.op.Sub(lo, g.const(1.0, dtype)), lo)
        hi = g.op.Where(same, g.op.Add(hi, g.const(1.0, dtype)), hi)
    else:
        lo, hi = g.const(float(min), dtype), g.const(float(max), dtype)
    # torch: bin = (x - lo) * bins / (hi - lo), in the input dtype; x == hi goes to the last bin.
    scaled = g.op.Div(g.op.Mul(g.op.Sub(flat, lo), g.const(float(bins), dtype)), g.op.Sub(hi, lo))
    pos = g.op.Cast(g.op.Floor(scaled), to=I64)
    pos = g.op.Min(pos, g.const(bins - 1))
    inside = g.op.And(g.op.GreaterOrEqual(flat, lo), g.op.LessOrEqual(flat, hi))
    # Elements outside [lo, hi] (and NaN) land in an extra bin that is dropped.
    pos = g.op.Where(inside, pos, g.const(bins))
    counts = g.op.ScatterElements(g.const([0] * (bins + 1)), pos,
                                  g.op.Expand(g.const(1), g.op.Shape(pos)), axis=0,
                                  reduction="add")
    return g.op.Cast(g.op.Slice(counts, g.const([0]), g.const([bins])), to=out_dtype)


def _search(g: RuleContext, seq: ir.Value, values: ir.Value, right: bool,
            out_int32: bool, seq_rank: int = 1) -> ir.Value:
    """Insertion points of ``values`` in the last axis of ``seq``: a count of comparisons."""
    out_type = ir.DataType.INT32 if out_int32 else I64
    if _empty(values) or _empty(seq):  # onnxruntime's ReduceSum mis-shapes empty inputs
        return g.op.Cast(g.op.Mul(g.op.Cast(values, to=ir.DataType.FLOAT), g.const(0.0)),
                         to=out_type)
    # (..., K, 1) against (..., 1, M): how many boundaries lie before each value.
    v = g.op.Unsqueeze(values, g.const([-1]))
    s = g.op.Unsqueeze(seq, g.const([-2])) if seq_rank > 1 else seq
    before = g.op.LessOrEqual(s, v) if right else g.op.Less(s, v)
    if is_float(values.dtype):
        # NaN sorts after everything, so it is inserted at the end.
        before = g.op.Or(before, g.op.IsNaN(v))
    out = g.op.ReduceSum(g.op.Cast(before, to=I64), g.const([-1]), keepdims=0)
    return g.op.Cast(out, to=ir.DataType.INT32) if out_int32 else out


def _empty(x: ir.Value) -> bool:
    return x.shape is not None and any(d == 0 for d in x.shape)


def _common(g: RuleContext, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    dtype = result_dtype(a, b) if a.dtype is not None else b.dtype
    assert dtype is not None
    return g.cast(a, dtype), g.cast(b, dtype)


@translation(aten.searchsorted.Tensor)
def searchsorted(g: RuleContext, seq: ir.Value, values: ir.Value, *, out_int32: bool = False,
                 right: bool = False, side: str | None = None,
                 sorter: ir.Value | None = None) -> ir.Value:
    """searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"""
    seq_rank, side_right = rank(seq), right or side == "right"
    if sorter is not None:
        seq = g.op.GatherElements(seq, sorter, axis=-1)
    seq, values = _common(g, seq, values)
    if rank(values) == 0:
        out = _search(g, seq, g.op.Reshape(values, g.const([1])), side_right, out_int32, seq_rank)
        return g.op.Reshape(out, g.const([], I64))
    return _search(g, seq, values, side_right, out_int32, seq_rank)


@translation(aten.searchsorted.Scalar)
def searchsorted_scalar(g: RuleContext, seq: ir.Value, value: Any, *, out_int32: bool = False,
                        right: bool = False, side: str | None = None,
                        sorter: ir.Value | None = None) -> ir.Value:
    """searchsorted.Scalar(Tensor sorted_sequence, Scalar self, *, bool out_int32=False, bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"""
    values = g.const(value, seq.dtype)
    return searchsorted(g, seq, values, out_int32=out_int32, right=right, side=side,
                        sorter=sorter)


@translation(aten.bucketize.Tensor)
def bucketize(g: RuleContext, x: ir.Value, boundaries: ir.Value, *, out_int32: bool = False,
              right: bool = False) -> ir.Value:
    """bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor"""
    # boundaries is 1-D: compare each element of x against all of them.
    boundaries, x = _common(g, boundaries, x)
    return _search(g, boundaries, x, right, out_int32)


@translation(aten.bucketize.Scalar)
def bucketize_scalar(g: RuleContext, x: Any, boundaries: ir.Value, *, out_int32: bool = False,
                     right: bool = False) -> ir.Value:
    """bucketize.Scalar(Scalar self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor"""
    return searchsorted_scalar(g, boundaries, x, out_int32=out_int32, right=right)
