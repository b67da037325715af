"""Normalization: batch, layer, group, instance and RMS norm."""

from __future__ import annotations

import math
import warnings
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, dtype_of, torch_dtype, translation
from pt2onnx.rules._common import aten, axes, rank, static_dim


def _ones(g: RuleContext, n: int, dtype: ir.DataType) -> ir.Value:
    return g.const(torch.ones(n, dtype=torch_dtype(dtype)))


def _zeros(g: RuleContext, n: int, dtype: ir.DataType) -> ir.Value:
    return g.const(torch.zeros(n, dtype=torch_dtype(dtype)))


def _channels(x: ir.Value) -> int:
    return static_dim(x, 1)


@translation(aten._native_batch_norm_legit_no_training.default)
def batch_norm_inference(g: RuleContext, x: ir.Value, weight: ir.Value | None,
                         bias: ir.Value | None, running_mean: ir.Value, running_var: ir.Value,
                         momentum: float, eps: float) -> tuple[Any, ...]:
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    dtype = x.dtype
    assert dtype is not None
    # Inference mode saves no statistics: torch returns two empty tensors.
    stats = tuple(_zeros(g, 0, dtype) if isinstance(g.meta, (tuple, list)) and g.output_used(i)
                  else None
                  for i in (1, 2))
    if rank(x) < 2:
        # torch takes a 1-D input (no channel dim) only when it is empty: so is the output.
        return g.op.Identity(x), *stats
    c = _channels(x)
    # After a Conv, passes/fold_batch_norm.py folds this into the Conv's weights.
    weight = weight if weight is not None else _ones(g, c, dtype)
    bias = bias if bias is not None else _zeros(g, c, dtype)
    out = g.op.BatchNormalization(x, weight, bias, running_mean, running_var, epsilon=float(eps))
    return out, *stats


@translation(aten.native_batch_norm.default)
def native_batch_norm(g: RuleContext, x: ir.Value, weight: ir.Value | None,
                      bias: ir.Value | None, running_mean: ir.Value | None,
                      running_var: ir.Value | None, training: bool, momentum: float,
                      eps: float) -> tuple[Any, ...]:
    """native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    if not training and running_mean is not None and running_var is not None:
        return batch_norm_inference(g, x, weight, bias, running_mean, running_var, momentum, eps)
    if running_mean is not None or running_var is not None:
        warn_running_stats(g)
    return _batch_norm_batch_stats(g, x, weight, bias, eps)


@translation(aten._native_batch_norm_legit.no_stats)
def batch_norm_no_stats(g: RuleContext, x: ir.Value, weight: ir.Value | None,
                        bias: ir.Value | None, training: bool, momentum: float,
                        eps: float) -> tuple[Any, ...]:
    """_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    return _batch_norm_batch_stats(g, x, weight, bias, eps)


@translation(aten._native_batch_norm_legit.default)
def batch_norm_legit(g: RuleContext, x: ir.Value, weight: ir.Value | None, bias: ir.Value | None,
                     running_mean: ir.Value, running_var: ir.Value, training: bool,
                     momentum: float, eps: float) -> tuple[Any, ...]:
    """_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean, Tensor(b!) running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    if not training:
        return batch_norm_inference(g, x, weight, bias, running_mean, running_var, momentum, eps)
    warn_running_stats(g)
    return _batch_norm_batch_stats(g, x, weight, bias, eps)


def warn_running_stats(g: RuleContext) -> None:
    """Training-mode batch norm with running statistics: eager updates them in place.
    One message for all the model's batch norms (Python shows it once per process)."""
    warnings.warn(
        "batch norm in training mode: the ONNX graph normalises with each batch's "
        "own mean and variance, as eager does in train(), but the in-place updates of "
        "running_mean, running_var and num_batches_tracked are not part of it (ONNX has "
        "no buffers to write). Next step: call model.eval() (or pass "
        "training=torch.onnx.TrainingMode.EVAL) to export inference with the running "
        "statistics.",
        stacklevel=2,
    )


def _batch_norm_batch_stats(g: RuleContext, x: ir.Value, weight: ir.Value | None,
                            bias: ir.Value | None, eps: float) -> tuple[Any, ...]:
    """Training-mode batch norm: normalise with the statistics of this batch."""
    r = rank(x)
    dtype = x.dtype
    assert dtype is not None
    red = [0, *range(2, r)]
    mean = _reduce_mean(g, x, red)
    centered = g.op.Sub(x, mean)
    var = _reduce_mean(g, g.op.Mul(centered, centered), red)
    invstd = g.op.Reciprocal(g.op.Sqrt(g.op.Add(var, g.const(eps, dtype))))
    out = g.op.Mul(centered, invstd)
    bshape = g.const([-1] + [1] * (r - 2))
    if weight is not None:
        out = g.op.Mul(out, g.op.Reshape(weight, bshape))
    if bias is not None:
        out = g.op.Add(out, g.op.Reshape(bias, bshape))
    squeeze = axes(g, red)
    return out, g.op.Squeeze(mean, squeeze), g.op.Squeeze(invstd, squeeze)


def _reduce_mean(g: RuleContext, x: ir.Value, dims: list[int], keepdims: int = 1) -> ir.Value:
    if g.opset >= 18:
        return g.op.ReduceMean(x, axes(g, dims), keepdims=keepdims)
    return g.op.ReduceMean(x, axes=dims, keepdims=keepdims)


@translation(aten.layer_norm.default)
def layer_norm(g: RuleContext, x: ir.Value, normalized_shape: list[int],
               weight: ir.Value | None = None, bias: ir.Value | None = None, eps: float = 1e-5,
               cudnn_enable: bool = True) -> ir.Value:
    """layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor"""
    return native_layer_norm(g, x, normalized_shape, weight, bias, eps)[0]


@translation(aten.native_layer_norm.default)
def native_layer_norm(g: RuleContext, x: ir.Value, normalized_shape: list[int],
                      weight: ir.Value | None, bias: ir.Value | None,
                      eps: float) -> tuple[Any, ...]:
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)"""
    dtype = x.dtype
    assert dtype is not None
    if weight is None:
        weight = g.const(torch.ones(list(normalized_shape), dtype=torch_dtype(dtype)))
    axis = -len(normalized_shape)
    if any(isinstance(d, int) and d == 0 for d in normalized_shape):
        # Nothing to normalise: the output is empty; torch's mean is 0 and rstd NaN.
        # onnxruntime refuses LayerNormalization over 0 elements (found by the fuzzer).
        keep = g.op.Shape(x, end=axis) if axis < 0 else g.op.Shape(x)
        stats = g.op.Concat(keep, g.const([1] * len(normalized_shape)), axis=0)
        mean = g.op.Expand(g.const(0.0, dtype), stats)
        return g.op.Identity(x), mean, g.op.Expand(g.const(math.nan, dtype), stats)
    want_stats = g.node is not None and g.node.target is aten.native_layer_norm.default and (
        g.output_used(1) or g.output_used(2))
    if want_stats:
        y, mean, invstd = g.op.LayerNormalization(x, weight, bias, axis=axis, epsilon=float(eps),
                                                  _outputs=3)
        # The statistics come out in the stash type (float32) for float16 inputs; torch
        # returns them in the input's dtype.
        mean.dtype = invstd.dtype = ir.DataType.FLOAT if dtype in (
            ir.DataType.FLOAT16, ir.DataType.BFLOAT16) else dtype
        return y, g.cast(mean, dtype), g.cast(invstd, dtype)
    return g.op.LayerNormalization(x, weight, bias, axis=axis, epsilon=float(eps)), None, None


def _group_norm(g: RuleContext, x: ir.Value, weight: ir.Value | None, bias: ir.Value | None,
                groups: int, eps: float) -> ir.Value:
    dtype = x.dtype
    assert dtype is not None
    r = rank(x)
    if _empty_batch(x):
        return g.op.Identity(x)
    # Normalise each (sample, group) with InstanceNormalization over a (N, G, -1) view.
    grouped = g.op.Reshape(x, g.const([0, int(groups), -1]))
    normed = g.op.InstanceNormalization(
        grouped, _ones(g, groups, dtype), _zeros(g, groups, dtype), epsilon=float(eps)
    )
    out = g.op.Reshape(normed, g.op.Shape(x))
    bshape = g.const([-1] + [1] * (r - 2))
    if weight is not None:
        out = g.op.Mul(out, g.op.Reshape(weight, bshape))
    if bias is not None:
        out = g.op.Add(out, g.op.Reshape(bias, bshape))
    return out


def _empty_batch(x: ir.Value) -> bool:
    # An empty batch normalises nothing; the (N, G, -1) views cannot express it.
    return x.shape is not None and len(x.shape) > 0 and x.shape[0] == 0


@translation(aten.group_norm.default)
def group_norm(g: RuleContext, x: ir.Value, num_groups: int, weight: ir.Value | None = None,
               bias: ir.Value | None = None, eps: float = 1e-5,
               cudnn_enabled: bool = True) -> ir.Value:
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enabled=True) -> Tensor"""
    return _group_norm(g, x, weight, bias, num_groups, eps)


@translation(aten.group_norm.default, since=21)
def group_norm21(g: RuleContext, x: ir.Value, num_groups: int, weight: ir.Value | None = None,
                 bias: ir.Value | None = None, eps: float = 1e-5,
                 cudnn_enabled: bool = True) -> ir.Value:
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enabled=True) -> Tensor"""
    dtype = x.dtype
    assert dtype is not None
    if _empty_batch(x):
        return g.op.Identity(x)
    c = _channels(x)
    weight = weight if weight is not None else _ones(g, c, dtype)
    bias = bias if bias is not None else _zeros(g, c, dtype)
    return g.op.GroupNormalization(x, weight, bias, num_groups=int(num_groups), epsilon=float(eps))


@translation(aten.native_group_norm.default)
def native_group_norm(g: RuleContext, x: ir.Value, weight: ir.Value | None,
                      bias: ir.Value | None, n: Any, c: Any, hxw: Any, group: int,
                      eps: float) -> tuple[Any, ...]:
    """native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)"""
    out = _group_norm(g, x, weight, bias, group, eps)
    if not (g.output_used(1) or g.output_used(2)):
        return out, None, None
    stats_shape = g.static_shape(1)
    if _empty_batch(x) and stats_shape is not None:
        empty = g.const(torch.zeros(stats_shape, dtype=torch_dtype(dtype_of(x))))
        return out, empty, empty
    # Statistics over each (sample, group): mean and 1/sqrt(biased var + eps), shape (N, G).
    grouped = g.op.Reshape(x, g.const([0, int(group), -1]))
    two = g.const([2])
    mean = g.op.ReduceMean(grouped, two, keepdims=1) if g.opset >= 18 else g.op.ReduceMean(
        grouped, axes=[2], keepdims=1)
    centered = g.op.Sub(grouped, mean)
    sq = g.op.Mul(centered, centered)
    var = g.op.ReduceMean(sq, two, keepdims=0) if g.opset >= 18 else g.op.ReduceMean(
        sq, axes=[2], keepdims=0)
    rstd = g.op.Reciprocal(g.op.Sqrt(g.op.Add(var, g.const(float(eps), x.dtype))))
    return out, g.op.Squeeze(mean, two), rstd


@translation(aten.instance_norm.default)
def instance_norm(g: RuleContext, x: ir.Value, weight: ir.Value | None, bias: ir.Value | None,
                  running_mean: ir.Value | None, running_var: ir.Value | None,
                  use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool) -> ir.Value:
    """instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool use_input_stats, float momentum, float eps, bool cudnn_enabled) -> Tensor"""
    dtype = x.dtype
    assert dtype is not None
    c = _channels(x)
    if not use_input_stats and running_mean is not None and running_var is not None:
        w = weight if weight is not None else _ones(g, c, dtype)
        b = bias if bias is not None else _zeros(g, c, dtype)
        return g.op.BatchNormalization(x, w, b, running_mean, running_var, epsilon=float(eps))
    w = weight if weight is not None else _ones(g, c, dtype)
    b = bias if bias is not None else _zeros(g, c, dtype)
    return g.op.InstanceNormalization(x, w, b, epsilon=float(eps))


def _rms_eps(eps: float | None, dtype: ir.DataType) -> float:
    return float(eps) if eps is not None else float(torch.finfo(torch_dtype(dtype)).eps)


@translation(aten.rms_norm.default)
def rms_norm(g: RuleContext, x: ir.Value, normalized_shape: list[int],
             weight: ir.Value | None = None, eps: float | None = None) -> ir.Value:
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor"""
    dtype = x.dtype
    assert dtype is not None
    dims = list(range(-len(normalized_shape), 0))
    ms = _reduce_mean(g, g.op.Mul(x, x), dims)
    out = g.op.Mul(x, g.op.Reciprocal(g.op.Sqrt(g.op.Add(ms, g.const(_rms_eps(eps, dtype), dtype)))))
    return g.op.Mul(out, weight) if weight is not None else out


@translation(aten.rms_norm.default, since=23)
def rms_norm23(g: RuleContext, x: ir.Value, normalized_shape: list[int],
               weight: ir.Value | None = None, eps: float | None = None) -> ir.Value:
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor"""
    dtype = x.dtype
    assert dtype is not None
    if weight is None:
        weight = g.const(torch.ones(list(normalized_shape), dtype=torch_dtype(dtype)))
    return g.op.RMSNormalization(x, weight, axis=-len(normalized_shape),
                                 epsilon=_rms_eps(eps, dtype))
