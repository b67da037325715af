"""Two captures for a dim whose cache the model's state holds: ``If(dim <= n, ...)``.

A model keeps a cache that grows (``if self.n < len(x): refill``, then
``self.k[:len(x)]``), and an earlier eager call left it at n, above the example.
torch.export captures the cache hit and proves its guards only up to n; captured
again above n (``_refine._past_a_cap``), the refill is traced and proved only from
n + 1. The sizes below are first run against eager one by one
(``_below_minimum.lift``); where that does not reach the declared minimum (the
example's index values do not fit the smaller sizes, fuzz seed 3805 program 533),
the model is captured once more with the dim bounded at n, and the file holds both:
each branch is proved by torch.export for its side of n, and an ``If`` on the
input's size picks. The model's state is not changed: the branch up to n reads the
cache as the model holds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pt2onnx.capture._refine import BOUNDED_RANGE, TIED_NOTE


def _ranges(notes: list[str]) -> dict[str, tuple[int, float]]:
    """name -> (low, high) of each ``name bounded to [low, high]`` (high inf, oo or
    int_oo: no bound)."""
    found: dict[str, tuple[int, float]] = {}
    for note in notes:
        m = BOUNDED_RANGE.match(note)
        if m is not None:
            high = m.group(3)
            found[m.group(1)] = (int(m.group(2)), float(high) if high.isdigit() else math.inf)
    return found


def _ties(notes: list[str]) -> set[tuple[str, str]]:
    return {(m.group(1), m.group(2)) for m in map(TIED_NOTE.match, notes) if m is not None}


def _covers(low: list[str], general: list[str], name: str, lowest: int, top: int) -> bool:
    """Whether the capture up to ``top`` keeps ``name`` from ``lowest`` and narrows and
    ties nothing the general one does not."""
    mine, theirs = _ranges(low), _ranges(general)
    if name in mine and (mine[name][0] > lowest or mine[name][1] < top):
        return False
    for dim, (lo, hi) in mine.items():
        if dim != name and (dim not in theirs or lo > theirs[dim][0] or hi < theirs[dim][1]):
            return False
    return _ties(low) <= _ties(general)


def split_up_to(prog: Any, captured: Any, rep: Any, declared_min: int,
                dim_names: list[dict[int, str]],
                up_to: Callable[[Any, str, int], tuple[Any, Any] | None],
                settle: Callable[[Any, Any], list[str]]) -> list[str]:
    """Where ``captured.split`` (name, n) names a dim still narrowed from below the
    declared minimum ``declared_min``, ``prog.model`` becomes ``If(name <= n, capture
    up to n, itself)`` and the narrowing is dropped from the report. Returns notes;
    none where the split is not needed or not possible (the narrowing then stands)."""
    from pt2onnx.capture._size_one import _run
    from pt2onnx.capture._size_one_merge import merge_up_to

    if captured.split is None:
        return []
    name, top = captured.split
    narrowing = [n for n in rep.dynamic_refinements if n.startswith(f"{name} bounded to [")]
    ranges = _ranges(narrowing)
    lowest = max(declared_min, 1)
    if name not in ranges or not lowest < ranges[name][0] <= top + 1:
        return []
    where = next(((i, axis) for i, axes in enumerate(dim_names) for axis, n in axes.items()
                  if n == name), None)
    if where is None:
        return []
    try:
        built = up_to(prog, name, top)
    except Exception as exc:  # the narrowing stands, as reported
        return [f"{name}: a capture for its sizes up to {top} failed "
                f"({type(exc).__name__}: {str(exc)[:200]}); the narrowing stands"]
    if built is None:
        return []
    low, cap = built
    general = [n for n in rep.dynamic_refinements if n not in narrowing]
    if cap.below_minimum or not _covers(cap.refinements, general, name, lowest, top):
        return [f"{name}: the capture for its sizes up to {top} narrows them too "
                f"({'; '.join(cap.refinements)}); the narrowing stands"]
    notes = []
    if cap.size_one:
        try:
            notes += [f"{name} <= {top}: {n}" for n in settle(low, cap)]
        except Exception as exc:
            return [f"{name}: the capture for its sizes up to {top} is not right at size 1 "
                    f"({type(exc).__name__}: {str(exc)[:200]}); the narrowing stands"]
    import onnx_ir as ir

    kept = ir.to_proto(prog.model)
    try:
        prog.model, other_rank = merge_up_to(prog.model, low.model, where, top)
    except ValueError as exc:  # the captures' inputs or outputs differ
        prog.model = ir.from_proto(kept)
        return [f"{name}: the capture for its sizes up to {top} cannot join the other "
                f"({exc}); the narrowing stands"]
    prog._session = None
    # The sizes cut off that can be run, through the joined file (each side of n).
    for below in captured.below_minimum:
        for point in below.points.values() if below.name == name else ():
            wrong = None if point is None else _run(prog, point)
            if wrong is not None:
                prog.model, prog._session = ir.from_proto(kept), None
                return [f"{name}: joined with a capture for its sizes up to {top}, the file "
                        f"does not match eager PyTorch at {point.label}: {wrong[:300]}; "
                        "the narrowing stands"]
    rep.dynamic_refinements[:] = general
    # The narrowing, and what the run below it gave back, no longer apply.
    rep.warnings[:] = [w for w in rep.warnings
                       if w not in {f"dynamic shapes refined: {n}" for n in narrowing}
                       and not w.startswith(f"{name}: torch.export proved its guards only")]
    notes.append(
        f"{name}: the model's state holds what it computes for sizes up to {top} (an eager "
        f"call above that refills it), so the file holds a capture for {name} <= {top} and "
        f"one for {name} > {top}, each proved by torch.export on its side and chosen by an "
        f"If on the input's size; {name} keeps its declared range")
    if other_rank:
        notes.append(f"{name}: outputs {other_rank} differ in rank on the two sides of {top}")
    return notes
