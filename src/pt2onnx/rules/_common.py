"""Helpers shared by rule families."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, dtype_of, onnx_dtype, torch_dtype

aten = torch.ops.aten
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def present(*names: str) -> list[Any]:
    """The ATen overloads ("cholesky.default") this torch has; the others are left out.

    For rules of ops a torch release removed or has not added yet (aten.cholesky is
    gone in torch 2.14): ``@translation(present("cholesky.default"))``."""
    found = []
    for name in names:
        packet_name, overload = name.split(".")
        packet = getattr(aten, packet_name, None)
        op = getattr(packet, overload, None) if packet is not None else None
        if op is not None:
            found.append(op)
    return found


def operand(g: RuleContext, x: Any, dtype: ir.DataType) -> ir.Value:
    """A tensor value or a Python scalar, as a value of ``dtype``."""
    if isinstance(x, ir.Value):
        return g.cast(x, dtype)
    if isinstance(x, (torch.SymInt, torch.SymFloat)):
        raise TypeError("symbolic scalars must arrive as values")
    return g.const(x, dtype)


def _representative(x: Any) -> Any:
    if isinstance(x, ir.Value):
        shape = (1,) if x.shape is None or len(x.shape) else ()
        return torch.empty(shape, dtype=torch_dtype(dtype_of(x)))
    return x


def result_dtype(a: Any, b: Any) -> ir.DataType:
    """torch's type promotion of two operands (values or Python scalars)."""
    return onnx_dtype(torch.result_type(_representative(a), _representative(b)))


def axes(g: RuleContext, dims: Any) -> ir.Value:
    if isinstance(dims, int):
        dims = [dims]
    return g.const([int(d) for d in dims], ir.DataType.INT64)


def normalize_dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def rank(x: ir.Value) -> int:
    assert x.shape is not None, f"rank of {x.name} is unknown"
    return len(x.shape)


def shape_list(x: ir.Value) -> list[Any]:
    assert x.shape is not None
    return list(x.shape)


def static_dims(x: ir.Value) -> list[int] | None:
    """x's dims when every one is a known int, else None."""
    if x.shape is None or not all(isinstance(d, int) for d in x.shape):
        return None
    return list(x.shape.numpy())


def static_dim(x: ir.Value, axis: int) -> int:
    """Dim ``axis`` of x, which the rule needs as a known int."""
    d = shape_list(x)[axis]
    if not isinstance(d, int):
        raise ValueError(f"dim {axis} of {x.name} is not static ({d})")
    return d


def is_float(dtype: ir.DataType | None) -> bool:
    return dtype in (
        ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE
    )


def shape_value(g: RuleContext, sizes: Any) -> ir.Value:
    """A 1-D int64 shape value: from the node's static output shape when known."""
    static = g.static_shape()
    if static is not None:
        return g.const(list(static), ir.DataType.INT64)
    return g.int_list(list(sizes))
