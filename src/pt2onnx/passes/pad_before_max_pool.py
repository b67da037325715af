"""Keeps onnxruntime's pad fusion from changing ``Pad(value 0) -> MaxPool``.

torch pads with zeros and then takes the max, so a window over the border of an
all-negative map gives 0. onnxruntime's ``PadFusion`` (graph optimization level
basic and up, so on by default) folds a constant zero ``Pad`` into the ``MaxPool``
after it, whose own padding is -inf: those windows give the negative maximum
instead (0.25 off eager on transformers' BiT, which pads a ``Conv`` output before its
stem ``MaxPool``; onnxruntime 1.31 and 1.32). The pass writes such a ``Pad`` on a
view with one more leading axis, ``Unsqueeze -> Pad -> Squeeze``: the same values,
in a pattern the fusion does not match.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from pt2onnx.passes._graphs import rewrite_all


def _constant(value: ir.Value | None) -> np.ndarray | None:
    if value is None:
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant" and not producer.domain:
        attr = producer.attributes.get("value")
        if attr is not None and attr.type == ir.AttributeType.TENSOR:
            return attr.as_tensor().numpy()
    return None


def _feeds_max_pool(value: ir.Value) -> bool:
    return any(user.op_type == "MaxPool" and not user.domain for user, _ in value.uses())


def _rewrite(graph: ir.Graph) -> int:
    count = 0
    for node in list(graph):
        if node.op_type != "Pad" or node.domain or not _feeds_max_pool(node.outputs[0]):
            continue
        mode = node.attributes.get("mode")
        if mode is not None and mode.as_string() != "constant":
            continue
        x = node.inputs[0]
        pads = _constant(node.inputs[1] if len(node.inputs) > 1 else None)
        if x is None or pads is None:
            continue  # pads computed at run time: the fusion needs them constant
        axes_in = node.inputs[3] if len(node.inputs) > 3 else None
        rest = list(node.inputs[2:3])
        if axes_in is not None:
            axes = _constant(axes_in)
            if axes is None:
                continue
            shifted = np.array([a + 1 if a >= 0 else a for a in axes.tolist()], np.int64)
            new_pads, extra = pads.astype(np.int64), [graph_const(graph, shifted, node, "axes")]
        else:
            half = len(pads) // 2
            new_pads = np.concatenate([[0], pads[:half], [0], pads[half:]]).astype(np.int64)
            extra = []
        zero = graph_const(graph, np.array([0], np.int64), node, "axis")
        unsqueeze = ir.Node("", "Unsqueeze", [x, zero], name=f"{node.name}/unsqueeze")
        inputs: list[ir.Value | None] = [unsqueeze.outputs[0],
                                         graph_const(graph, new_pads, node, "pads")]
        if rest or extra:
            inputs += [*(rest or [None]), *extra]
        pad = ir.Node("", "Pad", inputs, attributes=list(node.attributes.values()),
                      name=f"{node.name}/pad")
        squeeze = ir.Node("", "Squeeze", [pad.outputs[0], zero], name=f"{node.name}/squeeze")
        out = node.outputs[0]
        if out.dtype is not None:
            for value in (unsqueeze.outputs[0], pad.outputs[0]):
                value.dtype = out.dtype
        ir.convenience.replace_nodes_and_values(
            graph, node, [node], [unsqueeze, pad, squeeze], [out], [squeeze.outputs[0]])
        count += 1
    return count


def graph_const(graph: ir.Graph, array: np.ndarray, node: ir.Node, what: str) -> ir.Value:
    value = ir.Value(name=f"{node.name or 'pad'}/{what}", const_value=ir.tensor(array))
    graph.register_initializer(value)
    return value


def apply(model: ir.Model) -> int:
    """Rewrites the model in place (subgraphs included); returns how many Pads it rewrote."""
    return rewrite_all(model, _rewrite)
