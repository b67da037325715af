"""The same model and inputs give byte-identical .onnx files."""

from __future__ import annotations

import hashlib

import torch
from torch._higher_order_ops.while_loop import while_loop

import pt2onnx
from pt2onnx.examples import tiny_resnet, tiny_transformer


class Loop(torch.nn.Module):
    def forward(self, x, n):
        def cond_fn(i, acc):
            return i < n.sum()

        def body_fn(i, acc):
            return i + 1, acc.tanh() + x

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x * 0))


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_byte_identical_exports(tmp_path):
    cases = [tiny_resnet(), tiny_transformer(), (Loop(), (torch.randn(2, 3), torch.tensor(3)))]
    for i, (model, inputs) in enumerate(cases):
        a, b = tmp_path / f"{i}a.onnx", tmp_path / f"{i}b.onnx"
        pt2onnx.export(model, inputs, a)
        pt2onnx.export(model, inputs, b)
        assert _digest(a) == _digest(b), f"case {i} differs between two exports"


def test_byte_identical_external_data(tmp_path):
    model, inputs = tiny_transformer()
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    pt2onnx.export(model, inputs, a, external_data=True)
    pt2onnx.export(model, inputs, b, external_data=True)
    assert a.with_name("a.onnx.data").read_bytes() == b.with_name("b.onnx.data").read_bytes()
    # The model files differ only in the data file's name they point at.
    assert a.read_bytes().replace(b"a.onnx.data", b"b.onnx.data") == b.read_bytes()
