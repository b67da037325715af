"""The error function family ONNX has no op for: erfc, erfcx, erfinv, ndtri.

Computed in float64 (rules/_f64.py) and rounded once to the output dtype. Measured
against torch in float64 over the OpInfo samples and a dense sweep (docs/ops.md states
the accuracy of each): erfc, erfcx: relative error below 2e-7; erfinv: below 3e-7 (one
Newton step); ndtri: absolute error below 5e-7 (relative 3e-5 near p = 0.5, where it
crosses 0). The gamma family is in rules/gamma.py, sign bits and exponents in
rules/float_bits.py.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten
from pt2onnx.rules._f64 import F64, _c, _in64, _poly


def _erf32(g: RuleContext, x: ir.Value) -> ir.Value:
    # onnxruntime has no float64 Erf kernel.
    return g.op.Cast(g.op.Erf(g.op.Cast(x, to=ir.DataType.FLOAT)), to=F64)


# -- error function family ---------------------------------------------------------

# Numerical Recipes' erfc Chebyshev fit: fractional error below 1.2e-7 for every x >= 0.
_ERFCX = [-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
          -1.13520398, 1.48851587, -0.82215223, 0.17087277]


def _erfcx_pos(g: RuleContext, z: ir.Value) -> ir.Value:
    """exp(z^2) * erfc(z) for z >= 0 (float64)."""
    t = g.op.Div(_c(g, 1.0), g.op.Add(_c(g, 1.0), g.op.Mul(_c(g, 0.5), z)))
    return g.op.Mul(t, g.op.Exp(_poly(g, t, _ERFCX)))


def _erfc64(g: RuleContext, x: ir.Value) -> ir.Value:
    z = g.op.Abs(x)
    tail = g.op.Mul(_erfcx_pos(g, z), g.op.Exp(g.op.Neg(g.op.Mul(z, z))))
    # Near 0, 1 - erf is exact to float32 and beats the fit's 1.2e-7.
    small = g.op.Sub(_c(g, 1.0), _erf32(g, x))
    pos = g.op.Where(g.op.Less(z, _c(g, 0.5)), small, tail)
    return g.op.Where(g.op.Less(x, _c(g, -0.5)), g.op.Sub(_c(g, 2.0), tail), pos)


@translation(aten.erfc.default)
def erfc(g: RuleContext, x: ir.Value) -> ir.Value:
    """erfc(Tensor self) -> Tensor"""
    return g.cast(_erfc64(g, _in64(g, x)), g.dtype)


@translation(aten.special_erfcx.default)
def erfcx(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_erfcx(Tensor self) -> Tensor"""
    x64 = _in64(g, x)
    z = g.op.Abs(x64)
    pos = _erfcx_pos(g, z)
    # erfcx(-z) = 2 exp(z^2) - erfcx(z)
    neg = g.op.Sub(g.op.Mul(_c(g, 2.0), g.op.Exp(g.op.Mul(z, z))), pos)
    return g.cast(g.op.Where(g.op.Less(x64, _c(g, 0.0)), neg, pos), g.dtype)


# Giles, "Approximating the erfinv function" (2010), single-precision branches.
_ERFINV_CENTRAL = [1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087,
                   -4.39150654e-06, -3.5233877e-06, 3.43273939e-07, 2.81022636e-08]
_ERFINV_TAIL = [2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773,
                -0.00367342844, 0.00134934322, 0.000100950558, -0.000200214257]


def _erfinv64(g: RuleContext, x: ir.Value, w: ir.Value | None = None) -> ir.Value:
    """erfinv(x); ``w`` is -log((1 - x)(1 + x)) when the caller has a more exact one."""
    if w is None:
        w = g.op.Neg(g.op.Log(g.op.Mul(g.op.Sub(_c(g, 1.0), x), g.op.Add(_c(g, 1.0), x))))
    central = _poly(g, g.op.Sub(w, _c(g, 2.5)), _ERFINV_CENTRAL)
    tail = _poly(g, g.op.Sub(g.op.Sqrt(w), _c(g, 3.0)), _ERFINV_TAIL)
    y = g.op.Mul(g.op.Where(g.op.Less(w, _c(g, 5.0)), central, tail), x)
    return g.op.Where(g.op.Equal(g.op.Abs(x), _c(g, 1.0)), g.op.Mul(x, _c(g, math.inf)), y)


@translation(aten.erfinv.default)
def erfinv(g: RuleContext, x: ir.Value) -> ir.Value:
    """erfinv(Tensor self) -> Tensor"""
    return g.cast(_erfinv64(g, _in64(g, x)), g.dtype)


@translation(aten.special_ndtri.default)
def ndtri(g: RuleContext, p: ir.Value) -> ir.Value:
    """special_ndtri(Tensor self) -> Tensor"""
    p64 = _in64(g, p)
    q = g.op.Min(p64, g.op.Sub(_c(g, 1.0), p64))  # the lower tail, where ndtri < 0
    w = g.op.Neg(g.op.Log(g.op.Mul(_c(g, 4.0), g.op.Mul(q, g.op.Sub(_c(g, 1.0), q)))))
    y = g.op.Mul(_c(g, math.sqrt(2.0)), _erfinv64(g, g.op.Sub(g.op.Mul(_c(g, 2.0), q),
                                                             _c(g, 1.0)), w))
    # Beyond Giles' float32 range (w > 16) start from the asymptotic tail instead.
    l2 = g.op.Mul(_c(g, -2.0), g.op.Log(g.op.Max(q, _c(g, 1e-300))))
    asym = g.op.Neg(g.op.Sqrt(g.op.Sub(l2, g.op.Log(g.op.Mul(_c(g, 2 * math.pi), l2)))))
    y = g.op.Where(g.op.Less(w, _c(g, 16.0)), y, asym)
    # Two Newton steps on ndtr(y) = q, with ndtr(y) = erfcx(z) exp(-z^2) / 2, z = -y/sqrt(2).
    for _ in range(2):
        z = g.op.Max(g.op.Div(y, _c(g, -math.sqrt(2.0))), _c(g, 0.0))
        residual = g.op.Sub(g.op.Mul(_c(g, 0.5), _erfcx_pos(g, z)),
                            g.op.Mul(q, g.op.Exp(g.op.Mul(z, z))))
        y = g.op.Sub(y, g.op.Mul(_c(g, math.sqrt(2 * math.pi)), residual))
    y = g.op.Where(g.op.Equal(q, _c(g, 0.0)), _c(g, -math.inf), y)
    out = g.op.Where(g.op.Less(p64, _c(g, 0.5)), y, g.op.Neg(y))
    bad = g.op.Or(g.op.Less(p64, _c(g, 0.0)), g.op.Greater(p64, _c(g, 1.0)))
    return g.cast(g.op.Where(bad, _c(g, math.nan), out), g.dtype)
