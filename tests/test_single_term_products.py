"""passes/single_term_products.py: a matrix product over a contracted dim of 1 is
``Mul``, so each output is the one product torch computes, signed zeros included
(fuzz seed 2613, program 15470)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from torch import nn

import pt2onnx
from pt2onnx.passes import single_term_products


class _Product(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.w = nn.Parameter(torch.tensor([[-1.5], [2.0], [-0.5], [3.0]]))

    def forward(self, x):
        return self.fn(x, self.w)


CASES = {
    "linear, then atan2": (lambda x, w: torch.atan2(nn.functional.linear(x, w), -torch.ones(4)),
                           torch.tensor([[0.0], [1.0], [-2.0]])),
    "linear with bias": (lambda x, w: nn.functional.linear(x, w, torch.zeros(4)),
                         torch.tensor([[0.0], [1.0]])),
    "matmul of a batch": (lambda x, w: torch.matmul(x, w.t()), torch.tensor([[[0.0], [2.0]]] * 3)),
    "addmm, alpha and beta": (lambda x, w: torch.addmm(torch.ones(4), x, w.t(), beta=0.5,
                                                       alpha=2.0), torch.tensor([[0.0], [1.0]])),
    "a contracted dim of 2 stays a MatMul": (lambda x, w: x @ torch.cat([w, w], 1).t(),
                                             torch.tensor([[0.0, 0.0], [1.0, 2.0]])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_single_term_products_match_eager_with_the_sign_of_zero(tmp_path, case):
    fn, x = CASES[case]
    model = _Product(fn).eval()
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, (x,), path)
    ops = {n.op_type for n in prog.model.graph}
    if "dim of 2" in case:
        assert ops & {"MatMul", "Gemm"}, ops
    else:
        assert not ops & {"MatMul", "Gemm"}, ops
    session = ort.InferenceSession(str(path))
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert (np.signbit(got) == np.signbit(want)).all(), (got, want)


@pytest.mark.parametrize(("trans_a", "trans_b", "alpha", "beta"),
                         [(0, 0, 1.0, 1.0), (1, 0, 2.0, 0.5), (0, 1, 1.0, 0.0), (1, 1, -1.0, 2.0)])
def test_gemm_attributes(trans_a, trans_b, alpha, beta):
    """Every Gemm form with K = 1 gives Gemm's own values (onnxruntime, before and after)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 3) if trans_a else (3, 1)).astype(np.float32)
    b = rng.standard_normal((4, 1) if trans_b else (1, 4)).astype(np.float32)
    c = rng.standard_normal((4,)).astype(np.float32)
    x = ir.Value(name="a", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(a.shape))
    bv = ir.Value(name="b", const_value=ir.tensor(b))
    bv.dtype, bv.shape = ir.DataType.FLOAT, ir.Shape(b.shape)
    cv = ir.Value(name="c", const_value=ir.tensor(c))
    cv.dtype, cv.shape = ir.DataType.FLOAT, ir.Shape(c.shape)
    node = ir.Node("", "Gemm", [x, bv, cv], attributes=[
        ir.AttrInt64("transA", trans_a), ir.AttrInt64("transB", trans_b),
        ir.AttrFloat32("alpha", alpha), ir.AttrFloat32("beta", beta)], name="gemm")
    out = node.outputs[0]
    out.name, out.dtype, out.shape = "y", ir.DataType.FLOAT, ir.Shape([3, 4])
    graph = ir.Graph([x], [out], nodes=[node], initializers=[bv, cv], opset_imports={"": 17})
    model = ir.Model(graph, ir_version=8)

    def run():
        proto = ir.serde.serialize_model(model).SerializeToString()
        return ort.InferenceSession(proto).run(None, {"a": a})[0]

    before = run()
    assert single_term_products.apply(model) == 1
    assert "Gemm" not in {n.op_type for n in model.graph}
    np.testing.assert_allclose(run(), before, rtol=1e-6, atol=1e-6)
