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

``perm=[1, 2, 0]`` crashes it too (fuzz seed 3702, program 880: ``F.linear`` of
``x.permute(1, 2, 0)`` in float16). There the MatMul contracts ``x``'s first axis, so
``Transpose(x, perm) @ W`` is ``W^T @ x`` with ``x`` seen as ``(a, b * c)``, reshaped
to ``(n, b, c)`` and transposed by the same ``perm``; no Transpose feeds a MatMul.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.passes._graphs import rewrite_all

_HALF = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def _is_constant(value: ir.Value) -> bool:
    """A constant, or a Transpose of one (onnxruntime folds it into a constant first)."""
    if value.const_value is not None:
        return True
    producer = value.producer()
    if producer is None or producer.domain:
        return False
    if producer.op_type == "Transpose" and producer.inputs and producer.inputs[0] is not None:
        return _is_constant(producer.inputs[0])
    return producer.op_type == "Constant"


def _shape(value: ir.Value) -> tuple[int, ...] | None:
    """The static shape of a value, or of a Transpose of a constant whose own output
    shape was not inferred."""
    if value.shape is not None and all(isinstance(d, int) for d in value.shape):
        return tuple(d for d in value.shape if isinstance(d, int))
    producer = value.producer()
    if producer is None or producer.op_type != "Transpose" or producer.domain:
        return None
    source = producer.inputs[0] if producer.inputs else None
    inner = _shape(source) if source is not None else None
    perm_attr = producer.attributes.get("perm")
    if inner is None:
        return None
    perm = list(perm_attr.as_ints()) if perm_attr is not None else list(
        range(len(inner)))[::-1]
    return tuple(inner[p] for p in perm)


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
        if perm is None or len(perm) != 3 or perm[-1] not in (0, 2) or perm == [0, 1, 2]:
            continue
        w_shape = _shape(w)
        if w_shape is None or len(w_shape) != 2 or not _is_constant(w):
            continue
        x = transpose.inputs[0]
        if x is None:
            continue
        if perm[-1] == 0:
            _first_axis(graph, node, x, w, int(w_shape[1]), perm)
            count += 1
            continue
        product = ir.Node("", "MatMul", [x, w], name=f"{node.name}/before_transpose")
        product.outputs[0].dtype = a.dtype
        moved = ir.Node("", "Transpose", product.outputs, [ir.AttrInt64s("perm", perm)],
                        name=f"{node.name}/transpose_after")
        ir.convenience.replace_nodes_and_values(
            graph, node, [node], [product, moved], [out], [moved.outputs[0]])
        count += 1
    return count


def _const(name: str, values: list[int]) -> ir.Node:
    return ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(values, dtype=ir.DataType.INT64))],
                   name=name)


def _first_axis(graph: ir.Graph, node: ir.Node, x: ir.Value, w: ir.Value, cols: int,
                perm: list[int]) -> None:
    """``Transpose(x, perm) @ W`` with ``perm[-1] == 0`` as ``W^T @ x`` (see above)."""
    name = node.name or "matmul"
    out = node.outputs[0]
    wt_producer = w.producer()
    nodes: list[ir.Node] = []
    if (wt_producer is not None and wt_producer.op_type == "Transpose"
            and not wt_producer.domain and wt_producer.inputs[0] is not None):
        wt = wt_producer.inputs[0]  # W is itself a transposed constant (nn.Linear)
    else:
        flip = ir.Node("", "Transpose", [w], [ir.AttrInt64s("perm", [1, 0])],
                       name=f"{name}/weight_t")
        nodes.append(flip)
        wt = flip.outputs[0]
    shape = ir.Node("", "Shape", [x], name=f"{name}/shape")
    starts, ends = _const(f"{name}/one", [1]), _const(f"{name}/three", [3])
    zero, n = _const(f"{name}/zero", [0]), _const(f"{name}/n", [cols])
    lead = ir.Node("", "Slice", [shape.outputs[0], zero.outputs[0], starts.outputs[0]],
                   name=f"{name}/lead")
    rest = ir.Node("", "Slice", [shape.outputs[0], starts.outputs[0], ends.outputs[0]],
                   name=f"{name}/rest")
    flat = ir.Node("", "ReduceProd", [rest.outputs[0]], [ir.AttrInt64("keepdims", 1)],
                   name=f"{name}/flat")
    as_2d = ir.Node("", "Concat", [lead.outputs[0], flat.outputs[0]],
                    [ir.AttrInt64("axis", 0)], name=f"{name}/as_2d")
    back = ir.Node("", "Concat", [n.outputs[0], rest.outputs[0]], [ir.AttrInt64("axis", 0)],
                   name=f"{name}/back")
    x2 = ir.Node("", "Reshape", [x, as_2d.outputs[0]], [ir.AttrInt64("allowzero", 1)],
                 name=f"{name}/x_2d")
    product = ir.Node("", "MatMul", [wt, x2.outputs[0]], name=f"{name}/weight_first")
    y3 = ir.Node("", "Reshape", [product.outputs[0], back.outputs[0]],
                 [ir.AttrInt64("allowzero", 1)], name=f"{name}/y_3d")
    dtype = out.dtype or x.dtype
    if dtype is not None:
        product.outputs[0].dtype = dtype
        y3.outputs[0].dtype = dtype
    moved = ir.Node("", "Transpose", y3.outputs, [ir.AttrInt64s("perm", perm)],
                    name=f"{name}/transpose_after")
    nodes += [shape, starts, ends, zero, n, lead, rest, flat, as_2d, back, x2, product, y3,
              moved]
    ir.convenience.replace_nodes_and_values(graph, node, [node], nodes, [out],
                                            [moved.outputs[0]])


def apply(model: ir.Model) -> int:
    """Rewrites the model in place; returns how many nodes it rewrote."""
    return rewrite_all(model, _rewrite)
