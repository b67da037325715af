"""Scatters: scatter, scatter_add, scatter_reduce, index_reduce, put, select/slice/diagonal/
as_strided_scatter, masked_scatter."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, torch_dtype, translation
from pt2onnx.rules._common import (
    aten,
    is_float,
    normalize_dim,
    rank,
    shape_value,
)
from pt2onnx.rules.shape import diagonal_positions, strided_index, strided_index_value


def _src_like_index(g: RuleContext, src: ir.Value, index: ir.Value) -> ir.Value:
    """torch reads only the index-shaped corner of src; ONNX wants equal shapes."""
    if src.shape is not None and index.shape is not None and tuple(src.shape) == tuple(index.shape):
        return src
    r = rank(index)
    return g.op.Slice(src, g.const([0] * r), g.op.Shape(index), g.const(list(range(r))))


def _scatter(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, updates: ir.Value,
             reduction: str | None = None) -> ir.Value:
    if rank(x) == 0:
        # A 0-d scatter writes the single element (or reduces into it).
        flat = g.op.Reshape(x, g.const([1]))
        out = g.op.ScatterElements(flat, g.op.Reshape(index, g.const([-1])),
                                   g.op.Reshape(updates, g.const([-1])), axis=0,
                                   reduction=reduction)
        return g.op.Reshape(out, g.const([], ir.DataType.INT64))
    return g.op.ScatterElements(x, index, updates, axis=normalize_dim(dim, rank(x)),
                                reduction=reduction)


@translation(aten.scatter.src)
def scatter_src(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, src: ir.Value) -> ir.Value:
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scatter(g, x, dim, index, g.cast(_src_like_index(g, src, index), g.dtype))


@translation(aten.scatter.value)
def scatter_value(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, value: Any) -> ir.Value:
    """scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor"""
    updates = g.op.Expand(g.const(value, g.dtype), g.op.Shape(index))
    return _scatter(g, x, dim, index, updates)


@translation(aten.scatter_add.default)
def scatter_add(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, src: ir.Value) -> ir.Value:
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scatter(g, x, dim, index, _src_like_index(g, src, index), "add")


# scatter(..., reduce=) takes "add" or "multiply".
_SCATTER_REDUCE = {"add": "add", "multiply": "mul"}


@translation(aten.scatter.reduce)
def scatter_reduce_src(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, src: ir.Value,
                       *, reduce: str) -> ir.Value:
    """scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor"""
    updates = g.cast(_src_like_index(g, src, index), g.dtype)
    return _scatter(g, x, dim, index, updates, _SCATTER_REDUCE[reduce])


@translation(aten.scatter.value_reduce)
def scatter_value_reduce(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, value: Any,
                         *, reduce: str) -> ir.Value:
    """scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce) -> Tensor"""
    updates = g.op.Expand(g.const(value, g.dtype), g.op.Shape(index))
    return _scatter(g, x, dim, index, updates, _SCATTER_REDUCE[reduce])


_ONNX_REDUCTION = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min", "mean": "add"}


def _identity(reduce: str, dtype: ir.DataType) -> Any:
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    t = torch_dtype(dtype)
    if t.is_floating_point:
        return float("-inf") if reduce == "amax" else float("inf")
    # The type's own extremes (-max would be min + 1 for a signed type, 1 for uint8).
    info = torch.iinfo(t)
    return info.min if reduce == "amax" else info.max


def _scatter_reduce(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, src: ir.Value,
                    reduce: str, include_self: bool) -> ir.Value:
    if g.dtype == ir.DataType.BOOL:
        # ONNX reduces no bools; in torch a bool sum/amax is an or and prod/amin an
        # and, which int32 arithmetic then != 0 gives.
        i32 = ir.DataType.INT32
        out = _scatter_reduce_as(g, g.cast(x, i32), dim, index, g.cast(src, i32), reduce,
                                 include_self, i32)
        return g.op.Cast(out, to=ir.DataType.BOOL)
    return _scatter_reduce_as(g, x, dim, index, src, reduce, include_self, g.dtype)


def _scatter_reduce_as(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, src: ir.Value,
                       reduce: str, include_self: bool, dtype: ir.DataType) -> ir.Value:
    src = _src_like_index(g, src, index)
    base = x
    if not include_self:
        # Positions that receive values start from the reduction's identity.
        fill = g.op.Expand(g.const(_identity(reduce, dtype), dtype), g.op.Shape(index))
        base = _scatter(g, x, dim, index, fill)
        base.dtype, base.shape = dtype, x.shape
    out = _scatter(g, base, dim, index, src, _ONNX_REDUCTION[reduce])
    if reduce != "mean":
        return out
    ones = g.op.Expand(g.const(1, dtype), g.op.Shape(index))
    start = g.op.Expand(g.const(1 if include_self else 0, dtype), g.op.Shape(x))
    start.dtype, start.shape = dtype, x.shape
    count = _scatter(g, start, dim, index, ones, "add")
    count = g.op.Max(count, g.const(1, dtype))
    if is_float(dtype):
        return g.op.Div(out, count)
    # torch floors integer means.
    q = g.op.Div(g.cast(out, ir.DataType.DOUBLE), g.cast(count, ir.DataType.DOUBLE))
    return g.op.Cast(g.op.Floor(q), to=dtype)


@translation(aten.scatter_reduce.two)
def scatter_reduce(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, src: ir.Value,
                   reduce: str, *, include_self: bool = True) -> ir.Value:
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor"""
    if reduce in ("amax", "amin"):
        raise NotImplementedError(
            f"scatter_reduce(reduce='{reduce}') needs ScatterElements max/min: opset 18 or later"
        )
    return _scatter_reduce(g, x, dim, index, src, reduce, include_self)


@translation(aten.scatter_reduce.two, since=18)
def scatter_reduce18(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, src: ir.Value,
                     reduce: str, *, include_self: bool = True) -> ir.Value:
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor"""
    return _scatter_reduce(g, x, dim, index, src, reduce, include_self)


def _index_reduce(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, source: ir.Value,
                  reduce: str, include_self: bool = True) -> ir.Value:
    # index_reduce is scatter_reduce with index repeated over source's other dims.
    r = rank(x)
    if r == 0:
        return _scatter_reduce(g, x, 0, index, g.op.Reshape(source, g.const([1])), reduce,
                               include_self)
    d = normalize_dim(dim, r)
    shape = [1] * r
    shape[d] = -1
    full = g.op.Expand(g.op.Reshape(index, g.const(shape)), g.op.Shape(source))
    full.dtype, full.shape = ir.DataType.INT64, source.shape
    return _scatter_reduce(g, x, d, full, source, reduce, include_self)


@translation(aten.index_reduce.default)
def index_reduce(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, source: ir.Value,
                 reduce: str, *, include_self: bool = True) -> ir.Value:
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, bool include_self=True) -> Tensor"""
    if reduce in ("amax", "amin"):
        raise NotImplementedError(
            f"index_reduce(reduce='{reduce}') needs ScatterElements max/min: opset 18 or later"
        )
    return _index_reduce(g, x, dim, index, source, reduce, include_self)


@translation(aten.index_reduce.default, since=18)
def index_reduce18(g: RuleContext, x: ir.Value, dim: int, index: ir.Value, source: ir.Value,
                   reduce: str, *, include_self: bool = True) -> ir.Value:
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, bool include_self=True) -> Tensor"""
    return _index_reduce(g, x, dim, index, source, reduce, include_self)


@translation(aten.put.default)
def put(g: RuleContext, x: ir.Value, index: ir.Value, source: ir.Value,
        accumulate: bool = False) -> ir.Value:
    """put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor"""
    flat = g.op.Reshape(x, g.const([-1]))
    idx = g.op.Reshape(index, g.const([-1]))
    # Negative positions count from the end of the flattened tensor.
    numel = g.op.Size(x)
    idx = g.op.Where(g.op.Less(idx, g.const(0)), g.op.Add(idx, numel), idx)
    updates = g.cast(g.op.Reshape(source, g.const([-1])), g.dtype)
    out = g.op.ScatterElements(flat, idx, updates, axis=0,
                               reduction="add" if accumulate else None)
    return g.op.Reshape(out, g.op.Shape(x))


@translation(aten.diagonal_scatter.default)
def diagonal_scatter(g: RuleContext, x: ir.Value, src: ir.Value, offset: int = 0, dim1: int = 0,
                     dim2: int = 1) -> ir.Value:
    """diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor"""
    r = rank(x)
    d1, d2 = normalize_dim(dim1, r), normalize_dim(dim2, r)
    n, m = x.shape[d1], x.shape[d2]  # type: ignore[index]
    rest = [d for d in range(r) if d not in (d1, d2)]
    perm = [*rest, d1, d2]
    inverse = [perm.index(d) for d in range(r)]
    # With (d1, d2) last and flattened, diagonal element i sits at row*m + col.
    moved = g.op.Transpose(x, perm=perm)
    if not (isinstance(n, int) and isinstance(m, int)):
        flat, index = diagonal_positions(g, moved, len(rest), int(offset))
        out = g.op.ScatterElements(flat, g.op.Expand(index, g.op.Shape(src)),
                                   g.cast(src, g.dtype), axis=len(rest))
        return g.op.Transpose(g.op.Reshape(out, g.op.Shape(moved)), perm=inverse)
    flat = g.op.Reshape(moved, g.const([0] * len(rest) + [n * m]))
    if offset >= 0:
        pairs = [(i, i + offset) for i in range(max(0, min(n, m - offset)))]
    else:
        pairs = [(i - offset, i) for i in range(max(0, min(n + offset, m)))]
    if not pairs:
        return x
    where = g.op.Expand(g.const([i * m + j for i, j in pairs]), g.op.Shape(src))
    out = g.op.ScatterElements(flat, where, g.cast(src, g.dtype), axis=len(rest))
    out = g.op.Reshape(out, g.op.Shape(moved))
    return g.op.Transpose(out, perm=inverse)


@translation(aten.as_strided_scatter.default)
def as_strided_scatter(g: RuleContext, x: ir.Value, src: ir.Value, size: list[Any],
                       stride: list[Any], storage_offset: Any = None) -> ir.Value:
    """as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor"""
    # ONNX tensors are dense: exact when self is contiguous in torch, as for as_strided.
    arg = g.node.args[0] if g.node is not None else None
    val = getattr(arg, "meta", {}).get("val")
    if val is not None and not val.is_contiguous():
        raise NotImplementedError("as_strided_scatter into a tensor that is not contiguous")
    flat = g.op.Reshape(x, g.const([-1]))
    if all(isinstance(v, int) for v in [*size, *stride, storage_offset or 0]):
        known = strided_index(size, stride, storage_offset or 0).reshape(-1)
        if known.numel() == 0:
            return x
        index = g.const(known)
    else:
        index = g.op.Reshape(strided_index_value(g, size, stride, storage_offset or 0),
                             g.const([-1]))
    updates = g.cast(g.op.Reshape(src, g.const([-1])), g.dtype)
    out = g.op.ScatterElements(flat, index, updates, axis=0)
    return g.op.Reshape(out, g.op.Shape(x))


def _slice_write(g: RuleContext, x: ir.Value, src: ir.Value, dim: int, start: Any,
                 step: Any) -> ir.Value:
    """Writes src into x at start, start+step, ... along dim (src sets the count)."""
    r = rank(x)
    d = normalize_dim(dim, r)
    size = src.shape[d] if src.shape is not None else None
    if isinstance(start, int) and isinstance(step, int) and isinstance(size, int):
        idx = g.const(list(range(start, start + size * step, step)))
    else:
        count = g.op.Gather(g.op.Shape(src), g.const([d]))
        s = start if isinstance(start, ir.Value) else g.const(int(start))
        st = step if isinstance(step, ir.Value) else g.const(int(step))
        s, st = g.op.Reshape(s, g.const([1])), g.op.Reshape(st, g.const([1]))
        idx = g.op.Range(g.op.Squeeze(s), g.op.Squeeze(g.op.Add(s, g.op.Mul(count, st))),
                         g.op.Squeeze(st))
    shape = [1] * r
    shape[d] = -1
    idx = g.op.Expand(g.op.Reshape(idx, g.const(shape)), g.op.Shape(src))
    return g.op.ScatterElements(x, idx, g.cast(src, g.dtype), axis=d)


@translation(aten.select_scatter.default)
def select_scatter(g: RuleContext, x: ir.Value, src: ir.Value, dim: int, index: Any) -> ir.Value:
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor"""
    d = normalize_dim(dim, rank(x))
    if isinstance(index, int) and index < 0:
        n = x.shape[d] if x.shape is not None else None
        # Along a dynamic dim the position counts from its run-time size.
        index = index + n if isinstance(n, int) else g.op.Add(
            g.op.Gather(g.op.Shape(x), g.const(d)), g.const(index))
    src = g.op.Unsqueeze(src, g.const([d]))
    src.shape = ir.Shape([*list(x.shape[:d]), 1, *list(x.shape[d + 1:])])  # type: ignore[index]
    src.type = x.type if src.type is None else src.type
    return _slice_write(g, x, src, d, index, 1)


@translation(aten.slice_scatter.default)
def slice_scatter(g: RuleContext, x: ir.Value, src: ir.Value, dim: int = 0, start: Any = None,
                  end: Any = None, step: Any = 1) -> ir.Value:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor"""
    d = normalize_dim(dim, rank(x))
    start = 0 if start is None else start
    size = x.shape[d]  # type: ignore[index]
    if isinstance(start, int) and isinstance(size, int):
        start = min(max(start + size if start < 0 else start, 0), size)
    return _slice_write(g, x, src, d, start, step)


@translation(aten.masked_scatter.default)
def masked_scatter(g: RuleContext, x: ir.Value, mask: ir.Value, source: ir.Value) -> ir.Value:
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor"""
    shape = shape_value(g, list(g.shape))
    mask = g.op.Expand(g.cast(mask, ir.DataType.BOOL), shape)
    x = g.op.Expand(x, shape)
    flat_mask = g.op.Reshape(mask, g.const([-1]))
    # The k-th True position takes source's k-th element.
    pos = g.op.Sub(g.op.CumSum(g.op.Cast(flat_mask, to=ir.DataType.INT64), g.const(0)),
                   g.const(1))
    pos = g.op.Max(pos, g.const(0))
    flat_src = g.op.Reshape(source, g.const([-1]))
    picked = g.op.Reshape(g.op.Gather(flat_src, pos, axis=0), shape)
    return g.op.Where(mask, picked, x)
