"""Python-level arithmetic on SymInt/SymFloat/SymBool values (0-d ONNX tensors).

torch.export records size arithmetic as calls to ``operator.*`` and
``torch.sym_*``. With static shapes they are folded away; with dynamic
shapes each becomes a scalar ONNX op on values that come from ``Shape``.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, translation

_I64, _F, _B = ir.DataType.INT64, ir.DataType.FLOAT, ir.DataType.BOOL


def _kind(x: Any) -> ir.DataType:
    if isinstance(x, ir.Value):
        return x.dtype or _I64
    if isinstance(x, bool):
        return _B
    return _F if isinstance(x, float) else _I64


def _operands(g: RuleContext, *xs: Any) -> tuple[ir.DataType, list[ir.Value]]:
    kinds = {_kind(x) for x in xs}
    dtype = _F if _F in kinds or ir.DataType.DOUBLE in kinds else (_B if kinds == {_B} else _I64)
    vals = [g.cast(x, dtype) if isinstance(x, ir.Value) else g.const(x, dtype) for x in xs]
    return dtype, vals


def _compare(onnx_op: str, negate: bool = False):  # type: ignore[no-untyped-def]
    def rule(g: RuleContext, a: Any, b: Any) -> ir.Value:
        _, (va, vb) = _operands(g, a, b)
        out = getattr(g.op, onnx_op)(va, vb)
        return g.op.Not(out) if negate else out

    rule.__doc__ = f"SymInt comparison as ONNX {onnx_op}"
    return rule


for _fn, _onnx, _neg in ((operator.eq, "Equal", False), (operator.ne, "Equal", True),
                         (operator.lt, "Less", False), (operator.le, "LessOrEqual", False),
                         (operator.gt, "Greater", False), (operator.ge, "GreaterOrEqual", False)):
    translation(_fn)(_compare(_onnx, _neg))


def _arith(onnx_op: str):  # type: ignore[no-untyped-def]
    def rule(g: RuleContext, a: Any, b: Any) -> ir.Value:
        return getattr(g.op, onnx_op)(*_operands(g, a, b)[1])

    rule.__doc__ = f"SymInt/SymFloat arithmetic as ONNX {onnx_op}"
    return rule


for _fn, _onnx in ((operator.add, "Add"), (operator.sub, "Sub"), (operator.mul, "Mul")):
    translation(_fn)(_arith(_onnx))


@translation(operator.floordiv)
def floordiv(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """a // b with Python's rounding toward negative infinity."""
    dtype, (va, vb) = _operands(g, a, b)
    if dtype == _F:
        return g.op.Floor(g.op.Div(va, vb))
    return g.op.Div(g.op.Sub(va, g.op.Mod(va, vb, fmod=0)), vb)


@translation(operator.mod)
def mod(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """a % b with the sign of b, as in Python."""
    dtype, (va, vb) = _operands(g, a, b)
    if dtype == _F:
        return g.op.Sub(va, g.op.Mul(g.op.Floor(g.op.Div(va, vb)), vb))
    return g.op.Mod(va, vb, fmod=0)


@translation(operator.truediv)
def truediv(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """a / b, always a float."""
    return g.op.Div(*(g.cast(v, _F) for v in _operands(g, a, b)[1]))


@translation(operator.pow)
def pow_(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """a ** b"""
    dtype, (va, vb) = _operands(g, a, b)
    out = g.op.Pow(g.cast(va, _F), g.cast(vb, _F))
    return out if dtype == _F else g.op.Cast(g.op.Round(out), to=dtype)


@translation(operator.neg)
def neg(g: RuleContext, a: ir.Value) -> ir.Value:
    """-a"""
    return g.op.Neg(a)


@translation([operator.and_, operator.or_])
def logical(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """a & b, a | b on SymBools"""
    _, (va, vb) = _operands(g, a, b)
    assert g.node is not None
    return g.op.And(va, vb) if g.node.target is operator.and_ else g.op.Or(va, vb)


@translation([operator.not_, torch.sym_not])
def not_(g: RuleContext, a: ir.Value) -> ir.Value:
    """not a"""
    return g.op.Not(g.cast(a, _B))


@translation(torch.sym_max)
def sym_max(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """torch.sym_max(a, b)"""
    return g.op.Max(*_operands(g, a, b)[1])


@translation(torch.sym_min)
def sym_min(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """torch.sym_min(a, b)"""
    return g.op.Min(*_operands(g, a, b)[1])


@translation(torch.sym_float)
def sym_float(g: RuleContext, a: Any) -> ir.Value:
    """torch.sym_float(a)"""
    return g.cast(a, _F) if isinstance(a, ir.Value) else g.const(float(a), _F)


@translation([torch.sym_int, math.floor, math.trunc])
def sym_int(g: RuleContext, a: Any) -> ir.Value:
    """torch.sym_int(a): truncation toward zero (floor for math.floor)"""
    if not isinstance(a, ir.Value) or a.dtype == _I64:
        return a if isinstance(a, ir.Value) else g.const(int(a))
    assert g.node is not None
    if g.node.target is math.floor:
        return g.op.Cast(g.op.Floor(a), to=_I64)
    return g.op.Cast(g.op.Mul(g.op.Sign(a), g.op.Floor(g.op.Abs(a))), to=_I64)


@translation(math.ceil)
def ceil(g: RuleContext, a: Any) -> ir.Value:
    """math.ceil(a)"""
    return g.op.Cast(g.op.Ceil(g.cast(a, _F)), to=_I64)


@translation(round)
def round_(g: RuleContext, a: Any, ndigits: Any = None) -> ir.Value:
    """round(a): to the nearest integer, ties to even (Python's and ONNX Round's rule)"""
    if not isinstance(a, ir.Value):
        return g.const(round(a, ndigits)) if ndigits is not None else g.const(round(a))
    if ndigits is not None:  # round(a, n) stays a float: a * 10**n rounded, then scaled back
        scale = g.const(10.0 ** int(ndigits), _F)
        return g.op.Div(g.op.Round(g.op.Mul(g.cast(a, _F), scale)), scale)
    if a.dtype == _I64:
        return a
    return g.op.Cast(g.op.Round(a), to=_I64)


@translation(torch.sym_ite)
def sym_ite(g: RuleContext, cond: Any, a: Any, b: Any) -> ir.Value:
    """torch.sym_ite(cond, a, b)"""
    _, (va, vb) = _operands(g, a, b)
    return g.op.Where(g.cast(cond, _B) if isinstance(cond, ir.Value) else g.const(bool(cond)),
                      va, vb)


if hasattr(torch, "sym_sum"):

    @translation(torch.sym_sum)
    def sym_sum(g: RuleContext, args: list[Any]) -> ir.Value:
        """torch.sym_sum(args)"""
        _, vals = _operands(g, *args)
        return g.op.Sum(*vals)


def _unary_math(onnx_op: str):  # type: ignore[no-untyped-def]
    def rule(g: RuleContext, a: Any) -> ir.Value:
        x = g.cast(a, _F) if isinstance(a, ir.Value) else g.const(float(a), _F)
        if onnx_op == "Log2":
            return g.op.Div(g.op.Log(x), g.const(math.log(2.0), _F))
        return getattr(g.op, onnx_op)(x)

    rule.__doc__ = f"math function of a size (strict torch.export's torch._sym_*) as ONNX {onnx_op}"
    return rule


# Dynamo records math.sqrt(t + 1) and the like on a size as torch._sym_sqrt(...).
for _name, _onnx in (("sqrt", "Sqrt"), ("cos", "Cos"), ("cosh", "Cosh"), ("sin", "Sin"),
                     ("sinh", "Sinh"), ("tan", "Tan"), ("tanh", "Tanh"), ("asin", "Asin"),
                     ("acos", "Acos"), ("atan", "Atan"), ("log2", "Log2")):
    if hasattr(torch, f"_sym_{_name}"):
        translation(getattr(torch, f"_sym_{_name}"))(_unary_math(_onnx))
