"""Linear solves as ONNX Loops: LU with partial pivoting (lu_factor, lu, lu_unpack,
lu_solve), inverse and solve, and triangular solves. The Loop machinery and the
substitution they share are in rules/_linalg_loop.py; Cholesky, QR and LDL^T in
rules/linalg_factor.py.

- LU follows getf2: the pivot is the first largest ``|a_ik|`` (i >= k), the column
  below is scaled by the reciprocal of the pivot (divided when the pivot is
  subnormal, left alone when it is 0, which sets ``info`` to the first such k + 1).
- Solves apply the row permutation as a 0/1 matrix product, then forward and back
  substitution, column-oriented as BLAS trsm; inverse is the solve with the identity,
  as torch does.

The error checks of the non-``_ex`` variants (``_linalg_check_errors``, also when a
whole-program retrace wraps it in ``with_effects``) have nothing to check with in
ONNX and are dropped: a singular matrix gives inf/NaN (a matrix that is not positive
definite, the partial factor above) instead of an exception.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, torch_dtype, translation
from pt2onnx.rules._common import aten, rank
from pt2onnx.rules._linalg_loop import (
    _I32,
    _I64,
    _batch,
    _cols,
    _dim,
    _empty,
    _eye,
    _fill,
    _info_out,
    _like,
    _loop,
    _mT,
    _rows,
    _solve_triangular,
    _swap_index,
    _trsm,
    _typed,
    _with_rank,
)


# -- LU with partial pivoting -------------------------------------------------------
def _lu(g: RuleContext, a: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """getf2 on a [..., m, n]: (LU, perm [..., m, 1] int64, pivots [..., 1, K] int64
    0-based, info [..., 1, 1] int64) with A[perm] = L U."""
    dtype = a.dtype
    assert dtype is not None
    r = rank(a)
    m, n = _dim(g, a, -2), _dim(g, a, -1)
    trips = g.op.Min(m, n)
    rows, cols = _rows(g, m), _cols(g, n)
    kcols = _cols(g, trips)
    batch = _batch(g, a)
    perm0 = _typed(g.op.Expand(rows, g.op.Concat(batch, g.const([1, 1]), axis=0)), _I64)
    piv0 = _fill(g, [[0]], _I64, g.op.Concat(batch, g.const([1]), g.op.Reshape(trips, g.const([1])),
                                               axis=0))
    info0 = _fill(g, [[0]], _I64, g.op.Concat(batch, g.const([1, 1]), axis=0))
    tiny = g.const(float(torch.finfo(torch_dtype(dtype)).tiny), dtype)
    zero, one = g.const(0.0, dtype), g.const(1.0, dtype)

    def step(k: ir.Value, lu: ir.Value, perm: ir.Value, piv: ir.Value,
             info: ir.Value) -> list[ir.Value]:
        kk = g.op.Reshape(k, g.const([1]))
        # i?amax: the first largest |a_ik|, i >= k; a NaN is never larger, and a NaN
        # at i = k stays the pivot.
        mag = g.op.Abs(g.op.Gather(lu, kk, axis=r - 1))
        cand = g.op.Where(g.op.Less(rows, k), g.const(-2.0, dtype),
                          g.op.Where(g.op.IsNaN(mag), g.const(-1.0, dtype), mag))
        p = g.op.ArgMax(cand, axis=r - 2, keepdims=1)  # first index on ties
        p = g.op.Where(g.op.IsNaN(g.op.Gather(mag, kk, axis=r - 2)), k, p)
        idx = _swap_index(g, rows, k, p)
        lu = g.op.GatherElements(lu, g.op.Expand(idx, g.op.Shape(lu)), axis=r - 2)
        perm = g.op.GatherElements(perm, idx, axis=r - 2)
        piv = g.op.Where(g.op.Equal(kcols, k), p, piv)
        urow = g.op.Gather(lu, kk, axis=r - 2)  # [..., 1, n]
        col = g.op.Gather(lu, kk, axis=r - 1)  # [..., m, 1]
        pivot = g.op.Gather(urow, kk, axis=r - 1)  # [..., 1, 1]
        scaled = g.op.Where(g.op.GreaterOrEqual(g.op.Abs(pivot), tiny),
                            g.op.Mul(col, g.op.Div(one, pivot)), g.op.Div(col, pivot))
        is_zero = g.op.Equal(pivot, zero)
        lcol = g.op.Where(is_zero, col, scaled)
        below = g.op.Greater(rows, k)
        trailing = g.op.And(below, g.op.Greater(cols, k))
        lu = g.op.Where(trailing, g.op.Sub(lu, g.op.Mul(lcol, urow)), lu)
        lu = g.op.Where(g.op.And(below, g.op.Equal(cols, k)), lcol, lu)
        first = g.op.And(g.op.Equal(info, g.const(0)), is_zero)
        info = g.op.Where(first, g.op.Add(k, g.const(1)), info)
        return [lu, perm, piv, info]

    lu, perm, piv, info = _loop(g, trips, [a, perm0, piv0, info0], step)
    return _like(lu, a), _with_rank(perm, _I64, r), piv, info


def _pivots_out(g: RuleContext, piv: ir.Value, r: int) -> ir.Value:
    """0-based [..., 1, K] int64 pivots as torch's 1-based [..., K] int32."""
    out = g.op.Cast(g.op.Add(g.op.Squeeze(piv, g.const([r - 2])), g.const(1)), to=_I32)
    return _typed(out, _I32)


def _perm_from_pivots(g: RuleContext, pivots: ir.Value, m: ir.Value) -> ir.Value:
    """The row order [..., m, 1] (int64) that LAPACK's sequential swaps give."""
    r = rank(pivots) + 1  # rank of the matrix the pivots belong to
    rows = _rows(g, m)
    p0 = g.op.Unsqueeze(g.op.Sub(g.cast(pivots, _I64), g.const(1)), g.const([r - 2]))
    batch = g.op.Shape(pivots, start=0, end=r - 2)
    perm0 = _typed(g.op.Expand(rows, g.op.Concat(batch, g.const([1, 1]), axis=0)), _I64)

    def step(k: ir.Value, perm: ir.Value) -> list[ir.Value]:
        p = g.op.Gather(p0, g.op.Reshape(k, g.const([1])), axis=r - 1)  # [..., 1, 1]
        return [g.op.GatherElements(perm, _swap_index(g, rows, k, p), axis=r - 2)]

    (perm,) = _loop(g, _dim(g, pivots, -1), [perm0], step)
    return _with_rank(perm, _I64, r)


def _perm_matrix(g: RuleContext, perm: ir.Value, dtype: ir.DataType) -> ir.Value:
    """P with A = P L U, from the row order: P[i, j] = (perm[j] == i)."""
    m = _dim(g, perm, -2)
    p = g.op.Cast(g.op.Equal(_mT(g, perm), _rows(g, m)), to=dtype)
    return _with_rank(p, dtype, rank(perm))


# -- triangular solves (the substitution is _linalg_loop._trsm) --------------------
@translation(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(g: RuleContext, a: ir.Value, b: ir.Value, *, upper: bool,
                            left: bool = True, unitriangular: bool = False) -> ir.Value:
    """linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False) -> Tensor"""
    return _solve_triangular(g, a, b, upper, left, unitriangular)


@translation(aten.triangular_solve.default)
def triangular_solve(g: RuleContext, b: ir.Value, a: ir.Value, upper: bool = True,
                     transpose: bool = False,
                     unitriangular: bool = False) -> tuple[ir.Value, ir.Value]:
    """triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False, bool unitriangular=False) -> (Tensor solution, Tensor cloned_coefficient)"""
    x = _solve_triangular(g, a, b, upper, True, unitriangular, transpose)
    if rank(b) > 2:  # the coefficient comes back broadcast to the batch
        a = g.op.Expand(a, g.op.Concat(_batch(g, b), g.const([1, 1]), axis=0))
    return x, g.op.Identity(a)


# -- LU-based rules -----------------------------------------------------------------
def _lu_solve(g: RuleContext, lu: ir.Value, perm: ir.Value, b: ir.Value, left: bool = True,
              adjoint: bool = False) -> ir.Value:
    """X with A X = B (A^T X = B when adjoint; X A = B, X A^T = B when not left), A = P L U."""
    dtype = lu.dtype
    assert dtype is not None
    if not left:  # X A = B <=> A^T X^T = B^T
        return _mT(g, _lu_solve(g, lu, perm, _mT(g, b), True, not adjoint))
    p = _perm_matrix(g, perm, dtype)
    if adjoint:  # U^T L^T P^T X = B
        lu_t = _mT(g, lu)
        w = _trsm(g, lu_t, b, upper=False, unit=False)
        v = _trsm(g, lu_t, w, upper=True, unit=True)
        return _with_rank(g.op.MatMul(p, v), dtype, max(rank(v), rank(p)))
    y = _with_rank(g.op.MatMul(_mT(g, p), b), dtype, max(rank(b), rank(p)))
    z = _trsm(g, lu, y, upper=False, unit=True)
    return _trsm(g, lu, z, upper=True, unit=False)


@translation([aten.linalg_lu_factor_ex.default, aten._lu_with_info.default])
def linalg_lu_factor_ex(g: RuleContext, a: ir.Value, pivot: bool = True,
                        check_errors: bool = False) -> tuple[ir.Value, ir.Value, ir.Value]:
    """linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (Tensor LU, Tensor pivots, Tensor info)"""
    _need_pivot(pivot)
    lu, _, piv, info = _lu(g, a)
    r = rank(a)
    return lu, _pivots_out(g, piv, r), _info_out(g, info, r)


@translation(aten.linalg_lu_factor.default)
def linalg_lu_factor(g: RuleContext, a: ir.Value, *, pivot: bool = True) -> tuple[ir.Value, ir.Value]:
    """linalg_lu_factor(Tensor A, *, bool pivot=True) -> (Tensor LU, Tensor pivots)"""
    lu, piv, _ = linalg_lu_factor_ex(g, a, pivot)
    return lu, piv


def _need_pivot(pivot: bool) -> None:
    if not pivot:
        raise NotImplementedError(
            "LU without pivoting (pivot=False): torch supports it on CUDA only, and "
            "the exported graph follows the CPU kernel; pass pivot=True")


def _unpack(g: RuleContext, lu: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(L [..., m, k] unit lower, U [..., k, n]) from packed LU [..., m, n], k = min(m, n)."""
    dtype = lu.dtype
    assert dtype is not None
    r = rank(lu)
    m, n = _dim(g, lu, -2), _dim(g, lu, -1)
    k = g.op.Reshape(g.op.Min(m, n), g.const([1]))
    rows_m, cols_n = _rows(g, m), _cols(g, n)
    kk = g.op.Min(m, n)
    rows_k, cols_k = _rows(g, kk), _cols(g, kk)
    left = g.op.Slice(lu, g.const([0]), k, g.const([r - 1]))
    low = g.op.Where(g.op.Greater(rows_m, cols_k), left,
                     g.op.Cast(g.op.Equal(rows_m, cols_k), to=dtype))
    top = g.op.Slice(lu, g.const([0]), k, g.const([r - 2]))
    up = g.op.Where(g.op.LessOrEqual(rows_k, cols_n), top, g.const(0.0, dtype))
    return low, up


@translation(aten.linalg_lu.default)
def linalg_lu(g: RuleContext, a: ir.Value, *,
              pivot: bool = True) -> tuple[ir.Value, ir.Value, ir.Value]:
    """linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)"""
    _need_pivot(pivot)
    lu, perm, _, _ = _lu(g, a)
    low, up = _unpack(g, lu)
    assert a.dtype is not None
    return _perm_matrix(g, _with_rank(perm, _I64, rank(a)), a.dtype), low, up


@translation(aten.lu_unpack.default)
def lu_unpack(g: RuleContext, lu: ir.Value, pivots: ir.Value, unpack_data: bool = True,
              unpack_pivots: bool = True) -> tuple[ir.Value, ir.Value, ir.Value]:
    """lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) -> (Tensor P, Tensor L, Tensor U)"""
    dtype = lu.dtype
    assert dtype is not None
    if unpack_data:
        low, up = _unpack(g, lu)
    else:
        low, up = _empty(g, dtype), _empty(g, dtype)
    if unpack_pivots:
        p = _perm_matrix(g, _perm_from_pivots(g, pivots, _dim(g, lu, -2)), dtype)
    else:
        p = _empty(g, dtype)
    return p, low, up


@translation(aten.linalg_lu_solve.default)
def linalg_lu_solve(g: RuleContext, lu: ir.Value, pivots: ir.Value, b: ir.Value, *,
                    left: bool = True, adjoint: bool = False) -> ir.Value:
    """linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) -> Tensor"""
    perm = _perm_from_pivots(g, pivots, _dim(g, lu, -1))
    return _lu_solve(g, lu, perm, b, left, adjoint)


@translation(aten.lu_solve.default)
def lu_solve(g: RuleContext, b: ir.Value, lu: ir.Value, pivots: ir.Value) -> ir.Value:
    """lu_solve(Tensor self, Tensor LU_data, Tensor LU_pivots) -> Tensor"""
    return linalg_lu_solve(g, lu, pivots, b)


@translation(aten.linalg_inv_ex.default)
def linalg_inv_ex(g: RuleContext, a: ir.Value, *,
                  check_errors: bool = False) -> tuple[ir.Value, ir.Value]:
    """linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)"""
    assert a.dtype is not None
    lu, perm, _, info = _lu(g, a)
    n = _dim(g, a, -1)
    inv = _lu_solve(g, lu, perm, _eye(g, n, n, a.dtype))
    return inv, _info_out(g, info, rank(a))


@translation(aten.linalg_inv.default)
def linalg_inv(g: RuleContext, a: ir.Value) -> ir.Value:
    """linalg_inv(Tensor A) -> Tensor"""
    return linalg_inv_ex(g, a)[0]


def _is_vector_rhs(a: ir.Value, b: ir.Value) -> bool:
    """torch's rule: B is a batch of vectors when it has one dim less than A and the
    shape of A without its last dim (or B is 1-D)."""
    if rank(b) == 1:
        return True
    return rank(b) == rank(a) - 1 and list(b.shape or ()) == list(a.shape or ())[:-1]


def _solve(g: RuleContext, a: ir.Value, b: ir.Value,
           left: bool) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    lu, perm, piv, info = _lu(g, a)
    vector = _is_vector_rhs(a, b)  # torch rejects a vector B with left=False
    rb = rank(b)
    if vector:
        b = _with_rank(g.op.Unsqueeze(b, g.const([rb])), b.dtype, rb + 1)
    x = _lu_solve(g, lu, perm, b, left)
    if vector:
        x = g.op.Squeeze(x, g.const([rank(x) - 1]))
    r = rank(a)
    return x, lu, _pivots_out(g, piv, r), _info_out(g, info, r)


@translation(aten._linalg_solve_ex.default)
def _linalg_solve_ex(g: RuleContext, a: ir.Value, b: ir.Value, *, left: bool = True,
                     check_errors: bool = False) -> tuple[ir.Value, ...]:
    """_linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> (Tensor result, Tensor LU, Tensor pivots, Tensor info)"""
    return _solve(g, a, b, left)


@translation(aten.linalg_solve_ex.default)
def linalg_solve_ex(g: RuleContext, a: ir.Value, b: ir.Value, *, left: bool = True,
                    check_errors: bool = False) -> tuple[ir.Value, ir.Value]:
    """linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> (Tensor result, Tensor info)"""
    x, _, _, info = _solve(g, a, b, left)
    return x, info


@translation(aten.linalg_solve.default)
def linalg_solve(g: RuleContext, a: ir.Value, b: ir.Value, *, left: bool = True) -> ir.Value:
    """linalg_solve(Tensor A, Tensor B, *, bool left=True) -> Tensor"""
    return _solve(g, a, b, left)[0]


@translation(aten._linalg_check_errors.default)
def _linalg_check_errors(g: RuleContext, info: ir.Value, api_name: str, *,
                         is_matrix: bool) -> None:
    """_linalg_check_errors(Tensor info, str api_name, *, bool is_matrix) -> ()"""
    # ONNX cannot raise: a singular (or not positive definite) input gives inf/NaN.
    return None


if hasattr(torch.ops.higher_order, "with_effects"):

    @translation(torch.ops.higher_order.with_effects)
    def with_effects(g: RuleContext, token: Any, op: Any, *args: Any,
                     **kwargs: Any) -> tuple[Any, ...]:
        """with_effects(token, op, *args, **kwargs) -> (token, *outputs)"""
        # A whole-program retrace threads the error check through an effect token.
        if op is aten._linalg_check_errors.default:  # outputs: the token and ()
            return (None,) * (len(g.meta) if isinstance(g.meta, (tuple, list)) else 1)
        raise NotImplementedError(
            f"{op} has a side effect (with_effects); ONNX graphs are pure, so it has no "
            "translation. Remove the call from the exported code, or register a rule for "
            "torch.ops.higher_order.with_effects that handles it")
