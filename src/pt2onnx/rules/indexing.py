"""Gathers and advanced indexing."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from pt2onnx._builder import RuleContext
from pt2onnx._registry import translation
from pt2onnx.rules._common import aten, axes, normalize_dim, rank


@translation(aten.embedding.default)
def embedding(g: RuleContext, weight: ir.Value, indices: ir.Value, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> ir.Value:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor"""
    return g.op.Gather(weight, indices, axis=0)


@translation(aten.index_select.default)
def index_select(g: RuleContext, x: ir.Value, dim: int, index: ir.Value) -> ir.Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    if rank(x) == 0:
        return x
    return g.op.Gather(x, index, axis=normalize_dim(dim, rank(x)))


@translation(aten.gather.default)
def gather(g: RuleContext, x: ir.Value, dim: int, index: ir.Value,
           *, sparse_grad: bool = False) -> ir.Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    if rank(x) == 0:
        return g.op.Identity(x)
    return g.op.GatherElements(x, index, axis=normalize_dim(dim, rank(x)))


@translation(aten.index.Tensor)
def index(g: RuleContext, x: ir.Value, indices: list[ir.Value | None]) -> ir.Value:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"""
    present = [i for i, idx in enumerate(indices) if idx is not None]
    for i in present:
        if indices[i].dtype == ir.DataType.BOOL:  # type: ignore[union-attr]
            raise NotImplementedError(
                "boolean-mask indexing has a data-dependent shape; it is handled by nonzero"
            )
    if len(present) == 1:
        i = present[0]
        return g.op.Gather(x, indices[i], axis=i)
    r = rank(x)
    consecutive = present == list(range(present[0], present[-1] + 1))
    # Move the indexed dims to the front, gather them together with GatherND.
    rest = [d for d in range(r) if d not in present]
    perm = present + rest
    if perm != list(range(r)):
        x = g.op.Transpose(x, perm=perm)
    idx = [g.cast(indices[i], ir.DataType.INT64) for i in present]  # type: ignore[arg-type]
    # Broadcast the index tensors against each other, then stack on a new last axis.
    shape = None
    for t in idx:
        s = g.op.Shape(t)
        shape = s if shape is None else g.op.Shape(g.op.Expand(g.op.Expand(
            g.const(0), shape), s))
    stacked = g.op.Concat(
        *[g.op.Unsqueeze(g.op.Expand(t, shape), axes(g, -1)) for t in idx], axis=-1
    )
    # Negative indices wrap like in torch.
    dims = g.op.Gather(g.op.Shape(x), g.const(list(range(len(present)))))
    stacked = g.op.Where(g.op.Less(stacked, g.const(0)), g.op.Add(stacked, dims), stacked)
    out = g.op.GatherND(x, stacked)
    if consecutive and present[0] > 0:
        # torch puts the broadcast dims where the indexed dims were.
        b = len(g.shape) - len(rest)
        out_rank = len(g.shape)
        k = present[0]
        perm_out = list(range(b, b + k)) + list(range(b)) + list(range(b + k, out_rank))
        out = g.op.Transpose(out, perm=perm_out)
    return out


@translation(aten.index_put.default)
def index_put(g: RuleContext, x: ir.Value, indices: list[ir.Value | None], values: ir.Value,
              accumulate: bool = False) -> ir.Value:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor"""
    present = [i for i, idx in enumerate(indices) if idx is not None]
    if present != list(range(len(present))):
        raise NotImplementedError("index_put with leading None indices")
    idx = [g.cast(indices[i], ir.DataType.INT64) for i in present]  # type: ignore[arg-type]
    if any(t.dtype == ir.DataType.BOOL for t in idx):
        raise NotImplementedError("index_put with a boolean mask")
    shape: Any = None
    for t in idx:
        s = g.op.Shape(t)
        shape = s if shape is None else g.op.Shape(g.op.Expand(g.op.Expand(g.const(0), shape), s))
    stacked = g.op.Concat(
        *[g.op.Unsqueeze(g.op.Expand(t, shape), axes(g, -1)) for t in idx], axis=-1
    )
    # values broadcast to index_shape + the trailing, not indexed dims.
    trailing = g.op.Slice(g.op.Shape(x), g.const([len(present)]), g.const([2**62]))
    upd_shape = g.op.Concat(shape, trailing, axis=0)
    updates = g.op.Expand(g.cast(values, g.dtype), upd_shape)
    return g.op.ScatterND(x, stacked, updates, reduction="add" if accumulate else None)
