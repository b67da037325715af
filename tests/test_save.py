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


def _mapped_rss_kb(path) -> int:
    """The resident kB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                inside = len(head) >= 6 and head[5] == str(path)
            elif inside and line.startswith("Rss:"):
                total += int(head[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux only: /proc/self/smaps")
def test_weights_mapped_from_a_file_are_handed_back_once_written(tmp_path):
    """A weight whose pages map a file (as from_pretrained's safetensors): the save
    reads it once, and its pages leave the process's resident set after it is
    written (save/_pages.py); the file and the tensor keep their values."""
    import onnxruntime as ort

    from pt2onnx.save import FilePages

    rows, cols = 1024, 2048  # 8 MB
    weights = tmp_path / "weights.bin"
    torch.randn(rows * cols).numpy().tofile(weights)
    mapped = torch.from_file(str(weights), shared=False, size=rows * cols).view(rows, cols)
    layer = nn.Linear(cols, rows, bias=False)
    with torch.no_grad():
        layer.weight = nn.Parameter(mapped, requires_grad=False)
    x = torch.randn(3, cols)
    want = layer(x).detach()  # reads every page
    if not FilePages().release(mapped):
        pytest.skip("the kernel did not take MADV_PAGEOUT (Linux before 5.4)")
    layer(x)
    before = _mapped_rss_kb(weights)
    assert before > 4096  # resident again after the forward
    prog = pt2onnx.export(layer, (x,), None, input_names=["x"])
    prog.save(tmp_path / "m.onnx", external_data=True)
    after = _mapped_rss_kb(weights)
    assert after < before / 2, (before, after)
    torch.testing.assert_close(layer(x).detach(), want)  # the tensor's values are kept
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], want.numpy(),
                               rtol=1e-4, atol=1e-4)
