"""Rewrites that keep valid graphs away from onnxruntime crashes.

onnxruntime 1.31 and 1.32 segfault while creating a session (graph optimization level
``ORT_ENABLE_ALL``, the default) for a float16 or bfloat16 ``MatMul`` whose first
input is a 3-D ``Transpose`` with ``perm=[1, 0, 2]`` and whose second input is a
constant (found by the differential fuzzer; a sequence-first tensor permuted to
batch-first, then ``nn.Linear`` in half precision, is the pattern in real models).
The model is valid: it runs with ``ORT_ENABLE_EXTENDED``.

Since the MatMul acts on the last dim only, ``Transpose(x, perm) @ W`` equals
``Transpose(x @ W, perm)`` for a 2-D ``W`` and any ``perm`` that keeps the last axis
last; the pass writes the second form, which onnxruntime runs.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.passes._graphs import rewrite_all

_HALF = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def _is_constant(value: ir.Value) -> bool:
    if value.const_value is not None:
        return True
    producer = value.producer()
    return producer is not None and producer.op_type == "Constant" and not producer.domain


def _rewrite(graph: ir.Graph) -> int:
    count = 0
    for node in list(graph):
        if node.op_type != "MatMul" or node.domain or len(node.inputs) != 2:
            continue
        a, w = node.inputs
        out = node.outputs[0]
        if a is None or w is None or a.dtype not in _HALF:
            continue
        transpose = a.producer()
        if transpose is None or transpose.op_type != "Transpose" or transpose.domain:
            continue
        perm_attr = transpose.attributes.get("perm")
        perm = list(perm_attr.as_ints()) if perm_attr is not None else None
        if perm is None or len(perm) != 3 or perm[-1] != 2 or perm == [0, 1, 2]:
            continue
        if w.shape is None or len(w.shape) != 2 or not _is_constant(w):
            continue
        x = transpose.inputs[0]
        if x is None:
            continue
        product = ir.Node("", "MatMul", [x, w], name=f"{node.name}/before_transpose")
        product.outputs[0].dtype = a.dtype
        moved = ir.Node("", "Transpose", product.outputs, [ir.AttrInt64s("perm", perm)],
                        name=f"{node.name}/transpose_after")
        ir.convenience.replace_nodes_and_values(
            graph, node, [node], [product, moved], [out], [moved.outputs[0]])
        count += 1
    return count


def apply(model: ir.Model) -> int:
    """Rewrites the model in place; returns how many nodes it rewrote."""
    return rewrite_all(model, _rewrite)
