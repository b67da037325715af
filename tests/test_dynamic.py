"""Export once, run at many shapes: symbolic dims carry the user's names."""

from __future__ import annotations

import onnx
import pytest
import torch
from torch import nn
from torch.export import Dim

import pt2onnx
from pt2onnx.examples import tiny_resnet, tiny_transformer


def _dims(values):
    return [[d if isinstance(d, int) else str(d) for d in v.shape] for v in values]


def test_cnn_over_batch_and_image_size(tmp_path):
    model, (x,) = tiny_resnet()
    shapes = {"x": {0: Dim("batch", max=64), 2: Dim("height", min=16, max=512),
                    3: Dim("width", min=16, max=512)}}
    prog = pt2onnx.export(model, (x,), tmp_path / "cnn.onnx", dynamic_shapes=shapes)
    onnx.checker.check_model(str(tmp_path / "cnn.onnx"), full_check=True)
    assert _dims(prog.model.graph.inputs) == [["batch", 3, "height", "width"]]
    assert _dims(prog.model.graph.outputs) == [["batch", 10]]
    for shape in [(1, 3, 32, 32), (5, 3, 64, 48), (3, 3, 24, 40)]:
        assert prog.verify(torch.randn(*shape)).ok, shape
    assert prog.report.dynamic_dims["height"] == "[16, 512]"


def test_torch_onnx_style_dynamic_axes(tmp_path):
    model, (ids, mask) = tiny_transformer()
    prog = pt2onnx.export(
        model, (ids, mask), tmp_path / "t.onnx",
        input_names=["input_ids", "attention_mask"], output_names=["logits"],
        dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                      "attention_mask": {0: "batch", 1: "sequence"}, "logits": {0: "batch"}},
    )
    assert _dims(prog.model.graph.inputs) == [["batch", "sequence"], ["batch", "sequence"]]
    assert [v.name for v in prog.model.graph.outputs] == ["logits"]
    assert _dims(prog.model.graph.outputs) == [["batch", 4]]
    for b, s in [(1, 3), (4, 16), (3, 40)]:
        mask = torch.ones(b, s)
        mask[0, s // 2:] = 0
        assert prog.verify(torch.randint(0, 1000, (b, s)), mask).ok, (b, s)


def test_dynamic_axes_list_form_names_dims_after_the_input():
    prog = pt2onnx.export(nn.Linear(4, 2), (torch.randn(3, 4),), input_names=["x"],
                          dynamic_axes={"x": [0]})
    assert _dims(prog.model.graph.inputs) == [["x_dim0", 4]]
    assert prog.verify(torch.randn(7, 4)).ok


def test_derived_dims_are_expressions():
    class Double(nn.Module):
        def forward(self, x):
            return torch.cat([x, x], dim=0)

    prog = pt2onnx.export(Double(), (torch.randn(3, 2),),
                          dynamic_shapes={"x": {0: Dim("n")}})
    assert _dims(prog.model.graph.outputs) == [["2*n", 2]]
    assert prog.verify(torch.randn(5, 2)).ok


def test_symint_arithmetic_becomes_shape_ops():
    class Shapes(nn.Module):
        def forward(self, x):
            b, s = x.shape[0], x.shape[1]
            y = x.reshape(b * s, -1)
            idx = torch.arange(s * 2 - 1)
            return y, idx, x.new_zeros(b, s // 2)

    prog = pt2onnx.export(Shapes(), (torch.randn(2, 6, 3),),
                          dynamic_shapes={"x": {0: Dim("b"), 1: Dim("s", min=4)}})
    hist = prog.report.op_histogram
    assert "Shape" in hist or "Size" in hist
    for shape in [(1, 4, 3), (3, 7, 3), (4, 10, 3)]:
        assert prog.verify(torch.randn(*shape)).ok, shape


def test_specialised_dim_error_names_the_dim(tmp_path):
    class Fixed(nn.Module):
        def forward(self, x):
            return x.view(4, -1)

    with pytest.raises(pt2onnx.CaptureError) as info:
        pt2onnx.export(Fixed(), (torch.randn(4, 3),), tmp_path / "m.onnx",
                       dynamic_shapes={"x": {0: Dim("batch")}})
    assert "batch" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_unknown_dynamic_shapes_key():
    with pytest.raises(pt2onnx.InvalidInputError, match="not inputs"):
        pt2onnx.export(nn.ReLU(), (torch.randn(2),), dynamic_shapes={"y": {0: Dim("n")}})
