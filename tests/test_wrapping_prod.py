"""Integer ``prod`` wraps on overflow as eager does. onnxruntime's integer ReduceProd
saturates (int32 and int64, 1.31 and 1.32), which made a file silently differ from
eager on any product past the type's range; rules/reduction.py multiplies in a tree
of Muls instead."""

from __future__ import annotations

import warnings

import pytest
import torch

import pt2onnx


class _Prods(torch.nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return (x.prod(1), x.prod(0, keepdim=True), x.prod(), x.prod(-1, dtype=torch.int32),
                x.to(torch.int8).prod(1, dtype=torch.int8), (x > 0).prod(0))


def _export(dynamic: bool) -> pt2onnx.OnnxProgram:
    x = torch.tensor([[3_000_000_000, 5, 7, 3_000_000_001, 11], [2, 3, 4, 5, 6],
                      [0, 1, 2, 3, 4]])
    spec = ({0: torch.export.Dim("a"), 1: torch.export.Dim("b")},) if dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(_Prods(), (x,), dynamic_shapes=spec)
    assert prog.verify().ok  # the example's products overflow int64 and int32
    return prog


def test_static_products_wrap() -> None:
    prog = _export(False)
    assert "ReduceProd" not in [n.op_type for n in prog.model.graph]


@pytest.mark.parametrize("shape", [(1, 1), (4, 9), (2, 0), (0, 3), (1, 64), (3, 33)])
def test_dynamic_products_wrap(shape: tuple[int, int]) -> None:
    """A dynamic length runs the halving in a Loop; lengths 0 and 1, odd lengths, and an
    empty batch included."""
    prog = _export(True)
    g = torch.Generator().manual_seed(sum(shape))
    assert prog.verify(torch.randint(-90_000, 90_000, shape, generator=g)).ok
