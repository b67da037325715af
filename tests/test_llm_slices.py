"""llm/_slices.py: a value cut in two and joined back is read as the value, exactly."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from pt2onnx.llm import _slices

END = 2**63 - 1


def _model(rot: int, width: int, end: int, cut: int | None = None) -> onnx.ModelProto:
    """Phi's shape: y = cat(x[..., :rot], cat(f(x[..., :rot]), x[..., rot:])[..., rot:])
    (f a Neg here), which is x, beside the plain x[..., rot:] read on its own."""
    ints = helper.make_tensor
    nodes = [
        helper.make_node("Slice", ["x", "zero", "rot", "axis"], ["head"]),
        helper.make_node("Slice", ["x", "rot", "end", "axis"], ["tail"]),
        helper.make_node("Neg", ["head"], ["turned"]),
        helper.make_node("Concat", ["turned", "tail"], ["joined"], axis=-1),
        helper.make_node("Slice", ["joined", "cut", "end", "axis"], ["rest"]),
        helper.make_node("Concat", ["head", "rest"], ["y"], axis=-1),
        helper.make_node("Relu", ["y"], ["out"]),
        helper.make_node("Sigmoid", ["joined"], ["other"]),
    ]
    inits = [ints("zero", TensorProto.INT64, [1], [0]), ints("rot", TensorProto.INT64, [1], [rot]),
             ints("end", TensorProto.INT64, [1], [end]),
             ints("cut", TensorProto.INT64, [1], [rot if cut is None else cut]),
             ints("axis", TensorProto.INT64, [1], [-1])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, width])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("other", TensorProto.FLOAT, [2, 3, width])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    return onnx.shape_inference.infer_shapes(model)


def _run(proto: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


@pytest.mark.parametrize("end", [END, 32, 40])  # to the end: past it, at it, beyond it
def test_a_value_cut_and_joined_back_is_read_as_the_value(end):
    proto = _model(rot=16, width=32, end=end)
    x = np.random.default_rng(0).standard_normal((2, 3, 32)).astype(np.float32)
    want = _run(proto, x)
    model = ir.serde.deserialize_model(proto)
    assert _slices.rejoin_slices(model) == 2
    relu = next(n for n in model.graph if n.op_type == "Relu")
    assert relu.inputs[0] is model.graph.inputs[0]  # reads x itself
    assert [n.op_type for n in model.graph if n.op_type == "Neg"] == ["Neg"]  # "other" reads it
    got = _run(ir.serde.serialize_model(model), x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_slice_that_does_not_start_where_a_part_does_is_kept():
    """The join sliced from 8, inside its first part (16 wide): neither rewrite applies,
    and the graph computes what it did."""
    proto = _model(rot=16, width=32, end=END, cut=8)
    x = np.random.default_rng(1).standard_normal((2, 3, 32)).astype(np.float32)
    want = _run(proto, x)
    model = ir.serde.deserialize_model(proto)
    assert _slices.rejoin_slices(model) == 0
    got = _run(ir.serde.serialize_model(model), x)
    assert got[0].shape == (2, 3, 40)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
