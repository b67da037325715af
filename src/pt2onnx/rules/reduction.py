"""Reductions, softmax and scans."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, axes, is_float, normalize_dim, rank


def reduce(g: RuleContext, onnx_op: str, x: ir.Value, dims: Any, keepdim: bool) -> ir.Value:
    """One reduction over ``dims`` (None or [] means all), for any opset."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        dims = list(range(rank(x)))
    if isinstance(dims, int):
        dims = [dims]
    if rank(x) == 0:
        return x
    dims = [normalize_dim(d, rank(x)) for d in dims]
    fn = getattr(g.op, onnx_op)
    if onnx_op == "ReduceSum" or g.opset >= 18:
        return fn(x, axes(g, dims), keepdims=int(bool(keepdim)))
    return fn(x, axes=dims, keepdims=int(bool(keepdim)))


def _acc_input(g: RuleContext, x: ir.Value, dtype: Any) -> ir.Value:
    # The output dtype already reflects dtype= (and int -> int64 promotion of sums).
    return g.cast(x, g.dtype)


def _sum_like(onnx_op: str, g: RuleContext, x: ir.Value, dim: Any = None, keepdim: bool = False,
              *, dtype: Any = None) -> ir.Value:
    if onnx_op == "ReduceMean" and _reduces_nothing(x, dim):
        # torch's mean of no elements is 0 / 0 = NaN; onnxruntime's ReduceMean is not.
        total = reduce(g, "ReduceSum", _acc_input(g, x, dtype), dim, keepdim)
        return g.op.Div(total, g.const(0.0, g.dtype))
    return reduce(g, onnx_op, _acc_input(g, x, dtype), dim, keepdim)


def _reduces_nothing(x: ir.Value, dim: Any) -> bool:
    """Whether a reduction of ``x`` over ``dim`` statically covers no element."""
    if x.shape is None or rank(x) == 0:
        return False
    dims = list(range(rank(x))) if dim is None or dim == [] else (
        [dim] if isinstance(dim, int) else list(dim))
    return any(isinstance(x.shape[normalize_dim(d, rank(x))], int)
               and x.shape[normalize_dim(d, rank(x))] == 0 for d in dims)


translation([aten.sum.dim_IntList])(partial(_sum_like, "ReduceSum"))
translation([aten.mean.dim])(partial(_sum_like, "ReduceMean"))


@translation(aten.sum.default)
def sum_all(g: RuleContext, x: ir.Value, *, dtype: Any = None) -> ir.Value:
    """sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _sum_like("ReduceSum", g, x, None, False)


@translation(aten.mean.default)
def mean_all(g: RuleContext, x: ir.Value, *, dtype: Any = None) -> ir.Value:
    """mean(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _sum_like("ReduceMean", g, x, None, False)


@translation(aten.prod.dim_int)
def prod_dim(g: RuleContext, x: ir.Value, dim: int, keepdim: bool = False,
             *, dtype: Any = None) -> ir.Value:
    """prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    if not is_float(g.dtype) and rank(x) > 0:
        return _wrapping_prod(g, _acc_input(g, x, dtype), dim, keepdim)
    return _sum_like("ReduceProd", g, x, [dim], keepdim)


@translation(aten.prod.default)
def prod_all(g: RuleContext, x: ir.Value, *, dtype: Any = None) -> ir.Value:
    """prod(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    if not is_float(g.dtype) and rank(x) > 0:
        return _wrapping_prod(g, _acc_input(g, x, dtype), None, False)
    return _sum_like("ReduceProd", g, x, None, False)


def _halve(g: RuleContext, v: ir.Value, r: int, length: int | None) -> ir.Value:
    """The products of neighbouring pairs along the last axis of ``v`` (rank ``r``; an
    odd length gets a 1 appended first): the length halves, rounding up."""
    if length is None or length % 2:
        if length is None:
            odd = g.op.Mod(g.op.Shape(v, start=-1), g.const([2]))
        else:
            odd = g.const([1])
        pads = g.op.Concat(g.const([0] * r), g.const([0] * (r - 1)), odd, axis=0)
        v = g.op.Pad(v, pads, g.const(1, g.dtype))
    # No -1 in the shape: an empty batch leaves it undefined.
    half = g.op.Div(g.op.Shape(v, start=-1), g.const([2]))
    pairs = g.op.Reshape(v, g.op.Concat(g.op.Shape(v, end=-1), half, g.const([2]), axis=0))
    return g.op.Mul(g.op.Gather(pairs, g.const(0), axis=-1),
                    g.op.Gather(pairs, g.const(1), axis=-1))


def _wrapping_prod(g: RuleContext, x: ir.Value, dim: int | None, keepdim: bool) -> ir.Value:
    """An integer product as torch computes it, wrapping on overflow. onnxruntime's
    integer ReduceProd saturates instead (int32 and int64, 1.31 and 1.32), so the
    product is a tree of Muls: pairs along the axis, halving it each step (unrolled for a
    static length, an ONNX Loop for a dynamic one). A 1 is appended first, so an empty
    axis gives 1."""
    from pt2onnx.rules.polynomials import loop

    r = rank(x)
    if dim is None:
        v, d = g.op.Reshape(x, g.const([-1])), 0
        r = 1
    else:
        d = normalize_dim(dim, r)
        perm = [a for a in range(r) if a != d] + [d]
        v = g.op.Transpose(x, perm=perm) if d != r - 1 else x
    dims = list(x.shape) if x.shape is not None else None
    reduced = dims if dims is None or dim is None else [dims[d]]
    known = [s for s in reduced or [] if isinstance(s, int)]
    n = math.prod(known) if reduced is not None and len(known) == len(reduced) else None
    ones = g.op.Expand(g.const(1, g.dtype), g.op.Concat(g.op.Shape(v, end=-1), g.const([1]),
                                                       axis=0))
    v = g.op.Concat(v, ones, axis=-1)
    v.dtype = g.dtype
    if n is not None:
        length = n + 1
        while length > 1:
            v = _halve(g, v, r, length)
            length = (length + 1) // 2
    else:
        size = g.op.Cast(g.op.Shape(v, start=-1), to=ir.DataType.DOUBLE)
        steps = g.op.Ceil(g.op.Div(g.op.Log(size), g.const(math.log(2.0), ir.DataType.DOUBLE)))
        trips = g.op.Add(g.op.Reshape(g.op.Cast(steps, to=ir.DataType.INT64), g.const([])),
                         g.const(1))

        def body(g: RuleContext, it: ir.Value, states: list[ir.Value]) -> tuple[Any, list[Any]]:
            halved = _halve(g, states[0], r, None)
            if states[0].dtype is not None:
                halved.dtype = states[0].dtype
            return g.const(True), [halved]

        v = loop(g, g.const(True), [v], body, max_trips=trips)[0]
    out = g.op.Squeeze(v, g.const([-1]))
    if dim is None or not keepdim:
        return out
    return g.op.Unsqueeze(out, g.const([d]))


def _minmax(onnx_op: str, g: RuleContext, x: ir.Value, dim: Any = None,
            keepdim: bool = False) -> ir.Value:
    if x.dtype == ir.DataType.BOOL:
        out = reduce(g, onnx_op, g.cast(x, ir.DataType.INT32), dim, keepdim)
        return g.cast(out, ir.DataType.BOOL)
    return reduce(g, onnx_op, x, dim, keepdim)


translation(aten.amax.default)(partial(_minmax, "ReduceMax"))
translation(aten.amin.default)(partial(_minmax, "ReduceMin"))
translation(aten.max.default)(partial(_minmax, "ReduceMax"))
translation(aten.min.default)(partial(_minmax, "ReduceMin"))


def _arg_reduce(onnx_op: str, g: RuleContext, x: ir.Value, dim: int | None = None,
                keepdim: bool = False) -> ir.Value:
    if dim is None:
        flat = g.op.Reshape(x, g.const([-1]))
        out = getattr(g.op, onnx_op)(flat, axis=0, keepdims=0, select_last_index=0)
        if keepdim:
            out = g.op.Reshape(out, g.const([1] * rank(x)))
        return out
    if rank(x) == 0:
        return g.const(0)
    x = g.cast(x, ir.DataType.INT32) if x.dtype == ir.DataType.BOOL else x
    return getattr(g.op, onnx_op)(x, axis=normalize_dim(dim, rank(x)), keepdims=int(keepdim))


translation(aten.argmax.default)(partial(_arg_reduce, "ArgMax"))
translation(aten.argmin.default)(partial(_arg_reduce, "ArgMin"))


def _minmax_dim(reduce_op: str, arg_op: str, g: RuleContext, x: ir.Value, dim: int,
                keepdim: bool = False) -> tuple[ir.Value, Any]:
    values = _minmax(reduce_op, g, x, [dim], keepdim)
    indices = _arg_reduce(arg_op, g, x, dim, keepdim) if g.output_used(1) else None
    return values, indices


translation(aten.max.dim)(partial(_minmax_dim, "ReduceMax", "ArgMax"))
translation(aten.min.dim)(partial(_minmax_dim, "ReduceMin", "ArgMin"))


def _var(g: RuleContext, x: ir.Value, dim: Any, correction: Any, keepdim: bool) -> ir.Value:
    dtype = g.dtype
    x = g.cast(x, dtype)
    mean = reduce(g, "ReduceMean", x, dim, True)
    centered = g.op.Sub(x, mean)
    squares = g.op.Mul(centered, centered)
    squares.type, squares.shape = x.type, x.shape
    sq = reduce(g, "ReduceSum", squares, dim, keepdim)
    corr = 1 if correction is None else correction
    shape = x.shape
    assert shape is not None
    dims = range(len(shape)) if not dim else [normalize_dim(d, len(shape)) for d in dim]
    n: Any = 1
    for d in dims:
        n = n * shape[d] if isinstance(n, int) and isinstance(shape[d], int) else None
    if n is None:
        count = g.op.Cast(g.op.ReduceProd(g.op.Gather(g.op.Shape(x), g.const(list(dims))),
                                          keepdims=0), to=dtype)
        denom = g.op.Sub(count, g.const(float(corr), dtype))
    else:
        denom = g.const(float(max(n - corr, 0)), dtype)
    return g.op.Div(sq, denom)


@translation(aten.var.correction)
def var(g: RuleContext, x: ir.Value, dim: Any = None, *, correction: Any = None,
        keepdim: bool = False) -> ir.Value:
    """var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor"""
    return _var(g, x, dim, correction, keepdim)


@translation(aten.std.correction)
def std(g: RuleContext, x: ir.Value, dim: Any = None, *, correction: Any = None,
        keepdim: bool = False) -> ir.Value:
    """std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor"""
    return g.op.Sqrt(_var(g, x, dim, correction, keepdim))


@translation(aten.var_mean.correction)
def var_mean(g: RuleContext, x: ir.Value, dim: Any = None, *, correction: Any = None,
             keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    """var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)"""
    variance = _var(g, x, dim, correction, keepdim)
    return variance, reduce(g, "ReduceMean", g.cast(x, g.dtype), dim, keepdim)


@translation(aten.std_mean.correction)
def std_mean(g: RuleContext, x: ir.Value, dim: Any = None, *, correction: Any = None,
             keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    """std_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)"""
    variance, mean = var_mean(g, x, dim, correction=correction, keepdim=keepdim)
    return g.op.Sqrt(variance), mean


def _any_all(onnx_op: str, g: RuleContext, x: ir.Value, dim: Any = None,
             keepdim: bool = False) -> ir.Value:
    as_int = g.op.Cast(g.op.Cast(x, to=ir.DataType.BOOL), to=ir.DataType.INT32)
    as_int.shape = x.shape
    # > 0, not a cast: onnxruntime reduces an empty tensor to INT32_MIN (ReduceMax),
    # which any() must read as False, and to INT32_MAX (ReduceMin), all()'s True.
    found = g.op.Greater(reduce(g, onnx_op, as_int, dim, keepdim), g.const(0, ir.DataType.INT32))
    # torch gives uint8 for a uint8 input (0 / 1), bool otherwise.
    return g.cast(found, g.dtype) if g.dtype == ir.DataType.UINT8 else found


for _op in (aten.any.default, aten.any.dim, aten.any.dims):
    translation(_op)(partial(_any_all, "ReduceMax"))
for _op in (aten.all.default, aten.all.dim, aten.all.dims):
    translation(_op)(partial(_any_all, "ReduceMin"))


@translation([aten._softmax.default, aten.softmax.int])
def softmax(g: RuleContext, x: ir.Value, dim: int, half_to_float: Any = False) -> ir.Value:
    """_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return _softmax_as("Softmax", g, x, dim)


def _softmax_as(onnx_op: str, g: RuleContext, x: ir.Value, dim: int) -> ir.Value:
    # Eager runs an integer or bool softmax only on an empty tensor (its kernels refuse
    # those dtypes otherwise); ONNX types Softmax for floats only.
    work = g.dtype if is_float(g.dtype) else ir.DataType.FLOAT
    x = g.cast(x, work)
    if rank(x) == 0:
        out = g.op.Div(x, x) if onnx_op == "Softmax" else g.op.Sub(x, x)
    else:
        out = getattr(g.op, onnx_op)(x, axis=normalize_dim(dim, rank(x)))
    out.dtype = work
    return g.cast(out, g.dtype)


@translation([aten._log_softmax.default, aten.log_softmax.int])
def log_softmax(g: RuleContext, x: ir.Value, dim: int, half_to_float: Any = False) -> ir.Value:
    """_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return _softmax_as("LogSoftmax", g, x, dim)


@translation(aten.logsumexp.default)
def logsumexp(g: RuleContext, x: ir.Value, dim: Any, keepdim: bool = False) -> ir.Value:
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor"""
    x = g.cast(x, g.dtype)
    return reduce(g, "ReduceLogSumExp", x, dim, keepdim)


@translation(aten.cumsum.default)
def cumsum(g: RuleContext, x: ir.Value, dim: int, *, dtype: Any = None) -> ir.Value:
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"""
    x = g.cast(x, g.dtype)
    if rank(x) == 0:
        return x
    return g.op.CumSum(x, g.const(normalize_dim(dim, rank(x))))


def _is_float_out(g: RuleContext) -> bool:
    return is_float(g.dtype)


@translation(aten.var.dim)
def var_dim(g: RuleContext, x: ir.Value, dim: Any = None, unbiased: bool = True,
            keepdim: bool = False) -> ir.Value:
    """var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor"""
    return _var(g, x, dim, 1 if unbiased else 0, keepdim)


@translation(aten.linalg_vector_norm.default)
def linalg_vector_norm(g: RuleContext, x: ir.Value, ord: Any = 2, dim: Any = None,
                       keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    x = g.cast(x, g.dtype)
    if rank(x) == 0:  # a 0-d input still takes the absolute value (or the ord=0 test)
        flat = g.op.Reshape(x, g.const([1]))
        flat.type, flat.shape = x.type, ir.Shape([1])
        return linalg_vector_norm(g, flat, ord, None, False)
    if ord == 2:
        return reduce(g, "ReduceL2", x, dim, keepdim)
    if ord == 1:
        return reduce(g, "ReduceL1", x, dim, keepdim)
    absx = g.op.Abs(x)
    absx.type, absx.shape = x.type, x.shape
    if ord == float("inf"):
        return reduce(g, "ReduceMax", absx, dim, keepdim)
    if ord == float("-inf"):
        return reduce(g, "ReduceMin", absx, dim, keepdim)
    if ord == 0:
        nonzero = g.op.Cast(g.op.Not(g.op.Equal(x, g.const(0.0, g.dtype))), to=g.dtype)
        nonzero.type, nonzero.shape = x.type, x.shape
        return reduce(g, "ReduceSum", nonzero, dim, keepdim)
    p = g.const(float(ord), g.dtype)
    powered = g.op.Pow(absx, p)
    powered.type, powered.shape = x.type, x.shape
    total = reduce(g, "ReduceSum", powered, dim, keepdim)
    return g.op.Pow(total, g.const(1.0 / float(ord), g.dtype))


_SEGMENT = {"sum": ("ReduceSum", 0.0), "mean": ("ReduceSum", 0.0), "prod": ("ReduceProd", 1.0),
            "max": ("ReduceMax", float("-inf")), "min": ("ReduceMin", float("inf"))}


@translation(aten.segment_reduce.default)
def segment_reduce(g: RuleContext, data: ir.Value, reduce_: str, *,
                   lengths: ir.Value | None = None, indices: ir.Value | None = None,
                   offsets: ir.Value | None = None, axis: int = 0, unsafe: bool = False,
                   initial: Any = None) -> ir.Value:
    """segment_reduce(Tensor data, str reduce, *, Tensor? lengths=None, Tensor? indices=None, Tensor? offsets=None, int axis=0, bool unsafe=False, Scalar? initial=None) -> Tensor"""
    dtype = g.dtype
    r = rank(data)
    ax = normalize_dim(axis, r)
    i64 = ir.DataType.INT64
    if offsets is not None:
        n = g.op.Shape(offsets, start=-1)
        start = g.op.Slice(offsets, g.const([0]), g.op.Sub(n, g.const([1])), g.const([-1]))
        end = g.op.Slice(offsets, g.const([1]), n, g.const([-1]))
    elif lengths is not None:
        end = g.op.CumSum(lengths, g.const(-1))
        start = g.op.Sub(end, lengths)
    else:
        raise NotImplementedError("segment_reduce needs lengths or offsets")
    start, end = g.cast(start, i64), g.cast(end, i64)
    # mask[..., k, p]: position p along axis lies in segment k.
    size = g.op.Squeeze(g.op.Shape(data, start=ax, end=ax + 1), g.const([0]))
    pos = g.op.Range(g.const(0), size, g.const(1))
    tail = [1] * (r - ax - 1)
    start_k = g.op.Reshape(start, g.const([0] * ax + [-1, 1] + tail))
    end_k = g.op.Reshape(end, g.const([0] * ax + [-1, 1] + tail))
    pos = g.op.Reshape(pos, g.const([1, -1] + tail))
    mask = g.op.And(g.op.LessOrEqual(start_k, pos), g.op.Less(pos, end_k))
    onnx_op, neutral = _SEGMENT[reduce_]
    values = g.op.Where(mask, g.op.Unsqueeze(data, g.const([ax])), g.const(neutral, dtype))
    fn = getattr(g.op, onnx_op)
    out = (fn(values, axes(g, [ax + 1]), keepdims=0) if onnx_op == "ReduceSum" or g.opset >= 18
           else fn(values, axes=[ax + 1], keepdims=0))
    count = g.op.Squeeze(g.cast(g.op.Sub(end_k, start_k), dtype), g.const([ax + 1]))
    if initial is not None:
        init = g.const(float(initial), dtype)
        combine = {"sum": "Add", "mean": "Add", "prod": "Mul", "max": "Max", "min": "Min"}
        out = getattr(g.op, combine[reduce_])(out, init)
    if reduce_ == "mean":
        # An empty segment is initial when given, else NaN (0 / 0).
        denom = count if initial is None else g.op.Max(count, g.const(1.0, dtype))
        out = g.op.Div(out, denom)
    return out
