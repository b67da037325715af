"""One file for both sides of size 1: ``If(dim == 1, graph at 1, general graph)``.

Where a declared dim may be 1 and the model computes something else there (``squeeze``
drops the dim only at 1, so even the result's rank changes), no single graph traced
as if the dim were never 1 is right. pt2onnx then captures the model a second time
with that dim at 1 (every other dim still dynamic), translates it, and joins both
graphs under an ``If`` on the input's size: each branch is exact on its side. The
weights the two graphs share are stored once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir


def _same_tensor(a: ir.Value, b: ir.Value) -> bool:
    ta, tb = a.const_value, b.const_value
    if ta is None or tb is None:
        return False
    if getattr(ta, "raw", None) is not None and getattr(ta, "raw", None) is getattr(tb, "raw", 0):
        return True
    if ta.dtype != tb.dtype or tuple(ta.shape) != tuple(tb.shape):
        return False
    return bool(np.array_equal(ta.numpy(), tb.numpy()))


def _merged_shape(a: ir.Value, b: ir.Value) -> ir.Shape | None:
    """The dims both branches agree on, the others unnamed. ONNX wants a rank on every
    graph output: where the branches' ranks differ (``squeeze`` at 1), the general
    graph's rank is declared, with no dim known (onnxruntime warns at 1 and runs)."""
    if a.shape is None or b.shape is None:
        return None
    if len(a.shape) != len(b.shape):
        return ir.Shape([None] * len(a.shape))
    return ir.Shape([x if x == y else None for x, y in zip(a.shape, b.shape)])


def _branch(graph: ir.Graph, name: str) -> ir.Graph:
    """``graph``'s nodes as a subgraph with no inputs (it reads the outer graph's)."""
    nodes = list(graph)
    graph.remove(nodes, safe=False)
    outputs = list(graph.outputs)
    graph.outputs.clear()
    body = ir.Graph([], [], nodes=nodes, name=name)
    for value in outputs:
        # A branch output must be made in the branch (a model input or a weight passed
        # through is not): an Identity names it there.
        out = ir.Value(name=f"{name}/out/{value.name}", type=value.type, shape=value.shape)
        body.append(ir.Node("", "Identity", [value], outputs=[out]))
        body.outputs.append(out)
    return body


def merge_at_one(general: ir.Model, at_one: ir.Model, where: list[tuple[int, int]],
                 ) -> tuple[ir.Model, list[str]]:
    """``general`` with its nodes under ``If(Shape(input)[axis] == 1 for each (input,
    axis) in where, at_one, general)``.

    Both models take the same inputs in the same order; ``at_one`` was captured with
    those axes at 1 (several where declared dims broadcast against each other and only
    all at 1 differ). ``general`` is changed in place and returned, with the names of
    the outputs whose rank at 1 is not the declared one."""
    return _join(general, at_one, "at_one", where, "Equal", 1)


def merge_up_to(general: ir.Model, low: ir.Model, where: tuple[int, int], top: int,
                ) -> tuple[ir.Model, list[str]]:
    """``general`` with its nodes under ``If(Shape(input)[axis] <= top, low, general)``:
    ``low`` was captured for that dim's sizes up to ``top``, ``general`` above them (a
    growing cache the model's state holds at ``top``)."""
    return _join(general, low, "up_to", [where], "LessOrEqual", top)


def merge_at(general: ir.Model, at_n: ir.Model, where: tuple[int, int], n: int,
             ) -> tuple[ir.Model, list[str]]:
    """``general`` with its nodes under ``If(Shape(input)[axis] == n, at_n, general)``:
    ``at_n`` was captured with that dim static at ``n`` (a size below the range its
    residue class's capture holds, ``_residue``)."""
    return _join(general, at_n, f"at{n}", [where], "Equal", n)


def merge_residue(general: ir.Model, other: ir.Model, where: tuple[int, int], k: int,
                  residue: int) -> tuple[ir.Model, list[str]]:
    """``general`` with its nodes under ``If(Shape(input)[axis] % k == residue, other,
    general)``: ``other`` was captured for that dim's sizes of one residue class
    (``_residue``)."""
    return _join(general, other, f"mod{k}_{residue}", [where], "Equal", residue, modulus=k)


def _join(general: ir.Model, other: ir.Model, prefix: str, where: list[tuple[int, int]],
          compare: str, size: int, modulus: int | None = None) -> tuple[ir.Model, list[str]]:
    """``If(compare(Shape(input)[axis] (% modulus), size) for each (input, axis), other,
    general)``."""
    g, g1 = general.graph, other.graph
    if len(g.inputs) != len(g1.inputs) or len(g.outputs) != len(g1.outputs):
        raise ValueError("the two captures have different inputs or outputs")
    for v1, v in zip(g1.inputs, g.inputs):
        v1.replace_all_uses_with(v)
    for name in list(g1.initializers):
        init = g1.initializers.pop(name)
        existing = g.initializers.get(name)
        if existing is not None and _same_tensor(existing, init):
            init.replace_all_uses_with(existing)
            continue
        init.name = f"{prefix}/{name}"
        g.register_initializer(init)
    unnamed = 0
    for node in g1.all_nodes():  # value names are unique across a model and its subgraphs
        for out in node.outputs:
            if not out.name:  # an unnamed value (fuzz seed 7411 program 109: two "at_one/")
                unnamed += 1
                out.name = f"unnamed{unnamed}"
            out.name = f"{prefix}/{out.name}"
        if node.name:
            node.name = f"{prefix}/{node.name}"
    outputs = list(g.outputs)
    names = [v.name or f"output_{i}" for i, v in enumerate(outputs)]
    shapes = [_merged_shape(a, b) for a, b in zip(outputs, g1.outputs)]
    other_rank = [v.name or "" for v, w in zip(outputs, g1.outputs) if v.shape is not None
                  and w.shape is not None and len(v.shape) != len(w.shape)]
    # A model joined before already holds "general/..." names (one If per residue class,
    # or size 1 beside a split): each join names its own.
    taken = {(v.name or "").split("/", 1)[0] for node in g.all_nodes() for v in node.outputs}
    rest = next(f"general{i or ''}" for i in range(len(taken) + 1)
                if f"general{i or ''}" not in taken)
    then_branch, else_branch = _branch(g1, prefix), _branch(g, rest)
    bound = ir.Value(name=f"{prefix}/size", const_value=ir.tensor(np.array([size], np.int64)))
    g.register_initializer(bound)
    tests: list[ir.Node] = []
    cond: ir.Node | None = None
    for input_index, axis in where:
        size_of = ir.Node("", "Shape", [g.inputs[input_index]], attributes=[
            ir.AttrInt64("start", axis), ir.AttrInt64("end", axis + 1)])
        tests.append(size_of)
        if modulus is not None:
            by = ir.Value(name=f"{prefix}/modulus",
                          const_value=ir.tensor(np.array([modulus], np.int64)))
            g.register_initializer(by)
            size_of = ir.Node("", "Mod", [size_of.outputs[0], by])
            tests.append(size_of)
        test = ir.Node("", compare, [size_of.outputs[0], bound])
        tests.append(test)
        if cond is not None:
            test = ir.Node("", "And", [cond.outputs[0], test.outputs[0]])
            tests.append(test)
        cond = test
    assert cond is not None
    choose = ir.Node("", "If", [cond.outputs[0]],
                     attributes=[ir.AttrGraph("then_branch", then_branch),
                                 ir.AttrGraph("else_branch", else_branch)],
                     num_outputs=len(outputs))
    g.extend([*tests, choose])
    for out, old, name, shape in zip(choose.outputs, outputs, names, shapes):
        if old.producer() is not None:  # the If's output takes the name
            old.name = f"{rest}/{name}"
        out.name, out.type, out.shape = name, old.type, shape
        g.outputs.append(out)
    for domain, version in g1.opset_imports.items():
        g.opset_imports.setdefault(domain, version)
    for key, function in other.functions.items():
        general.functions.setdefault(key, function)
    return general, other_rank


def input_position(program: Any, symbol: Any) -> tuple[int, int] | None:
    """(tensor input index, axis) of the first input dim that is ``symbol`` itself."""
    import torch

    from pt2onnx.capture._resize import user_shapes

    for i, shape in enumerate(user_shapes(program)):
        for axis, d in enumerate(shape):
            if isinstance(d, torch.SymInt) and d.node.expr == symbol:
                return i, axis
    return None
