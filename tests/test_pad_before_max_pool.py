"""passes/pad_before_max_pool.py: a zero Pad before a MaxPool stays right under
onnxruntime's default optimizations (its PadFusion pads with -inf instead)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F

import pt2onnx


class PadPool(torch.nn.Module):
    def __init__(self, value: float = 0.0) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.value = value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x) - 5.0  # mostly negative: the border windows see the pad value
        return F.max_pool2d(F.pad(y, (1, 1, 1, 1), value=self.value), 3, 2)


def _max_error(path, model, x, level):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = level
    session = ort.InferenceSession(str(path), opts)
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    with torch.no_grad():
        return float(np.abs(got - model(x).numpy()).max())


@pytest.mark.parametrize("value", [0.0, -1.0])
@pytest.mark.parametrize("batch", [1, 3])
def test_zero_pad_then_max_pool_under_default_optimizations(tmp_path, value, batch):
    model = PadPool(value).eval()
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, (torch.randn(2, 3, 16, 16),), path, input_names=["x"],
                          dynamic_axes={"x": {0: "b"}})
    ops = [n.op_type for n in prog.model.graph]
    assert ops[-4:] == ["Unsqueeze", "Pad", "Squeeze", "MaxPool"], ops
    x = torch.randn(batch, 3, 16, 16)
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                  ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                  ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        assert _max_error(path, model, x, level) < 1e-4, level


def test_pad_before_another_op_is_left_alone():
    class PadConv(torch.nn.Module):
        def forward(self, x):
            return F.pad(x, (1, 1, 1, 1)) * 2

    prog = pt2onnx.export(PadConv(), (torch.randn(1, 3, 8, 8),))
    assert [n.op_type for n in prog.model.graph] == ["Pad", "Mul"]


def test_bit_stem(tmp_path):
    """transformers' BiT pads its stem Conv's output with zeros before the MaxPool."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BitConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                 num_groups=4)  # preactivation: Conv -> Pad -> MaxPool
    model = transformers.BitModel(cfg).eval()
    x = torch.randn(1, 3, 32, 32)
    path = tmp_path / "bit.onnx"
    pt2onnx.export(model, (x,), path)
    session = ort.InferenceSession(str(path))
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        expected = model(x)
    assert float(np.abs(got[0] - expected.last_hidden_state.numpy()).max()) < 1e-3
