"""In-place writes whose reach depends on memory layout, and so on a size being 1.

``reshape`` and ``contiguous`` return their input itself (a view) where its strides
allow, and a copy otherwise. Whether they allow can turn on a dim being 1:
``movedim(x, 1, 0)`` of a ``(B, 2, 2)`` tensor is contiguous only at ``B = 1``. An
in-place op on one side of such an op then writes through to the other side at that
size only. Both captures hold the same ops; the difference is in which tensors share
memory, which torch settles later, when it functionalizes the program for that size
(fuzz seed 2613, program 8014). So such a write is a point where the written graph
must be run (``_size_one.settle``), whatever the two captures' ops say.
"""

from __future__ import annotations

import torch

# Ops that return their input (an alias) or a copy of it, by its strides.
_VIEW_OR_COPY = {"contiguous", "reshape", "reshape_as", "flatten", "ravel", "to",
                 "type_as"}


def _alias_parent(node: torch.fx.Node) -> torch.fx.Node | None:
    """The tensor ``node`` may share memory with, for an op whose output aliases its
    first argument (views, ``reshape``, an in-place op's return, ``getitem`` of ``split``)."""
    import operator

    if node.op != "call_function" or not node.args or not isinstance(node.args[0],
                                                                         torch.fx.Node):
        return None
    if node.target is operator.getitem:
        return node.args[0]
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.returns or not schema.arguments:
        return None
    if schema.returns[0].alias_info is None or schema.arguments[0].alias_info is None:
        return None
    return node.args[0]


def _may_copy(node: torch.fx.Node) -> bool:
    packet = getattr(node.target, "overloadpacket", None)
    return getattr(packet, "__name__", "") in _VIEW_OR_COPY


def _written(node: torch.fx.Node) -> list[torch.fx.Node]:
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.is_mutable:
        return []
    out = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            if isinstance(value, torch.fx.Node):
                out.append(value)
    return out


def layout_dependent_write(module: torch.fx.GraphModule) -> torch.fx.Node | None:
    """The first in-place op whose written tensor and a tensor read after it are joined
    by a ``reshape`` or ``contiguous`` (a view at some sizes and a copy at others)."""
    graphs = [module] + [m for m in module.modules()
                         if isinstance(m, torch.fx.GraphModule) and m is not module]
    for gm in graphs:
        found = _in_graph(gm.graph)
        if found is not None:
            return found
    return None


def _in_graph(graph: torch.fx.Graph) -> torch.fx.Node | None:
    nodes = list(graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    parent = {n: p for n in nodes if (p := _alias_parent(n)) is not None}

    chains: dict[torch.fx.Node, list[torch.fx.Node]] = {}

    def chain(n: torch.fx.Node) -> list[torch.fx.Node]:
        todo = [n]
        while todo[-1] not in chains and todo[-1] in parent:
            todo.append(parent[todo[-1]])
        tail = chains.get(todo[-1], [todo[-1]])
        for m in reversed(todo[:-1]):
            tail = [m, *tail]
            chains[m] = tail
        return chains.get(n, tail)

    last_read = {n: max((order[u] for u in n.users), default=-1) for n in nodes}
    by_root: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for n in nodes:
        if n in parent:
            by_root.setdefault(chain(n)[-1], []).append(n)
    for write in nodes:
        for target in _written(write):
            up = chain(target)
            for other in [up[-1], *by_root.get(up[-1], [])]:
                if other is target or other is write or last_read[other] <= order[write]:
                    continue
                theirs = chain(other)
                shared = set(up) & set(theirs)
                # The edges from each side up to where they meet: a node's edge to its
                # parent is layout-dependent where the node may copy.
                path = [n for n in up if n not in shared] + [
                    n for n in theirs if n not in shared]
                if any(_may_copy(n) for n in path):
                    return write
    return None
