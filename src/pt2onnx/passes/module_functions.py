"""Module calls as ONNX functions (``export(..., export_modules_as_functions=...)``).

Each call of a chosen module type becomes one node that calls an ONNX local function.
Calls whose bodies are equal share one function; calls that differ (another constant
baked into a Reshape, another attribute) get one function per distinct body, named
``Type``, ``Type_1``, ... in the domain of the class's Python module, as the TorchScript
exporter named them.

It runs on the finished graph (after the passes and the size-1 merge): each node knows
the module calls it came from (``node.meta["pt2onnx.modules"]``, outermost first, set by
the translator); a node a pass wrote without it joins the calls its producers and
consumers share. The innermost calls are extracted first, so a body calls the
functions of its submodules.

- Weights and every other value from outside a call are the function's inputs (an
  ONNX function holds no initializers); the small constants the rules made (at most
  64 elements, not a weight) become Constant nodes in the body, so layers with their
  own weights keep one body.
- Integer shape arithmetic that CSE shared between calls (computed in the first layer,
  read by the next ones) moves out of the call, so identical layers keep one body; so
  does attention's check for fully masked rows, which reads the shared mask alone.
- A call whose nodes a node outside both reads from and feeds cannot become one node:
  it stays inline, and the result names it.
- Types and shapes are left off the values inside a body (one body serves calls of
  other sizes); the call nodes' outputs keep theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir

Call = tuple[str, str, str]  # (call key, module path, qualified type name)

SMALL_CONSTANT = 64  # elements: a rule's constant this small is copied into the body
_CONE_LIMIT = 32
# Ops of the integer shape arithmetic CSE shares between layers (hoisted, see _cone).
_SHAPE_OPS = frozenset({
    "Shape", "Size", "Gather", "Concat", "Unsqueeze", "Squeeze", "Slice", "Cast", "Reshape",
    "Constant", "ConstantOfShape", "Range", "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs",
    "Equal", "Less", "Greater", "Where", "Max", "Min", "Expand", "Identity", "ReduceProd",
})
# sdpa's fully-masked-row check (rules/attention.py) reads only the mask, which the
# layers share, and ends in a bool: hoisted like the shape arithmetic.
_MASK_OPS = frozenset({"ArgMax", "GatherElements", "Not", "LessOrEqual"})
_HOISTED_OPS = _SHAPE_OPS | _MASK_OPS
_INTEGER = frozenset({ir.DataType.INT64, ir.DataType.INT32, ir.DataType.BOOL})


@dataclass
class Result:
    """What :func:`apply` did."""

    calls: dict[tuple[str, str], int] = field(default_factory=dict)  # (domain, name) -> calls
    inlined: list[str] = field(default_factory=list)  # module calls left inline, and why

    def summary(self) -> list[str]:
        return [f"{domain}::{name}: {n} call(s)" for (domain, name), n in self.calls.items()]


def chooser(selection: Any) -> Callable[[str], bool] | None:
    """The type predicate for ``export_modules_as_functions``: True, every module type
    (torch.onnx's meaning); a collection of module classes (or qualified or plain class
    names), those; False, None or empty: None (no functions)."""
    import torch

    if selection is None or selection is False:
        return None
    if selection is True:
        return lambda _name: True
    if isinstance(selection, (str, type)) or not isinstance(selection, Collection):
        selection = [selection]
    names: set[str] = set()
    for item in selection:
        if isinstance(item, type) and issubclass(item, torch.nn.Module):
            names.add(torch.typename(item))
        elif isinstance(item, str) and item:
            names.add(item)
        else:
            from pt2onnx.errors import InvalidInputError

            raise InvalidInputError(
                f"export_modules_as_functions takes True or a set of nn.Module classes "
                f"(or their names), got {item!r}. Next step: pass e.g. "
                "export_modules_as_functions={torch.nn.TransformerEncoderLayer}.")
    if not names:
        return None
    return lambda name: name in names or name.rsplit(".", 1)[-1] in names


def apply(model: ir.Model, chosen: Callable[[str], bool],
          weights: Collection[str] = ()) -> Result:
    """Extracts the calls of the module types ``chosen`` accepts (by qualified type name,
    ``torch.nn.modules.linear.Linear``) into functions, in place. ``weights``: the names
    of initializers that are the model's state (never copied into a body)."""
    shared = _Shared(model, chosen, set(weights))
    shared.names.update((domain, name) for domain, name, _ in model.functions)
    _Extractor(shared, model.graph).run()
    if shared.result.calls:  # the constants copied into bodies, and the dropped calls'
        for name, value in list(model.graph.initializers.items()):
            if not value.uses() and not value.is_graph_input() and not value.is_graph_output():
                model.graph.initializers.pop(name)
    for fn in model.functions.values():
        for domain, version in model.graph.opset_imports.items():
            fn.opset_imports.setdefault(domain, version)
    return shared.result


def _subgraphs(node: ir.Node) -> Iterator[ir.Graph]:
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            yield attr.as_graph()
        elif attr.type == ir.AttributeType.GRAPHS:
            yield from attr.as_graphs()


def _inner_nodes(node: ir.Node) -> Iterator[ir.Node]:
    for graph in _subgraphs(node):
        for inner in graph:
            yield inner
            yield from _inner_nodes(inner)


def _tensor_key(tensor: Any) -> tuple[Any, ...]:
    return (int(tensor.dtype), tuple(tensor.shape), tensor.tobytes())


def _freeze(attr: ir.Attr) -> Any:
    if attr.type == ir.AttributeType.TENSOR:
        return _tensor_key(attr.value)
    if attr.type == ir.AttributeType.TENSORS:
        return tuple(_tensor_key(t) for t in attr.value)
    value = tuple(attr.value) if isinstance(attr.value, (list, tuple)) else attr.value
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


@dataclass
class _Shared:
    """What the walks over the graph and its subgraphs share."""

    model: ir.Model
    chosen: Callable[[str], bool]
    weights: set[str]
    bodies: dict[Any, ir.Function] = field(default_factory=dict)  # signature -> function
    names: set[tuple[str, str]] = field(default_factory=set)
    result: Result = field(default_factory=Result)


class _Extractor:
    """One graph's walk (the main graph, or a branch of an If outside every call: the
    size-1 check's merge puts the whole model in one)."""

    def __init__(self, shared: _Shared, graph: ir.Graph):
        self.shared, self.graph, self.weights = shared, graph, shared.weights
        self.model, self.result = shared.model, shared.result
        chosen = shared.chosen
        self.order: list[ir.Node | None] = list(self.graph)
        self.pos: dict[ir.Node, int] = {n: i for i, n in enumerate(self.order) if n}
        self.top: dict[ir.Node, ir.Node] = {}
        for node in self.pos:
            for inner in _inner_nodes(node):
                self.top[inner] = node
        self.stack: dict[ir.Node, tuple[Call, ...]] = {}
        for node in self.pos:
            calls = node.meta.get("pt2onnx.modules")
            if calls is not None:
                self.stack[node] = tuple(c for c in calls if chosen(c[2]))
        # The innermost module path (metadata, as a pass's node copies it) -> its calls.
        self.by_path: dict[str, tuple[Call, ...]] = {}
        for node in self.stack:
            self.by_path.setdefault(node.metadata_props.get("pt2onnx.module", ""),
                                    self.stack[node])
        for node in self.pos:  # in graph order: a guess can lean on the ones before it
            if node not in self.stack:
                self.stack[node] = self._guess(node)
        self.members: dict[str, dict[ir.Node, None]] = {}
        self.info: dict[str, tuple[int, str, str]] = {}
        for node in self.pos:
            for depth, (key, path, type_name) in enumerate(self.stack[node], 1):
                self.members.setdefault(key, {})[node] = None
                self.info[key] = (depth, path, type_name)
        self.bodies, self.names = shared.bodies, shared.names
        self.made = 0

    def _up(self, node: ir.Node | None) -> ir.Node | None:
        return None if node is None else self.top.get(node, node)

    def _guess(self, node: ir.Node) -> tuple[Call, ...]:
        """A node a pass wrote: the calls of the module its metadata or its name
        (``<module path>/<node>/<what the pass wrote>``) names, or else the calls its
        neighbours have in common."""
        near = [self._up(v.producer()) for v in node.inputs if v is not None]
        near += [self._up(u.node) for v in node.outputs for u in v.uses()]
        stacks = [self.stack[n] for n in near if n is not None and n in self.stack]
        path = node.metadata_props.get("pt2onnx.module") or (
            node.name.split("/", 1)[0] if node.name and "/" in node.name else "")
        if path and path in self.by_path:
            known = self.by_path[path]
            paths = [c[1] for c in known]
            # A module called twice: the call of the nearest translated nodes of the same
            # module (through other nodes passes wrote), else of any neighbour.
            for other in (*self._nearest(node, path), *stacks):
                if [c[1] for c in other[:len(known)]] == paths:
                    return other[:len(known)]
            return known
        # A cast at the graph's boundary (precision_io) belongs to no call.
        if any(v is not None and v.is_graph_input() for v in node.inputs) or any(
                v.is_graph_output() for v in node.outputs):
            stacks.append(())
        if not stacks:
            return ()
        common = stacks[0]
        for other in stacks[1:]:
            k = 0
            while k < min(len(common), len(other)) and common[k] == other[k]:
                k += 1
            common = common[:k]
        return common

    def _nearest(self, node: ir.Node, path: str, hops: int = 4) -> list[tuple[Call, ...]]:
        """The calls of the translated nodes of module ``path`` nearest to ``node``,
        walking both ways through nodes that passes wrote (not through those that read
        weights alone, which CSE shares between calls)."""
        found: list[tuple[Call, ...]] = []
        seen, frontier = {node}, [node]
        for _ in range(hops):
            step = []
            for n in frontier:
                near = [self._up(v.producer()) for v in n.inputs if v is not None]
                near += [self._up(u.node) for v in n.outputs for u in v.uses()]
                for m in near:
                    if m is None or m in seen or m not in self.pos:
                        continue
                    seen.add(m)
                    # not through what is computed from weights alone: CSE shares it
                    if all(v is None or v.is_initializer() for v in m.inputs):
                        continue
                    if "pt2onnx.modules" not in m.meta:
                        step.append(m)
                    elif m.metadata_props.get("pt2onnx.module") == path:
                        found.append(self.stack[m])
            if found:
                return found
            frontier = step
        return found

    # -- the walk ---------------------------------------------------------------------
    def run(self) -> None:
        keys = sorted(self.members, key=lambda k: (
            -self.info[k][0], min(self.pos[n] for n in self.members[k])))
        for key in keys:
            self._extract(key)
        for node in list(self.graph):
            if not self.stack.get(node):
                for sub in _subgraphs(node):
                    _Extractor(self.shared, sub).run()
        if self.made:
            self.graph.sort()

    def _extract(self, key: str) -> None:
        depth, path, type_name = self.info[key]
        nodes = sorted(self.members.pop(key), key=self.pos.__getitem__)
        nodes = self._hoist(nodes, depth)
        if not nodes:
            return
        inside = set(nodes)
        if not self._convex(nodes, inside):
            self.result.inlined.append(
                f"{path} ({type_name}): a node outside the call both reads from it and "
                "feeds it, so it stays inline")
            return
        signature, ext, consts, outs = self._signature(nodes, inside)
        if not outs:
            return
        fn = self.bodies.get(signature)
        desc = self._descendants(nodes, inside)
        results = [ir.Value(type=old.type, shape=old.shape) for old in outs]
        for old, new in zip(outs, results):
            for use in list(old.uses()):
                if self._up(use.node) not in inside:
                    use.node.replace_input_with(use.idx, new)
            for i, out in enumerate(self.graph.outputs):
                if out is old:
                    self.graph.outputs[i] = new
        if fn is None:
            fn = self.bodies[signature] = self._define(nodes, inside, ext, consts, outs,
                                                        type_name)
        else:
            self._drop(nodes)
        for old, new in zip(outs, results):
            new.name = old.name
        again = key.rpartition("@")[2] if "@" in key else ""
        call = ir.Node(fn.domain, fn.name, ext, outputs=results,
                       name=f"{path}@{again}" if again else path, metadata_props={
                           "pt2onnx.module": path,
                           "pt2onnx.module_type": type_name.rsplit(".", 1)[-1]})
        self.graph.append(call)
        ident = (fn.domain, fn.name)
        self.result.calls[ident] = self.result.calls.get(ident, 0) + 1
        self.made += 1
        self._place(nodes, call, desc, depth)

    # -- which nodes ------------------------------------------------------------------
    def _hoist(self, nodes: list[ir.Node], depth: int) -> list[ir.Node]:
        """What CSE shared between calls moves out of the call that computes it for
        itself and for others: integer shape arithmetic, the masked-row check computed
        from a shared attention mask, and what is computed from the
        weights alone (a weight transposed or cast once for a module called three times)."""
        inside = set(nodes)
        out: set[ir.Node] = set()
        for node in nodes:
            for value in node.outputs:
                users = {self._up(u.node) for u in value.uses()}
                if not users & inside or not users - inside:
                    continue
                cone = self._cone(node, inside, weights=True)
                if cone is None and (value.dtype is None or value.dtype in _INTEGER):
                    cone = self._cone(node, inside, weights=False)
                if cone is not None:
                    out |= cone
        for node in out:
            self.stack[node] = self.stack[node][:depth - 1]
        return [n for n in nodes if n not in out]

    def _cone(self, node: ir.Node, inside: set[ir.Node], weights: bool) -> set[ir.Node] | None:
        """``node`` and what it reads from inside the call, if all shape arithmetic or
        mask ops (``weights`` False) or all computed from initializers (True)."""
        cone: set[ir.Node] = set()
        todo = [node]
        while todo:
            n = todo.pop()
            if n in cone:
                continue
            if n.domain not in ("", "ai.onnx") or any(True for _ in _subgraphs(n)) \
                    or len(cone) >= _CONE_LIMIT or (not weights and n.op_type not in _HOISTED_OPS):
                return None
            cone.add(n)
            for v in n.inputs:
                if v is None:
                    continue
                p = self._up(v.producer())
                if p is not None and p in inside:
                    todo.append(p)
                elif weights and not v.is_initializer():
                    return None
        return cone

    def _reads(self, node: ir.Node) -> Iterator[ir.Value]:
        for n in (node, *_inner_nodes(node)):
            yield from (v for v in n.inputs if v is not None)

    def _convex(self, nodes: list[ir.Node], inside: set[ir.Node]) -> bool:
        """No path leaves the call and comes back (one node could not hold it). Only the
        nodes before the call's last one can lead back into it."""
        last = self.pos[nodes[-1]]
        seen: set[ir.Node] = set()
        todo: list[ir.Node] = []
        for start in (list(nodes), todo):
            while start:
                node = start.pop()
                for value in node.outputs:
                    for use in value.uses():
                        user = self._up(use.node)
                        if user in inside:
                            if start is todo:
                                return False
                            continue
                        if user is None or user in seen or self.pos.get(user, last) >= last:
                            continue
                        seen.add(user)
                        todo.append(user)
        return True

    def _descendants(self, nodes: list[ir.Node], inside: set[ir.Node]) -> list[ir.Node]:
        """The nodes between the call's first and last node that read from it."""
        lo, hi = self.pos[nodes[0]], self.pos[nodes[-1]]
        reached = set(inside)
        desc = []
        for node in self.order[lo:hi + 1]:
            if node is None or node in inside:
                continue
            if any(self._up(v.producer()) in reached for v in self._reads(node)):
                reached.add(node)
                desc.append(node)
        return desc

    def _place(self, nodes: list[ir.Node], call: ir.Node, desc: list[ir.Node],
               depth: int) -> None:
        """The call takes the nodes' place: what reads from it after, the rest before."""
        lo, hi = self.pos[nodes[0]], self.pos[nodes[-1]]
        inside, after = set(nodes), set(desc)
        before = [n for n in self.order[lo:hi + 1] if n is not None
                  and n not in inside and n not in after]
        seg: list[ir.Node | None] = [*before, call, *desc]
        seg += [None] * (hi + 1 - lo - len(seg))
        self.order[lo:hi + 1] = seg
        for node in nodes:
            del self.pos[node]
        for i, slot in enumerate(seg, lo):
            if slot is not None:
                self.pos[slot] = i
        self.stack[call] = self.stack[nodes[0]][:depth - 1]
        for outer, *_ in self.stack[call]:
            group = self.members.get(outer)
            if group is not None:
                for node in nodes:
                    group.pop(node, None)
                group[call] = None

    # -- bodies -----------------------------------------------------------------------
    def _embeddable(self, value: ir.Value) -> bool:
        tensor = value.const_value
        return (value.is_initializer() and not value.is_graph_input() and tensor is not None
                and tensor.size <= SMALL_CONSTANT and "pt2onnx.weight" not in value.meta
                and value.name not in self.weights)

    def _signature(self, nodes: list[ir.Node], inside: set[ir.Node]) -> tuple[
            Any, list[ir.Value], list[ir.Value], list[ir.Value]]:
        """What makes two calls' bodies equal: the ops, their attributes and wiring, the
        constants copied in; with the call's inputs, constants and outputs in order."""
        ext: dict[ir.Value, int] = {}
        consts: dict[ir.Value, int] = {}
        made: dict[ir.Value, tuple[int, int]] = {}

        def ref(v: ir.Value | None) -> Any:
            if v is None:
                return None
            if v in made:
                return ("n", *made[v])
            if self._embeddable(v):
                consts.setdefault(v, len(consts))
                return ("c", _tensor_key(v.const_value))
            return ("i", ext.setdefault(v, len(ext)))

        body = []
        for j, node in enumerate(nodes):
            body.append(self._node_key(node, ref))
            for k, out in enumerate(node.outputs):
                made[out] = (j, k)
        outs = [v for n in nodes for v in n.outputs if v.is_graph_output()
                or any(self._up(u.node) not in inside for u in v.uses())]
        return (tuple(body), tuple(made[v] for v in outs)), list(ext), list(consts), outs

    def _node_key(self, node: ir.Node, ref: Callable[[ir.Value | None], Any]) -> Any:
        attrs = []
        for name, attr in sorted(node.attributes.items()):
            if attr.type == ir.AttributeType.GRAPH:
                value: Any = self._graph_key(attr.as_graph(), ref)
            elif attr.type == ir.AttributeType.GRAPHS:
                value = tuple(self._graph_key(g, ref) for g in attr.as_graphs())
            else:
                value = (attr.ref_attr_name, _freeze(attr))
            attrs.append((name, int(attr.type), value))
        return (node.domain, node.op_type, node.overload, tuple(ref(v) for v in node.inputs),
                tuple(attrs), len(node.outputs))

    def _graph_key(self, graph: ir.Graph, ref: Callable[[ir.Value | None], Any]) -> Any:
        local: dict[ir.Value, Any] = {v: ("s", i) for i, v in enumerate(graph.inputs)}
        for v in graph.initializers.values():
            local[v] = ("g", _tensor_key(v.const_value)) if v.const_value is not None else None

        def inner(v: ir.Value | None) -> Any:
            return local[v] if v is not None and v in local else ref(v)

        nodes = []
        for j, node in enumerate(graph):
            nodes.append(self._node_key(node, inner))
            for k, out in enumerate(node.outputs):
                local[out] = ("l", j, k)
        return (tuple(nodes), tuple(inner(v) for v in graph.outputs))

    def _define(self, nodes: list[ir.Node], inside: set[ir.Node], ext: list[ir.Value],
                consts: list[ir.Value], outs: list[ir.Value], type_name: str) -> ir.Function:
        """A function whose body is ``nodes`` (moved out of the graph)."""
        domain, _, base = type_name.rpartition(".")
        domain = domain or "pt2onnx.modules"
        name, k = base, 0
        while (domain, name) in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add((domain, name))
        inputs = [ir.Value(name=v.name) for v in ext]
        made = [ir.Node("", "Constant", [], [ir.AttrTensor("value", v.const_value)],
                        outputs=[ir.Value(name=v.name)])
                for v in consts if v.const_value is not None]  # all: _embeddable
        for old, new in [*zip(ext, inputs), *zip(consts, (n.outputs[0] for n in made))]:
            for use in list(old.uses()):
                if self._up(use.node) in inside:
                    use.node.replace_input_with(use.idx, new)
        self.graph.remove(nodes, safe=False)
        for node in nodes:
            for value in node.outputs:
                value.type, value.shape = None, None
        graph = ir.Graph(inputs, outs, nodes=[*made, *nodes], name=name,
                         opset_imports=dict(self.model.graph.opset_imports))
        fn = ir.Function(domain, name, graph=graph, attributes=[])
        self.model.functions[fn.identifier()] = fn
        self.model.graph.opset_imports.setdefault(domain, 1)
        self.model.opset_imports.setdefault(domain, 1)
        return fn

    def _drop(self, nodes: list[ir.Node]) -> None:
        """Another call of a body already defined: its nodes go, let go of their inputs."""
        for node in nodes:
            for n in (node, *_inner_nodes(node)):
                for i, v in enumerate(n.inputs):
                    if v is not None:
                        n.replace_input_with(i, None)
        self.graph.remove(nodes, safe=False)
