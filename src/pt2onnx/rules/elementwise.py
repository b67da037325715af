"""Elementwise arithmetic, comparisons, activations and casts."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, onnx_dtype, torch_dtype, translation
from pt2onnx.rules._common import aten, is_float, operand, result_dtype

# -- unary -------------------------------------------------------------------


def _unary(onnx_op: str, g: RuleContext, x: ir.Value, *_: Any) -> ir.Value:
    """self -> onnx_op(self), computed in the output dtype (int inputs promote)."""
    x = g.cast(x, g.dtype) if g.dtype not in (ir.DataType.BOOL,) else x
    return getattr(g.op, onnx_op)(x)


for _op, _onnx in {
    aten.abs.default: "Abs",
    aten.neg.default: "Neg",
    aten.exp.default: "Exp",
    aten.log.default: "Log",
    aten.sqrt.default: "Sqrt",
    aten.sin.default: "Sin",
    aten.cos.default: "Cos",
    aten.tan.default: "Tan",
    aten.asin.default: "Asin",
    aten.acos.default: "Acos",
    aten.atan.default: "Atan",
    aten.sinh.default: "Sinh",
    aten.cosh.default: "Cosh",
    aten.tanh.default: "Tanh",
    aten.asinh.default: "Asinh",
    aten.acosh.default: "Acosh",
    aten.atanh.default: "Atanh",
    aten.sigmoid.default: "Sigmoid",
    aten.erf.default: "Erf",
    aten.reciprocal.default: "Reciprocal",
    aten.sign.default: "Sign",
}.items():
    translation(_op)(partial(_unary, _onnx))


@translation(aten.relu.default)
def relu(g: RuleContext, x: ir.Value) -> ir.Value:
    """relu(Tensor self) -> Tensor. onnxruntime's Relu has no integer kernels (int64
    and int32 relu failed to load): max(x, 0) there."""
    if is_float(g.dtype):
        return g.op.Relu(g.cast(x, g.dtype))
    return g.op.Max(g.cast(x, g.dtype), g.const(0, g.dtype))


def _identity_if_int(onnx_op: str, g: RuleContext, x: ir.Value) -> ir.Value:
    """floor/ceil/round/trunc are the identity on integers."""
    if not is_float(x.dtype):
        return x
    return getattr(g.op, onnx_op)(x)


for _op, _onnx in {aten.floor.default: "Floor", aten.ceil.default: "Ceil",
                   aten.round.default: "Round"}.items():
    translation(_op)(partial(_identity_if_int, _onnx))


@translation(aten.round.decimals)
def round_decimals(g: RuleContext, x: ir.Value, *, decimals: int = 0) -> ir.Value:
    """round.decimals(Tensor self, *, int decimals) -> Tensor"""
    if not is_float(x.dtype):
        return x
    # As torch's kernel: scale by 10^|d| in the op math type (float32 for halves),
    # round half to even, scale back; a negative d divides first.
    compute = ir.DataType.DOUBLE if x.dtype == ir.DataType.DOUBLE else ir.DataType.FLOAT
    xc = g.cast(x, compute)
    scale = g.const(float(10.0 ** abs(decimals)), compute)
    if decimals < 0:
        out = g.op.Mul(g.op.Round(g.op.Div(xc, scale)), scale)
    else:
        out = g.op.Div(g.op.Round(g.op.Mul(xc, scale)), scale)
    return g.cast(out, x.dtype)  # type: ignore[arg-type]


@translation(aten.rsqrt.default)
def rsqrt(g: RuleContext, x: ir.Value) -> ir.Value:
    """rsqrt(Tensor self) -> Tensor"""
    return g.op.Reciprocal(g.op.Sqrt(g.cast(x, g.dtype)))


@translation(aten.trunc.default)
def trunc(g: RuleContext, x: ir.Value) -> ir.Value:
    """trunc(Tensor self) -> Tensor"""
    if not is_float(x.dtype):
        return x
    return g.op.Mul(g.op.Sign(x), g.op.Floor(g.op.Abs(x)))


@translation(aten.expm1.default)
def expm1(g: RuleContext, x: ir.Value) -> ir.Value:
    """expm1(Tensor self) -> Tensor"""
    x = g.cast(x, g.dtype)
    return g.op.Sub(g.op.Exp(x), g.const(1.0, g.dtype))


@translation(aten.log1p.default)
def log1p(g: RuleContext, x: ir.Value) -> ir.Value:
    """log1p(Tensor self) -> Tensor"""
    x = g.cast(x, g.dtype)
    return g.op.Log(g.op.Add(x, g.const(1.0, g.dtype)))


def _log_base(base: float, g: RuleContext, x: ir.Value) -> ir.Value:
    x = g.cast(x, g.dtype)
    return g.op.Div(g.op.Log(x), g.const(math.log(base), g.dtype))


translation(aten.log2.default)(partial(_log_base, 2.0))
translation(aten.log10.default)(partial(_log_base, 10.0))


@translation(aten.exp2.default)
def exp2(g: RuleContext, x: ir.Value) -> ir.Value:
    """exp2(Tensor self) -> Tensor"""
    return g.op.Pow(g.const(2.0, g.dtype), g.cast(x, g.dtype))


@translation([aten.isnan.default])
def isnan(g: RuleContext, x: ir.Value) -> ir.Value:
    """isnan(Tensor self) -> Tensor"""
    if not is_float(x.dtype):
        return g.op.Cast(g.op.Mul(x, g.const(0, x.dtype)), to=ir.DataType.BOOL)
    return g.op.IsNaN(x)


@translation([aten.logical_not.default, aten.bitwise_not.default])
def logical_not(g: RuleContext, x: ir.Value) -> ir.Value:
    """logical_not(Tensor self) -> Tensor"""
    if g.node is not None and g.node.target is aten.bitwise_not.default and x.dtype != ir.DataType.BOOL:
        if g.opset < 18:
            raise NotImplementedError("bitwise_not on integers needs BitwiseNot: opset 18 or later")
        return g.op.BitwiseNot(x)
    return g.cast(g.op.Not(g.cast(x, ir.DataType.BOOL)), g.dtype)


# -- binary ------------------------------------------------------------------


def _binary(onnx_op: str, g: RuleContext, a: Any, b: Any, alpha: Any = 1) -> ir.Value:
    """self op other (* alpha), in the output dtype."""
    dtype = g.dtype
    b_val = operand(g, b, dtype)
    if alpha != 1:
        scale = g.op.And if dtype == ir.DataType.BOOL else g.op.Mul
        b_val = scale(b_val, g.const(bool(alpha) if dtype == ir.DataType.BOOL else alpha, dtype))
    if dtype == ir.DataType.BOOL:
        # ONNX arithmetic has no bool kernels; on bools torch's add is or, mul is and.
        onnx_op = _BOOL_ARITH.get(onnx_op, onnx_op)
    return getattr(g.op, onnx_op)(operand(g, a, dtype), b_val)


_BOOL_ARITH = {"Add": "Or", "Mul": "And", "Max": "Or", "Min": "And"}


for _op in (aten.add.Tensor, aten.add.Scalar):
    translation(_op)(partial(_binary, "Add"))
for _op in (aten.sub.Tensor, aten.sub.Scalar):
    translation(_op)(partial(_binary, "Sub"))
for _op in (aten.mul.Tensor, aten.mul.Scalar):
    translation(_op)(partial(_binary, "Mul"))
for _op, _onnx in {aten.maximum.default: "Max", aten.minimum.default: "Min",
                   aten.fmax.default: "Max", aten.fmin.default: "Min"}.items():
    translation(_op)(partial(_binary, _onnx))


@translation([aten.rsub.Tensor, aten.rsub.Scalar])
def rsub(g: RuleContext, a: Any, b: Any, alpha: Any = 1) -> ir.Value:
    """rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    dtype = g.dtype
    a_val = operand(g, a, dtype)
    if alpha != 1:
        a_val = g.op.Mul(a_val, g.const(alpha, dtype))
    return g.op.Sub(operand(g, b, dtype), a_val)


@translation([aten.div.Tensor, aten.div.Scalar, aten.true_divide.Tensor])
def div(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """div.Tensor(Tensor self, Tensor other) -> Tensor"""
    return g.op.Div(operand(g, a, g.dtype), operand(g, b, g.dtype))


@translation([aten.div.Tensor_mode, aten.div.Scalar_mode])
def div_mode(g: RuleContext, a: Any, b: Any, *, rounding_mode: str | None = None) -> ir.Value:
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor"""
    dtype = g.dtype
    if rounding_mode is None:
        return g.op.Div(operand(g, a, dtype), operand(g, b, dtype))
    if is_float(dtype):
        q = g.op.Div(operand(g, a, dtype), operand(g, b, dtype))
        return g.op.Floor(q) if rounding_mode == "floor" else _trunc_float(g, q)
    # Integer division: compute in double, which is exact for |x| < 2**53.
    fa = operand(g, a, ir.DataType.DOUBLE)
    fb = operand(g, b, ir.DataType.DOUBLE)
    q = g.op.Div(fa, fb)
    q = g.op.Floor(q) if rounding_mode == "floor" else _trunc_float(g, q)
    return g.op.Cast(q, to=dtype)


def _trunc_float(g: RuleContext, q: ir.Value) -> ir.Value:
    return g.op.Mul(g.op.Sign(q), g.op.Floor(g.op.Abs(q)))


@translation([aten.floor_divide.default, aten.floor_divide.Scalar])
def floor_divide(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """floor_divide(Tensor self, Tensor other) -> Tensor"""
    return div_mode(g, a, b, rounding_mode="floor")


@translation([aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor])
def remainder(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """remainder.Tensor(Tensor self, Tensor other) -> Tensor"""
    dtype = g.dtype
    a_val, b_val = operand(g, a, dtype), operand(g, b, dtype)
    if not is_float(dtype):
        if _int_zero(b):
            return g.op.Identity(a_val)
        return g.op.Mod(a_val, b_val, fmod=0)
    return g.op.Sub(a_val, g.op.Mul(g.op.Floor(g.op.Div(a_val, b_val)), b_val))


@translation([aten.fmod.Tensor, aten.fmod.Scalar])
def fmod(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """fmod.Tensor(Tensor self, Tensor other) -> Tensor"""
    dtype = g.dtype
    if not is_float(dtype) and _int_zero(b):
        return g.op.Identity(operand(g, a, dtype))
    return g.op.Mod(operand(g, a, dtype), operand(g, b, dtype), fmod=1)


def _int_zero(b: Any) -> bool:
    """An integer remainder by the constant 0: eager raises unless the tensor is empty
    (take_along_dim's decomposition wraps indices of a 0-size dim by 0), and onnxruntime
    refuses to load a Mod by a constant 0 even for an empty tensor. The result is empty."""
    return isinstance(b, (bool, int)) and not isinstance(b, torch.SymInt) and b == 0


@translation([aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar])
def pow_(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor"""
    dtype = g.dtype
    if isinstance(b, (int, float)) and not isinstance(b, bool) and is_float(dtype):
        x = operand(g, a, dtype)
        if b == 2:
            return g.op.Mul(x, x)
        if b == 1:
            return x
        if b == 0.5:
            return g.op.Sqrt(x)
    if not is_float(dtype):
        # onnxruntime's Pow has no integer base kernel for every type: compute in double.
        base = operand(g, a, ir.DataType.DOUBLE)
        return g.op.Cast(g.op.Pow(base, operand(g, b, ir.DataType.DOUBLE)), to=dtype)
    return g.op.Pow(operand(g, a, dtype), operand(g, b, dtype))


@translation(aten.atan2.default)
def atan2(g: RuleContext, a: ir.Value, b: ir.Value) -> ir.Value:
    """atan2(Tensor self, Tensor other) -> Tensor

    C's values on the axes and at the origin (atan2(0, 0) is 0, not atan(0 / 0)), as the
    complex angle computes them; float16 runs in float32, float64 with one Newton step
    (onnxruntime has no float64 Atan)."""
    from pt2onnx.rules.complex import _atan2_f64
    from pt2onnx.rules.complex import atan2 as careful_atan2

    dtype = g.dtype
    if dtype == ir.DataType.DOUBLE:
        return _atan2_f64(g, operand(g, a, dtype), operand(g, b, dtype))
    work = ir.DataType.FLOAT if dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16) else dtype
    y, x = operand(g, a, work), operand(g, b, work)
    return g.cast(careful_atan2(g, y, x), dtype)


def _logical(onnx_op: str, g: RuleContext, a: Any, b: Any) -> ir.Value:
    out = getattr(g.op, onnx_op)(operand(g, a, ir.DataType.BOOL), operand(g, b, ir.DataType.BOOL))
    return g.cast(out, g.dtype)


for _op, _onnx in {aten.logical_and.default: "And", aten.logical_or.default: "Or",
                   aten.logical_xor.default: "Xor"}.items():
    translation(_op)(partial(_logical, _onnx))


def _bitwise(bool_op: str, int_op: str, g: RuleContext, a: Any, b: Any) -> ir.Value:
    if g.dtype == ir.DataType.BOOL:
        return _logical(bool_op, g, a, b)
    if g.opset < 18:
        raise NotImplementedError(f"{int_op} on integers needs opset 18 or later")
    return getattr(g.op, int_op)(operand(g, a, g.dtype), operand(g, b, g.dtype))


for _ops, _b, _i in (
    ((aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.bitwise_and.Scalar_Tensor),
     "And", "BitwiseAnd"),
    ((aten.bitwise_or.Tensor, aten.bitwise_or.Scalar, aten.bitwise_or.Scalar_Tensor),
     "Or", "BitwiseOr"),
    ((aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.bitwise_xor.Scalar_Tensor),
     "Xor", "BitwiseXor"),
):
    translation(list(_ops))(partial(_bitwise, _b, _i))


# -- comparisons ---------------------------------------------------------------


def _compare(onnx_op: str, negate: bool, g: RuleContext, a: Any, b: Any) -> ir.Value:
    dtype = result_dtype(a, b)
    if dtype == ir.DataType.BOOL and onnx_op != "Equal":
        dtype = ir.DataType.INT32  # ONNX orders numbers only: False < True as 0 < 1
    out = getattr(g.op, onnx_op)(operand(g, a, dtype), operand(g, b, dtype))
    return g.op.Not(out) if negate else out


for _name, _onnx, _neg in (
    ("eq", "Equal", False), ("ne", "Equal", True), ("lt", "Less", False),
    ("le", "LessOrEqual", False), ("gt", "Greater", False), ("ge", "GreaterOrEqual", False),
):
    _packet = getattr(aten, _name)
    translation([_packet.Tensor, _packet.Scalar])(partial(_compare, _onnx, _neg))


# -- selection -------------------------------------------------------------------


@translation([aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar])
def where(g: RuleContext, cond: ir.Value, a: Any, b: Any) -> ir.Value:
    """where.self(Tensor condition, Tensor self, Tensor other) -> Tensor; the Scalar
    overloads (a model on the meta device gets them for Python numbers)."""
    cond = g.cast(cond, ir.DataType.BOOL)
    # The builder selects bool (and the other types onnxruntime's Where lacks) in a
    # wider type and casts back.
    return g.op.Where(cond, operand(g, a, g.dtype), operand(g, b, g.dtype))


@translation([aten.masked_fill.Scalar, aten.masked_fill.Tensor])
def masked_fill(g: RuleContext, x: ir.Value, mask: ir.Value, value: Any) -> ir.Value:
    """masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor"""
    return g.op.Where(g.cast(mask, ir.DataType.BOOL), operand(g, value, g.dtype), x)


@translation([aten.clamp.default, aten.clamp.Tensor, aten.clip.default])
def clamp(g: RuleContext, x: ir.Value, min: Any = None, max: Any = None) -> ir.Value:
    """clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor"""
    dtype = g.dtype
    x = g.cast(x, dtype)
    scalar = all(v is None or isinstance(v, (int, float)) for v in (min, max))
    if scalar and dtype not in (ir.DataType.BOOL,):
        if not is_float(dtype):
            # A bound outside an integer type's range: torch 2.13 wraps it (-3 is 253 in
            # uint8), 2.15 saturates it. The bounds torch uses are what its clamp makes
            # of the type's extremes; Clip with those is torch's clamp for every value.
            info = torch.iinfo(torch_dtype(dtype))
            ends = torch.tensor([info.min, info.max], dtype=torch_dtype(dtype))
            lo_hi = torch.clamp(ends, min=min, max=max).tolist()
            return g.op.Clip(x, g.const(lo_hi[0], dtype), g.const(lo_hi[1], dtype))
        lo = g.const(min, dtype) if min is not None else None
        hi = g.const(max, dtype) if max is not None else None
        return g.op.Clip(x, lo, hi)
    # ONNX orders no bools (Max/Min): a bool clamp runs on uint8, then casts back.
    work = ir.DataType.UINT8 if dtype == ir.DataType.BOOL else dtype
    x = g.cast(x, work)
    if min is not None:
        x = g.op.Max(x, operand(g, min, work))
    if max is not None:
        x = g.op.Min(x, operand(g, max, work))
    return g.cast(x, dtype)


@translation([aten.clamp_min.default, aten.clamp_min.Tensor])
def clamp_min(g: RuleContext, x: ir.Value, min: Any) -> ir.Value:
    """clamp_min(Tensor self, Scalar min) -> Tensor"""
    return clamp(g, x, min, None)


@translation([aten.clamp_max.default, aten.clamp_max.Tensor])
def clamp_max(g: RuleContext, x: ir.Value, max: Any) -> ir.Value:
    """clamp_max(Tensor self, Scalar max) -> Tensor"""
    return clamp(g, x, None, max)


# -- activations -------------------------------------------------------------------


@translation(aten.hardtanh.default)
def hardtanh(g: RuleContext, x: ir.Value, min_val: float = -1.0, max_val: float = 1.0) -> ir.Value:
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor"""
    if not is_float(g.dtype):  # an integer tensor: the default -1 is outside uint8
        return clamp(g, x, min_val, max_val)
    return g.op.Clip(x, g.const(min_val, g.dtype), g.const(max_val, g.dtype))


@translation(aten.leaky_relu.default)
def leaky_relu(g: RuleContext, x: ir.Value, negative_slope: float = 0.01) -> ir.Value:
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor"""
    return g.op.LeakyRelu(x, alpha=float(negative_slope))


@translation(aten.elu.default)
def elu(g: RuleContext, x: ir.Value, alpha: float = 1.0, scale: float = 1.0,
        input_scale: float = 1.0) -> ir.Value:
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor"""
    if scale == 1.0 and input_scale == 1.0:
        return g.op.Elu(x, alpha=float(alpha))
    dtype = g.dtype
    neg = g.op.Mul(g.const(alpha, dtype),
                   g.op.Sub(g.op.Exp(g.op.Mul(x, g.const(input_scale, dtype))), g.const(1.0, dtype)))
    out = g.op.Where(g.op.Greater(x, g.const(0.0, dtype)), x, neg)
    return g.op.Mul(out, g.const(scale, dtype))


@translation(aten.selu.default)
def selu(g: RuleContext, x: ir.Value) -> ir.Value:
    """selu(Tensor self) -> Tensor"""
    return g.op.Selu(x)


@translation(aten.celu.default)
def celu(g: RuleContext, x: ir.Value, alpha: float = 1.0) -> ir.Value:
    """celu(Tensor self, Scalar alpha=1.0) -> Tensor"""
    if g.dtype != ir.DataType.FLOAT:
        return elu(g, x, alpha, 1.0, 1.0 / alpha)
    return g.op.Celu(x, alpha=float(alpha))


@translation(aten.gelu.default)
def gelu(g: RuleContext, x: ir.Value, *, approximate: str = "none") -> ir.Value:
    """gelu(Tensor self, *, str approximate='none') -> Tensor"""
    dtype = g.dtype
    half = g.const(0.5, dtype)
    if approximate == "tanh":
        inner = g.op.Mul(
            g.const(math.sqrt(2.0 / math.pi), dtype),
            g.op.Add(x, g.op.Mul(g.const(0.044715, dtype), g.op.Mul(x, g.op.Mul(x, x)))),
        )
        return g.op.Mul(g.op.Mul(half, x), g.op.Add(g.const(1.0, dtype), g.op.Tanh(inner)))
    erf = g.op.Erf(g.op.Mul(x, g.const(1.0 / math.sqrt(2.0), dtype)))
    return g.op.Mul(g.op.Mul(half, x), g.op.Add(g.const(1.0, dtype), erf))


@translation(aten.gelu.default, since=20)
def gelu20(g: RuleContext, x: ir.Value, *, approximate: str = "none") -> ir.Value:
    """gelu(Tensor self, *, str approximate='none') -> Tensor"""
    return g.op.Gelu(x, approximate=approximate)


@translation(aten.silu.default)
def silu(g: RuleContext, x: ir.Value) -> ir.Value:
    """silu(Tensor self) -> Tensor"""
    return g.op.Mul(x, g.op.Sigmoid(x))


@translation(aten.hardswish.default)
def hardswish(g: RuleContext, x: ir.Value) -> ir.Value:
    """hardswish(Tensor self) -> Tensor"""
    return g.op.HardSwish(x)


@translation(aten.hardsigmoid.default)
def hardsigmoid(g: RuleContext, x: ir.Value) -> ir.Value:
    """hardsigmoid(Tensor self) -> Tensor"""
    return g.op.HardSigmoid(x, alpha=1.0 / 6.0, beta=0.5)


@translation(aten.mish.default)
def mish(g: RuleContext, x: ir.Value) -> ir.Value:
    """mish(Tensor self) -> Tensor"""
    if g.opset < 18:  # Mish is opset 18
        return g.op.Mul(x, g.op.Tanh(g.op.Softplus(x)))
    return g.op.Mish(x)


@translation(aten.softplus.default)
def softplus(g: RuleContext, x: ir.Value, beta: float = 1.0, threshold: float = 20.0) -> ir.Value:
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor"""
    dtype = g.dtype
    scaled = g.op.Mul(x, g.const(beta, dtype)) if beta != 1 else x
    soft = g.op.Softplus(scaled)
    if beta != 1:
        soft = g.op.Div(soft, g.const(beta, dtype))
    return g.op.Where(g.op.Greater(scaled, g.const(threshold, dtype)), x, soft)


@translation(aten.prelu.default)
def prelu(g: RuleContext, x: ir.Value, weight: ir.Value) -> ir.Value:
    """prelu(Tensor self, Tensor weight) -> Tensor"""
    r = len(x.shape) if x.shape is not None else 0
    if r >= 2 and weight.shape is not None and len(weight.shape) == 1:
        weight = g.op.Reshape(weight, g.const([-1] + [1] * (r - 2)))
    if r == 0:  # a 0-d input takes a one-element weight and stays 0-d
        weight = g.op.Reshape(weight, g.const([], ir.DataType.INT64))
    return g.op.PRelu(x, weight)


@translation(aten.threshold.default)
def threshold(g: RuleContext, x: ir.Value, threshold: Any, value: Any) -> ir.Value:
    """threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor"""
    dtype = g.dtype
    return g.op.Where(g.op.Greater(x, g.const(threshold, dtype)), x, g.const(value, dtype))


# -- casts and copies -------------------------------------------------------------


@translation([aten._to_copy.default, aten.to.dtype,
              torch.ops.prims.convert_element_type.default])
def to_copy(g: RuleContext, x: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    return g.cast(x, g.dtype)


@translation([aten.clone.default, aten.alias.default, aten.detach.default,
              aten.lift_fresh_copy.default, aten.contiguous.default,
              torch.ops.prims.copy_strided.default])
def identity(g: RuleContext, x: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
    """clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor"""
    return x


@translation(aten.set.source_Tensor)
def set_source(g: RuleContext, x: ir.Value, source: ir.Value) -> ir.Value:
    """set.source_Tensor(Tensor self, Tensor source) -> Tensor"""
    return source


@translation(aten.type_as.default)
def type_as(g: RuleContext, x: ir.Value, other: ir.Value) -> ir.Value:
    """type_as(Tensor self, Tensor other) -> Tensor"""
    return g.cast(x, onnx_dtype(g.meta.dtype))


@translation(aten.isinf.default)
def isinf(g: RuleContext, x: ir.Value) -> ir.Value:
    """isinf(Tensor self) -> Tensor"""
    if not is_float(x.dtype):
        return g.op.Cast(g.op.Mul(g.cast(x, ir.DataType.INT64), g.const(0)),
                         to=ir.DataType.BOOL)
    # onnxruntime's IsInf has no float16 kernel.
    return g.op.IsInf(g.cast(x, ir.DataType.FLOAT) if x.dtype == ir.DataType.FLOAT16 else x)


@translation(aten.copy.default)
def copy(g: RuleContext, x: ir.Value, src: ir.Value, non_blocking: bool = False) -> ir.Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor"""
    out = g.cast(src, g.dtype)
    static = g.static_shape()
    if static is not None and src.shape is not None and tuple(src.shape) == static:
        return out
    return g.op.Expand(out, g.op.Shape(x))


@translation(aten.atan2.out)
def atan2_out(g: RuleContext, a: ir.Value, b: ir.Value, *, out: Any = None) -> ir.Value:
    """atan2.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)"""
    return atan2(g, a, b)


@translation(aten.addcmul.default)
def addcmul(g: RuleContext, x: Any, t1: Any, t2: Any, value: Any = 1) -> ir.Value:
    """addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor

    Eager casts ``value`` to the result dtype first: an integer addcmul with
    ``value=0.5`` multiplies by 0 (torch's decomposition refuses that case)."""
    dtype = g.dtype
    prod = g.op.Mul(operand(g, t1, dtype), operand(g, t2, dtype))
    if not is_float(dtype):
        value = bool(value) if dtype == ir.DataType.BOOL else int(value)
    if value != 1:
        prod = g.op.Mul(prod, g.const(value, dtype))
    return g.op.Add(operand(g, x, dtype), prod)
