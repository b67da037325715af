"""Ops that models written for torch.onnx still reach: ``conv_tbc`` (fairseq),
``_convolution`` (the pre-2.0 convolution entry point, all its backend flags) and
``repeat_interleave`` with a tensor of repeats."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules import nn as nn_rules
from pt2onnx.rules._common import aten, rank


@translation(aten.conv_tbc.default)
def conv_tbc(g: RuleContext, x: ir.Value, weight: ir.Value, bias: ir.Value,
             pad: int = 0) -> ir.Value:
    """conv_tbc(Tensor self, Tensor weight, Tensor bias, int pad=0) -> Tensor"""
    # x is (time, batch, in), weight (kernel, in, out): a 1-D cross-correlation over time,
    # as Conv on (batch, in, time) with the weight as (out, in, kernel).
    xs = g.op.Transpose(x, perm=[1, 2, 0])
    ws = g.op.Transpose(weight, perm=[2, 1, 0])
    kernel = weight.shape[0] if weight.shape is not None else None
    if not isinstance(kernel, int):
        raise NotImplementedError("conv_tbc with a kernel size that is not static")
    y = g.op.Conv(xs, ws, bias, pads=[int(pad), int(pad)], kernel_shape=[kernel])
    return g.op.Transpose(y, perm=[2, 0, 1])


@translation([aten._convolution.default, aten._convolution.deprecated])
def convolution_legacy(g: RuleContext, x: ir.Value, weight: ir.Value, bias: ir.Value | None,
                       stride: list[int], padding: list[int], dilation: list[int],
                       transposed: bool, output_padding: list[int], groups: int,
                       *_backend_flags: Any) -> ir.Value:
    """_convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, bool benchmark, bool deterministic, bool cudnn_enabled, bool allow_tf32) -> Tensor"""
    # benchmark, deterministic, cudnn_enabled and allow_tf32 choose a backend kernel,
    # not the result.
    return nn_rules.convolution(g, x, weight, bias, stride, padding, dilation, transposed,
                                output_padding, groups)


@translation(aten.repeat_interleave.Tensor)
def repeat_interleave_tensor(g: RuleContext, repeats: ir.Value, *,
                             output_size: Any = None) -> ir.Value:
    """repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor"""
    # Output position p holds the number of running totals of repeats at or below p
    # (searchsorted(cumsum(repeats), p, right=True)), which skips the zero repeats.
    # output_size, when given, equals sum(repeats) (torch requires it), so the sum
    # is used either way.
    if rank(repeats) != 1:
        raise NotImplementedError("repeat_interleave needs 1-D repeats")
    reps = g.cast(repeats, ir.DataType.INT64)
    zero = g.const(0, ir.DataType.INT64)
    totals = g.op.CumSum(reps, zero)
    total = g.op.ReduceSum(reps, keepdims=0)
    positions = g.op.Range(zero, total, g.const(1, ir.DataType.INT64))
    hits = g.op.LessOrEqual(g.op.Unsqueeze(totals, g.const([0])),
                            g.op.Unsqueeze(positions, g.const([1])))
    index = g.op.ReduceSum(g.cast(hits, ir.DataType.INT64), g.const([1]), keepdims=0)
    return g.cast(index, g.dtype)
