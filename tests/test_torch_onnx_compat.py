"""Calls written for torch.onnx.export work with pt2onnx.export: every keyword has a
defined meaning or a warning, f may be a file object, and errors are torch.onnx's."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import pt2onnx
from pt2onnx.errors import ExportError, InvalidInputError, SaveError


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.drop = nn.Dropout(0.5)
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None,
                scale: float = 2.0) -> torch.Tensor:
        out = self.bn(self.drop(self.fc(x))) * scale
        return out if y is None else out + y


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [str(w.message) for w in caught]


def test_errors_are_torch_onnx_errors():
    assert issubclass(ExportError, torch.onnx.errors.OnnxExporterError)
    assert issubclass(InvalidInputError, TypeError) and issubclass(SaveError, OSError)
    with pytest.raises(torch.onnx.errors.OnnxExporterError, match="disagree"):
        pt2onnx.export(Net().eval(), (torch.randn(2, 4),), opset=17, opset_version=18)


def test_opset_version_is_an_alias():
    prog = pt2onnx.export(Net().eval(), (torch.randn(2, 4),), opset_version=18)
    assert prog.model.opset_imports[""] == 18


def test_misspelled_keyword_is_an_error():
    with pytest.raises(InvalidInputError, match="opset_verison"):
        pt2onnx.export(Net().eval(), (torch.randn(2, 4),), opset_verison=18)


def test_training_eval_exports_the_eval_graph_and_restores_the_mode():
    model = Net()  # left in training mode, as torch.onnx's default training=EVAL allows
    x = torch.randn(5, 4)
    prog = pt2onnx.export(model, (x,), training=torch.onnx.TrainingMode.EVAL)
    assert model.training and model.drop.training and model.bn.training
    ops = {n.op_type for n in prog.model.graph}
    assert not ops & {"Dropout", "RandomUniformLike", "Bernoulli"}, ops
    model.eval()
    expected = model(x).detach().numpy()
    np.testing.assert_allclose(prog.run(x)[0], expected, rtol=1e-5, atol=1e-5)
    model.train()
    assert prog.verify(x).ok  # the eager reference runs in the exported mode too


def test_export_params_false_makes_weights_inputs():
    model = Net().eval()
    x = torch.randn(2, 4)
    prog = pt2onnx.export(model, (x,), export_params=False)
    names = [v.name for v in prog.model.graph.inputs]
    # Parameters and buffers become inputs; constants the rules made stay in the file.
    assert names == ["x", "fc.weight", "fc.bias", "bn.weight", "bn.bias", "bn.running_mean",
                     "bn.running_var"]
    assert not set(names) & set(prog.model.graph.initializers)
    session = ort.InferenceSession(prog.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    state = model.state_dict()
    feeds = {"x": x.numpy(), **{name: state[name].numpy() for name in names[1:]}}
    np.testing.assert_allclose(session.run(None, feeds)[0], model(x).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_keep_initializers_as_inputs():
    model = Net().eval()
    x = torch.randn(2, 4)
    prog = pt2onnx.export(model, (x,), keep_initializers_as_inputs=True)
    graph = prog.model.graph
    weights = [v.name for v in graph.inputs[1:]]
    assert len(weights) == 6 and set(weights) <= set(graph.initializers)
    # Weights keep their values (defaults an input feed may override).
    session = ort.InferenceSession(prog.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0],
                               model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_custom_opsets_and_ignored_keywords_warn():
    prog, messages = _warnings_of(lambda: pt2onnx.export(
        Net().eval(), (torch.randn(2, 4),), custom_opsets={"com.example": 2},
        do_constant_folding=False, dynamo=False, autograd_inlining=True,
        operator_export_type=torch.onnx.OperatorExportTypes.ONNX))
    assert prog.model.opset_imports["com.example"] == 2
    assert any("do_constant_folding=False has no effect" in m for m in messages)
    assert any("dynamo=False has no effect" in m for m in messages)
    # torch.onnx's defaults say nothing.
    assert not any("autograd_inlining" in m or "operator_export_type" in m for m in messages)


def test_custom_translation_table_is_custom_translations():
    def relu(g, x):
        return g.op.Relu(x)

    prog = pt2onnx.export(nn.ReLU(), (torch.randn(3),),
                          custom_translation_table={torch.ops.aten.relu.default: relu})
    assert [n.op_type for n in prog.model.graph] == ["Relu"]


def test_verbose_prints_the_report(capsys):
    pt2onnx.export(Net().eval(), (torch.randn(2, 4),), verbose=True)
    assert "capture" in capsys.readouterr().err


def test_f_may_be_a_binary_file_object():
    model = Net().eval()
    x = torch.randn(2, 4)
    buf = io.BytesIO()
    pt2onnx.export(model, (x,), buf)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0],
                               model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(InvalidInputError, match="external_data"):
        pt2onnx.export(model, (x,), io.BytesIO(), external_data=True)


def test_dynamic_axes_keys_for_non_tensors_and_outputs_warn_or_pass():
    model = Net().eval()
    prog, messages = _warnings_of(lambda: pt2onnx.export(
        model, (torch.randn(2, 4),),
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}, "scale": [0],
                      "output": {0: "batch"}, "nothing": [0]}))
    assert any("'y' names an argument that is not a tensor (left at its default)" in m
               for m in messages)
    assert any("'scale' names an argument" in m for m in messages)
    assert any("'nothing' matches no input" in m for m in messages)
    assert not any("'output'" in m for m in messages)
    assert not isinstance(prog.model.graph.inputs[0].shape[0], int)
    assert prog.verify(torch.randn(7, 4)).ok
    with pytest.raises(InvalidInputError, match="match no input"):
        pt2onnx.export(model, (torch.randn(2, 4),), dynamic_axes={"nothing": [0]})
