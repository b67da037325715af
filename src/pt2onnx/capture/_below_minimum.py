"""Sizes below a minimum torch.export could prove, where the model still runs.

A guard torch.export cannot prove for a dim's whole range, but that holds from some
size on, narrows the range (``_guards_hold``, and torch's own suggested ``min=``). Often
the sizes cut off are the 0/1 special cases of an expression of the dim, not real
limits of the model: ``x[:, 0:-1]`` is ``b - 1`` long, and torch.export's guard
``Ne(b - 1, 1)`` (its broadcast assumes that length is never 1) cuts off ``b = 2``,
where eager runs and the general graph is right (fuzz seed 2613, programs 3390 and
4290). So each size cut off between the declared minimum and the new one, where eager
runs, is a point the written graph is run at; where every one of them matches eager,
the dim keeps those sizes, and the report says they were checked. Where one does not,
the range stays narrowed from there, as reported.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from pt2onnx.capture._size_one import Unproved

BOUNDED = re.compile(r"^(\w+) bounded to \[(\d+), ")
MOST = 32  # sizes below the new minimum checked one by one; more: the narrowing stands


@dataclass
class Below:
    """A dim whose range was narrowed: the sizes cut off and a point at each where the
    model runs (None where it does not)."""

    name: str
    note: str  # the refinement note that narrowed it
    declared: int
    minimum: int
    points: dict[int, Unproved | None] = field(default_factory=dict)
    # the example's own size where it is below the new minimum: the export is refused
    # unless the run below the minimum reaches it
    example: int | None = None
    # why the range left would exclude the example, where ``lift`` left that to a
    # capture up to a cache's length (``_up_to``) to settle
    excluded: str | None = None


def liftable(notes: list[str], positions: list[tuple[str, int, int, int]],
             sizes: dict[str, int]) -> dict[str, int]:
    """The dims narrowed from below to above the example's own size, by at most
    ``MOST`` sizes above the declared minimum: name -> the example's size."""
    found = {}
    for note in notes:
        m = BOUNDED.match(note)
        if m is None or m.group(1) not in sizes:
            continue
        name, minimum = m.group(1), int(m.group(2))
        declared = max(min((low for n, _, _, low in positions if n == name), default=1), 1)
        if declared <= sizes[name] < minimum <= declared + MOST:
            found[name] = sizes[name]
    return found


def points(module: torch.nn.Module, program: torch.export.ExportedProgram,
           refinements: list[str], positions: list[tuple[str, int, int, int]],
           names: dict[Any, str], examples: dict[str, int] | None = None,
           original: tuple[tuple[Any, ...], dict[str, Any]] | None = None) -> list[Below]:
    """For each narrowed dim, the sizes cut off that are at most ``MOST`` below the new
    minimum, with the example resized to each; at the example's own size, the example
    itself (``original``: a capture at a grown example resizes index inputs whose
    values the example's size would not hold)."""
    from pt2onnx.capture._resize import example_at
    from pt2onnx.capture._size_one import root_symbols

    symbols = {name: sym for sym, name in names.items()}
    known = root_symbols(program)
    found = []
    for note in refinements:
        m = BOUNDED.match(note)
        if m is None or m.group(1) not in symbols or symbols[m.group(1)] not in known:
            continue
        name, minimum = m.group(1), int(m.group(2))
        lowers = [lower for n, _, _, lower in positions if n == name]
        declared = max(min(lowers, default=minimum), 1)
        if not declared < minimum <= declared + MOST:
            continue
        below = Below(name, note, declared, minimum, example=(examples or {}).get(name))
        for size in range(declared, minimum):
            if original is not None and below.example == size:
                example: tuple[tuple[Any, ...], dict[str, Any]] | None = original
            else:
                # Every symbol of the name: torch.export can give two inputs' dims one
                # Dim as two symbols (fuzz seed 6301, program 541: resizing one of them
                # left the others at the grown size, and eager failed).
                example = example_at(program, {**known, **{
                    sym: size for sym, n in names.items() if n == name and sym in known}})
            point = None
            if example is not None:
                try:
                    with torch.no_grad():
                        module(*copy.deepcopy(example[0]), **copy.deepcopy(example[1]))
                    point = Unproved(f"{name}={size}", example[0], example[1], "",
                                     [symbols[name]], [name])
                except Exception:  # eager fails there too: a real limit of the model
                    point = None
            below.points[size] = point
        found.append(below)
    return found


def lift(prog: Any, below: list[Below], rep: Any, defer: str | None = None) -> list[str]:
    """Runs the written graph at the sizes cut off, from the new minimum down; gives each
    dim back the sizes where it matches eager (editing the report's refinements).
    Returns notes. A range that would exclude the example is refused, but for the dim
    ``defer``, where a capture up to its cache's length may still cover it (the caller
    raises ``excluded`` where that does not)."""
    from pt2onnx.capture._size_one import _run

    notes = []
    for b in below:
        lowest, checked = b.minimum, []
        for size in range(b.minimum - 1, b.declared - 1, -1):
            point = b.points.get(size)
            if point is None:
                break
            try:
                wrong = _run(prog, point)
            except Exception:  # onnxruntime is not installed: it cannot be told
                break
            if wrong is not None:
                break
            lowest = size
            checked.append(size)
        if b.example is not None and b.example < lowest:
            from pt2onnx.errors import CaptureError

            b.excluded = (
                f"the dynamic shapes declare {b.name}, and torch.export proved the model's "
                f"guards only from {b.name} = {b.minimum} (captured above the example, "
                f"{b.example}); the written graph, run below that against eager PyTorch, "
                f"is right only down to {lowest}, so its range would exclude the example."
                f"\nNext step: export from an example of {lowest} or more, or make "
                f"{b.name} static.")
            if b.name != defer:
                raise CaptureError(b.excluded)
        if lowest == b.minimum:
            continue
        edited = None if lowest == b.declared else b.note.replace(
            f"bounded to [{b.minimum}, ", f"bounded to [{lowest}, ", 1)
        rep.dynamic_refinements[:] = [r for r in rep.dynamic_refinements if r != b.note] + (
            [edited] if edited else [])
        old = f"dynamic shapes refined: {b.note}"
        rep.warnings[:] = [w for w in rep.warnings if w != old] + (
            [f"dynamic shapes refined: {edited}"] if edited else [])
        sizes = ", ".join(str(s) for s in sorted(checked))
        notes.append(
            f"{b.name}: torch.export proved its guards only from {b.minimum}; the written "
            f"graph was run at {b.name} = {sizes} against eager PyTorch and matches, so "
            f"{b.name} keeps its sizes from {lowest} (the model's own range)"
            if lowest == b.declared else
            f"{b.name}: torch.export proved its guards only from {b.minimum}; the written "
            f"graph was run at {b.name} = {sizes} against eager PyTorch and matches, so "
            f"{b.name} is bounded from {lowest}")
    return notes
