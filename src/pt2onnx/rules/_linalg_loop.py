"""Shared pieces of the Loop-based linear algebra (rules/linalg_solve.py,
rules/linalg_factor.py, rules/svdvals.py): index helpers, the ``Loop`` builder and
triangular substitution.

ONNX has no factorisation op, so each one is a ``Loop`` over the matrix dimension k
(trip count from ``Shape``, so n may be dynamic) whose body updates the whole batch
with tensor ops: a Gather of the pivot column, a masked rank-1 update, a ``Where``
to write the new column. Masks (``Where``), not multiplications by 0/1, select what a
step changes, so an inf or NaN stays where LAPACK leaves it. Work is in the input
dtype; the steps follow LAPACK's unblocked routines, in their order of operations
where that is cheap to keep.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, torch_dtype
from pt2onnx.rules._common import rank

_I64 = ir.DataType.INT64
_I32 = ir.DataType.INT32
_BOOL = ir.DataType.BOOL

Step = Callable[..., list[ir.Value]]


# -- small helpers ----------------------------------------------------------------
def _typed(v: ir.Value, dtype: ir.DataType | None) -> ir.Value:
    if dtype is not None:
        v.dtype = dtype
    return v


def _dim(g: RuleContext, x: ir.Value, axis: int) -> ir.Value:
    """Size of ``axis`` of x as a 0-d int64 value."""
    a = axis % rank(x)
    return g.op.Squeeze(g.op.Shape(x, start=a, end=a + 1), g.const([0]))


def _batch(g: RuleContext, x: ir.Value) -> ir.Value:
    """x's shape without its last two dims (1-D int64)."""
    return g.op.Shape(x, start=0, end=rank(x) - 2)


def _rows(g: RuleContext, n: ir.Value) -> ir.Value:
    """[[0], [1], ..., [n-1]] (n x 1 int64)."""
    return g.op.Unsqueeze(g.op.Range(g.const(0), n, g.const(1)), g.const([1]))


def _cols(g: RuleContext, n: ir.Value) -> ir.Value:
    """[[0, 1, ..., n-1]] (1 x n int64)."""
    return g.op.Unsqueeze(g.op.Range(g.const(0), n, g.const(1)), g.const([0]))


def _mT(g: RuleContext, x: ir.Value) -> ir.Value:
    r = rank(x)
    out = g.op.Transpose(x, perm=[*range(r - 2), r - 1, r - 2])
    out.dtype = x.dtype
    if x.shape is not None:
        dims = list(x.shape)
        out.shape = ir.Shape([*dims[:-2], dims[-1], dims[-2]])
    return out


def _like(v: ir.Value, like: ir.Value) -> ir.Value:
    """Gives v the rank (and dtype) of ``like``, for helpers that read ``rank``."""
    _typed(v, like.dtype)
    if like.shape is not None:
        v.shape = ir.Shape([None] * len(like.shape))
    return v


def _with_rank(v: ir.Value, dtype: ir.DataType | None, r: int) -> ir.Value:
    _typed(v, dtype)
    v.shape = ir.Shape([None] * r)
    return v


def _fill(g: RuleContext, value: Any, dtype: ir.DataType, shape: ir.Value) -> ir.Value:
    return _typed(g.op.Expand(g.const(value, dtype), shape), dtype)


def _eye(g: RuleContext, m: ir.Value, n: ir.Value, dtype: ir.DataType) -> ir.Value:
    return _with_rank(g.op.Cast(g.op.Equal(_rows(g, m), _cols(g, n)), to=dtype), dtype, 2)


def _empty(g: RuleContext, dtype: ir.DataType) -> ir.Value:
    return g.op.Identity(g.const(torch.empty(0, dtype=torch_dtype(dtype))))


def _loop(g: RuleContext, trips: ir.Value, init: list[ir.Value], step: Step) -> list[ir.Value]:
    """Runs ``step(k, *states) -> states`` for k = 0 .. trips-1 as an ONNX Loop.

    Every value in ``init`` must carry its dtype; the states keep their shapes.
    """
    with g.scope() as nodes:
        g._counter += 1
        k = ir.Value(name=f"linalg_k_{g._counter}", type=ir.TensorType(_I64), shape=ir.Shape([]))
        cond = ir.Value(name=f"linalg_cond_{g._counter}", type=ir.TensorType(_BOOL),
                        shape=ir.Shape([]))
        states = []
        for v in init:
            g._counter += 1
            assert v.dtype is not None, "loop state without a dtype"
            states.append(ir.Value(name=f"linalg_state_{g._counter}",
                                   type=ir.TensorType(v.dtype), shape=v.shape))
        new = step(k, *states)
    for node in nodes:  # subgraph values need names of their own (SSA across graphs)
        for out in node.outputs:
            if out.name is None:
                g._counter += 1
                out.name = f"linalg_{g._counter}"
    body = g.subgraph("linalg_loop", [k, cond, *states], [g.const(True), *new], nodes)
    outs = g.op.Loop(trips, None, *init, body=body, _outputs=len(init))
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    for out, v in zip(outs, init, strict=True):
        out.dtype, out.shape = v.dtype, v.shape
    return outs


def _swap_index(g: RuleContext, rows: ir.Value, k: ir.Value, p: ir.Value) -> ir.Value:
    """Row indices that swap rows k and p (p: [..., 1, 1]): shape [..., m, 1]."""
    return g.op.Where(g.op.Equal(rows, k), p, g.op.Where(g.op.Equal(rows, p), k, rows))


def _info_out(g: RuleContext, info: ir.Value, r: int) -> ir.Value:
    return _typed(g.op.Cast(g.op.Squeeze(info, g.const([r - 2, r - 1])), to=_I32), _I32)



# -- triangular solves --------------------------------------------------------------
def _trsm(g: RuleContext, t: ir.Value, b: ir.Value, upper: bool, unit: bool) -> ir.Value:
    """X with T X = B, T triangular [..., n, n] (the other triangle is not read), B
    [..., n, k]; batch dims broadcast. Column-oriented substitution, as BLAS trsm."""
    rt = rank(t)
    r = max(rt, rank(b))
    n = _dim(g, t, -1)
    x0 = g.op.Expand(b, g.op.Concat(_batch(g, t), g.const([1, 1]), axis=0)) if rt > 2 else b
    x0 = _typed(x0, b.dtype)
    rows = _rows(g, n)
    last = g.op.Sub(n, g.const(1))

    def step(it: ir.Value, x: ir.Value) -> list[ir.Value]:
        i = g.op.Sub(last, it) if upper else it
        ii = g.op.Reshape(i, g.const([1]))
        xi = g.op.Gather(x, ii, axis=r - 2)  # [..., 1, k]
        if not unit:
            xi = g.op.Div(xi, g.op.Gather(g.op.Gather(t, ii, axis=rt - 2), ii, axis=rt - 1))
        tcol = g.op.Gather(t, ii, axis=rt - 1)  # [..., n, 1]
        ahead = g.op.Less(rows, i) if upper else g.op.Greater(rows, i)
        x = g.op.Where(ahead, g.op.Sub(x, g.op.Mul(tcol, xi)), x)
        return [g.op.Where(g.op.Equal(rows, i), xi, x)]

    (x,) = _loop(g, n, [x0], step)
    return _with_rank(x, b.dtype, r)


def _solve_triangular(g: RuleContext, a: ir.Value, b: ir.Value, upper: bool, left: bool,
                      unit: bool, transpose: bool = False) -> ir.Value:
    """op(A) X = B (left) or X op(A) = B, op(A) = A or A^T."""
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return _mT(g, _solve_triangular(g, a, _mT(g, b), upper, True, unit, not transpose))
    if transpose:
        return _trsm(g, _mT(g, a), b, not upper, unit)
    return _trsm(g, a, b, upper, unit)

