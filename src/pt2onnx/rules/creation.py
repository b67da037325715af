"""Factory ops: arange, full, zeros/ones-like, scalar_tensor, empty."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, torch_dtype, translation
from pt2onnx.rules._common import aten, operand, shape_value


def _fill(g: RuleContext, shape: ir.Value, value: Any) -> ir.Value:
    dtype = g.dtype
    if isinstance(value, ir.Value):
        return g.op.Expand(g.cast(value, dtype), shape)
    scalar = torch.tensor([value], dtype=torch_dtype(dtype))
    return g.op.ConstantOfShape(shape, value=ir.tensor_adapters.TorchTensor(scalar))


@translation(aten.full.default)
def full(g: RuleContext, size: list[Any], fill_value: Any, **_: Any) -> ir.Value:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(g, shape_value(g, size), fill_value)


@translation([aten.empty.memory_format, aten.zeros.default])
def empty(g: RuleContext, size: list[Any], **_: Any) -> ir.Value:
    """empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(g, shape_value(g, size), 0)


@translation(aten.ones.default)
def ones(g: RuleContext, size: list[Any], **_: Any) -> ir.Value:
    """ones(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(g, shape_value(g, size), 1)


@translation(aten.empty_strided.default)
def empty_strided(g: RuleContext, size: list[Any], stride: list[Any], **_: Any) -> ir.Value:
    """empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(g, shape_value(g, size), 0)


@translation(aten.empty_permuted.default)
def empty_permuted(g: RuleContext, size: list[Any], physical_layout: list[int],
                   **_: Any) -> ir.Value:
    """empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype=None, ...) -> Tensor"""
    # empty_like of a symbolically shaped tensor decomposes to this; the layout is
    # only the memory order, invisible in ONNX.
    return _fill(g, shape_value(g, size), 0)


def _like_shape(g: RuleContext, x: ir.Value) -> ir.Value:
    static = g.static_shape()
    return g.const(list(static)) if static is not None else g.op.Shape(x)


@translation(aten.full_like.default)
def full_like(g: RuleContext, x: ir.Value, fill_value: Any, **_: Any) -> ir.Value:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(g, _like_shape(g, x), fill_value)


@translation([aten.zeros_like.default, aten.empty_like.default, aten.zero.default])
def zeros_like(g: RuleContext, x: ir.Value, **_: Any) -> ir.Value:
    """zeros_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor; zero(Tensor self) -> Tensor"""
    return _fill(g, _like_shape(g, x), 0)


@translation(aten.ones_like.default)
def ones_like(g: RuleContext, x: ir.Value, **_: Any) -> ir.Value:
    """ones_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(g, _like_shape(g, x), 1)


@translation(aten.fill.Scalar)
def fill(g: RuleContext, x: ir.Value, value: Any) -> ir.Value:
    """fill.Scalar(Tensor self, Scalar value) -> Tensor"""
    return _fill(g, _like_shape(g, x), value)


@translation(aten.scalar_tensor.default)
def scalar_tensor(g: RuleContext, s: Any, **_: Any) -> ir.Value:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, ...) -> Tensor"""
    return g.op.Reshape(operand(g, s, g.dtype), g.const([], ir.DataType.INT64))


@translation([aten.arange.start_step, aten.arange.default, aten.arange.start])
def arange(g: RuleContext, *args: Any, **_: Any) -> ir.Value:
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, ...) -> Tensor"""
    values = [a for a in args if a is not None]
    start, end, step = (0, values[0], 1) if len(values) == 1 else (
        values[0], values[1], values[2] if len(values) > 2 else 1)
    dtype = g.dtype
    return g.op.Range(operand(g, start, dtype), operand(g, end, dtype), operand(g, step, dtype))
