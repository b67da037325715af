"""Pairwise distances: cdist and pdist."""

from __future__ import annotations

import math

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, rank
from pt2onnx.rules.reduction import reduce


def _norm_last(g: RuleContext, diff: ir.Value, p: float) -> ir.Value:
    """The p-norm over the last axis, as torch.cdist defines it for every p >= 0."""
    dtype = g.dtype
    last = [rank(diff) - 1]
    a = g.op.Abs(diff)
    a.shape = diff.shape
    if p == 0:
        nonzero = g.op.Cast(g.op.Not(g.op.Equal(a, g.const(0.0, dtype))), to=dtype)
        nonzero.shape = diff.shape
        return reduce(g, "ReduceSum", nonzero, last, False)
    if math.isinf(p):
        return reduce(g, "ReduceMax", a, last, False)
    if p == 1:
        return reduce(g, "ReduceSum", a, last, False)
    if p == 2:
        sq = g.op.Mul(a, a)
        sq.shape = diff.shape
        return g.op.Sqrt(reduce(g, "ReduceSum", sq, last, False))
    powered = g.op.Pow(a, g.const(float(p), dtype))
    powered.shape = diff.shape
    total = reduce(g, "ReduceSum", powered, last, False)
    return g.op.Pow(total, g.const(1.0 / p, dtype))


@translation(aten._cdist_forward.default)
def cdist(g: RuleContext, x1: ir.Value, x2: ir.Value, p: float,
          compute_mode: int | None = None) -> ir.Value:
    """_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor"""
    # [..., P, 1, M] - [..., 1, R, M] -> [..., P, R, M]
    diff = g.op.Sub(g.op.Unsqueeze(x1, g.const([-2])), g.op.Unsqueeze(x2, g.const([-3])))
    diff.shape = ir.Shape([None] * (rank(x1) + 1))
    return _norm_last(g, diff, p)


@translation(aten._pdist_forward.default)
def pdist(g: RuleContext, x: ir.Value, p: float = 2.0) -> ir.Value:
    """_pdist_forward(Tensor self, float p=2.) -> Tensor"""
    n = x.shape[0]  # type: ignore[index]
    if not isinstance(n, int):
        raise NotImplementedError("pdist with a dynamic number of rows")
    diff = g.op.Sub(g.op.Unsqueeze(x, g.const([1])), g.op.Unsqueeze(x, g.const([0])))
    diff.shape = ir.Shape([None] * 3)
    full = g.op.Reshape(_norm_last(g, diff, p), g.const([-1]))
    upper = [i * n + j for i in range(n) for j in range(i + 1, n)]
    return g.op.Gather(full, g.const(upper, ir.DataType.INT64), axis=0)
