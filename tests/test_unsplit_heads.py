"""passes/unsplit_heads.py: a merge of heads that undoes the model's own split reads the
value from before the split (the GroupQueryAttention rule looked back for it itself)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from pt2onnx.passes import unsplit_heads


def _model(split: list[int], y_shape: list[int], target: list[int]) -> ir.Model:
    g = onnx.helper
    nodes = [
        g.make_node("Reshape", ["y", "split"], ["heads"]),
        g.make_node("Transpose", ["heads"], ["bnsd"], perm=[0, 2, 1, 3]),
        g.make_node("Relu", ["bnsd"], ["other"]),  # the split is read elsewhere too
        g.make_node("Transpose", ["bnsd"], ["bsnd"], perm=[0, 2, 1, 3]),
        g.make_node("Reshape", ["bsnd", "merge"], ["merged"]),
        g.make_node("Neg", ["merged"], ["out"]),
    ]
    graph = g.make_graph(
        nodes, "g",
        [g.make_tensor_value_info("y", onnx.TensorProto.FLOAT, y_shape)],
        [g.make_tensor_value_info("out", onnx.TensorProto.FLOAT, None),
         g.make_tensor_value_info("other", onnx.TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.array(split, np.int64), "split"),
         onnx.numpy_helper.from_array(np.array(target, np.int64), "merge")],
        value_info=[g.make_tensor_value_info("heads", onnx.TensorProto.FLOAT, split)])
    return ir.serde.deserialize_model(g.make_model(
        graph, opset_imports=[g.make_opsetid("", 21)], ir_version=10))


def _run(model: ir.Model, y: np.ndarray) -> list[np.ndarray]:
    proto = ir.serde.serialize_model(model)
    return ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"y": y})


def test_the_merge_reads_the_value_before_the_split() -> None:
    model = _model([2, 5, 3, 4], [2, 5, 12], [0, 0, -1])
    y = np.random.default_rng(0).standard_normal((2, 5, 12)).astype(np.float32)
    before = _run(model, y)
    assert unsplit_heads.apply(model) == 1
    neg = next(n for n in model.graph if n.op_type == "Neg")
    assert neg.inputs[0] is model.graph.inputs[0]
    for a, b in zip(before, _run(model, y), strict=True):
        np.testing.assert_array_equal(a, b)


def test_other_merges_are_left() -> None:
    """A merge into another shape, or a split whose heads do not multiply back to the
    last dim of y, is not the inverse of the split."""
    assert unsplit_heads.apply(_model([2, 5, 3, 4], [2, 5, 12], [0, -1, 4])) == 0
    assert unsplit_heads.apply(_model([2, 5, 2, 6], [2, 5, 12], [0, 0, -1])) == 1
    assert unsplit_heads.apply(_model([2, 5, 3, 4], [2, 5, 13], [0, 0, -1])) == 0
