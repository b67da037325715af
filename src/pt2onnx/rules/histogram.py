"""Histograms: histogram and histogramdd, with counted or given bin edges.

Follows torch's CPU kernel (aten/src/ATen/native/cpu/HistogramKernel.cpp): the
edges of counted bins are a linspace between the data's min and max (or the
given range), widened by 0.5 on each side when they are equal; an element
outside [first edge, last edge] or NaN is dropped; the bin of an element is
``upper_bound(edges, x) - 1``, the last bin keeping its right edge. The
binary search is unrolled as torch's ``std::upper_bound`` runs it, so unsorted
edge tensors give torch's answer too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, torch_dtype, translation
from pt2onnx.rules._common import aten

I64 = ir.DataType.INT64


def _scalar(g: RuleContext, x: ir.Value) -> ir.Value:
    return g.op.Reshape(x, g.const([], I64))


def _upper_bound(g: RuleContext, edges: ir.Value, n: int, values: ir.Value) -> ir.Value:
    """std::upper_bound(edges, edges + n, v) - edges for each v, as libstdc++ runs it."""
    first = g.op.Mul(g.op.Cast(values, to=I64), g.const(0))  # zeros shaped like values
    length = g.op.Add(first, g.const(n))
    for _ in range(max(n, 1).bit_length()):
        half = g.op.Div(length, g.const(2))
        middle = g.op.Add(first, half)
        probe = g.op.Gather(edges, g.op.Min(middle, g.const(max(n - 1, 0))), axis=0)
        active = g.op.Greater(length, g.const(0))
        left = g.op.Less(values, probe)
        first = g.op.Where(g.op.And(active, g.op.Not(left)), g.op.Add(middle, g.const(1)), first)
        length = g.op.Where(active, g.op.Where(left, half, g.op.Sub(g.op.Sub(length, half),
                                                                   g.const(1))), length)
    return first


def _linspace(g: RuleContext, lo: ir.Value, hi: ir.Value, steps: int,
              dtype: ir.DataType) -> ir.Value:
    """torch's CPU linspace: start + step * i for the first half, end - step * (n - 1 - i) after."""
    step = g.op.Div(g.op.Sub(hi, lo), g.const(float(steps - 1), dtype))
    half = steps // 2
    i = np.arange(steps)
    front = g.op.Add(lo, g.op.Mul(step, g.const(i[:half].astype(np.float64), dtype)))
    back = g.op.Sub(hi, g.op.Mul(step, g.const((steps - 1 - i[half:]).astype(np.float64), dtype)))
    return g.op.Concat(front, back, axis=0)


def _outer_edges(g: RuleContext, rows: ir.Value, dims: int, empty: bool,
                 range_: Sequence[float] | None) -> list[tuple[ir.Value, ir.Value]]:
    """(first, last) edge per dim, in the input dtype: range, else data min/max, else 0 and 1."""
    dtype = rows.dtype
    assert dtype is not None
    double = ir.DataType.DOUBLE
    out = []
    if range_ is None and not empty:
        mins = g.op.ReduceMin(rows, g.const([0]), keepdims=0) if g.opset >= 18 else \
            g.op.ReduceMin(rows, axes=[0], keepdims=0)
        maxs = g.op.ReduceMax(rows, g.const([0]), keepdims=0) if g.opset >= 18 else \
            g.op.ReduceMax(rows, axes=[0], keepdims=0)
    for d in range(dims):
        if range_ is not None or empty:
            lo, hi = (float(range_[2 * d]), float(range_[2 * d + 1])) if range_ else (0.0, 1.0)
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            # Rounded to dtype as torch's linspace takes its double ends.
            t = torch_dtype(dtype)
            out.append((g.const(float(torch.tensor(lo, dtype=torch.float64).to(t)), dtype),
                        g.const(float(torch.tensor(hi, dtype=torch.float64).to(t)), dtype)))
            continue
        at = g.const([d])
        low = g.cast(g.op.Gather(mins, at, axis=0), double)
        high = g.cast(g.op.Gather(maxs, at, axis=0), double)
        # Equal ends widen by 0.5 each way, in double as torch does, then round to dtype.
        same = g.op.Cast(g.op.Equal(low, high), to=double)
        half = g.op.Mul(same, g.const(0.5, double))
        out.append((g.cast(g.op.Sub(low, half), dtype), g.cast(g.op.Add(high, half), dtype)))
    return out


def _counted_edges(g: RuleContext, rows: ir.Value, bins: Sequence[int],
                   range_: Sequence[float] | None) -> list[ir.Value]:
    dtype = rows.dtype
    assert dtype is not None
    empty = rows.shape is not None and rows.shape[0] == 0
    ends = _outer_edges(g, rows, len(bins), empty, range_)
    return [_linspace(g, lo, hi, int(b) + 1, dtype) for (lo, hi), b in zip(ends, bins, strict=True)]


def _hist(g: RuleContext, rows: ir.Value, edges: Sequence[ir.Value], counts: Sequence[int],
          weight: ir.Value | None, density: bool) -> ir.Value:
    """The (counts...) histogram of rows (M, D) over per-dim edges, in rows' dtype."""
    dtype = rows.dtype
    assert dtype is not None
    total = math.prod(counts)
    flat = g.const(0)
    inside = None
    for d, (e, b) in enumerate(zip(edges, counts, strict=True)):
        v = g.op.Gather(rows, g.const(d), axis=1)
        first, last = g.op.Gather(e, g.const(0), axis=0), g.op.Gather(e, g.const(b), axis=0)
        ok = g.op.And(g.op.GreaterOrEqual(v, first), g.op.LessOrEqual(v, last))
        inside = ok if inside is None else g.op.And(inside, ok)
        pos = g.op.Sub(_upper_bound(g, e, b + 1, v), g.const(1))
        pos = g.op.Min(pos, g.const(b - 1))  # the last bin keeps its right edge
        pos = g.op.Max(pos, g.const(0))
        stride = math.prod(counts[d + 1:])
        flat = g.op.Add(flat, g.op.Mul(pos, g.const(stride)))
    assert inside is not None
    # Dropped elements go to one extra bin that is sliced off.
    flat = g.op.Where(inside, flat, g.const(total))
    ones = g.op.Expand(g.const(1.0, dtype), g.op.Shape(flat))
    w = ones if weight is None else g.cast(g.op.Reshape(weight, g.const([-1])), dtype)
    hist = g.op.ScatterElements(g.op.Expand(g.const(0.0, dtype), g.const([total + 1])), flat, w,
                                axis=0, reduction="add")
    hist = g.op.Reshape(g.op.Slice(hist, g.const([0]), g.const([total])), g.const(list(counts)))
    if not density:
        return hist
    # torch: divide by the total, then by each dim's bin widths.
    hist = g.op.Div(hist, g.op.ReduceSum(hist, keepdims=0))
    for d, (e, b) in enumerate(zip(edges, counts, strict=True)):
        width = g.op.Sub(g.op.Slice(e, g.const([1]), g.const([b + 1])),
                         g.op.Slice(e, g.const([0]), g.const([b])))
        shape = [1] * len(counts)
        shape[d] = b
        hist = g.op.Div(hist, g.op.Reshape(width, g.const(shape)))
    return hist


def _rows(g: RuleContext, x: ir.Value, dims: int) -> ir.Value:
    """x as (M, dims), typed: the rules read its dtype and whether M is 0."""
    rows = g.op.Reshape(x, g.const([-1, dims]))
    rows.dtype, rows.shape = x.dtype, ir.Shape([_numel(x, dims), dims])
    return rows


def _edge_count(e: ir.Value) -> int:
    n = e.shape[0] if e.shape is not None and len(e.shape) == 1 else None
    if not isinstance(n, int):
        raise NotImplementedError("histogram bin edges of a size that is not static")
    return n


@translation(aten.histogram.bin_ct)
def histogram(g: RuleContext, x: ir.Value, bins: int = 100, *,
              range: Sequence[float] | None = None, weight: ir.Value | None = None,
              density: bool = False) -> tuple[ir.Value, ir.Value]:
    """histogram.bin_ct(Tensor self, int bins=100, *, float[]? range=None, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    rows = _rows(g, x, 1)
    (edges,) = _counted_edges(g, rows, [bins], range)
    return _hist(g, rows, [edges], [bins], weight, density), edges


@translation(aten.histogram.bins_tensor)
def histogram_bins(g: RuleContext, x: ir.Value, bins: ir.Value, *,
                   weight: ir.Value | None = None,
                   density: bool = False) -> tuple[ir.Value, ir.Value]:
    """histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    n = _edge_count(bins)
    hist = _hist(g, _rows(g, x, 1), [bins], [n - 1], weight, density)
    return hist, g.op.Identity(bins)


@translation(aten._histogramdd_bin_edges.default)
def histogramdd_bin_edges(g: RuleContext, x: ir.Value, bins: list[int], *,
                          range: Sequence[float] | None = None, weight: ir.Value | None = None,
                          density: bool = False) -> tuple[ir.Value, ...]:
    """_histogramdd_bin_edges(Tensor self, int[] bins, *, float[]? range=None, Tensor? weight=None, bool density=False) -> Tensor[]"""
    rows = _rows(g, x, len(bins))
    return tuple(_counted_edges(g, rows, bins, range))


@translation(aten._histogramdd_from_bin_cts.default)
def histogramdd_from_bin_cts(g: RuleContext, x: ir.Value, bins: list[int], *,
                             range: Sequence[float] | None = None,
                             weight: ir.Value | None = None, density: bool = False) -> ir.Value:
    """_histogramdd_from_bin_cts(Tensor self, int[] bins, *, float[]? range=None, Tensor? weight=None, bool density=False) -> Tensor"""
    rows = _rows(g, x, len(bins))
    edges = _counted_edges(g, rows, bins, range)
    return _hist(g, rows, edges, list(bins), weight, density)


@translation(aten._histogramdd_from_bin_tensors.default)
def histogramdd_from_bin_tensors(g: RuleContext, x: ir.Value, bins: list[ir.Value], *,
                                 weight: ir.Value | None = None,
                                 density: bool = False) -> ir.Value:
    """_histogramdd_from_bin_tensors(Tensor self, Tensor[] bins, *, Tensor? weight=None, bool density=False) -> Tensor"""
    counts = [_edge_count(e) - 1 for e in bins]
    return _hist(g, _rows(g, x, len(bins)), bins, counts, weight, density)


def _numel(x: ir.Value, per_row: int = 1) -> Any:
    dims: list[Any] = list(x.shape) if x.shape is not None else [None]
    if all(isinstance(d, int) for d in dims):
        return math.prod(dims) // per_row
    return None
