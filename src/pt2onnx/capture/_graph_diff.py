"""Where two captures of one model first differ, node by node.

A program captured with symbolic sizes and one captured at fixed sizes are walked in
order: the same ops, the same non-tensor arguments and the same output shapes once the
symbols take the fixed capture's sizes. Ops that only pass values through (a clone, a
reshape that is a view at one size and a copy at another) are left out, so memory layout
alone never makes two programs differ. Used by the size-1 proof (``_size_one``) and the
second-size check (``_second_size``).
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any

import sympy
import torch

aten = torch.ops.aten

# Ops that pass their input's values through unchanged: torch may add or leave them
# out by memory layout alone (a reshape is a view at size 1 and a copy otherwise), so
# they never make two programs differ.
_TRANSPARENT = {
    aten.clone.default, aten.alias.default, aten.detach.default,
    aten.contiguous.default, aten.lift_fresh_copy.default,
}
_SAME_AS_VIEW = {aten._unsafe_view.default, aten.reshape.default, aten.view.default,
                 aten._reshape_alias.default}
# Ops that are the identity when their output has their input's shape: a static capture
# leaves out a slice over a whole dim or an expand to the same shape, which a capture
# with a symbolic size keeps.
_IDENTITY_AT_SAME_SHAPE = {aten.slice.Tensor, aten.expand.default, aten.to.dtype,
                           aten._to_copy.default, aten.to.dtype_layout, *_SAME_AS_VIEW}


@dataclass
class Step:
    node: torch.fx.Node
    key: tuple[Any, ...]  # what must be equal: op, non-tensor arguments, output shapes


class _Any:
    """A size that depends on tensor data (an unbacked symbol): equal to any size."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "?"


ANY = _Any()


def _eval(expr: Any, values: dict[Any, int]) -> Any:
    if any(str(s).startswith("u") for s in getattr(expr, "free_symbols", ())):
        return ANY  # data-dependent: the static capture has the example's value
    try:
        return sympy.simplify(expr.subs(values))
    except Exception:
        return str(expr)


def _value(node: Any, values: dict[Any, int]) -> Any:
    """A comparable form of an FX argument: SymInts evaluated at ``values``."""
    if isinstance(node, torch.fx.Node):
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return _eval(val.node.expr, values)
        if isinstance(val, (int, float, bool)):
            return val
        return "T"
    if isinstance(node, (list, tuple)):
        return tuple(_value(n, values) for n in node)
    if isinstance(node, dict):
        return tuple(sorted((k, _value(v, values)) for k, v in node.items()))
    if isinstance(node, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return _eval(node.node.expr, values)
    if isinstance(node, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return str(node)
    return node


def _shape(val: Any, values: dict[Any, int]) -> Any:
    if isinstance(val, torch.Tensor):
        dims = []
        for d in val.shape:
            if isinstance(d, torch.SymInt):
                d = _eval(d.node.expr, values)
            dims.append(int(d) if getattr(d, "is_number", False) or type(d) is int else d)
        return (str(val.dtype), tuple(dims))
    if isinstance(val, (list, tuple)):
        return tuple(_shape(v, values) for v in val)
    return None


def _steps(program: torch.export.ExportedProgram, values: dict[Any, int]) -> list[Step]:
    return _graph_steps(program.graph_module, values)


def _graph_steps(module: torch.fx.GraphModule, values: dict[Any, int]) -> list[Step]:
    steps = []
    for node in module.graph.nodes:
        if node.op != "call_function" or node.target in _TRANSPARENT or (
                node.target is operator.getitem):
            continue
        if isinstance(node.target, torch._ops.HigherOrderOperator):
            # A region under no_grad or autocast is a submodule in one capture and inline
            # in another: compare what runs inside, in order.
            for arg in node.args:
                if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
                    sub = getattr(module, str(arg.target), None)
                    if isinstance(sub, torch.fx.GraphModule):
                        steps += _graph_steps(sub, values)
            if "wrap_with" in str(node.target):
                continue
        shape = _shape(node.meta.get("val"), values)
        if shape is None or shape == ():  # symbolic arithmetic, asserts: not tensor work
            continue
        if node.target in _IDENTITY_AT_SAME_SHAPE and node.args and isinstance(
                node.args[0], torch.fx.Node) and _shape(node.args[0].meta.get("val"),
                                                        values) == shape:
            continue
        target = aten.view.default if node.target in _SAME_AS_VIEW else node.target
        args = _value(tuple(node.args), values)
        if target is aten.view.default:
            args = ()  # the output shape says it all (view(x, [-1]) and view(x, [n]) agree)
        steps.append(Step(node, (str(target), args, _value(node.kwargs, values), shape)))
    return steps


def source_line(node: torch.fx.Node) -> str:
    """The innermost frame of the node's stack trace: the model's line."""
    from pt2onnx.translate import is_transparent

    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File ") and not is_transparent(lines[i]):
            code = lines[i + 1] if i + 1 < len(lines) else ""
            return f"{lines[i]}: {code}".replace('File "', "").replace('", line ', ":")
    return "(no source line recorded)"


def _same(a: Any, b: Any) -> bool:
    if a is ANY or b is ANY:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except TypeError:
        return False


def first_difference(general: torch.export.ExportedProgram,
                     at_one: torch.export.ExportedProgram, values: dict[Any, int]) -> tuple[Step | None, Step | None] | None:
    """The first pair of nodes that differ, or None when the programs agree."""
    a, b = _steps(general, values), _steps(at_one, {})
    for x, y in itertools.zip_longest(a, b):
        if x is None or y is None or not _same(x.key, y.key):
            return x, y
    return None


def describe(step: Step | None) -> str:
    if step is None:
        return "nothing (the graph ends earlier)"
    target, _, _, shape = step.key
    return f"{target.removeprefix('aten.')} giving {_shapes_text(shape)}"


def _shapes_text(shape: Any) -> str:
    if isinstance(shape, tuple) and len(shape) == 2 and isinstance(shape[0], str):
        return "(" + ", ".join(str(d) for d in shape[1]) + ")"
    return ", ".join(_shapes_text(s) for s in shape)
