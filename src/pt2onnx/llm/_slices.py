"""A tensor cut in two and joined back is the tensor: for the rotary inside the op.

Phi rotates the first ``R`` dims of each head and joins the rest back
(``cat(rotate(q[..., :R]), q[..., R:])``); export-llm's fused attention hands
GroupQueryAttention the unrotated ``cat(q[..., :R], that_join[..., R:])``
(``_attention._unrotated``). Two rewrites, each exact on the values, turn that back
into ``q``, so the model's own rotary is left unread (and removed) and the
projections read packed:

- ``Slice(Concat(a_1, ..., a_n), start, end)`` along the Concat's axis, where
  ``start`` is where some ``a_k`` begins (the sizes before it known) and the Slice
  runs to the end with step 1: ``Concat(a_k, ..., a_n)`` (``a_k`` where it is the last);
- ``Concat(Slice(x, 0, r), Slice(x, r, end))`` along one axis, both of the same
  ``x``, step 1, the second to the end: ``x``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

_END = 2**31 - 1  # a Slice end at or past this runs to the end of its axis


def _ints(value: ir.Value | None) -> list[int] | None:
    if value is None or value.const_value is None:
        return None
    return [int(v) for v in np.asarray(value.const_value.numpy()).reshape(-1)]


def _one_axis_slice(node: ir.Node) -> tuple[ir.Value, int, int, int] | None:
    """(input, axis, start, end) of a Slice on one axis with step 1, constants only."""
    if (node.domain, node.op_type) != ("", "Slice") or len(node.inputs) < 4:
        return None
    x = node.inputs[0]
    starts, ends, axes = (_ints(v) for v in node.inputs[1:4])
    steps = _ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None \
        else [1]
    if x is None or x.shape is None or starts is None or ends is None or axes is None \
            or steps is None or len(starts) != 1 or len(ends) != 1 or len(axes) != 1 \
            or steps != [1]:
        return None
    axis = axes[0] % len(x.shape)
    return x, axis, starts[0], ends[0]


def _size(value: ir.Value | None, axis: int) -> int | None:
    if value is None or value.shape is None or axis >= len(value.shape):
        return None
    dim = value.shape[axis]
    return dim if isinstance(dim, int) else None


def _to_end(end: int, value: ir.Value, axis: int) -> bool:
    size = _size(value, axis)
    return end >= _END or (size is not None and end >= size)


def _slice_of_concat(node: ir.Node) -> ir.Value | list[ir.Value] | None:
    found = _one_axis_slice(node)
    if found is None:
        return None
    x, axis, start, end = found
    concat = x.producer()
    if concat is None or (concat.domain, concat.op_type) != ("", "Concat") \
            or not _to_end(end, x, axis) or start < 0 or x.shape is None:
        return None
    concat_axis = concat.attributes.get_int("axis", 0) % len(x.shape)
    if concat_axis != axis:
        return None
    offset = 0
    parts = list(concat.inputs)
    for k, part in enumerate(parts):
        if offset == start:
            rest = [p for p in parts[k:] if p is not None]
            return rest[0] if len(rest) == 1 else rest
        size = _size(part, axis)
        if size is None:
            return None
        offset += size
    return None


def _concat_of_halves(node: ir.Node) -> ir.Value | None:
    if (node.domain, node.op_type) != ("", "Concat") or len(node.inputs) != 2:
        return None
    first, second = (v.producer() if v is not None else None for v in node.inputs)
    if first is None or second is None:
        return None
    a, b = _one_axis_slice(first), _one_axis_slice(second)
    if a is None or b is None or a[0] is not b[0]:
        return None
    x, axis = a[0], a[1]
    out = node.outputs[0]
    if out.shape is None or node.attributes.get_int("axis", 0) % len(out.shape) != axis \
            or b[1] != axis:
        return None
    if a[2] != 0 or a[3] != b[2] or b[2] <= 0 or not _to_end(b[3], x, axis):
        return None
    return x


def rejoin_slices(model: Any) -> int:
    """Applies both rewrites until none is left; returns how many nodes were replaced."""
    graph = model.graph
    replaced = 0
    changed = True
    while changed:
        changed = False
        for node in list(graph):
            out = node.outputs[0] if node.outputs else None
            if out is None or out.is_graph_output() or not out.uses():
                continue  # (a node replaced before stays until the end, unread)
            new = _slice_of_concat(node)
            if isinstance(new, list):
                producer = node.inputs[0].producer() if node.inputs[0] is not None else None
                if producer is None:
                    continue
                joined = ir.node("Concat", new, attributes={
                    "axis": producer.attributes.get_int("axis", 0)})
                graph.insert_before(node, joined)
                joined.outputs[0].dtype, joined.outputs[0].shape = out.dtype, out.shape
                new = joined.outputs[0]
            if new is None:
                new = _concat_of_halves(node)
            if new is None:
                continue
            ir.convenience.replace_all_uses_with(out, new)
            replaced += 1
            changed = True
    if replaced:
        ir.passes.common.RemoveUnusedNodesPass()(model)
    return replaced
