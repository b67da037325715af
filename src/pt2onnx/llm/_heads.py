"""RotaryEmbedding on the projection's own ``[B, S, N * D]`` layout.

``pt2onnx::rotary`` (``rules/rotary.py``) turns the model's ``[B, N, S, D]`` query or
key: the capture gives ``Reshape`` (split into heads) -> ``Transpose`` -> the op ->
(HunYuan's per-head norm) -> ``Transpose`` -> ``Reshape`` (GroupQueryAttention's
``[B, S, N * D]``). onnxruntime's RotaryEmbedding also takes ``[B, S, N * D]`` with
``num_heads``, and a norm over the last axis does not care where the heads are, so
the two Transposes go: ``Reshape`` -> the op -> ``Reshape`` -> the norm -> ``Reshape``,
the graph onnxruntime-genai's builder writes. ``drop_reshape_round_trips`` then drops
the split that is joined straight back.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

MS_DOMAIN = "com.microsoft"
# Ops over the last axis alone, whichever way the others are laid out.
_LAST_AXIS = {("", "SimplifiedLayerNormalization"), ("", "LayerNormalization")}


def _swaps_heads(node: ir.Node | None) -> bool:
    return node is not None and (node.domain, node.op_type) == ("", "Transpose") \
        and list(node.attributes.get_ints("perm", [])) == [0, 2, 1, 3]


def _last_axis(node: ir.Node, index: int) -> bool:
    if (node.domain, node.op_type) not in _LAST_AXIS or index != 0:
        return False
    if node.attributes.get_int("axis", -1) not in (-1, 3):
        return False
    return all(not out.uses() and not out.is_graph_output() for out in node.outputs[1:])


def _chain(value: ir.Value) -> tuple[list[ir.Node], ir.Node] | None:
    """The last-axis ops reading ``value`` one after the other, then the Transpose
    swapping heads and positions back; None where anything else reads them."""
    chain: list[ir.Node] = []
    while True:
        uses = list(value.uses())
        if len(uses) != 1 or value.is_graph_output():
            return None
        user, index = uses[0].node, uses[0].idx
        if _swaps_heads(user):
            return chain, user
        if not _last_axis(user, index):
            return None
        chain.append(user)
        value = user.outputs[0]


def _shape_const(graph: ir.Graph, name: str, dims: list[int]) -> ir.Value:
    value = ir.Value(name=name, const_value=ir.tensor(np.array(dims, dtype=np.int64), name=name))
    value.dtype, value.shape = ir.DataType.INT64, ir.Shape([len(dims)])
    graph.register_initializer(value)
    return value


def rotary_heads_last(model: ir.Model) -> int:
    """Rewrites, in place, each RotaryEmbedding between the two Transposes (see the
    module's docstring); returns how many."""
    graph = model.graph
    done = 0
    for node in list(graph):
        if (node.domain, node.op_type) != (MS_DOMAIN, "RotaryEmbedding"):
            continue
        x = node.inputs[0]
        into = x.producer() if x is not None else None
        if x is None or not _swaps_heads(into) or len(x.uses()) != 1 or x.is_graph_output():
            continue
        assert into is not None
        split = into.inputs[0]  # [B, S, N, D]
        if split is None or split.shape is None or len(split.shape) != 4:
            continue
        heads, size, dtype = split.shape[2], split.shape[3], split.dtype
        if not isinstance(heads, int) or not isinstance(size, int) or dtype is None:
            continue
        found = _chain(node.outputs[0])
        if found is None:
            continue
        chain, back = found
        tag = node.name or f"rotary{done}"
        flat = ir.node("Reshape", [split, _shape_const(graph, f"{tag}.flat", [0, 0, -1])],
                       name=f"{tag}_flat")
        flat_shape = ir.Shape([split.shape[0], split.shape[1], heads * size])
        flat.outputs[0].dtype, flat.outputs[0].shape = dtype, flat_shape
        attrs = {a.name: a.value for a in node.attributes.values()}
        attrs["num_heads"] = heads
        turned = ir.node("RotaryEmbedding", [flat.outputs[0], *node.inputs[1:]], attrs,
                         domain=MS_DOMAIN, name=tag)
        turned.outputs[0].dtype, turned.outputs[0].shape = dtype, flat_shape
        heads_of = ir.node("Reshape", [turned.outputs[0],
                                       _shape_const(graph, f"{tag}.heads", [0, 0, heads, size])],
                           name=f"{tag}_heads")
        heads_of.outputs[0].dtype, heads_of.outputs[0].shape = dtype, split.shape
        graph.insert_before(node, [flat, turned, heads_of])
        last = heads_of.outputs[0]
        for op in chain:  # the norms, now over [B, S, N, D]
            op.replace_input_with(0, last)
            op.outputs[0].shape = split.shape
            last = op.outputs[0]
        ir.convenience.replace_all_uses_with(back.outputs[0], last)
        graph.remove(back, safe=True)
        graph.remove(node, safe=True)
        graph.remove(into, safe=True)
        done += 1
    return done
