"""Saving: inline and external data, atomic writes, reloading."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
import torch
from torch import nn

import pt2onnx
from pt2onnx.save import _save


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 128)
        self.b = nn.Linear(128, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_external_data_is_written_beside_the_model(tmp_path):
    path = tmp_path / "mlp.onnx"
    x = torch.randn(3, 64)
    prog = pt2onnx.export(Mlp().eval(), (x,), path, external_data=True)
    data = tmp_path / "mlp.onnx.data"
    assert data.exists() and data.stat().st_size >= (64 * 128 + 128 * 8) * 4
    assert sorted(os.listdir(tmp_path)) == ["mlp.onnx", "mlp.onnx.data"]
    onnx.checker.check_model(str(path), full_check=True)
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(got, prog.run(x)[0], rtol=1e-6, atol=1e-6)
    # The in-memory model still holds its real weights after the save.
    assert prog.verify(x).ok


def test_inline_save_removes_stale_external_data(tmp_path):
    path = tmp_path / "mlp.onnx"
    pt2onnx.export(Mlp().eval(), (torch.randn(3, 64),), path, external_data=True)
    pt2onnx.export(Mlp().eval(), (torch.randn(3, 64),), path, external_data=False)
    assert sorted(os.listdir(tmp_path)) == ["mlp.onnx"]


def test_auto_external_threshold(monkeypatch, tmp_path):
    monkeypatch.setattr(_save, "EXTERNAL_DATA_AUTO_BYTES", 1000)
    pt2onnx.export(Mlp().eval(), (torch.randn(3, 64),), tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx.data").exists()


def test_failed_write_leaves_nothing(monkeypatch, tmp_path):
    def boom(*args, **kwargs):
        raise OSError("disk full")

    prog = pt2onnx.export(Mlp().eval(), (torch.randn(3, 64),))
    monkeypatch.setattr(_save.ir, "to_proto", boom)
    with pytest.raises(OSError, match="disk full"):
        prog.save(tmp_path / "m.onnx", external_data=True)
    assert os.listdir(tmp_path) == []


def test_model_proto_and_bfloat16_weights(tmp_path):
    model = Mlp().eval().to(torch.bfloat16)
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    prog = pt2onnx.export(model, (x,), tmp_path / "bf16.onnx", external_data=True)
    proto = prog.model_proto
    assert proto.graph.initializer[0].data_type == onnx.TensorProto.BFLOAT16
    onnx.checker.check_model(str(tmp_path / "bf16.onnx"), full_check=True)
    loaded = onnx.load(str(tmp_path / "bf16.onnx"))
    from onnx import numpy_helper

    w = {i.name: i for i in loaded.graph.initializer}["a.weight"]
    got = torch.from_numpy(numpy_helper.to_array(w).astype(np.float32))
    assert torch.equal(got, model.a.weight.float())


def test_transposed_weights_are_written_in_blocks(tmp_path):
    import io

    w = torch.randn(7, 13)
    buf = io.BytesIO()
    _save._write_transposed(buf, w, chunk_bytes=7 * 4 * 3)  # three rows of w.t() per block
    assert buf.getvalue() == w.t().contiguous().numpy().tobytes()
    buf = io.BytesIO()  # converted on the way, a block at a time (weights= in another dtype)
    _save._write_transposed(buf, w, chunk_bytes=7 * 2 * 3, dtype=torch.float16)
    assert buf.getvalue() == w.t().to(torch.float16).contiguous().numpy().tobytes()


def test_matmul_weights_through_external_data(tmp_path):
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
    x = torch.randn(2, 5, 16)  # 3-D input: MatMul with weights stored transposed
    prog = pt2onnx.export(model, (x,), tmp_path / "m.onnx", external_data=True)
    assert "MatMul" in prog.report.op_histogram
    onnx.checker.check_model(str(tmp_path / "m.onnx"), full_check=True)
    import onnxruntime as ort

    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
