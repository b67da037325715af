"""Debugging tools: as_output, annotate, save_testcase, strip/unstrip, verify(bisect=True)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from onnx import numpy_helper
from torch import nn

import pt2onnx


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 64)
        self.b = nn.Linear(64, 3)

    def forward(self, x):
        h = pt2onnx.as_output(torch.relu(self.a(x)), "hidden")
        with pt2onnx.annotate(stage="head", owner="me"):
            y = self.b(h)
            with pt2onnx.annotate(stage="scale"):
                y = y * 2
        return y + 1  # the line verify(bisect=True) must name


X = torch.randn(5, 4)


def test_as_output_adds_a_named_graph_output_and_is_identity_in_eager(tmp_path):
    model = Net().eval()
    prog = pt2onnx.export(model, (X,), tmp_path / "m.onnx")
    assert [v.name for v in prog.model.graph.outputs] == ["output", "hidden"]
    onnx.checker.check_model(str(tmp_path / "m.onnx"), full_check=True)
    out, hidden = prog.run(X)
    torch.testing.assert_close(torch.from_numpy(hidden), torch.relu(model.a(X)))
    torch.testing.assert_close(torch.from_numpy(out), model(X))
    assert prog.verify(X).ok  # the extra output is not compared with eager's outputs


def test_as_output_of_an_input_and_of_a_returned_value():
    class M(nn.Module):
        def forward(self, x):
            pt2onnx.as_output(x, "the_input")
            return pt2onnx.as_output(x + 1, "also_returned")

    prog = pt2onnx.export(M(), (X,))
    assert [v.name for v in prog.model.graph.outputs] == ["output", "the_input",
                                                           "also_returned"]
    out, same_x, same_out = prog.run(X)
    np.testing.assert_allclose(same_x, X.numpy())
    np.testing.assert_allclose(same_out, out)


def test_annotate_reaches_every_node_in_the_block_and_nests():
    prog = pt2onnx.export(Net().eval(), (X,))
    by_op = {}
    for node in prog.model.graph:
        by_op.setdefault(node.op_type, []).append(dict(node.metadata_props))
    first_gemm, second_gemm = by_op["Gemm"]
    assert "stage" not in first_gemm and "stage" not in by_op["Relu"][0]
    assert second_gemm["stage"] == "head" and second_gemm["owner"] == "me"
    assert by_op["Mul"][0]["stage"] == "scale" and by_op["Mul"][0]["owner"] == "me"
    assert "stage" not in by_op["Add"][0]


def test_save_testcase_writes_the_backend_test_layout(tmp_path):
    model = Net().eval()
    prog = pt2onnx.export(model, (X,))
    prog.save_testcase(tmp_path / "case")
    data = tmp_path / "case" / "test_data_set_0"
    assert sorted(p.name for p in data.iterdir()) == ["input_0.pb", "output_0.pb",
                                                       "output_1.pb"]
    proto = onnx.load(str(tmp_path / "case" / "model.onnx"))
    onnx.checker.check_model(proto, full_check=True)

    def read(name):
        t = onnx.TensorProto()
        t.ParseFromString((data / name).read_bytes())
        return t.name, numpy_helper.to_array(t)

    name, x = read("input_0.pb")
    assert name == "x"
    np.testing.assert_array_equal(x, X.numpy())
    session = ort.InferenceSession(str(tmp_path / "case" / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, {name: x})
    for i, actual in enumerate(got):
        out_name, expected = read(f"output_{i}.pb")
        assert out_name == session.get_outputs()[i].name
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_strip_and_unstrip(tmp_path):
    model = nn.Sequential(nn.Linear(4, 300), nn.ReLU(), nn.Linear(300, 3)).eval()
    prog = pt2onnx.export(model, (X,))
    full = prog.save(tmp_path / "full.onnx")
    stripped = prog.save(tmp_path / "stripped.onnx", strip_weights=True)
    assert stripped.stat().st_size < full.stat().st_size - 4000  # 1200 float32 weights
    proto = onnx.load(str(stripped))
    records = {i.name: {p.key: p.value for p in i.metadata_props}
               for i in proto.graph.initializer if i.metadata_props}
    assert len(records) == 1  # 1200 floats: stripped; 900 and the biases stay
    (name, rec), = records.items()
    weight = model[0].weight.detach().double()
    assert rec["shape"] in ("300x4", "4x300") and rec["dtype"] == "float32"
    assert float(rec["mean"]) == pytest.approx(weight.mean().item(), rel=1e-6)
    assert float(rec["std"]) == pytest.approx(weight.std(unbiased=False).item(), rel=1e-6)
    stripped_init = next(i for i in proto.graph.initializer if i.name == name)
    assert not stripped_init.raw_data and not stripped_init.float_data

    restored = pt2onnx.unstrip(stripped, tmp_path / "restored.onnx")
    back = onnx.load(str(restored))
    onnx.checker.check_model(back, full_check=True)
    w = next(numpy_helper.to_array(i) for i in back.graph.initializer if i.name == name)
    assert "x".join(map(str, w.shape)) == rec["shape"] and w.dtype == np.float32
    assert w.min() >= float(rec["min"]) and w.max() <= float(rec["max"])
    assert abs(w.mean() - float(rec["mean"])) < 0.05
    session = ort.InferenceSession(str(restored), providers=["CPUExecutionProvider"])
    out = session.run(None, {session.get_inputs()[0].name: X.numpy()})
    assert out[0].shape == (5, 3) and np.isfinite(out[0]).all()
    with pytest.raises(pt2onnx.InvalidInputError, match="no stripped weights"):
        pt2onnx.unstrip(full, tmp_path / "again.onnx")


def test_bisect_names_the_node_of_a_wrong_custom_rule():
    def wrong_add(g, a, b, alpha=1):
        b = b if isinstance(b, ir.Value) else g.const(float(b))
        return g.op.Sub(a, b)  # deliberately wrong

    model = Net().eval()
    prog = pt2onnx.export(model, (X,),
                          custom_translations={torch.ops.aten.add.Tensor: wrong_add})
    result = prog.verify(X, bisect=True)
    assert not result.ok
    found = result.divergence
    assert found is not None
    assert found.op == "aten::add.Tensor" and found.rule.endswith("wrong_add")
    assert "return y + 1  # the line verify(bisect=True) must name" in found.source
    assert found.max_abs_error > found.tolerance
    assert "first divergence" in str(result) and found.node in str(result)


def test_bisect_is_not_run_when_outputs_match():
    result = pt2onnx.export(Net().eval(), (X,)).verify(X, bisect=True)
    assert result.ok and result.divergence is None and not result.bisected
