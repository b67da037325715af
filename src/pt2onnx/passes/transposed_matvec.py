"""Keeps onnxruntime's transpose fusion from changing ``Transpose -> MatMul`` with a
vector.

onnxruntime's ``MatmulTransposeFusion`` (graph optimization level extended and up, so
on by default) folds a ``Transpose`` of the last two axes into the ``MatMul`` after
it, as ``FusedMatMul(transA=1)``. When the ``MatMul``'s second input is 1-D, the fused
kernel ignores ``transA``: ``x.mT @ v`` gives ``x @ v`` (found by the differential
fuzzer, a ``mean`` transposed in place and then multiplied by a vector; onnxruntime
1.31 and 1.32; a ``Cast`` between the two fuses too). The pass writes such a product with the vector as a one-column
matrix, ``Squeeze(MatMul(a, Unsqueeze(v, -1)), -1)``: the same values, and a fusion
onnxruntime gets right.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from pt2onnx.passes._graphs import rewrite_all


def _is_transpose(value: ir.Value | None) -> bool:
    """Whether ``value`` is a Transpose's output, looking through Casts (the fusion
    also matches ``Transpose -> Cast -> MatMul``)."""
    producer = value.producer() if value is not None else None
    while producer is not None and producer.op_type == "Cast" and not producer.domain:
        producer = producer.inputs[0].producer() if producer.inputs[0] is not None else None
    return producer is not None and producer.op_type == "Transpose" and not producer.domain


def _rewrite(graph: ir.Graph) -> int:
    count = 0
    for node in list(graph):
        if node.op_type != "MatMul" or node.domain or len(node.inputs) != 2:
            continue
        a, v = node.inputs
        if v is None or v.shape is None or len(v.shape) != 1 or not _is_transpose(a):
            continue
        axis = ir.Value(name=f"{node.name or 'matmul'}/last_axis",
                        const_value=ir.tensor(np.array([-1], np.int64)))
        graph.register_initializer(axis)
        column = ir.Node("", "Unsqueeze", [v, axis], name=f"{node.name}/column")
        matmul = ir.Node("", "MatMul", [a, column.outputs[0]], name=f"{node.name}/matmul")
        squeeze = ir.Node("", "Squeeze", [matmul.outputs[0], axis], name=f"{node.name}/squeeze")
        out = node.outputs[0]
        if v.dtype is not None:
            for value in (column.outputs[0], matmul.outputs[0]):
                value.dtype = v.dtype
        ir.convenience.replace_nodes_and_values(
            graph, node, [node], [column, matmul, squeeze], [out], [squeeze.outputs[0]])
        count += 1
    return count


def apply(model: ir.Model) -> int:
    """Rewrites the model in place (subgraphs included); returns how many MatMuls it
    rewrote."""
    return rewrite_all(model, _rewrite)
