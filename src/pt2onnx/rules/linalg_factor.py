"""Factorisations as ONNX Loops (see rules/_linalg_loop.py): Cholesky (cholesky,
cholesky_solve, cholesky_inverse), Householder QR (qr, geqrf) and Bunch-Kaufman LDL^T
(ldl_factor, ldl_solve).

- Cholesky is column by column (potf2). Where a leading minor is not positive
  definite, ``info`` is that column, the column holds the failed diagonal value and
  later columns keep the input's entries, as LAPACK leaves them.
- QR is geqr2's Householder reflections (``beta = -sign(alpha) * norm``), Q formed
  by applying them to the identity in reverse (orgqr).
- LDL^T is sytf2 (lower): 1x1 or 2x2 pivot blocks chosen per matrix, so each matrix
  of a batch keeps its own column counter; ldl_solve is sytrs.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, present, rank
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


# -- Cholesky -----------------------------------------------------------------------
def _cholesky(g: RuleContext, a: ir.Value, upper: bool) -> tuple[ir.Value, ir.Value]:
    """(L, info [..., 1, 1] int64): potf2 on the lower triangle (upper: U = L^T of A^T)."""
    if upper:
        low, info = _cholesky(g, _mT(g, a), False)
        return _mT(g, low), info
    dtype = a.dtype
    assert dtype is not None
    r = rank(a)
    n = _dim(g, a, -1)
    rows, cols = _rows(g, n), _cols(g, n)
    batch = _batch(g, a)
    l0 = _fill(g, 0.0, dtype, g.op.Shape(a))
    info0 = _fill(g, [[0]], _I64, g.op.Concat(batch, g.const([1, 1]), axis=0))
    zero, one = g.const(0.0, dtype), g.const(1.0, dtype)

    def step(j: ir.Value, low: ir.Value, info: ir.Value) -> list[ir.Value]:
        jj = g.op.Reshape(j, g.const([1]))
        row = g.op.Gather(low, jj, axis=r - 2)  # [..., 1, n], zero from column j on
        col_a = g.op.Gather(a, jj, axis=r - 1)  # [..., n, 1]
        col = g.op.Sub(col_a, g.op.MatMul(low, _mT(g, _with_rank(row, dtype, r))))
        d = g.op.Gather(col, jj, axis=r - 2)  # [..., 1, 1]
        bad = g.op.Not(g.op.Greater(d, zero))  # not positive, or NaN
        sd = g.op.Sqrt(d)
        at, below = g.op.Equal(rows, j), g.op.Greater(rows, j)
        good = g.op.Where(below, g.op.Mul(col, g.op.Div(one, sd)), g.op.Where(at, sd, zero))
        # LAPACK stops at the first failure: that column keeps A's entries below the
        # failed diagonal value, later ones A's entries.
        failing = g.op.Where(at, d, g.op.Where(below, col_a, zero))
        kept = g.op.Where(g.op.Less(rows, j), zero, col_a)
        ok = g.op.Equal(info, g.const(0))
        new = g.op.Where(ok, g.op.Where(bad, failing, good), kept)
        low = g.op.Where(g.op.Equal(cols, j), new, low)
        info = g.op.Where(g.op.And(ok, bad), g.op.Add(j, g.const(1)), info)
        return [low, info]

    low, info = _loop(g, n, [l0, info0], step)
    return _like(low, a), info


@translation(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(g: RuleContext, a: ir.Value, *, upper: bool = False,
                       check_errors: bool = False) -> tuple[ir.Value, ir.Value]:
    """linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (Tensor L, Tensor info)"""
    low, info = _cholesky(g, a, upper)
    return low, _info_out(g, info, rank(a))


@translation(aten.linalg_cholesky.default)
def linalg_cholesky(g: RuleContext, a: ir.Value, *, upper: bool = False) -> ir.Value:
    """linalg_cholesky(Tensor self, *, bool upper=False) -> Tensor"""
    return _cholesky(g, a, upper)[0]


@translation(present("cholesky.default"))  # removed in torch 2.14
def cholesky(g: RuleContext, a: ir.Value, upper: bool = False) -> ir.Value:
    """cholesky(Tensor self, bool upper=False) -> Tensor"""
    return _cholesky(g, a, upper)[0]


@translation(aten.cholesky_solve.default)
def cholesky_solve(g: RuleContext, b: ir.Value, factor: ir.Value,
                   upper: bool = False) -> ir.Value:
    """cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor"""
    # A = L L^T (A = U^T U when upper): two triangular solves.
    y = _solve_triangular(g, factor, b, upper, True, False, transpose=upper)
    return _solve_triangular(g, factor, y, upper, True, False, transpose=not upper)


@translation(aten.cholesky_inverse.default)
def cholesky_inverse(g: RuleContext, factor: ir.Value, upper: bool = False) -> ir.Value:
    """cholesky_inverse(Tensor self, bool upper=False) -> Tensor"""
    assert factor.dtype is not None
    n = _dim(g, factor, -1)
    inv = _trsm(g, factor, _eye(g, n, n, factor.dtype), upper, False)  # L^-1 (U^-1)
    # (L L^T)^-1 = L^-T L^-1; (U^T U)^-1 = U^-1 U^-T, as potri.
    if upper:
        return g.op.MatMul(inv, _mT(g, inv))
    return g.op.MatMul(_mT(g, inv), inv)


# -- QR -----------------------------------------------------------------------------
def _geqr2(g: RuleContext, a: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Householder QR of a [..., m, n] as geqr2: (A with R on and above the diagonal and
    the reflectors' vectors below it, tau [..., 1, k])."""
    dtype = a.dtype
    assert dtype is not None
    r = rank(a)
    m, n = _dim(g, a, -2), _dim(g, a, -1)
    trips = g.op.Min(m, n)
    rows, cols, kcols = _rows(g, m), _cols(g, n), _cols(g, trips)
    tau0 = _fill(g, [[0.0]], dtype, g.op.Concat(_batch(g, a), g.const([1]),
                                                 g.op.Reshape(trips, g.const([1])), axis=0))
    zero, one = g.const(0.0, dtype), g.const(1.0, dtype)

    def step(j: ir.Value, qr: ir.Value, tau: ir.Value) -> list[ir.Value]:
        jj = g.op.Reshape(j, g.const([1]))
        col = g.op.Gather(qr, jj, axis=r - 1)  # [..., m, 1]
        alpha = g.op.Gather(col, jj, axis=r - 2)  # [..., 1, 1]
        at, below = g.op.Equal(rows, j), g.op.Greater(rows, j)
        x = g.op.Where(below, col, zero)
        xnorm = g.op.Sqrt(g.op.ReduceSum(g.op.Mul(x, x), g.const([r - 2]), keepdims=1))
        norm = g.op.Sqrt(g.op.Add(g.op.Mul(alpha, alpha), g.op.Mul(xnorm, xnorm)))
        beta = g.op.Where(g.op.GreaterOrEqual(alpha, zero), g.op.Neg(norm), norm)
        reflect = g.op.Not(g.op.Equal(xnorm, zero))  # else H = I (tau = 0), as dlarfg
        tau_j = g.op.Where(reflect, g.op.Div(g.op.Sub(beta, alpha), beta), zero)
        v_below = g.op.Where(reflect, g.op.Mul(col, g.op.Div(one, g.op.Sub(alpha, beta))), col)
        v = g.op.Where(below, v_below, g.op.Where(at, one, zero))  # v[j] = 1
        # dlarf on the trailing columns: C += v (-tau w^T), w = C^T v.
        w = g.op.MatMul(_mT(g, _with_rank(v, dtype, r)), qr)  # [..., 1, n]
        updated = g.op.Add(qr, g.op.Mul(v, g.op.Mul(g.op.Neg(tau_j), w)))
        qr = g.op.Where(g.op.And(g.op.GreaterOrEqual(rows, j), g.op.Greater(cols, j)), updated, qr)
        new_col = g.op.Where(below, v_below, g.op.Where(at, g.op.Where(reflect, beta, alpha), col))
        qr = g.op.Where(g.op.Equal(cols, j), new_col, qr)
        tau = g.op.Where(g.op.Equal(kcols, j), tau_j, tau)
        return [qr, tau]

    qr, tau = _loop(g, trips, [a, tau0], step)
    return _like(qr, a), _with_rank(tau, dtype, r)


def _orgqr(g: RuleContext, qr: ir.Value, tau: ir.Value, ncols: ir.Value) -> ir.Value:
    """The first ``ncols`` columns of Q = H_0 H_1 ... H_{k-1}, applied to the identity in
    reverse order as orgqr."""
    dtype = qr.dtype
    assert dtype is not None
    r = rank(qr)
    m = _dim(g, qr, -2)
    k = _dim(g, tau, -1)
    rows, cols = _rows(g, m), _cols(g, ncols)
    q0 = _typed(g.op.Expand(_eye(g, m, ncols, dtype),
                            g.op.Concat(_batch(g, qr), g.const([1, 1]), axis=0)), dtype)
    last = g.op.Sub(k, g.const(1))
    zero, one = g.const(0.0, dtype), g.const(1.0, dtype)

    def step(it: ir.Value, q: ir.Value) -> list[ir.Value]:
        j = g.op.Sub(last, it)
        jj = g.op.Reshape(j, g.const([1]))
        col = g.op.Gather(qr, jj, axis=r - 1)
        v = g.op.Where(g.op.Greater(rows, j), col, g.op.Where(g.op.Equal(rows, j), one, zero))
        tau_j = g.op.Gather(tau, jj, axis=r - 1)  # [..., 1, 1]
        w = g.op.MatMul(_mT(g, _with_rank(v, dtype, r)), q)
        updated = g.op.Add(q, g.op.Mul(v, g.op.Mul(g.op.Neg(tau_j), w)))
        # H_j acts on Q[j:, j:] only (as org2r), so a NaN tau stays in its block.
        block = g.op.And(g.op.GreaterOrEqual(rows, j), g.op.GreaterOrEqual(cols, j))
        return [g.op.Where(block, updated, q)]

    (q,) = _loop(g, k, [q0], step)
    return q


@translation(aten.linalg_qr.default)
def linalg_qr(g: RuleContext, a: ir.Value, mode: str = "reduced") -> tuple[ir.Value, ir.Value]:
    """linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)"""
    dtype = a.dtype
    assert dtype is not None
    qr, tau = _geqr2(g, a)
    r = rank(a)
    m, n = _dim(g, a, -2), _dim(g, a, -1)
    k = g.op.Min(m, n)
    rows_out = m if mode == "complete" else k
    top = g.op.Slice(qr, g.const([0]), g.op.Reshape(rows_out, g.const([1])), g.const([r - 2]))
    upper = g.op.Where(g.op.LessOrEqual(_rows(g, rows_out), _cols(g, n)), top,
                       g.const(0.0, dtype))
    if mode == "r":
        return _empty(g, dtype), upper
    return _orgqr(g, qr, tau, rows_out), upper


@translation(aten.geqrf.default)
def geqrf(g: RuleContext, a: ir.Value) -> tuple[ir.Value, ir.Value]:
    """geqrf(Tensor self) -> (Tensor a, Tensor tau)"""
    qr, tau = _geqr2(g, a)
    return qr, g.op.Squeeze(tau, g.const([rank(a) - 2]))


@translation(present("qr.default"))  # removed in torch 2.14
def qr(g: RuleContext, a: ir.Value, some: bool = True) -> tuple[ir.Value, ir.Value]:
    """qr(Tensor self, bool some=True) -> (Tensor Q, Tensor R)"""
    return linalg_qr(g, a, "reduced" if some else "complete")


# -- LDL^T (Bunch-Kaufman) --------------------------------------------------------------
# sytf2 takes 1x1 or 2x2 pivot blocks, so each matrix of a batch has its own column
# counter: the Loop runs n times and a matrix that has finished stops changing.
_BK_ALPHA = (1 + 17**0.5) / 8


def _pick_row(g: RuleContext, x: ir.Value, i: ir.Value, r: int, dtype: ir.DataType) -> ir.Value:
    """Row i ([..., 1, 1] per matrix) of x as [..., 1, n]: a masked sum, exact."""
    rows = _rows(g, g.op.Squeeze(g.op.Shape(x, start=r - 2, end=r - 1), g.const([0])))
    picked = g.op.Where(g.op.Equal(rows, i), x, g.const(0.0, dtype))
    return g.op.ReduceSum(picked, g.const([r - 2]), keepdims=1)


def _pick_col(g: RuleContext, x: ir.Value, j: ir.Value, r: int, dtype: ir.DataType) -> ir.Value:
    """Column j ([..., 1, 1] per matrix) of x as [..., n, 1]."""
    cols = _cols(g, g.op.Squeeze(g.op.Shape(x, start=r - 1, end=r), g.const([0])))
    picked = g.op.Where(g.op.Equal(cols, j), x, g.const(0.0, dtype))
    return g.op.ReduceSum(picked, g.const([r - 1]), keepdims=1)


def _reduce_max(g: RuleContext, x: ir.Value, axis: int) -> ir.Value:
    if g.opset >= 18:
        return g.op.ReduceMax(x, g.const([axis]), keepdims=1)
    return g.op.ReduceMax(x, axes=[axis], keepdims=1)


def _sytf2(g: RuleContext, a: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Bunch-Kaufman LDL^T on the lower triangle, as LAPACK's sytf2 (uplo='L'):
    (LD [..., n, n] lower, pivots [..., 1, n] int64 1-based, info [..., 1, 1] int64)."""
    dtype = a.dtype
    assert dtype is not None
    r = rank(a)
    n = _dim(g, a, -1)
    rows, cols = _rows(g, n), _cols(g, n)
    batch = _batch(g, a)
    one_one = g.op.Concat(batch, g.const([1, 1]), axis=0)
    k0 = _fill(g, [[0]], _I64, one_one)
    info0 = _fill(g, [[0]], _I64, one_one)
    piv0 = _fill(g, [[0]], _I64, g.op.Concat(batch, g.const([1]), g.op.Reshape(n, g.const([1])),
                                              axis=0))
    c = {v: g.const(float(v), dtype) for v in (0, 1, -1)}
    alpha = g.const(_BK_ALPHA, dtype)
    i1, i2 = g.const(1), g.const(2)
    last = g.op.Sub(n, i1)
    lower = g.op.GreaterOrEqual(rows, cols)

    def step(_: ir.Value, ld: ir.Value, kcur: ir.Value, piv: ir.Value,
             info: ir.Value) -> list[ir.Value]:
        active = g.op.Less(kcur, n)
        k = g.op.Min(kcur, last)
        col = _pick_col(g, ld, k, r, dtype)
        absakk = g.op.Abs(_pick_row(g, col, k, r, dtype))
        below = g.op.Greater(rows, k)
        cand = g.op.Where(below, g.op.Abs(col), c[-1])
        imax = g.op.ArgMax(cand, axis=r - 2, keepdims=1)
        colmax = g.op.Max(_reduce_max(g, cand, r - 2), c[0])
        row_i, col_i = _pick_row(g, ld, imax, r, dtype), _pick_col(g, ld, imax, r, dtype)
        in_row = g.op.And(g.op.GreaterOrEqual(cols, k), g.op.Less(cols, imax))
        rowmax = g.op.Max(
            _reduce_max(g, g.op.Where(in_row, g.op.Abs(row_i), c[-1]), r - 1),
            _reduce_max(g, g.op.Where(g.op.Greater(rows, imax), g.op.Abs(col_i), c[-1]), r - 2))
        aii = g.op.Abs(_pick_row(g, col_i, imax, r, dtype))
        zero = g.op.Or(g.op.Equal(g.op.Max(absakk, colmax), c[0]), g.op.IsNaN(absakk))
        alpha_col = g.op.Mul(alpha, colmax)
        keep = g.op.Or(zero, g.op.Or(
            g.op.GreaterOrEqual(absakk, alpha_col),
            g.op.GreaterOrEqual(absakk, g.op.Mul(alpha_col, g.op.Div(colmax, rowmax)))))
        single = g.op.Or(keep, g.op.GreaterOrEqual(aii, g.op.Mul(alpha, rowmax)))
        double = g.op.Not(single)
        kp = g.op.Where(keep, k, imax)
        kk = g.op.Where(double, g.op.Add(k, i1), k)
        # Interchange kk and kp: a symmetric permutation of the trailing A[k:, k:].
        idx = _swap_index(g, rows, kk, kp)
        full = g.op.Where(lower, ld, _mT(g, _with_rank(ld, dtype, r)))
        full = g.op.GatherElements(full, g.op.Expand(idx, g.op.Shape(ld)), axis=r - 2)
        full = g.op.GatherElements(full, g.op.Expand(_mT(g, _with_rank(idx, _I64, r)),
                                                     g.op.Shape(ld)), axis=r - 1)
        ld_s = g.op.Where(g.op.And(lower, g.op.GreaterOrEqual(cols, k)), full, ld)
        col = _pick_col(g, ld_s, k, r, dtype)
        akk = _pick_row(g, col, k, r, dtype)
        # 1x1 pivot: A22 -= x (1/akk) x^T (dsyr, lower), then x /= akk.
        d11 = g.op.Div(c[1], akk)
        x = g.op.Where(below, col, c[0])
        tmp = g.op.Mul(g.op.Neg(d11), _mT(g, _with_rank(x, dtype, r)))
        one_ld = g.op.Where(g.op.And(lower, g.op.Greater(cols, k)),
                            g.op.Add(ld_s, g.op.Mul(x, tmp)), ld_s)
        one_ld = g.op.Where(g.op.And(below, g.op.Equal(cols, k)), g.op.Mul(x, d11), one_ld)
        # 2x2 pivot on columns k, k+1.
        k1 = g.op.Add(k, i1)
        col1 = _pick_col(g, ld_s, k1, r, dtype)
        d21 = _pick_row(g, col, k1, r, dtype)
        e11 = g.op.Div(_pick_row(g, col1, k1, r, dtype), d21)
        e22 = g.op.Div(akk, d21)
        t = g.op.Div(c[1], g.op.Sub(g.op.Mul(e11, e22), c[1]))
        d21 = g.op.Div(t, d21)
        below2 = g.op.Greater(rows, k1)
        ck = g.op.Where(below2, col, c[0])
        ck1 = g.op.Where(below2, col1, c[0])
        wk = g.op.Mul(d21, g.op.Sub(g.op.Mul(e11, ck), ck1))
        wkp1 = g.op.Mul(d21, g.op.Sub(g.op.Mul(e22, ck1), ck))
        upd = g.op.Sub(g.op.Sub(ld_s, g.op.Mul(ck, _mT(g, _with_rank(wk, dtype, r)))),
                       g.op.Mul(ck1, _mT(g, _with_rank(wkp1, dtype, r))))
        two_ld = g.op.Where(g.op.And(lower, g.op.Greater(cols, k1)), upd, ld_s)
        two_ld = g.op.Where(g.op.And(below2, g.op.Equal(cols, k)), wk, two_ld)
        two_ld = g.op.Where(g.op.And(below2, g.op.Equal(cols, k1)), wkp1, two_ld)
        new_ld = g.op.Where(zero, ld, g.op.Where(double, two_ld, one_ld))
        ld = g.op.Where(active, new_ld, ld)
        p1 = g.op.Add(kp, i1)
        stored = g.op.Where(double, g.op.Neg(p1), p1)
        at = g.op.Or(g.op.Equal(cols, k), g.op.And(double, g.op.Equal(cols, k1)))
        piv = g.op.Where(g.op.And(active, at), stored, piv)
        failed = g.op.And(g.op.And(active, zero), g.op.Equal(info, g.const(0)))
        info = g.op.Where(failed, p1, info)
        kcur = g.op.Where(active, g.op.Add(kcur, g.op.Where(double, i2, i1)), kcur)
        return [ld, kcur, piv, info]

    ld, _, piv, info = _loop(g, n, [a, k0, piv0, info0], step)
    ld = g.op.Where(lower, ld, g.const(0.0, dtype))
    return _like(ld, a), _with_rank(piv, _I64, r), info


@translation(aten.linalg_ldl_factor_ex.default)
def linalg_ldl_factor_ex(g: RuleContext, a: ir.Value, *, hermitian: bool = False,
                         check_errors: bool = False) -> tuple[ir.Value, ir.Value, ir.Value]:
    """linalg_ldl_factor_ex(Tensor self, *, bool hermitian=False, bool check_errors=False) -> (Tensor LD, Tensor pivots, Tensor info)"""
    ld, piv, info = _sytf2(g, a)  # real input: hermitian and symmetric are the same
    r = rank(a)
    pivots = _typed(g.op.Cast(g.op.Squeeze(piv, g.const([r - 2])), to=_I32), _I32)
    return ld, pivots, _info_out(g, info, r)


@translation(aten.linalg_ldl_factor.default)
def linalg_ldl_factor(g: RuleContext, a: ir.Value, *,
                      hermitian: bool = False) -> tuple[ir.Value, ir.Value]:
    """linalg_ldl_factor(Tensor self, *, bool hermitian=False) -> (Tensor LD, Tensor pivots)"""
    ld, pivots, _ = linalg_ldl_factor_ex(g, a, hermitian=hermitian)
    return ld, pivots


@translation(aten.linalg_ldl_solve.default)
def linalg_ldl_solve(g: RuleContext, ld: ir.Value, pivots: ir.Value, b: ir.Value, *,
                     hermitian: bool = False) -> ir.Value:
    """linalg_ldl_solve(Tensor LD, Tensor pivots, Tensor B, *, bool hermitian=False) -> Tensor"""
    # sytrs (uplo='L'): L D L^T X = B, the interchanges applied as sytf2 recorded them.
    dtype = b.dtype
    assert dtype is not None
    rl = rank(ld)
    r = max(rl, rank(b))
    n = _dim(g, ld, -1)
    rows = _rows(g, n)
    batch = _batch(g, ld)
    piv = g.op.Unsqueeze(g.cast(pivots, _I64), g.const([rl - 2]))  # [..., 1, n]
    x0 = g.op.Expand(b, g.op.Concat(batch, g.const([1, 1]), axis=0)) if rl > 2 else b
    x0 = _typed(x0, dtype)
    c0, c1 = g.const(0.0, dtype), g.const(1.0, dtype)
    i1, i2 = g.const(1), g.const(2)
    last = g.op.Sub(n, i1)
    one_one = g.op.Concat(batch, g.const([1, 1]), axis=0)

    def pivot_at(k: ir.Value) -> ir.Value:
        return g.op.ReduceSum(g.op.Where(g.op.Equal(_cols(g, n), k), piv, g.const(0)),
                              g.const([rl - 1]), keepdims=1)

    def swap(x: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
        idx = _swap_index(g, rows, i, j)
        return g.op.GatherElements(x, g.op.Expand(idx, g.op.Shape(x)), axis=r - 2)

    def forward(_: ir.Value, x: ir.Value, kcur: ir.Value) -> list[ir.Value]:
        active = g.op.Less(kcur, n)
        k = g.op.Min(kcur, last)
        p = pivot_at(k)
        double = g.op.And(active, g.op.Less(p, g.const(0)))
        k1 = g.op.Add(k, i1)
        kp = g.op.Where(double, g.op.Sub(g.op.Neg(p), i1), g.op.Sub(p, i1))
        kp = g.op.Where(active, kp, k)  # a finished matrix swaps nothing
        x = swap(x, g.op.Where(double, k1, k), kp)
        col = _pick_col(g, ld, k, rl, dtype)
        xk = _pick_row(g, x, k, r, dtype)
        # 1x1: x[k+1:] -= l_k x[k]; x[k] *= 1/d_k.
        one = g.op.Where(g.op.Greater(rows, k), g.op.Sub(x, g.op.Mul(col, xk)), x)
        dk = _pick_row(g, col, k, rl, dtype)
        one = g.op.Where(g.op.Equal(rows, k), g.op.Mul(xk, g.op.Div(c1, dk)), one)
        # 2x2: x[k+2:] -= l_k x[k], then -= l_k+1 x[k+1]; then the 2x2 block D.
        col1 = _pick_col(g, ld, k1, rl, dtype)
        xk1 = _pick_row(g, x, k1, r, dtype)
        below2 = g.op.Greater(rows, k1)
        two = g.op.Where(below2, g.op.Sub(g.op.Sub(x, g.op.Mul(col, xk)), g.op.Mul(col1, xk1)), x)
        akm1k = _pick_row(g, col, k1, rl, dtype)
        akm1 = g.op.Div(dk, akm1k)
        ak = g.op.Div(_pick_row(g, col1, k1, rl, dtype), akm1k)
        denom = g.op.Sub(g.op.Mul(akm1, ak), c1)
        bkm1, bk = g.op.Div(xk, akm1k), g.op.Div(xk1, akm1k)
        new_k = g.op.Div(g.op.Sub(g.op.Mul(ak, bkm1), bk), denom)
        new_k1 = g.op.Div(g.op.Sub(g.op.Mul(akm1, bk), bkm1), denom)
        two = g.op.Where(g.op.Equal(rows, k), new_k, g.op.Where(g.op.Equal(rows, k1), new_k1, two))
        x = g.op.Where(active, g.op.Where(double, two, one), x)
        kcur = g.op.Where(active, g.op.Add(kcur, g.op.Where(double, i2, i1)), kcur)
        return [x, kcur]

    def backward(_: ir.Value, x: ir.Value, kcur: ir.Value) -> list[ir.Value]:
        active = g.op.GreaterOrEqual(kcur, g.const(0))
        k = g.op.Max(kcur, g.const(0))
        p = pivot_at(k)
        double = g.op.And(active, g.op.Less(p, g.const(0)))
        km1 = g.op.Max(g.op.Sub(k, i1), g.const(0))
        after = g.op.Where(g.op.Greater(rows, k), x, c0)
        # x[k] -= l_k^T x[k+1:] (and x[k-1] -= l_k-1^T x[k+1:] for a 2x2 block).
        dot = g.op.MatMul(_mT(g, _with_rank(_pick_col(g, ld, k, rl, dtype), dtype, rl)), after)
        x = g.op.Where(g.op.And(active, g.op.Equal(rows, k)), g.op.Sub(x, dot), x)
        dot1 = g.op.MatMul(_mT(g, _with_rank(_pick_col(g, ld, km1, rl, dtype), dtype, rl)), after)
        x = g.op.Where(g.op.And(double, g.op.Equal(rows, km1)), g.op.Sub(x, dot1), x)
        kp = g.op.Where(double, g.op.Sub(g.op.Neg(p), i1), g.op.Sub(p, i1))
        x = swap(x, k, g.op.Where(active, kp, k))
        return [x, g.op.Sub(kcur, g.op.Where(double, i2, i1))]

    kfirst = _fill(g, [[0]], _I64, one_one)
    y, _ = _loop(g, n, [x0, kfirst], forward)
    klast = _typed(g.op.Expand(g.op.Reshape(last, g.const([1, 1])), one_one), _I64)
    x, _ = _loop(g, n, [y, klast], backward)
    return _with_rank(x, dtype, r)
