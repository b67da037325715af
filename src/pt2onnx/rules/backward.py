"""Gradients that core ATen keeps as ops, for graphs exported from a backward pass."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, rank, shape_list
from pt2onnx.rules.nn import _expand_param
from pt2onnx.rules.reduction import reduce


@translation(aten.embedding_dense_backward.default)
def embedding_dense_backward(g: RuleContext, grad: ir.Value, indices: ir.Value,
                             num_weights: Any, padding_idx: Any,
                             scale_grad_by_freq: bool) -> ir.Value:
    """embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, bool scale_grad_by_freq) -> Tensor"""
    if scale_grad_by_freq:
        raise NotImplementedError("embedding_dense_backward with scale_grad_by_freq=True")
    dim = g.shape[1]
    idx = g.op.Reshape(g.cast(indices, ir.DataType.INT64), g.const([-1, 1]))
    rows = g.op.Reshape(grad, g.int_list([-1, dim]))
    if isinstance(padding_idx, int) and padding_idx >= 0:
        keep = g.op.Not(g.op.Equal(idx, g.const(padding_idx)))
        rows = g.op.Where(keep, rows, g.const(0.0, g.dtype))
    zeros = g.op.Expand(g.const(0.0, g.dtype), g.int_list([num_weights, dim]))
    return g.op.ScatterND(zeros, idx, rows, reduction="add")


@translation(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(g: RuleContext, grad: ir.Value, x: ir.Value, kernel_size: Any,
                                     stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
                                     indices: ir.Value) -> ir.Value:
    """max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor"""
    # indices count within each (n, c) plane, so scatter-add per plane.
    lead = rank(x) - 2
    plane = g.op.Concat(g.op.Shape(x, end=lead), g.const([-1]), axis=0)
    zeros = g.op.Reshape(g.op.Mul(x, g.const(0.0, g.dtype)), plane)
    out = g.op.ScatterElements(zeros, g.op.Reshape(indices, plane), g.op.Reshape(grad, plane),
                               axis=lead, reduction="add")
    return g.op.Reshape(out, g.op.Shape(x))


def _avg_pool_grad(g: RuleContext, grad: ir.Value, x: ir.Value, kernel: list[int],
                   strides: list[int], pads: list[int], count_include_pad: bool,
                   divisor_override: Any) -> ir.Value:
    """Spreads each window's gradient evenly over the inputs it averaged."""
    shape = list(x.shape)  # type: ignore[arg-type]
    gshape = list(grad.shape)  # type: ignore[arg-type]
    if not all(isinstance(d, int) for d in shape + gshape):
        raise NotImplementedError("avg_pool2d_backward with dynamic sizes")
    dtype = g.dtype
    lead = shape[:-2]
    planes = g.op.Reshape(grad, g.const([-1, 1, *gshape[-2:]]))
    area = kernel[0] * kernel[1]
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads + pads}
    if divisor_override:
        planes = g.op.Div(planes, g.const(float(divisor_override), dtype))
    elif count_include_pad:
        planes = g.op.Div(planes, g.const(float(area), dtype))
    else:
        ones = g.op.Expand(g.const(1.0, dtype), g.const([1, 1, *shape[-2:]]))
        counts = g.op.Mul(g.op.AveragePool(ones, count_include_pad=1, **attrs),
                          g.const(float(area), dtype))
        planes = g.op.Div(planes, counts)
    weight = g.op.Expand(g.const(1.0, dtype), g.const([1, 1, *kernel]))
    out_pad = [
        shape[-2 + i] - ((gshape[-2 + i] - 1) * strides[i] - 2 * pads[i] + kernel[i])
        for i in range(2)
    ]
    out = g.op.ConvTranspose(planes, weight, **attrs, output_padding=out_pad)
    return g.op.Reshape(out, g.const([*lead, *shape[-2:]]))


@translation(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(g: RuleContext, grad: ir.Value, x: ir.Value, kernel_size: Any,
                        stride: Any, padding: Any, ceil_mode: bool, count_include_pad: bool,
                        divisor_override: Any) -> ir.Value:
    """avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor"""
    if ceil_mode:
        raise NotImplementedError("avg_pool2d_backward with ceil_mode=True")
    kernel = _expand_param(kernel_size, 2)
    strides = _expand_param(stride, 2) if stride else kernel
    return _avg_pool_grad(g, grad, x, kernel, strides, _expand_param(padding, 2),
                          count_include_pad, divisor_override)


@translation(aten._adaptive_avg_pool2d_backward.default)
def adaptive_avg_pool2d_backward(g: RuleContext, grad: ir.Value, x: ir.Value) -> ir.Value:
    """_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor"""
    ins, outs = shape_list(x)[-2:], shape_list(grad)[-2:]
    if not all(isinstance(i, int) and isinstance(o, int) and o and i % o == 0
               for i, o in zip(ins, outs, strict=False)):
        raise NotImplementedError("adaptive pooling gradient where input % output != 0")
    kernel = [i // o for i, o in zip(ins, outs, strict=False)]
    return _avg_pool_grad(g, grad, x, kernel, kernel, [0, 0], True, None)


def _like(value: ir.Value, x: ir.Value) -> ir.Value:
    """value, marked with x's shape (for the rank that reduce() reads)."""
    value.shape = x.shape
    return value


@translation(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(g: RuleContext, grad: ir.Value, x: ir.Value,
                               normalized_shape: list[Any], mean: ir.Value, rstd: ir.Value,
                               weight: ir.Value | None, bias: ir.Value | None,
                               output_mask: list[bool]) -> tuple[Any, Any, Any]:
    """native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""
    r, k = rank(x), len(normalized_shape)
    inner, outer = list(range(r - k, r)), list(range(r - k))
    xhat = _like(g.op.Mul(g.op.Sub(x, mean), rstd), x)
    gw = _like(g.op.Mul(grad, weight), x) if weight is not None else grad
    dx = dw = db = None
    if output_mask[0]:
        a = reduce(g, "ReduceMean", gw, inner, True)
        b = reduce(g, "ReduceMean", _like(g.op.Mul(gw, xhat), x), inner, True)
        dx = g.op.Mul(rstd, g.op.Sub(g.op.Sub(gw, a), g.op.Mul(xhat, b)))
    if output_mask[1] and weight is not None:
        gx = _like(g.op.Mul(grad, xhat), x)
        dw = reduce(g, "ReduceSum", gx, outer, False) if outer else gx
    if output_mask[2] and bias is not None:
        db = reduce(g, "ReduceSum", grad, outer, False) if outer else g.op.Identity(grad)
    return dx, dw, db
