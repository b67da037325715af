"""What the passes share: a graph rewrite applied to the main graph and every subgraph."""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir


def rewrite_all(model: ir.Model, rewrite: Callable[[ir.Graph], int],
                domain: str | None = None) -> int:
    """Runs ``rewrite`` on the model's graph and on every If/Loop/Scan body in it;
    returns the sum of what it returned (the nodes rewritten). With ``domain``, the
    model imports that domain (version 1) where anything was rewritten."""
    count = _rewrite_all(model, rewrite)
    if count and domain is not None:
        model.opset_imports.setdefault(domain, 1)
    return count


def _rewrite_all(model: ir.Model, rewrite: Callable[[ir.Graph], int]) -> int:
    count = rewrite(model.graph)
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                count += rewrite(attr.as_graph())
            elif attr.type == ir.AttributeType.GRAPHS:
                for sub in attr.as_graphs():
                    count += rewrite(sub)
    return count


def last_dim(v: ir.Value) -> int | None:
    """``v``'s last dim where known: from its shape, or, a MatMul's output with no shape
    recorded, from the ``[K, N]`` weight it multiplies by (or the Transpose of a
    constant ``[N, K]`` one)."""
    if v.shape is not None and len(v.shape) and isinstance(v.shape[-1], int):
        return v.shape[-1]
    node = v.producer()
    if node is None or (node.domain, node.op_type) != ("", "MatMul") or len(node.inputs) != 2:
        return None
    w = node.inputs[1]
    if w is not None and w.shape is not None and len(w.shape) == 2 \
            and isinstance(w.shape[1], int):
        return w.shape[1]
    t = w.producer() if w is not None else None  # a weight read twice: its Transpose
    if t is None or (t.domain, t.op_type) != ("", "Transpose") \
            or list(t.attributes.get_ints("perm", [])) != [1, 0]:
        return None
    src = t.inputs[0]
    if src is None or src.const_value is None or src.shape is None or len(src.shape) != 2:
        return None
    return src.shape[0] if isinstance(src.shape[0], int) else None
