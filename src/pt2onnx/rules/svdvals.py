"""Singular values without singular vectors: ``_linalg_svd`` with ``compute_uv=False``,
which ``linalg.svdvals`` and ``linalg.matrix_norm`` / ``linalg.norm`` with ord 2, -2 and
'nuc' reach.

One-sided Jacobi (Hestenes): the columns of A (of its transpose when it is wide) are
rotated in pairs until they are mutually orthogonal; their norms are then the singular
values, sorted in descending order as torch returns them. Singular values are unique,
so unlike singular vectors (signs, order within ties) they do not depend on the
algorithm. It runs in float64 as one ONNX Loop over (sweep, column pair) steps, with a
fixed number of sweeps (Jacobi converges quadratically; 6 to 10 sweeps reach float64
precision on small matrices). The matrix sizes must be static.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, torch_dtype, translation
from pt2onnx.rules._common import aten, rank
from pt2onnx.rules._linalg_loop import _loop

_F64, _I64 = ir.DataType.DOUBLE, ir.DataType.INT64


def _sweeps(n: int) -> int:
    return 12 + math.ceil(math.log2(max(n, 2)))


def singular_values(g: RuleContext, a: ir.Value) -> ir.Value:
    """The singular values of the [..., m, n] matrices ``a`` (static m, n), descending,
    shape [..., min(m, n)], in float64."""
    shape = list(a.shape)  # type: ignore[arg-type]
    m, n = shape[-2], shape[-1]
    if not (isinstance(m, int) and isinstance(n, int)):
        raise NotImplementedError(
            "singular values of matrices whose sizes are not static (the Jacobi sweeps "
            "are laid out at export); export with fixed matrix sizes")
    w = g.cast(a, _F64)
    r = rank(a)
    if m < n:  # the transpose has the same singular values
        w = g.op.Transpose(w, perm=[*range(r - 2), r - 1, r - 2])
        m, n = n, m
    # [..., n]: the batch dims, then one value per column. (onnxruntime's ReduceSum keeps
    # the reduced axis of an empty tensor, so the reductions below are reshaped to this.)
    out_shape = g.op.Concat(g.op.Slice(g.op.Shape(w), g.const([0]), g.const([r - 2])),
                            g.const([n]), axis=0)
    if n == 0:
        return g.op.Reshape(w, out_shape, allowzero=1)
    if n > 1:
        pairs = [(p, q) for p in range(n) for q in range(p + 1, n)]
        ps = g.const([p for p, _ in pairs])
        qs = g.const([q for _, q in pairs])
        columns = g.const(list(range(n)))
        one, zero = g.const(1.0, _F64), g.const(0.0, _F64)
        count = g.const(len(pairs))

        def step(k: ir.Value, mat: ir.Value) -> list[ir.Value]:
            j = g.op.Mod(k, count)
            p = g.op.Gather(ps, g.op.Unsqueeze(j, g.const([0])), axis=0)  # [1]
            q = g.op.Gather(qs, g.op.Unsqueeze(j, g.const([0])), axis=0)
            ap = g.op.Gather(mat, p, axis=-1)  # [..., m, 1]
            aq = g.op.Gather(mat, q, axis=-1)
            alpha = g.op.ReduceSum(g.op.Mul(ap, ap), g.const([-2]), keepdims=1)
            beta = g.op.ReduceSum(g.op.Mul(aq, aq), g.const([-2]), keepdims=1)
            gamma = g.op.ReduceSum(g.op.Mul(ap, aq), g.const([-2]), keepdims=1)
            skip = g.op.Equal(gamma, zero)
            safe = g.op.Where(skip, one, gamma)
            zeta = g.op.Div(g.op.Sub(beta, alpha), g.op.Add(safe, safe))
            sign = g.op.Where(g.op.Less(zeta, zero), g.op.Neg(one), one)
            t = g.op.Div(sign, g.op.Add(g.op.Abs(zeta),
                                        g.op.Sqrt(g.op.Add(one, g.op.Mul(zeta, zeta)))))
            t = g.op.Where(skip, zero, t)
            c = g.op.Reciprocal(g.op.Sqrt(g.op.Add(one, g.op.Mul(t, t))))
            s = g.op.Mul(c, t)
            cm1 = g.op.Sub(c, one)
            dp = g.op.Sub(g.op.Mul(cm1, ap), g.op.Mul(s, aq))  # new a_p - a_p
            dq = g.op.Add(g.op.Mul(s, ap), g.op.Mul(cm1, aq))  # new a_q - a_q
            ep = g.cast(g.op.Equal(columns, p), _F64)  # [n] one-hot
            eq = g.cast(g.op.Equal(columns, q), _F64)
            return [g.op.Add(mat, g.op.Add(g.op.Mul(dp, ep), g.op.Mul(dq, eq)))]

        w.dtype = _F64
        w.shape = ir.Shape([*shape[:-2], m, n])
        trips = g.const(_sweeps(n) * len(pairs))
        (w,) = _loop(g, trips, [w], step)
    norms = g.op.Sqrt(g.op.Reshape(g.op.ReduceSum(g.op.Mul(w, w), g.const([-2]), keepdims=0),
                                   out_shape, allowzero=1))
    values, _ = g.op.TopK(norms, g.const([n]), axis=-1, largest=1, sorted=1, _outputs=2)
    return values


@translation(aten._linalg_svd.default)
def linalg_svd(g: RuleContext, a: ir.Value, full_matrices: bool = True,
               compute_uv: bool = True, *, driver: Any = None) -> tuple[Any, ...]:
    """_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *, str? driver=None) -> (Tensor U, Tensor S, Tensor Vh)"""
    if compute_uv and (g.output_used(0) or g.output_used(2)):
        raise NotImplementedError(
            "singular vectors (U and Vh of linalg.svd, and what is built from them: pinv, "
            "lstsq's minimum-norm solution) are not exported: their signs and the order "
            "within ties depend on LAPACK's algorithm. Only singular values are "
            "(linalg.svdvals, matrix_norm with ord 2, -2 or 'nuc', cond)")
    dtype = a.dtype or ir.DataType.FLOAT
    values = g.cast(singular_values(g, a), dtype)
    empty = g.const(torch.zeros(0, dtype=torch_dtype(dtype)))
    return (g.op.Identity(empty) if g.output_used(0) else None, values,
            g.op.Identity(empty) if g.output_used(2) else None)
