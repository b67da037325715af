"""What the passes share: a graph rewrite applied to the main graph and every subgraph."""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir


def rewrite_all(model: ir.Model, rewrite: Callable[[ir.Graph], int]) -> int:
    """Runs ``rewrite`` on the model's graph and on every If/Loop/Scan body in it;
    returns the sum of what it returned (the nodes rewritten)."""
    count = rewrite(model.graph)
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                count += rewrite(attr.as_graph())
            elif attr.type == ir.AttributeType.GRAPHS:
                for sub in attr.as_graphs():
                    count += rewrite(sub)
    return count
