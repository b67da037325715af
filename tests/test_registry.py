"""The registry: opset selection, overrides and per-call translations."""

from __future__ import annotations

import torch
from torch import nn

import pt2onnx
from pt2onnx.translate._registry import Registry

aten = torch.ops.aten


def test_highest_since_at_or_below_target_wins():
    reg = Registry()

    def old(g, x): ...
    def new(g, x): ...

    reg.register(aten.relu.default, old)
    reg.register(aten.relu.default, new, since=20)
    assert reg.lookup(aten.relu.default, 17).fn is old
    assert reg.lookup(aten.relu.default, 19).fn is old
    assert reg.lookup(aten.relu.default, 20).fn is new
    assert reg.lookup(aten.relu.default, 26).fn is new
    assert reg.lookup(aten.sigmoid.default, 26) is None


def test_gelu_uses_onnx_gelu_from_opset_20():
    model = nn.GELU()
    x = torch.randn(4, 8)
    low = pt2onnx.export(model, (x,), opset=19)
    high = pt2onnx.export(model, (x,), opset=20)
    assert "Gelu" not in low.report.op_histogram and "Erf" in low.report.op_histogram
    assert high.report.op_histogram == {"Gelu": 1}
    assert low.verify(x).ok and high.verify(x).ok
    assert low.model.opset_imports[""] == 19 and high.model.opset_imports[""] == 20


def test_custom_translations_apply_to_one_call_only():
    def relu_as_clip(g, x):
        return g.op.Clip(x, g.const(0.0), None)

    model = nn.ReLU()
    x = torch.randn(3)
    custom = pt2onnx.export(model, (x,), custom_translations={aten.relu.default: relu_as_clip})
    assert custom.report.op_histogram == {"Clip": 1}
    assert custom.verify(x).ok
    assert pt2onnx.export(model, (x,)).report.op_histogram == {"Relu": 1}


def test_public_decorator_registers_and_overrides():
    from pt2onnx.translate._registry import REGISTRY

    before = REGISTRY.lookup(aten.hardtanh.default, 21)
    try:
        @pt2onnx.translation(aten.hardtanh.default)
        def hardtanh_as_min_max(g, x, min_val=-1.0, max_val=1.0):
            return g.op.Min(g.op.Max(x, g.const(min_val)), g.const(max_val))

        x = torch.randn(10) * 3
        prog = pt2onnx.export(nn.Hardtanh(), (x,))
        assert set(prog.report.op_histogram) == {"Min", "Max"}
        assert prog.verify(x).ok
    finally:
        REGISTRY.register(aten.hardtanh.default, before.fn, before.since)
