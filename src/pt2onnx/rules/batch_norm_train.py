"""Training-mode batch norm in its functional forms, as a functionalized program has
it (``_native_batch_norm_legit_functional``, ``_batch_norm_with_update_functional``)
and the mutating ``_batch_norm_with_update``.

The output is normalised with the batch's own statistics, which is what eager returns
in ``train()``. The running statistics torch would write back are computed as torch
does (``(1 - momentum) * running + momentum * batch``, the variance unbiased by
n / (n - 1)); torch.export turns those write-backs into buffer-mutation outputs, which
the ONNX graph does not carry (a warning says so).
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, torch_dtype, translation
from pt2onnx.rules._common import aten, rank
from pt2onnx.rules.norm import _batch_norm_batch_stats, batch_norm_inference, warn_running_stats


def _updated_stats(g: RuleContext, x: ir.Value, mean: ir.Value, invstd: ir.Value,
                   running_mean: ir.Value, running_var: ir.Value, momentum: float,
                   eps: float) -> tuple[ir.Value, ir.Value]:
    """torch's running-statistics update from the batch mean and 1 / sqrt(var + eps)."""
    dtype = running_mean.dtype or ir.DataType.FLOAT
    xdtype = x.dtype or ir.DataType.FLOAT
    var = g.op.Sub(g.op.Reciprocal(g.op.Mul(invstd, invstd)), g.const(eps, xdtype))
    # n: the number of values per channel, every dim but the channel one.
    shape = g.op.Shape(x)
    dims = [0, *range(2, rank(x))]
    sizes = g.op.Gather(shape, g.const(dims), axis=0)
    n = g.cast(g.op.ReduceProd(sizes, g.const([0]), keepdims=0) if g.opset >= 18
               else g.op.ReduceProd(sizes, axes=[0], keepdims=0), xdtype)
    unbiased = g.op.Mul(var, g.op.Div(n, g.op.Sub(n, g.const(1.0, xdtype))))
    m = g.const(float(momentum), dtype)
    keep = g.const(1.0 - float(momentum), dtype)
    new_mean = g.op.Add(g.op.Mul(m, g.cast(mean, dtype)), g.op.Mul(keep, running_mean))
    new_var = g.op.Add(g.op.Mul(m, g.cast(unbiased, dtype)), g.op.Mul(keep, running_var))
    return new_mean, new_var


@translation(aten._native_batch_norm_legit_functional.default)
def batch_norm_legit_functional(g: RuleContext, x: ir.Value, weight: ir.Value | None,
                                bias: ir.Value | None, running_mean: ir.Value,
                                running_var: ir.Value, training: bool, momentum: float,
                                eps: float) -> tuple[Any, ...]:
    """_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)"""
    if not training:
        out = batch_norm_inference(g, x, weight, bias, running_mean, running_var, momentum,
                                   eps)
        return (*out, g.op.Identity(running_mean), g.op.Identity(running_var))
    warn_running_stats(g)
    out, mean, invstd = _batch_norm_batch_stats(g, x, weight, bias, eps)
    new_mean, new_var = _updated_stats(g, x, mean, invstd, running_mean, running_var,
                                       momentum, eps)
    return out, mean, invstd, new_mean, new_var


def _reserve(g: RuleContext) -> ir.Value:
    """The empty uint8 ``reserve`` output (cuDNN's workspace; empty on CPU)."""
    return g.const(torch.zeros(0, dtype=torch_dtype(ir.DataType.UINT8)))


@translation(aten._batch_norm_with_update_functional.default)
def batch_norm_with_update_functional(g: RuleContext, x: ir.Value, weight: ir.Value | None,
                                      bias: ir.Value | None, running_mean: ir.Value,
                                      running_var: ir.Value, momentum: float,
                                      eps: float) -> tuple[Any, ...]:
    """_batch_norm_with_update_functional(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)"""
    out, mean, invstd, new_mean, new_var = batch_norm_legit_functional(
        g, x, weight, bias, running_mean, running_var, True, momentum, eps)
    return out, mean, invstd, _reserve(g), new_mean, new_var


@translation(aten._batch_norm_with_update.default)
def batch_norm_with_update(g: RuleContext, x: ir.Value, weight: ir.Value | None,
                           bias: ir.Value | None, running_mean: ir.Value,
                           running_var: ir.Value, momentum: float,
                           eps: float) -> tuple[Any, ...]:
    """_batch_norm_with_update(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean, Tensor(b!) running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor, Tensor)"""
    warn_running_stats(g)
    out, mean, invstd = _batch_norm_batch_stats(g, x, weight, bias, eps)
    return out, mean, invstd, _reserve(g)
