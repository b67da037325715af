"""float64 building blocks shared by the special-function rules (rules/special.py,
rules/gamma.py, rules/float_bits.py).

The approximations run in float64 inside the graph (onnxruntime has float64 Exp, Log and
Sin, but Erf only in float32) and round once to the output dtype.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext

F64 = ir.DataType.DOUBLE


def _c(g: RuleContext, value: float) -> ir.Value:
    return g.const(float(value), F64)


def _poly(g: RuleContext, t: ir.Value, coeffs: list[float]) -> ir.Value:
    """Horner: coeffs[0] + t * (coeffs[1] + t * (...)), highest power last."""
    acc = _c(g, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = g.op.Add(_c(g, c), g.op.Mul(t, acc))
    return acc


def _in64(g: RuleContext, x: ir.Value) -> ir.Value:
    return g.cast(x, F64)
