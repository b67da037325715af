"""Proof that a dynamic program is right at a second size, not only at its example.

torch.export can hold a value computed from a dynamic size constant without a guard
that says so: a Python loop over ``math.ceil((t - 1) / 4)`` segments (torchaudio's
Emformer) is unrolled for the example's count, and, once a suggested fix such as
``time = 4*_time`` is applied, the capture returns with ``_time`` free over its whole
range. A file written from it runs only at the example's sizes, or computes other
numbers elsewhere, and torch.onnx's exporters write it as it is.

So every such capture (:func:`needed`) is compared, node by node (as at size 1,
``_size_one.py``), with a static capture at a second size: every dynamic dim doubled (or the nearest other size
its range allows). Equal programs prove the graph does not depend on the example's
sizes beyond what it states. Where they differ, ``_size_one.settle`` runs the written
graph there against eager: a match is kept and reported (the two captures only spell the
same computation differently), and a mismatch is a typed refusal naming the model line.
"""

from __future__ import annotations

from typing import Any

import torch

from pt2onnx import _compat
from pt2onnx.capture._graph_diff import describe, first_difference, source_line
from pt2onnx.capture._size_one import Unproved, root_symbols, trusted_now


def needed(refinements: list[str], assumed: list[str]) -> bool:
    """Whether a capture needs the second size: where pt2onnx captured again under a
    relation torch.export suggested (``time = 4*_time``), or with guards it checked
    itself (``_guards_hold.py``). A capture with the spec as declared, or only bounded,
    keeps torch.export's own guards, which report a size the graph depends on (the same
    loop is a constraint violation there, ``ceil((t//4 - 1)/4) == 8``), except on torch
    releases where pt2onnx defers guards to run-time asserts (2.12): every dynamic
    capture is checked there."""
    return (_compat.DEFERRED_GUARDS or bool(assumed)
            or any("tied to other dims" in n for n in refinements))


def _declared_sizes(program: torch.export.ExportedProgram,
                    positions: list[tuple[str, int, int, int]], values: dict[Any, int],
                    ) -> dict[str, int]:
    """Each declared dim's name -> its size where the program's symbols take ``values``."""
    from pt2onnx.capture._resize import user_shapes

    shapes = user_shapes(program)
    sizes: dict[str, int] = {}
    for name, i, axis, _ in positions:
        if i < len(shapes) and axis < len(shapes[i]):
            d = shapes[i][axis]
            expr = d.node.expr if isinstance(d, torch.SymInt) else d
            try:
                sizes.setdefault(name, int(expr.subs(values) if hasattr(expr, "subs") else expr))
            except TypeError:
                continue
    return sizes


def point(module: torch.nn.Module, program: torch.export.ExportedProgram, strict: bool,
          names: dict[Any, str], positions: list[tuple[str, int, int, int]],
          ) -> tuple[list[str], list[Unproved]]:
    """The second-size point of ``program``: (notes, [the point]) where its static capture
    differs, ([note], []) where it cannot be checked, ([], []) where it is proved."""
    from pt2onnx.capture._dynamic import _export
    from pt2onnx.capture._resize import second_size

    example = program.example_inputs
    if trusted_now() or not example:
        return [], []
    found = second_size(program, tuple(example[0]), dict(example[1] or {}))
    if found is None:
        return [], []
    sizes, args2, kwargs2 = found
    known = root_symbols(program)
    values = {**known, **{s: new for s, (_, new) in sizes.items()}}
    at_example, at_second = (_declared_sizes(program, positions, v) for v in (known, values))
    changed = [n for n in at_second if at_second[n] != at_example.get(n)]
    label = ", ".join(f"{n}={at_second[n]}" for n in changed) or ", ".join(
        f"{names.get(s, str(s))}={new}" for s, (_, new) in sizes.items())
    try:
        with torch.no_grad():
            other = _export(module, args2, kwargs2, None, strict)
    except Exception as exc:
        why = (str(exc).strip().splitlines() or [""])[0][:200]
        return [f"{label} (a second size) not checked: the model does not capture there "
                f"({type(exc).__name__}: {why})"], []
    differs = first_difference(program, other, values)
    if differs is None:
        return [], []
    general, static = differs
    first = general or static
    where = source_line(first.node) if first is not None else "(unknown)"
    example_sizes = ", ".join(f"{n}={at_example[n]}" for n in changed) or "the example"
    dims = ", ".join(changed) or ", ".join(dict.fromkeys(names.get(s, str(s)) for s in sizes))
    message = (
        "the dynamic shapes declare a dim that can only take one size in this model: "
        f"{'one of ' if ',' in dims else ''}{dims} is fixed by the model, though "
        "torch.export did not say so.\n"
        f"  At {label} PyTorch runs {describe(static)} at {where}; the graph captured at "
        f"{example_sizes} runs {describe(general)} there, and the written graph, run "
        "there against eager PyTorch, is wrong.\n"
        "The model turns a size into a Python value that shapes the graph (a loop count, "
        "or int() / math.ceil() of a size used as a length), which torch.export held at "
        "the example's value. No single ONNX graph captured this way computes the model "
        "at every size, so pt2onnx refuses.\n"
        f"Next step: leave {dims} static (export at the size you will run), or compute "
        "that value with tensor ops so the graph stays general.")
    return [], [Unproved(f"{label} (a second size)", args2, kwargs2, message, list(sizes),
                         changed, where, None, at_one=False)]
