"""PT2E's ops (``torch.ops.quantized_decomposed``) as ONNX QDQ.

These rules are registered the first time a graph holds a ``quantized_decomposed`` op,
not with the other built-in rules (``rules/__init__.py`` defers the namespace): the ops
exist only once ``torch.ao.quantization.fx._decomposed`` (or torchao) is imported, which
costs about 25 ms, and a program that holds one has imported it already. The
quantize/dequantize arithmetic is shared with the QAT rules in ``rules/quantized.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from pt2onnx import _compat
from pt2onnx.rule_api import KEEP_UNFOLDED, RuleContext, translation
from pt2onnx.rules._common import normalize_dim, rank
from pt2onnx.rules.quantized import _F32, _int, dequantize, quantize
from pt2onnx.translate import EXTRA_DECOMPOSITIONS

_QD = _compat.quantized_decomposed_ops()


def _overloads(*names: str) -> list[Any]:
    if _QD is None:
        return []
    found = []
    for name in names:
        packet, overload = name.split(".")
        op = getattr(getattr(_QD, packet, None), overload, None)
        if op is not None:
            found.append(op)
    return found


@translation(_overloads("quantize_per_tensor.default", "quantize_per_tensor.tensor",
                        "quantize_per_tensor.tensor2"))
def quantize_per_tensor(g: RuleContext, x: ir.Value, scale: Any, zero_point: Any,
                        quant_min: Any, quant_max: Any, dtype: torch.dtype) -> ir.Value:
    """quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype) -> Tensor"""
    qmin, qmax = _int(g, quant_min, "quant_min"), _int(g, quant_max, "quant_max")
    return quantize(g, x, scale, zero_point, qmin, qmax, dtype)


@translation(_overloads("dequantize_per_tensor.default", "dequantize_per_tensor.tensor",
                        "dequantize_per_tensor.tensor2"))
def dequantize_per_tensor(g: RuleContext, q: ir.Value, scale: Any, zero_point: Any,
                          quant_min: Any, quant_max: Any, dtype: torch.dtype, *,
                          out_dtype: torch.dtype | None = None) -> ir.Value:
    """dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor"""
    return dequantize(g, q, scale, zero_point, dtype, out_dtype=out_dtype)


@translation(_overloads("quantize_per_channel.default"))
def quantize_per_channel(g: RuleContext, x: ir.Value, scales: ir.Value, zero_points: ir.Value,
                         axis: int, quant_min: int, quant_max: int,
                         dtype: torch.dtype) -> ir.Value:
    """quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min, int quant_max, ScalarType dtype) -> Tensor"""
    return quantize(g, x, scales, zero_points, quant_min, quant_max, dtype,
                    normalize_dim(axis, rank(x)))


@translation(_overloads("dequantize_per_channel.default"))
def dequantize_per_channel(g: RuleContext, q: ir.Value, scales: ir.Value,
                           zero_points: ir.Value | None, axis: int, quant_min: int,
                           quant_max: int, dtype: torch.dtype, *,
                           out_dtype: torch.dtype | None = None) -> ir.Value:
    """dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor"""
    return dequantize(g, q, scales, zero_points, dtype, normalize_dim(axis, rank(q)), out_dtype)


@translation(_overloads("choose_qparams.tensor"))
def choose_qparams(g: RuleContext, x: ir.Value, quant_min: int, quant_max: int, eps: float,
                   dtype: torch.dtype) -> tuple[ir.Value, ir.Value]:
    """choose_qparams.tensor(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype) -> (Tensor, Tensor)"""
    # torch.ao's determine_qparams, per-tensor affine: the range always includes 0.
    x = g.cast(x, _F32)
    zero = g.const(0.0, _F32)
    low = g.op.Min(g.op.ReduceMin(x, keepdims=0), zero)
    high = g.op.Max(g.op.ReduceMax(x, keepdims=0), zero)
    scale = g.op.Div(g.op.Sub(high, low), g.const(float(quant_max - quant_min), _F32))
    scale = g.op.Max(scale, g.const(float(np.float32(eps)), _F32))
    zp = g.op.Sub(g.const(float(quant_min), _F32), g.op.Round(g.op.Div(low, scale)))
    zp = g.op.Clip(zp, g.const(float(quant_min), _F32), g.const(float(quant_max), _F32))
    one = g.const([1], ir.DataType.INT64)
    return (g.op.Reshape(g.cast(scale, ir.DataType.DOUBLE), one),
            g.op.Reshape(g.op.Cast(zp, to=ir.DataType.INT64), one))


@translation(_overloads("choose_qparams_symmetric.tensor"))
def choose_qparams_symmetric(g: RuleContext, x: ir.Value, quant_min: int, quant_max: int,
                             eps: float, dtype: torch.dtype) -> tuple[ir.Value, ir.Value]:
    """choose_qparams_symmetric.tensor(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype) -> (Tensor, Tensor)"""
    # determine_qparams, per-tensor symmetric: scale from the largest magnitude; the zero
    # point is 0, or 128 for uint8.
    x = g.cast(x, _F32)
    zero = g.const(0.0, _F32)
    low = g.op.Min(g.op.ReduceMin(x, keepdims=0), zero)
    high = g.op.Max(g.op.ReduceMax(x, keepdims=0), zero)
    scale = g.op.Div(g.op.Max(g.op.Neg(low), high),
                     g.const(float(quant_max - quant_min) / 2, _F32))
    scale = g.op.Max(scale, g.const(float(np.float32(eps)), _F32))
    one = g.const([1], ir.DataType.INT64)
    zp = 128 if dtype in (torch.uint8, torch.quint8) else 0
    return (g.op.Reshape(g.cast(scale, ir.DataType.DOUBLE), one),
            g.const([zp], ir.DataType.INT64))


# PT2E's per-token and per-group ops (torchao's 8-bit dynamic activation, 4-bit weight
# flows): torch's own Python implementations, traced as decompositions into ATen.
EXTRA_DECOMPOSITIONS.update(_compat.quantized_decomposed_kernels())

KEEP_UNFOLDED.update(_overloads(
    "dequantize_per_tensor.default", "dequantize_per_tensor.tensor",
    "dequantize_per_tensor.tensor2", "dequantize_per_channel.default"))
