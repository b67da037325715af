"""Bit shifts: ``<<`` / ``>>`` (``__lshift__``, ``__rshift__``, ``bitwise_left_shift``,
``bitwise_right_shift``), tensor and scalar forms, on every integer dtype.

ONNX ``BitShift`` is defined for unsigned integers only, so the shift runs in uint64:
the operand is widened to int64 (sign-extended), reinterpreted as uint64, shifted, and
narrowed back to the result dtype (the narrowing keeps the low bits, as C's shifts do). torch's
edge cases follow its CPU kernels:

- ``a << b`` is 0 when ``b`` is negative or at least the bit width of the dtype;
- ``a >> b`` on a signed dtype is an arithmetic shift (it rounds towards -inf); a
  negative ``b`` or one at least the bit width shifts by width - 1 (giving 0 or -1).
  A negative ``a`` is shifted as ``-1 - ((-1 - a) >> b)``: ``-1 - a`` is non-negative
  and never overflows, so the logical shift of it is exact.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, operand

_BITS = {
    ir.DataType.UINT8: 8, ir.DataType.INT8: 8, ir.DataType.INT16: 16, ir.DataType.UINT16: 16,
    ir.DataType.INT32: 32, ir.DataType.UINT32: 32, ir.DataType.INT64: 64,
    ir.DataType.UINT64: 64,
}
_SIGNED = {ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64}
_U64, _I64 = ir.DataType.UINT64, ir.DataType.INT64


def _logical_shift(g: RuleContext, a: ir.Value, amount: ir.Value, direction: str) -> ir.Value:
    """``a`` (int64, reinterpreted as uint64) shifted by ``amount`` (int64 in [0, 64)),
    reinterpreted back as int64."""
    out = g.op.BitShift(g.cast(a, _U64), g.cast(amount, _U64), direction=direction)
    return g.cast(out, _I64)


def _shift(direction: str, g: RuleContext, a: Any, b: Any) -> ir.Value:
    dtype = g.dtype
    bits = _BITS.get(dtype)
    if bits is None:
        raise NotImplementedError(
            f"bit shifts are defined on integer tensors only, not {dtype.name}; cast "
            "the operands to an integer dtype first")
    # Everything runs in int64 (onnxruntime lacks Where and comparisons on the narrow
    # integer types); the result is narrowed to the dtype at the end, keeping the low
    # bits as C's shifts do.
    x = g.cast(operand(g, a, dtype), _I64)
    s = g.cast(operand(g, b, dtype), _I64)
    zero = g.const(0, _I64)
    # Shift amounts outside [0, bits) are torch's special cases.
    outside = g.op.Or(g.op.Less(s, zero), g.op.GreaterOrEqual(s, g.const(bits, _I64)))
    if direction == "LEFT":
        shifted = _logical_shift(g, x, g.op.Where(outside, zero, s), "LEFT")
        return g.cast(g.op.Where(outside, zero, shifted), dtype)
    if dtype not in _SIGNED:
        shifted = _logical_shift(g, x, g.op.Where(outside, zero, s), "RIGHT")
        return g.cast(g.op.Where(outside, zero, shifted), dtype)
    amount = g.op.Where(outside, g.const(bits - 1, _I64), s)
    minus_one = g.const(-1, _I64)
    negative = g.op.Less(x, zero)
    magnitude = g.op.Where(negative, g.op.Sub(minus_one, x), x)  # -1 - x for x < 0
    shifted = _logical_shift(g, magnitude, amount, "RIGHT")
    return g.cast(g.op.Where(negative, g.op.Sub(minus_one, shifted), shifted), dtype)


for _ops, _dir in (
    ((aten.__lshift__.Tensor, aten.__lshift__.Scalar, aten.bitwise_left_shift.Tensor,
      aten.bitwise_left_shift.Tensor_Scalar, aten.bitwise_left_shift.Scalar_Tensor), "LEFT"),
    ((aten.__rshift__.Tensor, aten.__rshift__.Scalar, aten.bitwise_right_shift.Tensor,
      aten.bitwise_right_shift.Tensor_Scalar, aten.bitwise_right_shift.Scalar_Tensor),
     "RIGHT"),
):
    translation(list(_ops))(partial(_shift, _dir))
