"""Reads a value the model split into heads back from before the split.

``Reshape(Transpose(Transpose(Reshape(y, [B, S, N, D]))), [0, 0, -1])``, both
transposes ``perm=[0, 2, 1, 3]``, is ``y`` when ``y`` is ``[B, S, N * D]``: attention
splits its projections into heads (``[B, N, S, D]``), and a fused attention op
(com.microsoft ``GroupQueryAttention``, from ``rules/gqa.py``) takes them merged again. The merge then reads ``y`` itself, and the split, unused, goes.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.passes._graphs import rewrite_all


def _const_ints(v: ir.Value | None) -> list[int] | None:
    tensor = v.const_value if v is not None else None
    if tensor is None:
        return None
    return [int(i) for i in tensor.numpy().reshape(-1)]


def _swap(v: ir.Value | None) -> ir.Node | None:
    """The ``Transpose(perm=[0, 2, 1, 3])`` producing ``v``, else None."""
    t = v.producer() if v is not None else None
    if t is None or (t.domain, t.op_type) != ("", "Transpose"):
        return None
    perm = t.attributes.get("perm")
    return t if perm is not None and list(perm.as_ints()) == [0, 2, 1, 3] else None


def _source(merge: ir.Node) -> ir.Value | None:
    """``y`` for a merge ``Reshape(Transpose(Reshape(y)))`` that undoes the split."""
    if _const_ints(merge.inputs[1] if len(merge.inputs) > 1 else None) != [0, 0, -1]:
        return None
    back = _swap(merge.inputs[0])  # [B, N, S, D] -> [B, S, N, D]
    t = _swap(back.inputs[0]) if back is not None else None  # the split's [B, S, N, D] -> ...
    if t is None:
        return None
    r = t.inputs[0].producer() if t.inputs[0] is not None else None
    if r is None or (r.domain, r.op_type) != ("", "Reshape") or r.inputs[0] is None:
        return None
    y, split = r.inputs[0], r.outputs[0].shape
    if y.shape is None or split is None or len(y.shape) != 3 or len(split) != 4:
        return None
    n, d, nd = split[2], split[3], y.shape[2]
    if not all(isinstance(v, int) for v in (n, d, nd)) or n * d != nd:
        return None
    same = [a == b and a is not None for a, b in zip(y.shape[:2], split[:2])]
    return y if all(same) else None


def _rewrite(graph: ir.Graph) -> int:
    count = 0
    for node in list(graph):
        if node.op_type != "Reshape" or node.domain:
            continue
        allowzero = node.attributes.get("allowzero")
        if allowzero is not None and allowzero.as_int():
            continue
        y = _source(node)
        if y is None or node.outputs[0] in graph.outputs:
            continue
        ir.convenience.replace_all_uses_with(node.outputs[0], y)
        graph.remove(node, safe=True)
        count += 1
    return count


def apply(model: ir.Model) -> int:
    """Rewrites in place (subgraphs included); returns how many merges it removed."""
    return rewrite_all(model, _rewrite)
