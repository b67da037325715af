"""Random ops: rand, randn, randperm, dropout. Values differ from torch's generator."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from pt2onnx._builder import RuleContext
from pt2onnx._registry import translation
from pt2onnx.rules._common import aten, shape_value

# RandomUniform / RandomNormal produce float16, float and double only.
_RANDOM_TYPES = frozenset({ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE})


def _random(g: RuleContext, kind: str, size: list[Any]) -> ir.Value:
    dtype = g.dtype
    work = dtype if dtype in _RANDOM_TYPES else ir.DataType.FLOAT
    static = g.static_shape()
    if static is not None:
        out = getattr(g.op, kind)(dtype=work, shape=list(static))
    else:
        zeros = g.op.ConstantOfShape(shape_value(g, size))
        out = getattr(g.op, f"{kind}Like")(zeros, dtype=work)
    return g.cast(out, dtype)


@translation(aten.rand.default)
def rand(g: RuleContext, size: list[Any], **_: Any) -> ir.Value:
    """rand(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _random(g, "RandomUniform", size)


@translation(aten.randn.default)
def randn(g: RuleContext, size: list[Any], **_: Any) -> ir.Value:
    """randn(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _random(g, "RandomNormal", size)


@translation(aten.bernoulli.p)
def bernoulli_p(g: RuleContext, x: ir.Value, p: float = 0.5, **_: Any) -> ir.Value:
    """bernoulli.p(Tensor self, float p=0.5, *, Generator? generator=None) -> Tensor"""
    work = ir.DataType.DOUBLE if x.dtype == ir.DataType.DOUBLE else ir.DataType.FLOAT
    uniform = g.op.RandomUniformLike(x, dtype=work)
    return g.cast(g.op.Less(uniform, g.const(float(p), work)), g.dtype)


@translation(aten.randperm.default)
def randperm(g: RuleContext, n: Any, **_: Any) -> ir.Value:
    """randperm(SymInt n, *, ScalarType? dtype=long, ...) -> Tensor"""
    count = g.const([int(n)]) if isinstance(n, int) else g.op.Reshape(n, g.const([1]))
    keys = g.op.RandomUniformLike(g.op.ConstantOfShape(count), dtype=ir.DataType.FLOAT)
    # The order that sorts i.i.d. uniform keys is a uniformly random permutation.
    _, order = g.op.TopK(keys, count, axis=0, _outputs=2)
    return g.cast(order, g.dtype)


@translation(aten.native_dropout.default)
def native_dropout(g: RuleContext, x: ir.Value, p: float,
                   train: bool | None) -> tuple[ir.Value, ir.Value]:
    """native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)"""
    if not train or p == 0:
        mask = g.op.Expand(g.const(True), g.op.Shape(x))
        return g.op.Identity(x), mask
    if p >= 1:
        zeros = g.op.Mul(x, g.const(0.0, x.dtype))
        return zeros, g.op.Cast(zeros, to=ir.DataType.BOOL)
    out, mask = g.op.Dropout(x, g.const(float(p), x.dtype), g.const(True), _outputs=2)
    return out, mask
