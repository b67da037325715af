"""passes/transposed_matvec.py: a transposed matrix times a vector stays right under
onnxruntime's default optimizations (its transpose fusion drops the transpose there)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

import pt2onnx

_LEVELS = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
           ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
           ort.GraphOptimizationLevel.ORT_DISABLE_ALL)


class TransposedMatVec(torch.nn.Module):
    def __init__(self, half: bool = False) -> None:
        super().__init__()
        self.v = torch.nn.Parameter(torch.randn(4))
        self.half = half

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.mT.half().float() if self.half else x.mT  # (n, 4, 3) -> (n, 3, 4)
        return t @ self.v


def _errors(path, model, x):
    with torch.no_grad():
        expected = model(x).numpy()
    errors = []
    for level in _LEVELS:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = level
        session = ort.InferenceSession(str(path), opts)
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        assert got.shape == expected.shape
        errors.append(float(np.abs(got - expected).max(initial=0.0)))
    return errors


@pytest.mark.parametrize("half", [False, True], ids=["float", "through-cast"])
@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_transposed_matrix_times_vector(tmp_path, half, n):
    """``dynamic_axes`` declares n >= 0, so the product is the flattened one (a batch of
    0 times a vector fails in onnxruntime's MatMul); either way no MatMul is left with a
    transposed matrix and a 1-D second input, the pattern the fusion gets wrong."""
    model = TransposedMatVec(half).eval()
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, (torch.randn(5, 4, 3),), path, input_names=["x"],
                          dynamic_axes={"x": {0: "n"}})
    for node in prog.model.graph:
        if node.op_type == "MatMul":
            column = node.inputs[1].producer()
            assert column is not None and column.op_type == "Unsqueeze", node
    assert max(_errors(path, model, torch.randn(n, 4, 3))) < 1e-2


@pytest.mark.parametrize("half", [False, True], ids=["float", "through-cast"])
def test_transposed_matrix_times_vector_with_static_shapes(tmp_path, half):
    """With static shapes a (3, 4) matrix's product stays one MatMul, and the pass
    rewrites it as ``Squeeze(MatMul(a, Unsqueeze(v, -1)), -1)``."""
    model = TransposedMatVec(half).eval()
    path = tmp_path / "m.onnx"
    x = torch.randn(4, 3)
    prog = pt2onnx.export(model, (x,), path)
    assert "Squeeze" in [node.op_type for node in prog.model.graph]
    assert max(_errors(path, model, x)) < 1e-2


def test_fuzz_program_2792(tmp_path):
    """The fuzzer's find: an in-place scatter through a transposed view, then ``@``."""
    class Program(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.randn(2))

        def forward(self, x):
            m = torch.mean(x, -2)
            return m.transpose(0, 1) @ self.p

    model = Program().eval()
    x = torch.randn(2, 1, 2)
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, (x,), path)
    assert max(_errors(path, model, x)) < 1e-5


def test_untransposed_matvec_is_left_alone():
    class MatVec(torch.nn.Module):
        def forward(self, x, v):
            return x @ v

    prog = pt2onnx.export(MatVec(), (torch.randn(3, 4), torch.randn(4)))
    assert [n.op_type for n in prog.model.graph] == ["MatMul"]
