"""Gathers and advanced indexing."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, axes, normalize_dim, rank, shape_list, static_dims


@translation(aten.embedding.default)
def embedding(g: RuleContext, weight: ir.Value, indices: ir.Value, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> ir.Value:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor"""
    return g.op.Gather(weight, indices, axis=0)


@translation(aten.embedding_renorm.default)
def embedding_renorm(g: RuleContext, weight: ir.Value, indices: ir.Value, max_norm: float,
                     norm_type: float) -> ir.Value:
    """embedding_renorm(Tensor self, Tensor indices, float max_norm, float norm_type) -> Tensor"""
    dtype = weight.dtype
    p = float(norm_type)
    if not 0 < p < float("inf"):
        raise NotImplementedError(f"embedding max_norm with norm_type={p}")
    mag = g.op.Abs(weight)
    powered = mag if p == 1 else g.op.Mul(mag, mag) if p == 2 else g.op.Pow(mag, g.const(p, dtype))
    total = g.op.ReduceSum(powered, axes(g, 1), keepdims=1)
    norm = (total if p == 1 else g.op.Sqrt(total) if p == 2
            else g.op.Pow(total, g.const(1.0 / p, dtype)))
    # torch rescales the rows that indices look up and whose norm exceeds max_norm.
    flat = g.op.Reshape(indices, g.const([-1]))
    rows = g.op.ConstantOfShape(g.op.Shape(weight, start=0, end=1),
                                value=ir.tensor([0], dtype=ir.DataType.INT64))
    hits = g.op.ScatterElements(rows, flat, g.op.Expand(g.const(1), g.op.Shape(flat)), axis=0)
    looked_up = g.op.Unsqueeze(g.op.Cast(hits, to=ir.DataType.BOOL), g.const([1]))
    limit = g.const(float(max_norm), dtype)
    over = g.op.And(looked_up, g.op.Greater(norm, limit))
    scale = g.op.Div(limit, g.op.Add(norm, g.const(1e-7, dtype)))
    return g.op.Where(over, g.op.Mul(weight, scale), weight)


@translation(aten.take.default)
def take(g: RuleContext, x: ir.Value, index: ir.Value) -> ir.Value:
    """take(Tensor self, Tensor index) -> Tensor"""
    # Gather wraps negative indices as torch does; torch's decomposition of take
    # guards on the index value and fails under torch.export with a 0-d index.
    return g.op.Gather(g.op.Reshape(x, g.const([-1])), index, axis=0)


@translation(aten.index_select.default)
def index_select(g: RuleContext, x: ir.Value, dim: int, index: ir.Value) -> ir.Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    if rank(x) == 0:
        return x
    if rank(index) == 0:  # torch keeps the dim (size 1); Gather with a 0-d index drops it
        index = g.op.Reshape(index, g.const([1]))
    return g.op.Gather(x, index, axis=normalize_dim(dim, rank(x)))


@translation(aten.gather.default)
def gather(g: RuleContext, x: ir.Value, dim: int, index: ir.Value,
           *, sparse_grad: bool = False) -> ir.Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    if rank(x) == 0:
        return g.op.Identity(x)
    if index.dtype not in (ir.DataType.INT32, ir.DataType.INT64):  # e.g. uint8 in OpInfo samples
        index = g.cast(index, ir.DataType.INT64)
    return g.op.GatherElements(x, index, axis=normalize_dim(dim, rank(x)))


def expand_bool_indices(g: RuleContext, indices: list[ir.Value | None]) -> list[ir.Value | None]:
    """A k-D boolean mask is the k int64 index tensors of its nonzero positions.

    A uint8 index is a mask too, as in eager (which warns that it is deprecated)."""
    out: list[ir.Value | None] = []
    for idx in indices:
        if idx is None or idx.dtype not in (ir.DataType.BOOL, ir.DataType.UINT8):
            out.append(idx)
            continue
        k = rank(idx)
        positions = g.op.NonZero(idx)  # shape [k, n]; NonZero takes uint8 as it is
        for j in range(k):
            col = g.op.Gather(positions, g.const(j), axis=0)
            col.dtype, col.shape = ir.DataType.INT64, ir.Shape([None])
            out.append(col)
    return out


def _stack_indices(g: RuleContext, idx: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
    """Broadcasts index tensors together and stacks them on a new last axis.

    Returns the stacked indices and the broadcast shape (a 1-D int64 value).
    """
    shapes = [sh for sh in (static_dims(t) for t in idx) if sh is not None]
    shape: ir.Value | None
    if len(shapes) == len(idx):
        broadcast = tuple(torch.broadcast_shapes(*[tuple(sh) for sh in shapes]))
        shape = g.const(list(broadcast), ir.DataType.INT64)
        same = all(tuple(sh) == broadcast for sh in shapes)
    else:
        shape = None
        for t in idx:
            s = g.op.Shape(t)
            shape = s if shape is None else g.op.Shape(g.op.Expand(g.op.Expand(g.const(0), shape), s))
        same = len(idx) == 1
    parts = [g.op.Unsqueeze(t if same else g.op.Expand(t, shape), axes(g, -1)) for t in idx]
    stacked = parts[0] if len(parts) == 1 else g.op.Concat(*parts, axis=-1)
    return stacked, shape  # type: ignore[return-value]


def _dims_of(g: RuleContext, x: ir.Value, dims: list[int]) -> ir.Value:
    """x's sizes at ``dims`` as a 1-D int64 value (a constant when they are static)."""
    known = shape_list(x) if x.shape is not None else None
    if known is not None and all(isinstance(known[d], int) for d in dims):
        return g.const([int(known[d]) for d in dims], ir.DataType.INT64)
    return g.op.Gather(g.op.Shape(x), g.const(dims, ir.DataType.INT64), axis=0)


class _Advanced:
    """Advanced indexing moved to the front: ``moved = x`` transposed so that the indexed
    dims come first, and ``where`` (shape B + [k]) the broadcast, wrapped indices into
    them. ``moved[where]`` (GatherND / ScatterND) has shape B + the other dims.

    torch lays the result out as B + the other dims when the indexed dims are separated
    (by a slice or None), and keeps B in their place when they are consecutive."""

    def __init__(self, g: RuleContext, x: ir.Value, indices: list[ir.Value | None]) -> None:
        indices = expand_bool_indices(g, indices)
        r = rank(x)
        self.present = [i for i, idx in enumerate(indices) if idx is not None]
        self.rest = [d for d in range(r) if d not in self.present]
        self.perm = self.present + self.rest
        self.moved = x if self.perm == list(range(r)) else g.op.Transpose(x, perm=self.perm)
        idx = [g.cast(indices[i], ir.DataType.INT64) for i in self.present]  # type: ignore[arg-type]
        self.b_rank = max(rank(t) for t in idx)
        stacked, self.b_shape = _stack_indices(g, idx)
        # Negative indices wrap as in torch.
        sizes = _dims_of(g, x, self.present)
        self.where = g.op.Where(g.op.Less(stacked, g.const(0)), g.op.Add(stacked, sizes), stacked)
        first = self.present[0]
        consecutive = self.present == list(range(first, self.present[-1] + 1))
        # Where B sits in torch's layout of x[indices]: at the first indexed dim when the
        # indexed dims are consecutive, else in front.
        self.b_at = first if consecutive else 0

    def to_torch_layout(self, g: RuleContext, v: ir.Value) -> ir.Value:
        """B + other dims -> torch's layout of x[indices]."""
        if self.b_at == 0:
            return v
        b, k = self.b_rank, self.b_at
        n = b + len(self.rest)
        return g.op.Transpose(v, perm=list(range(b, b + k)) + list(range(b)) + list(range(b + k, n)))

    def from_torch_layout(self, g: RuleContext, v: ir.Value) -> ir.Value:
        """torch's layout of x[indices] -> B + other dims."""
        if self.b_at == 0:
            return v
        b, k = self.b_rank, self.b_at
        n = b + len(self.rest)
        return g.op.Transpose(v, perm=list(range(k, k + b)) + list(range(k)) + list(range(k + b, n)))

    def torch_shape(self, g: RuleContext, x: ir.Value) -> ir.Value:
        """The shape of x[indices] in torch's layout, as a 1-D int64 value."""
        before, after = self.rest[: self.b_at], self.rest[self.b_at:]
        parts = ([_dims_of(g, x, before)] if before else []) + [self.b_shape] + (
            [_dims_of(g, x, after)] if after else [])
        return parts[0] if len(parts) == 1 else g.op.Concat(*parts, axis=0)


@translation(aten.index.Tensor)
def index(g: RuleContext, x: ir.Value, indices: list[ir.Value | None]) -> ir.Value:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"""
    present = [(i, idx) for i, idx in enumerate(indices) if idx is not None]
    if len(present) == 1 and present[0][1].dtype in (ir.DataType.INT64, ir.DataType.INT32):
        i, idx = present[0]
        return g.op.Gather(x, idx, axis=i)  # B in place of dim i, as torch
    adv = _Advanced(g, x, indices)
    return adv.to_torch_layout(g, g.op.GatherND(adv.moved, adv.where))


@translation(aten.index_put.default)
def index_put(g: RuleContext, x: ir.Value, indices: list[ir.Value | None], values: ir.Value,
              accumulate: bool = False) -> ir.Value:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor"""
    adv = _Advanced(g, x, indices)
    # values broadcast to x[indices] (torch's layout), then go to B + the other dims.
    values = g.cast(values, g.dtype)
    want = adv.b_rank + len(adv.rest)
    if rank(values) > want:  # leading 1s beyond x[indices]'s rank, which torch drops
        n = rank(values)
        values = g.op.Reshape(values, g.op.Slice(g.op.Shape(values), g.const([n - want]),
                                                 g.const([n])))
    updates = adv.from_torch_layout(g, g.op.Expand(values, adv.torch_shape(g, x)))
    out = g.op.ScatterND(adv.moved, adv.where, updates, reduction="add" if accumulate else None)
    if adv.perm == list(range(len(adv.perm))):
        return out
    inverse = [adv.perm.index(d) for d in range(len(adv.perm))]
    return g.op.Transpose(out, perm=inverse)


@translation(aten.embedding_bag.padding_idx)
def embedding_bag_padding_idx(g: RuleContext, weight: ir.Value, indices: ir.Value,
                              offsets: ir.Value, scale_grad_by_freq: bool, mode: int,
                              sparse: bool, per_sample_weights: ir.Value | None,
                              include_last_offset: bool, padding_idx: int | None,
                              ) -> tuple[Any, ...]:
    """embedding_bag.padding_idx(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq, int mode, bool sparse, Tensor? per_sample_weights, bool include_last_offset, int? padding_idx) -> (Tensor, Tensor, Tensor, Tensor)

    The public op: a negative ``padding_idx`` counts from the end of ``weight``'s rows,
    None is no padding (``_embedding_bag``'s -1). Translated whole: torch's
    decomposition, traced per node, fixed the number of indices to the example's."""
    if padding_idx is not None and padding_idx < 0:
        rows = weight.shape[0] if weight.shape is not None else None
        if not isinstance(rows, int):
            raise NotImplementedError("a negative padding_idx with a symbolic number of rows")
        padding_idx += rows
    return embedding_bag(g, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                         per_sample_weights, include_last_offset,
                         -1 if padding_idx is None else padding_idx)


def _bag_ids(g: RuleContext, offsets: ir.Value, n: ir.Value, bags: ir.Value) -> ir.Value:
    """For each index position j, the bag it falls in: #(offsets[:bags] <= j) - 1."""
    starts = g.op.Slice(offsets, g.const([0]), bags, g.const([0]))
    positions = g.op.Range(g.const(0), n, g.const(1))
    inside = g.op.LessOrEqual(g.op.Unsqueeze(starts, g.const([0])),
                              g.op.Unsqueeze(positions, g.const([1])))
    count = g.op.ReduceSum(g.op.Cast(inside, to=ir.DataType.INT64), g.const([1]), keepdims=0)
    return g.op.Sub(count, g.const(1))


@translation([aten._embedding_bag.default, aten._embedding_bag_forward_only.default])
def embedding_bag(g: RuleContext, weight: ir.Value, indices: ir.Value, offsets: ir.Value,
                  scale_grad_by_freq: bool = False, mode: int = 0, sparse: bool = False,
                  per_sample_weights: ir.Value | None = None, include_last_offset: bool = False,
                  padding_idx: int = -1) -> tuple[Any, ...]:
    """_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)"""
    if any(g.output_used(i) for i in (1, 2, 3)):
        raise NotImplementedError("embedding_bag's offset2bag, bag_size and max_indices outputs")
    if mode == 2 and g.opset < 18:
        raise NotImplementedError("embedding_bag(mode='max') needs ScatterElements max: opset 18")
    dtype = g.dtype
    dim = g.shape[1]
    # The number of bags is read from offsets at run time: the example's count (a
    # SymInt's hint) would fix it.
    bags = g.op.Shape(offsets, start=0, end=1)
    if include_last_offset:
        bags = g.op.Sub(bags, g.const([1]))
    indices = g.cast(indices, ir.DataType.INT64)
    n = g.op.Squeeze(g.op.Shape(indices), g.const([0]))
    seg = _bag_ids(g, g.cast(offsets, ir.DataType.INT64), n, bags)
    rows = g.op.Gather(weight, indices, axis=0)
    valid = g.op.Expand(g.const(True), g.op.Shape(indices))
    if padding_idx is not None and padding_idx >= 0:
        valid = g.op.Not(g.op.Equal(indices, g.const(padding_idx)))
    counted = g.op.Cast(valid, to=dtype)
    if include_last_offset and mode != 2 and (padding_idx is None or padding_idx < 0):
        # Indices after the last offset: eager (without a padding_idx) leaves them out of
        # the last bag's sum, but its mean still divides by the count up to the end of
        # indices (the last bag's size is len(indices) - its start). Its max, and every
        # mode with a padding_idx, take them into the last bag.
        end = g.op.Gather(g.cast(offsets, ir.DataType.INT64), g.op.Squeeze(bags, g.const([0])))
        valid = g.op.And(valid, g.op.Less(g.op.Range(g.const(0), n, g.const(1)), end))
    valid_f = g.op.Cast(valid, to=dtype)
    if per_sample_weights is not None:
        rows = g.op.Mul(rows, g.op.Unsqueeze(per_sample_weights, g.const([1])))
    seg2 = g.op.Expand(g.op.Unsqueeze(seg, g.const([1])), g.op.Shape(rows))
    out_shape = g.op.Concat(bags, g.int_list([dim]), axis=0)
    zeros = g.op.Expand(g.const(0.0, dtype), out_shape)
    count = g.op.ScatterElements(g.op.Expand(g.const(0.0, dtype), bags), seg,
                                 counted if mode == 1 else valid_f, axis=0, reduction="add")
    count2 = g.op.Unsqueeze(count, g.const([1]))
    if mode == 2:
        low = g.const(float("-inf"), dtype)
        rows = g.op.Where(g.op.Unsqueeze(valid, g.const([1])), rows, low)
        out = g.op.ScatterElements(g.op.Expand(low, out_shape), seg2, rows,
                                   axis=0, reduction="max")
        out = g.op.Where(g.op.Greater(count2, g.const(0.0, dtype)), out, zeros)
        return out, None, None, None
    rows = g.op.Mul(rows, g.op.Unsqueeze(valid_f, g.const([1])))
    out = g.op.ScatterElements(zeros, seg2, rows, axis=0, reduction="add")
    if mode == 1:
        out = g.op.Div(out, g.op.Max(count2, g.const(1.0, dtype)))
    return out, None, None, None
