"""Sign bits and exponents of floats without bit casts: signbit, copysign, ldexp,
hypot, frexp, nextafter (exact).
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, is_float, operand
from pt2onnx.rules._f64 import F64, _c, _in64


def _signbit(g: RuleContext, x: ir.Value) -> ir.Value:
    """True where x's sign bit is set (-0.0 included; NaN's sign is not observable)."""
    if not is_float(x.dtype):
        if x.dtype in (ir.DataType.BOOL, ir.DataType.UINT8, ir.DataType.UINT16,
                       ir.DataType.UINT32, ir.DataType.UINT64):
            return g.op.Cast(g.op.Mul(g.cast(x, ir.DataType.INT32), g.const(0, ir.DataType.INT32)),
                             to=ir.DataType.BOOL)
        return g.op.Less(x, g.const(0, x.dtype))
    zero = g.const(0.0, x.dtype)
    negative_zero = g.op.And(g.op.Equal(x, zero), g.op.Less(g.op.Reciprocal(x), zero))
    return g.op.Or(g.op.Less(x, zero), negative_zero)


@translation(aten.signbit.default)
def signbit(g: RuleContext, x: ir.Value) -> ir.Value:
    """signbit(Tensor self) -> Tensor"""
    return _signbit(g, x)


@translation([aten.copysign.Tensor, aten.copysign.Scalar])
def copysign(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """copysign.Tensor(Tensor self, Tensor other) -> Tensor"""
    mag = g.op.Abs(operand(g, a, g.dtype))
    sign = _signbit(g, operand(g, b, g.dtype))
    # A product, not Where(sign, -mag, mag): onnxruntime's Where drops the sign of -0.0.
    return g.op.Mul(mag, g.op.Where(sign, g.const(-1.0, g.dtype), g.const(1.0, g.dtype)))


@translation(aten.ldexp.Tensor)
def ldexp(g: RuleContext, x: ir.Value, other: ir.Value) -> ir.Value:
    """ldexp.Tensor(Tensor self, Tensor other) -> Tensor"""
    # Two half-steps keep 2^other finite where x * 2^other is (e.g. other = 128, x = 0.5).
    e = operand(g, other, g.dtype)
    half = g.op.Floor(g.op.Div(e, g.const(2.0, g.dtype)))
    two = g.const(2.0, g.dtype)
    out = g.op.Mul(operand(g, x, g.dtype), g.op.Pow(two, half))
    return g.op.Mul(out, g.op.Pow(two, g.op.Sub(e, half)))


@translation(aten.hypot.default)
def hypot(g: RuleContext, a: ir.Value, b: ir.Value) -> ir.Value:
    """hypot(Tensor self, Tensor other) -> Tensor"""
    # float64 squares neither overflow nor lose bits for float32 inputs.
    work = F64 if g.dtype in (ir.DataType.FLOAT, ir.DataType.FLOAT16,
                              ir.DataType.BFLOAT16) else g.dtype
    x, y = operand(g, a, work), operand(g, b, work)
    out = g.op.Sqrt(g.op.Add(g.op.Mul(x, x), g.op.Mul(y, y)))
    inf = g.op.Or(g.op.IsInf(x), g.op.IsInf(y))  # hypot(inf, nan) is inf
    out = g.op.Where(inf, g.const(math.inf, work), out)
    return g.cast(out, g.dtype)


@translation(aten.frexp.Tensor)
def frexp(g: RuleContext, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)"""
    x64 = _in64(g, x)
    mag = g.op.Abs(x64)
    e = g.op.Add(g.op.Floor(g.op.Div(g.op.Log(mag), _c(g, math.log(2.0)))), _c(g, 1.0))
    m = g.op.Div(x64, g.op.Pow(_c(g, 2.0), e))
    # Log rounds near powers of two: move |m| into [0.5, 1).
    big = g.op.GreaterOrEqual(g.op.Abs(m), _c(g, 1.0))
    small = g.op.Less(g.op.Abs(m), _c(g, 0.5))
    e = g.op.Where(big, g.op.Add(e, _c(g, 1.0)), g.op.Where(small, g.op.Sub(e, _c(g, 1.0)), e))
    m = g.op.Div(x64, g.op.Pow(_c(g, 2.0), e))
    special = g.op.Or(g.op.Equal(x64, _c(g, 0.0)),
                      g.op.Or(g.op.IsInf(x64), g.op.IsNaN(x64)))
    m = g.op.Where(special, x64, m)
    e = g.op.Where(special, _c(g, 0.0), e)
    return g.cast(m, g.dtype), g.op.Cast(e, to=ir.DataType.INT32)


# (mantissa bits, smallest normal exponent, largest finite value) per float dtype.
_FLOAT_LAYOUT = {
    ir.DataType.FLOAT: (23, -126, 3.4028234663852886e38),
    ir.DataType.DOUBLE: (52, -1022, 1.7976931348623157e308),
    ir.DataType.FLOAT16: (10, -14, 65504.0),
    ir.DataType.BFLOAT16: (7, -126, 3.3895313892515355e38),
}


@translation(aten.nextafter.default)
def nextafter(g: RuleContext, a: ir.Value, b: ir.Value) -> ir.Value:
    """nextafter(Tensor self, Tensor other) -> Tensor"""
    # No bit casts before opset 26: the step is the ulp 2^(e - mantissa bits), with e the
    # exact binary exponent of |x| (clamped at the subnormal range), halved when moving
    # toward zero from a power of two. All steps are exact in float64.
    dt = g.dtype
    if dt not in _FLOAT_LAYOUT:
        raise TypeError(f"nextafter: no rule for dtype {dt}; torch supports float types only")
    mant, emin, largest = _FLOAT_LAYOUT[dt]
    # Every float dtype converts exactly to float64 (and onnxruntime has no bfloat16 Expand).
    x64, y64 = operand(g, a, F64), operand(g, b, F64)
    x64 = g.op.Expand(x64, g.op.Shape(y64))
    y64 = g.op.Expand(y64, g.op.Shape(x64))
    mag = g.op.Abs(x64)
    safe = g.op.Where(g.op.Or(g.op.Equal(mag, _c(g, 0.0)), g.op.Not(g.op.Less(mag, _c(g, math.inf)))),
                      _c(g, 1.0), mag)
    e = g.op.Floor(g.op.Div(g.op.Log(safe), _c(g, math.log(2.0))))
    two = _c(g, 2.0)
    e = g.op.Where(g.op.Greater(g.op.Pow(two, e), safe), g.op.Sub(e, _c(g, 1.0)), e)
    e = g.op.Where(g.op.LessOrEqual(g.op.Pow(two, g.op.Add(e, _c(g, 1.0))), safe),
                   g.op.Add(e, _c(g, 1.0)), e)
    ec = g.op.Max(e, _c(g, float(emin)))
    ulp = g.op.Pow(two, g.op.Sub(ec, _c(g, float(mant))))
    # Toward zero from an exact power of two (above the subnormals): half a step.
    power = g.op.And(g.op.Equal(g.op.Pow(two, e), safe), g.op.Greater(e, _c(g, float(emin))))
    up = g.op.Greater(y64, x64)
    away = g.op.Equal(up, g.op.Greater(x64, _c(g, 0.0)))
    step = g.op.Where(g.op.And(g.op.Not(away), power), g.op.Mul(ulp, _c(g, 0.5)), ulp)
    out = g.op.Where(up, g.op.Add(x64, step), g.op.Sub(x64, step))
    # From +-inf: the largest finite value; from 0: the smallest subnormal toward y.
    out = g.op.Where(g.op.IsInf(x64), g.op.Mul(g.op.Sign(x64), _c(g, largest)), out)
    tiny = _c(g, 2.0 ** (emin - mant))
    out = g.op.Where(g.op.Equal(x64, _c(g, 0.0)),
                     g.op.Where(up, tiny, g.op.Neg(tiny)), out)
    same = g.op.Equal(x64, y64)
    out = g.op.Where(same, y64, out)
    out = g.op.Where(g.op.Or(g.op.IsNaN(x64), g.op.IsNaN(y64)), _c(g, math.nan), out)
    # Zero results carry the sign of y (x == y) or of x (a step to zero); onnxruntime's
    # Where drops the sign of a -0.0 it selects, so the sign is applied by a product.
    negative = g.op.Or(g.op.And(same, g.op.Less(g.op.Reciprocal(y64), _c(g, 0.0))),
                       g.op.And(g.op.Not(same), g.op.Less(x64, _c(g, 0.0))))
    flip = g.op.And(g.op.Equal(out, _c(g, 0.0)), negative)
    out = g.op.Mul(out, g.op.Where(flip, _c(g, -1.0), _c(g, 1.0)))
    return g.cast(out, dt)
