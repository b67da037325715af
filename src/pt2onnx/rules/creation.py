"""Factory ops: arange, full, zeros/ones-like, scalar_tensor, empty."""

from __future__ import annotations

import functools
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


@translation(aten.fill.Tensor)
def fill_tensor(g: RuleContext, x: ir.Value, value: ir.Value) -> ir.Value:
    """fill.Tensor(Tensor self, Tensor value) -> Tensor"""
    # value is 0-d; fill_ casts it to self's dtype (x[:, 0] = t writes this way).
    return g.op.Expand(g.cast(value, g.dtype), _like_shape(g, x))


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
    if _integral(dtype) and any(_fractional(a) for a in (start, end, step)) and \
            _length_from_floats(torch_dtype(dtype)):
        # An integer arange takes its length from the float arguments, ceil((end - start)
        # / step), and its values from them truncated: arange(2, 8.5, 1.5, dtype=int64) is
        # [2, 3, 4, 5, 6] on torch 2.14 (Range over the truncated 2, 8, 1 gives 6, which
        # is what torch 2.13 returns for int64, though not for int32).
        d = ir.DataType.DOUBLE
        i64 = ir.DataType.INT64
        span = g.op.Div(g.op.Sub(operand(g, end, d), operand(g, start, d)), operand(g, step, d))
        count = g.op.Max(g.op.Cast(g.op.Ceil(span), to=i64), g.const(0, i64))
        steps = g.op.Range(g.const(0, i64), count, g.const(1, i64))
        out = g.op.Add(operand(g, start, i64), g.op.Mul(steps, operand(g, step, i64)))
        return out if dtype == i64 else g.op.Cast(out, to=dtype)
    return g.op.Range(operand(g, start, dtype), operand(g, end, dtype), operand(g, step, dtype))


@functools.cache
def _length_from_floats(dtype: torch.dtype) -> bool:
    """Whether this torch's arange in ``dtype`` counts its length from the float
    arguments rather than from them truncated (it differs by release and by dtype)."""
    return len(torch.arange(0.5, 2.0, 1.5, dtype=dtype)) == 1


def _integral(dtype: ir.DataType) -> bool:
    return dtype.is_integer() and dtype != ir.DataType.BOOL


def _fractional(x: Any) -> bool:
    """A float argument that may not be a whole number: a Python float with a fraction,
    or a float value in the graph (a SymFloat)."""
    if isinstance(x, ir.Value):
        return x.dtype is not None and x.dtype.is_floating_point()
    return isinstance(x, float) and not x.is_integer()
