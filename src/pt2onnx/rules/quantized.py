"""Quantization: ``fake_quantize_*`` and ATen's quantize ops as ONNX QDQ, and the
quantize/dequantize arithmetic that PT2E's rules (``rules/quantized_pt2e.py``) share.

PT2E-quantized programs carry ``quantized_decomposed.quantize_per_tensor`` /
``dequantize_per_tensor`` (and per-channel forms) around float ops; each becomes a
QuantizeLinear or DequantizeLinear, the QDQ form that onnxruntime and TensorRT fuse
into integer kernels. ``fake_quantize_*`` (QAT) becomes a QuantizeLinear ->
DequantizeLinear pair. Eager-mode quantized modules are rewritten into this form
before capture (``pt2onnx.frontends._quantized``).

torch rounds ``x * (1 / scale)``, QuantizeLinear rounds ``x / scale``; the two can
differ on a tie, by one quantization step. A quant range narrower than the dtype's
(``quant_min=-127``, 7-bit ranges) becomes a clamp of the float input before
QuantizeLinear, so the Q -> DQ pair stays adjacent. Integer dtypes QuantizeLinear lacks
at the target opset (int32; int16 below opset 21) and float zero points use the
arithmetic form ``clamp(round(x / scale) + zp)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from pt2onnx.rule_api import KEEP_UNFOLDED, RuleContext, onnx_dtype, torch_dtype, translation
from pt2onnx.rules._common import aten, normalize_dim, rank

_F32 = ir.DataType.FLOAT

# torch dtype -> the first opset whose QuantizeLinear / DequantizeLinear takes it.
_Q_SINCE = {torch.uint8: 13, torch.int8: 13, torch.int16: 21, torch.uint16: 21}
_DQ_SINCE = {**_Q_SINCE, torch.int32: 13}
_RANGE = {
    torch.uint8: (0, 255), torch.int8: (-128, 127), torch.int16: (-(2**15), 2**15 - 1),
    torch.uint16: (0, 2**16 - 1), torch.int32: (-(2**31), 2**31 - 1),
}


def _as(g: RuleContext, v: ir.Value, dtype: ir.DataType) -> ir.Value:
    """v as ``dtype``: a constant is converted now (a zero point stored as int64 becomes
    a uint8 initializer, as QDQ consumers expect), anything else by a Cast."""
    if v.dtype != dtype and v.is_initializer() and v.const_value is not None:
        raw = getattr(v.const_value, "raw", None)
        tensor = raw if isinstance(raw, torch.Tensor) else torch.from_numpy(
            np.asarray(v.const_value.numpy()))
        if not tensor.is_meta:
            return g.const(tensor.to(torch_dtype(dtype)), dtype)
    return g.cast(v, dtype)


def _scale(g: RuleContext, scale: Any, per_tensor: bool) -> ir.Value:
    """The scale as float32: a 0-d value per tensor, 1-D per channel."""
    if not isinstance(scale, ir.Value):
        return g.const(float(np.float32(scale)), _F32)
    scale = _as(g, scale, _F32)
    if per_tensor and (scale.shape is None or len(scale.shape) != 0):
        scale = g.op.Reshape(scale, g.const([], ir.DataType.INT64))
    return scale


def _zero_point(g: RuleContext, zp: Any, dtype: ir.DataType, per_tensor: bool) -> ir.Value:
    if not isinstance(zp, ir.Value):
        return g.const(int(zp), dtype)
    zp = _as(g, zp, dtype)
    if per_tensor and (zp.shape is None or len(zp.shape) != 0):
        zp = g.op.Reshape(zp, g.const([], ir.DataType.INT64))
    return zp


def _along(g: RuleContext, v: ir.Value, axis: int | None, nd: int) -> ir.Value:
    """A per-channel parameter reshaped to broadcast along ``axis`` of a rank-``nd`` tensor."""
    if axis is None or nd <= 1:
        return v
    shape = [1] * nd
    shape[axis] = -1
    return g.op.Reshape(v, g.const(shape, ir.DataType.INT64))


def _float_zp(g: RuleContext, zp: Any) -> ir.Value:
    return g.const(float(zp), _F32) if not isinstance(zp, ir.Value) else g.cast(zp, _F32)


def _known(v: Any) -> np.ndarray | None:
    """A Python number or a constant value as an array; None for a computed value."""
    if not isinstance(v, ir.Value):
        return None if v is None else np.asarray(v)
    if not v.is_initializer() or v.const_value is None:
        return None
    raw = getattr(v.const_value, "raw", None)
    if isinstance(raw, torch.Tensor) and raw.is_meta:
        return None
    return np.asarray(v.const_value.numpy())


def _scalar(v: Any) -> Any:
    """A one-element constant as a Python number (then the per-tensor paths fold it)."""
    known = _known(v) if isinstance(v, ir.Value) else None
    if known is None or known.size != 1:
        return v
    item = known.reshape(-1)[0]
    return float(item) if np.issubdtype(known.dtype, np.floating) else int(item)


def _narrow(g: RuleContext, x: ir.Value, scale: ir.Value, zp: Any, raw_scale: Any,
            qmin: int, qmax: int, axis: int | None, dtype: torch.dtype) -> ir.Value:
    """Clamps x to the floats that quantize into [qmin, qmax] when that range is
    narrower than the dtype's (QuantizeLinear itself saturates to the dtype's)."""
    low, high = _RANGE[dtype]
    if qmin <= low and qmax >= high:
        return x
    nd = rank(x)
    step, z0 = _known(raw_scale), _known(0 if zp is None else zp)
    if step is not None and z0 is not None:
        step, z0 = step.astype(np.float32), z0.astype(np.float32)
        lo = g.const(np.float32(qmin - z0) * step, _F32)
        hi = g.const(np.float32(qmax - z0) * step, _F32)
        lo, hi = _along(g, lo, axis, nd), _along(g, hi, axis, nd)
    else:
        s = _along(g, scale, axis, nd)
        z = _along(g, _float_zp(g, zp), axis, nd)
        lo = g.op.Mul(g.op.Sub(g.const(float(qmin), _F32), z), s)
        hi = g.op.Mul(g.op.Sub(g.const(float(qmax), _F32), z), s)
    if qmin > low:
        x = g.op.Max(x, lo)
    return g.op.Min(x, hi) if qmax < high else x


def quantize(g: RuleContext, x: ir.Value, scale: Any, zp: Any, qmin: int, qmax: int,
             dtype: torch.dtype, axis: int | None = None) -> ir.Value:
    """``clamp(round(x / scale) + zp, qmin, qmax)`` as ``dtype``; per channel along ``axis``."""
    x = g.cast(x, _F32)
    per_tensor = axis is None
    if per_tensor:
        scale, zp = _scalar(scale), _scalar(zp)
    s = _scale(g, scale, per_tensor)
    if _Q_SINCE.get(dtype, 10**9) <= g.opset and not _is_float_value(zp):
        clamped = _narrow(g, x, s, zp, scale, qmin, qmax, axis, dtype)
        z = _zero_point(g, zp, onnx_dtype(dtype), per_tensor)
        out = g.op.QuantizeLinear(clamped, s, z, axis=axis)
    else:
        nd = rank(x)
        q = g.op.Add(g.op.Round(g.op.Div(x, _along(g, s, axis, nd))),
                     _along(g, _float_zp(g, zp), axis, nd))
        q = g.op.Clip(q, g.const(float(qmin), _F32), g.const(float(qmax), _F32))
        out = g.op.Cast(q, to=onnx_dtype(dtype))
    out.dtype, out.shape = onnx_dtype(dtype), x.shape
    return out


def dequantize(g: RuleContext, q: ir.Value, scale: Any, zp: Any, dtype: torch.dtype,
               axis: int | None = None, out_dtype: torch.dtype | None = None) -> ir.Value:
    """``(q - zp) * scale`` in float32 (then ``out_dtype``); per channel along ``axis``."""
    per_tensor = axis is None
    if per_tensor:
        scale, zp = _scalar(scale), _scalar(zp)
    s = _scale(g, scale, per_tensor)
    if _DQ_SINCE.get(dtype, 10**9) <= g.opset and q.dtype == onnx_dtype(dtype) \
            and not _is_float_value(zp):
        z = None if zp is None else _zero_point(g, zp, onnx_dtype(dtype), per_tensor)
        out = g.op.DequantizeLinear(q, s, z, axis=axis)
    else:
        nd = rank(q)
        f = g.cast(q, _F32)
        if zp is not None:
            f = g.op.Sub(f, _along(g, _float_zp(g, zp), axis, nd))
        out = g.op.Mul(f, _along(g, s, axis, nd))
    out.dtype, out.shape = _F32, q.shape
    return g.cast(out, out_dtype or torch.float32)


def _is_float_value(zp: Any) -> bool:
    if isinstance(zp, ir.Value):
        return zp.dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16,
                            ir.DataType.BFLOAT16)
    return isinstance(zp, float) and not float(zp).is_integer()


def _int(g: RuleContext, v: Any, what: str) -> int:
    """A quant bound passed as a tensor (``.tensor2`` overloads): it must be a constant."""
    if not isinstance(v, ir.Value):
        return int(v)
    if v.const_value is None:
        raise ValueError(f"{what} must be a constant to export; it is computed in the graph")
    return int(np.asarray(v.const_value.numpy()).reshape(-1)[0])


# -- fake quantization (QAT) ------------------------------------------------------------
def _storage(g: RuleContext, qmin: int, qmax: int) -> torch.dtype | None:
    """The narrowest integer dtype QuantizeLinear takes at this opset that holds the range."""
    for dtype in (torch.uint8, torch.int8, torch.uint16, torch.int16):
        low, high = _RANGE[dtype]
        if low <= qmin and qmax <= high and _Q_SINCE[dtype] <= g.opset:
            return dtype
    return None


def fake_quantize(g: RuleContext, x: ir.Value, scale: Any, zp: Any, qmin: int, qmax: int,
                  axis: int | None = None) -> ir.Value:
    """A QuantizeLinear -> DequantizeLinear pair over the smallest storage dtype; else
    the arithmetic form ``(clamp(round(x / scale) + zp) - zp) * scale`` (a range no
    storage dtype holds), or with ``round(x / scale + zp)`` for a float zero point, which
    torch adds before rounding."""
    out_dtype = g.dtype
    if axis is None:
        scale, zp = _scalar(scale), _scalar(zp)
    storage = _storage(g, qmin, qmax)
    if storage is not None and not _is_float_value(zp):
        q = quantize(g, x, scale, zp, qmin, qmax, storage, axis)
        return g.cast(dequantize(g, q, scale, zp, storage, axis), out_dtype)
    nd = rank(x)
    s = _along(g, _scale(g, scale, axis is None), axis, nd)
    z = _along(g, _float_zp(g, zp), axis, nd)
    scaled = g.op.Div(g.cast(x, _F32), s)
    q = g.op.Round(g.op.Add(scaled, z)) if _is_float_value(zp) else g.op.Add(
        g.op.Round(scaled), z)
    q = g.op.Clip(q, g.const(float(qmin), _F32), g.const(float(qmax), _F32))
    out = g.op.Mul(g.op.Sub(q, z), s)
    out.dtype = _F32
    return g.cast(out, out_dtype)


def _mask(g: RuleContext, x: ir.Value, scale: Any, zp: Any, qmin: int, qmax: int,
          axis: int | None) -> ir.Value:
    """The cachemask output: where ``round(x / scale) + zp`` lies inside [qmin, qmax]."""
    if axis is None:
        scale, zp = _scalar(scale), _scalar(zp)
    nd = rank(x)
    s = _along(g, _scale(g, scale, axis is None), axis, nd)
    q = g.op.Add(g.op.Round(g.op.Div(g.cast(x, _F32), s)), _along(g, _float_zp(g, zp), axis, nd))
    return g.op.And(g.op.GreaterOrEqual(q, g.const(float(qmin), _F32)),
                    g.op.LessOrEqual(q, g.const(float(qmax), _F32)))


@translation([aten.fake_quantize_per_tensor_affine.default,
              aten.fake_quantize_per_tensor_affine.tensor_qparams])
def fake_quantize_per_tensor_affine(g: RuleContext, x: ir.Value, scale: Any, zero_point: Any,
                                    quant_min: int, quant_max: int) -> ir.Value:
    """fake_quantize_per_tensor_affine(Tensor self, float scale, int zero_point, int quant_min, int quant_max) -> Tensor"""
    return fake_quantize(g, x, scale, zero_point, quant_min, quant_max)


@translation(aten.fake_quantize_per_tensor_affine_cachemask.default)
def fake_quantize_per_tensor_affine_cachemask(
        g: RuleContext, x: ir.Value, scale: float, zero_point: int, quant_min: int,
        quant_max: int) -> tuple[ir.Value, ir.Value]:
    """fake_quantize_per_tensor_affine_cachemask(Tensor self, float scale, int zero_point, int quant_min, int quant_max) -> (Tensor output, Tensor mask)"""
    return (fake_quantize(g, x, scale, zero_point, quant_min, quant_max),
            _mask(g, x, scale, zero_point, quant_min, quant_max, None))


@translation(aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default)
def fake_quantize_cachemask_tensor_qparams(
        g: RuleContext, x: ir.Value, scale: ir.Value, zero_point: ir.Value,
        fake_quant_enabled: ir.Value, quant_min: int,
        quant_max: int) -> tuple[ir.Value, ir.Value]:
    """_fake_quantize_per_tensor_affine_cachemask_tensor_qparams(Tensor self, Tensor scale, Tensor zero_point, Tensor fake_quant_enabled, int quant_min, int quant_max) -> (Tensor output, Tensor mask)"""
    enabled = g.op.Reshape(g.op.Cast(fake_quant_enabled, to=ir.DataType.BOOL),
                           g.const([], ir.DataType.INT64))
    out = g.op.Where(enabled, fake_quantize(g, x, scale, zero_point, quant_min, quant_max), x)
    mask = g.op.Or(_mask(g, x, scale, zero_point, quant_min, quant_max, None),
                   g.op.Not(enabled))
    return out, mask


@translation(aten.fake_quantize_per_channel_affine.default)
def fake_quantize_per_channel_affine(g: RuleContext, x: ir.Value, scale: ir.Value,
                                     zero_point: ir.Value, axis: int, quant_min: int,
                                     quant_max: int) -> ir.Value:
    """fake_quantize_per_channel_affine(Tensor self, Tensor scale, Tensor zero_point, int axis, int quant_min, int quant_max) -> Tensor"""
    return fake_quantize(g, x, scale, zero_point, quant_min, quant_max,
                         normalize_dim(axis, rank(x)))


@translation(aten.fake_quantize_per_channel_affine_cachemask.default)
def fake_quantize_per_channel_affine_cachemask(
        g: RuleContext, x: ir.Value, scale: ir.Value, zero_point: ir.Value, axis: int,
        quant_min: int, quant_max: int) -> tuple[ir.Value, ir.Value]:
    """fake_quantize_per_channel_affine_cachemask(Tensor self, Tensor scale, Tensor zero_point, int axis, int quant_min, int quant_max) -> (Tensor output, Tensor mask)"""
    axis = normalize_dim(axis, rank(x))
    return (fake_quantize(g, x, scale, zero_point, quant_min, quant_max, axis),
            _mask(g, x, scale, zero_point, quant_min, quant_max, axis))


def _rounded_zero_point(g: RuleContext, zp: ir.Value, qmin: int, qmax: int) -> ir.Value:
    """The learnable ops' zero point: rounded (half to even), clamped, as an integer."""
    z = g.op.Clip(g.op.Round(g.cast(zp, _F32)), g.const(float(qmin), _F32),
                  g.const(float(qmax), _F32))
    return g.op.Cast(z, to=ir.DataType.INT32)


@translation(aten._fake_quantize_learnable_per_tensor_affine.default)
def fake_quantize_learnable_per_tensor_affine(
        g: RuleContext, x: ir.Value, scale: ir.Value, zero_point: ir.Value, quant_min: int,
        quant_max: int, grad_factor: float = 1.0) -> ir.Value:
    """_fake_quantize_learnable_per_tensor_affine(Tensor self, Tensor scale, Tensor zero_point, int quant_min, int quant_max, float grad_factor=1.0) -> Tensor"""
    zp = _rounded_zero_point(g, zero_point, quant_min, quant_max)
    return fake_quantize(g, x, scale, zp, quant_min, quant_max)


@translation(aten._fake_quantize_learnable_per_channel_affine.default)
def fake_quantize_learnable_per_channel_affine(
        g: RuleContext, x: ir.Value, scale: ir.Value, zero_point: ir.Value, axis: int,
        quant_min: int, quant_max: int, grad_factor: float = 1.0) -> ir.Value:
    """_fake_quantize_learnable_per_channel_affine(Tensor self, Tensor scale, Tensor zero_point, int axis, int quant_min, int quant_max, float grad_factor=1.0) -> Tensor"""
    zp = _rounded_zero_point(g, zero_point, quant_min, quant_max)
    return fake_quantize(g, x, scale, zp, quant_min, quant_max, normalize_dim(axis, rank(x)))


def _flag(v: ir.Value) -> bool | None:
    """A one-element flag buffer's value when it is a constant, else None."""
    if v.const_value is None:
        return None
    return bool(np.asarray(v.const_value.numpy()).reshape(-1)[0])


@translation(aten._fused_moving_avg_obs_fq_helper_functional.default)
def fused_moving_avg_obs_fake_quant(
        g: RuleContext, x: ir.Value, observer_on: ir.Value, fake_quant_on: ir.Value,
        running_min: ir.Value, running_max: ir.Value, scale: ir.Value, zero_point: ir.Value,
        averaging_const: float, quant_min: int, quant_max: int, ch_axis: int,
        per_row_fake_quant: bool = False, symmetric_quant: bool = False) -> tuple[ir.Value, ...]:
    """_fused_moving_avg_obs_fq_helper_functional(Tensor self, Tensor observer_on, Tensor fake_quant_on, Tensor running_min, Tensor running_max, Tensor scale, Tensor zero_point, float averaging_const, int quant_min, int quant_max, int ch_axis, bool per_row_fake_quant=False, bool symmetric_quant=False) -> (Tensor output, Tensor mask, Tensor running_min_out, Tensor running_max_out, Tensor scale_out, Tensor zero_point_out)"""
    # A QAT FakeQuantize in inference: the observer must be off, so the stored qparams
    # are the ones used and the running statistics pass through unchanged.
    if _flag(observer_on) is not False:
        raise ValueError(
            "a FusedMovingAvgObsFakeQuantize has its observer enabled, so every call would "
            "update its statistics; call model.apply(torch.ao.quantization.disable_observer) "
            "(or convert the QAT model) before exporting")
    axis = normalize_dim(ch_axis, rank(x)) if per_row_fake_quant else None
    on = _flag(fake_quant_on)
    if on is False:
        out, mask = g.op.Identity(x), g.op.Expand(g.const(True, ir.DataType.BOOL),
                                                 g.op.Shape(x))
    else:
        out = fake_quantize(g, x, scale, zero_point, quant_min, quant_max, axis)
        mask = _mask(g, x, scale, zero_point, quant_min, quant_max, axis)
        if on is None:
            enabled = g.op.Reshape(g.op.Cast(fake_quant_on, to=ir.DataType.BOOL),
                                   g.const([], ir.DataType.INT64))
            out = g.op.Where(enabled, out, x)
            mask = g.op.Or(mask, g.op.Not(enabled))
    return (out, mask, g.op.Identity(running_min), g.op.Identity(running_max),
            g.op.Identity(scale), g.op.Identity(zero_point))


# torch's quantized dtypes and the integer range each holds.
_Q_RANGE = {torch.quint8: (0, 255), torch.qint8: (-128, 127),
            torch.qint32: (-(2 ** 31), 2 ** 31 - 1)}


def _q_range(dtype: torch.dtype) -> tuple[int, int]:
    if dtype not in _Q_RANGE:
        from pt2onnx.errors import TranslationError

        raise TranslationError(
            f"quantizing to {dtype} has no ONNX form here. Next step: quantize to "
            "torch.quint8, torch.qint8 or torch.qint32.")
    return _Q_RANGE[dtype]


@translation([aten.quantize_per_tensor.default, aten.quantize_per_tensor.tensor_qparams])
def quantize_per_tensor_aten(g: RuleContext, x: ir.Value, scale: Any, zero_point: Any,
                             dtype: torch.dtype) -> ir.Value:
    """quantize_per_tensor(Tensor self, float scale, int zero_point, ScalarType dtype) -> Tensor

    A quantized tensor travels as its dequantized float values (pt2onnx.frontends._quantized), so
    quantizing is a QuantizeLinear -> DequantizeLinear pair: the float of each value
    rounded onto the grid and clamped to the dtype's range, as ``q.dequantize()`` gives."""
    qmin, qmax = _q_range(dtype)
    return g.cast(fake_quantize(g, x, scale, zero_point, qmin, qmax), _F32)


@translation(aten.quantize_per_channel.default)
def quantize_per_channel_aten(g: RuleContext, x: ir.Value, scales: ir.Value,
                              zero_points: ir.Value, axis: int, dtype: torch.dtype) -> ir.Value:
    """quantize_per_channel(Tensor self, Tensor scales, Tensor zero_points, int axis, ScalarType dtype) -> Tensor"""
    qmin, qmax = _q_range(dtype)
    return g.cast(fake_quantize(g, x, scales, zero_points, qmin, qmax,
                                normalize_dim(axis, rank(x))), _F32)


@translation(aten.dequantize.self)
def dequantize_self(g: RuleContext, x: ir.Value) -> ir.Value:
    """dequantize.self(Tensor self) -> Tensor"""
    # Quantized tensors travel as their float values (pt2onnx.frontends._quantized): the identity.
    return g.cast(g.op.Identity(x), _F32)


KEEP_UNFOLDED.update((
    aten.fake_quantize_per_tensor_affine.default,
    aten.fake_quantize_per_tensor_affine.tensor_qparams,
    aten.fake_quantize_per_channel_affine.default,
))
