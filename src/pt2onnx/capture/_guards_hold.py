"""Guards torch.export cannot prove but that hold for every size a Dim allows.

torch.export checks each guard a capture adds on a named Dim against the Dim's range
with its own solver. Some guards it cannot decide: ``torch.chunk(x, 1, d)`` along a
dynamic dim asks ``((2*B - 1) // B) == 1``, true for every B >= 1. torch.export then
reports a constraint violation and suggests fixing B to the example's size, and a model
that runs at every size would be refused.

Here each guard named by the violation is evaluated at the sizes the range allows:
every size when the range spans at most ``EXHAUSTIVE`` values, else every size up to
``EXHAUSTIVE`` above the minimum plus spread samples up to ``2**31`` (the note says so).
When every guard holds, the capture is repeated with those Dims as ``Dim.DYNAMIC``,
which accepts the same guards as assumptions. That is exact: the guards of that capture
are the ones the violation listed (checked here) plus those the declared range already
implied.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import torch

from pt2onnx.capture._dynamic import (
    DeclaredAxis,
    GuardLog,
    Refined,
    _checked,
    _export,
    _source_symbols,
    bound_inputs,
)

EXHAUSTIVE = 1 << 16
# Whether a guard that stops holding above some size may bound the dim from above: off
# for the first try of a capture, on for its last resort (``_refine.export_refined``).
_FROM_ABOVE = [True]


@contextlib.contextmanager
def bounds_from_above(allowed: bool) -> Iterator[None]:
    saved = _FROM_ABOVE[0]
    _FROM_ABOVE[0] = allowed
    try:
        yield
    finally:
        _FROM_ABOVE[0] = saved
# At most this many sizes inside a range where a guard fails, each checked by running the
# file there, before the guard counts as one that narrows or fixes the dim.
HOLES = 2
# A guard that fails over one run of sizes at an end of the range (``b <= 2``, from an
# op's own branch on an empty tensor) bounded the range there, and a file right over the
# whole range was cut short (fuzz seed 7411 programs 203, 393, 2692: both torch.onnx
# exporters wrote files right there). The file is run at the run's edges and middle
# instead, against eager; where it is wrong there, the export is repeated with the range
# bounded (``guards_bound_the_range``). Runs that reach above EDGE_MAX are bounded.
EDGE_MAX = 1024
_EDGES: contextvars.ContextVar[bool] = contextvars.ContextVar("guard_edges", default=True)
# Within ``edges_tracked()``: set once a capture kept a range by running edges.
_EDGES_USED: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "guard_edges_used", default=None)


@contextlib.contextmanager
def edges_tracked() -> Iterator[list[bool]]:
    """A list that is non-empty once an export within kept a range by edge runs
    (``edges_of``): where such an export fails in any way, ``_api`` repeats it with the
    range bounded (``guards_bound_the_range``), as every export ran before edge runs."""
    used: list[bool] = []
    token = _EDGES_USED.set(used)
    try:
        yield used
    finally:
        _EDGES_USED.reset(token)


@contextlib.contextmanager
def guards_bound_the_range() -> Iterator[None]:
    """A guard that fails over a run of sizes bounds the range (the retry after
    ``WrongWhereGuardFails``), instead of having the file run at the run's edges."""
    token = _EDGES.set(False)
    try:
        yield
    finally:
        _EDGES.reset(token)


def edges_of(bad: list[int], sizes: list[int], example: int | None) -> list[int] | None:
    """The sizes to run the file at for a guard that fails at ``bad``: its first, middle
    and last size, where ``bad`` is one run of consecutive sizes checked (``sizes``) that
    ends at most at EDGE_MAX and leaves the example out; None where the range is bounded
    as before."""
    if not _EDGES.get() or not bad or bad[-1] > EDGE_MAX or (
            example is not None and bad[0] <= example <= bad[-1]):
        return None
    if bad != [b for b in sizes if bad[0] <= b <= bad[-1]] or bad != list(
            range(bad[0], bad[-1] + 1)):
        return None
    used = _EDGES_USED.get()
    if used is not None:
        used.append(True)
    return sorted({bad[0], (bad[0] + bad[-1]) // 2, bad[-1]})


def _edges_note(name: str, guard: str, bad: list[int], runs: list[int]) -> str:
    return (f"dynamic dim {name}: the capture assumes {guard}, which fails at every size "
            f"from {bad[0]} to {bad[-1]}; the file was run at {', '.join(map(str, runs))} "
            f"against eager PyTorch and matches, so {name} keeps its declared range")
# The range reads "3 <= b <= 64" or "b <= 64" (min 0), or is left out. ("3 <= b", with no
# max, is left to the guards the capture logged.)
_LINE = re.compile(r"Not all values of (\w+) = (.+?) in the specified range"
                   r"(?: (?:(\d+) <= )?\w+ <= (\d+))? satisfy the generated guard (.+)")
_SOURCE = re.compile(r"L\[[^\]]+\](?:\[[^\]]+\]|\.\w+)*?\.size\(\)\[\d+\]")


def violated_guards(message: str) -> dict[str, list[str]] | None:
    """``{dim name: [guard source]}`` from a constraint violation; None if a line about
    a dim's guards cannot be read (a relation between Dims, an unknown form)."""
    found: dict[str, list[str]] = {}
    head = message.split("\n\nSuggested fixes:")[0]
    for line in head.splitlines():
        line = line.strip()
        if not line.startswith("- "):
            continue
        m = _LINE.search(line)
        if m is None:
            if "solving the guards generated for" in line:
                continue  # the specialization torch derived from the guards listed above
            return None
        guard = m.group(5).split("Specializations unexpectedly required")[0].strip()
        found.setdefault(m.group(1), []).append(guard.removesuffix("."))
    return found or None


# The functions torch prints a guard on Python arithmetic of sizes with (``round(b / 2)``,
# ``math.trunc(0.5*torch.sym_float(b))``), as Python computes them.
_PYTHON: dict[str, Any] = {
    "Max": max, "Min": min, "abs": abs, "max": max, "min": min, "round": round,
    "trunc": math.trunc, "floor": math.floor, "ceil": math.ceil, "sym_float": float,
    "sym_int": int}


def _compiled(guard: str, sources: set[str]) -> Callable[[int], bool] | None:
    """The guard as a function of the Dim's size, when each size it reads is one of the
    Dim's own axes."""
    used = set(_SOURCE.findall(guard))
    if not used or not used <= sources:
        return None
    text = guard
    for src in sorted(used, key=len, reverse=True):
        text = text.replace(src, "b")
    for dotted in ("math.", "torch."):  # math.trunc, torch.sym_float: Python's arithmetic
        text = text.replace(dotted, "")
    if set(re.findall(r"[A-Za-z_]\w*", text)) - {"b", "and", "or", "not", *_PYTHON}:
        return None  # only the size, numbers, arithmetic and comparisons are evaluated
    try:
        code = compile(text, "<guard>", "eval")
    except SyntaxError:
        return None
    names = _PYTHON

    def holds(b: int) -> bool:
        return bool(eval(code, {"__builtins__": {}, **names}, {"b": b}))

    return holds


def _sizes(lo: int, hi: int | None) -> tuple[list[int], bool]:
    """The sizes to evaluate, and whether they are all the range holds."""
    if hi is not None and hi - lo <= EXHAUSTIVE:
        return list(range(lo, hi + 1)), True
    top = hi if hi is not None else 2**31
    sizes = list(range(lo, lo + EXHAUSTIVE + 1))
    sizes += [2**k + d for k in range(17, 32) for d in (-1, 0, 1) if 2**k + d <= top]
    sizes += [int(lo + (top - lo) * (i / 997)) for i in range(1, 998)]
    return sorted(set(sizes)), False


_SYMPY = {"Eq": lambda a, b: a == b, "Ne": lambda a, b: a != b, "Mod": lambda a, b: a % b,
          "FloorDiv": lambda a, b: a // b, "CeilToInt": lambda a: -(-a // 1),
          "Max": max, "Min": min, "Abs": abs, "True": True, "False": False}


def _compiled_symbolic(guard: str, symbols: set[str]) -> Callable[[int], bool] | None:
    """A guard as torch's shape env logs it (``Eq(((2*s0 - 1)//s0), 1)``) as a function
    of the one size its symbols stand for."""
    names = set(re.findall(r"[A-Za-z_]\w*", guard))
    if not names & symbols or names - symbols - set(_SYMPY):
        return None
    try:
        code = compile(guard, "<guard>", "eval")
    except SyntaxError:
        return None

    def holds(b: int) -> bool:
        return bool(eval(code, {"__builtins__": {}, **_SYMPY}, dict.fromkeys(symbols, b)))

    return holds


def guards_hold(message: str, sources: dict[str, set[str]],
                ranges: dict[str, tuple[int, int | None]],
                logged: dict[str, tuple[set[str], list[str]]] | None = None,
                narrowed: dict[str, int] | None = None,
                holes: dict[str, list[int]] | None = None,
                maxima: dict[str, int] | None = None,
                examples: dict[str, int] | None = None,
                edges: set[str] | None = None,
                ) -> tuple[set[str], list[str]] | None:
    """The Dims whose violated guards all hold over their range, and a note per Dim;
    None when any guard fails somewhere or cannot be read. The guards are the lines of
    the violation; where torch only says it specialised a Dim (torch 2.12), every
    guard the capture logged on the Dim's symbols (``logged``: name -> (symbols,
    guards)). Where a guard fails only below some size and holds from it on, among the
    sizes checked one by one (``chunk(x, 3)`` gives 3 chunks from 5 on), the Dim's new
    minimum goes into ``narrowed`` and its note says it is bounded. Where it fails at no
    more than ``HOLES`` sizes inside the range and holds around them (``s != 16``, from a
    cache the model keeps for the last input shape), those sizes go into ``holes``: the
    capture is general there only if the file, run at each of them, matches eager. Where
    it holds up to some size and fails at every size checked above it (``arange(b, 8.5,
    1.5)`` guards ``sym_float(b) <= 8.5``, and eager raises from 9 on), the new maximum
    goes into ``maxima``."""
    found = violated_guards(message)
    compile_as: Callable[[str, str], Callable[[int], bool] | None]
    if found is not None:
        def compile_as(guard: str, name: str) -> Callable[[int], bool] | None:
            return _compiled(guard, sources.get(name, set()))
    elif logged:
        found = {name: guards for name, (_, guards) in logged.items() if guards}

        def compile_as(guard: str, name: str) -> Callable[[int], bool] | None:
            return _compiled_symbolic(guard, logged[name][0])
    if not found:
        return None
    notes = []
    for name, guards in found.items():
        if name not in ranges:
            return None
        lo, hi = ranges[name]
        sizes, exhaustive = _sizes(lo, hi)
        failing: list[int] = []
        for guard in guards:
            holds = compile_as(guard, name)
            if holds is None:
                return None
            try:
                failing += [b for b in sizes if not holds(b)]
            except Exception:  # a division by a size of 0, an unknown function
                return None
        bad = sorted(set(failing))
        # Holes only where narrowing from below would leave the example out (a chunk
        # count that differs at 2 and 4 from an example of 18 narrows to 5 and up).
        if bad and holes is not None and len(bad) <= HOLES and bad != list(
                range(lo, bad[-1] + 1)) and (hi is None or bad[-1] < hi) and (
                examples is None or examples.get(name, 0) <= bad[-1]):
            holes[name] = bad
            notes.append(f"dynamic dim {name}: torch.export could not prove the guard "
                         f"{' and '.join(guards)}; pt2onnx evaluated it over {name}'s range, "
                         f"where it holds at every size but {', '.join(map(str, bad))}; the "
                         f"file was run there against eager PyTorch, and {name} stays dynamic")
            continue
        runs = edges_of(bad, sizes, (examples or {}).get(name)) if (
            holes is not None and edges is not None) else None
        if runs is not None and holes is not None and edges is not None:
            holes[name] = runs
            edges.add(name)
            notes.append(_edges_note(name, " and ".join(guards), bad, runs))
            continue
        if bad and maxima is not None and bad[0] > lo and bad == [
                b for b in sizes if b >= bad[0]]:
            maxima[name] = bad[0] - 1
            notes.append(f"{name} bounded to at most {bad[0] - 1}: torch.export could not "
                         f"prove the guard {' and '.join(guards)}; pt2onnx evaluated it at "
                         f"every size from {lo}, and it holds up to {bad[0] - 1} and fails "
                         f"at every size checked from {bad[0]} on")
            continue
        if failing:
            start = max(failing) + 1
            if narrowed is None or start > lo + EXHAUSTIVE or (hi is not None and start > hi):
                return None
            narrowed[name] = start
            top = hi if hi is not None else "inf"
            notes.append(f"{name} bounded to [{start}, {top}]: torch.export could not prove "
                         f"the guard {' and '.join(guards)}; pt2onnx evaluated it at every "
                         f"size from {lo}, and it fails at {sorted(set(failing))[:8]} and "
                         f"holds from {start} on")
            continue
        span = f"{lo}..{hi}" if hi is not None else f"{lo}.."
        how = "every size" if exhaustive else f"every size to {lo + EXHAUSTIVE} and samples"
        notes.append(f"dynamic dim {name}: torch.export could not prove the guard "
                     f"{' and '.join(guards)} over {name}'s range {span}; pt2onnx evaluated "
                     f"it at {how} in that range, where it holds, so {name} stays dynamic")
    return set(found), notes


def as_dynamic(spec: Any, names: set[str], minima: dict[str, int] | None = None,
               maxima: dict[str, int] | None = None) -> Any:
    """``spec`` with the Dims of these names replaced by ``Dim.DYNAMIC`` (from a new
    minimum where ``minima`` gives one, to a new maximum where ``maxima`` does)."""
    minima, maxima = minima or {}, maxima or {}

    def walk(s: Any) -> Any:
        if isinstance(s, dict):
            return {k: walk(v) for k, v in s.items()}
        if isinstance(s, (list, tuple)):
            return type(s)(walk(v) for v in s)
        name = getattr(s, "__name__", None)
        if name in names and hasattr(s, "min"):
            # The declared range stays (a size-1 point below a declared min of 4 is not
            # one the file must hold).
            low = max(minima.get(name, 0), s.min if isinstance(s.min, int) else 0)
            top = s.max if isinstance(s.max, int) and s.max < 2**31 else None
            if name in maxima:
                top = maxima[name] if top is None else min(top, maxima[name])
            if low >= 2 or top is not None:
                return torch.export.Dim.DYNAMIC(min=low, max=top)
            return torch.export.Dim.DYNAMIC
        return s

    return walk(spec)


def export_if_guards_hold(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                          spec: Any, strict: bool, text: str, declared: list[DeclaredAxis],
                          log: GuardLog, mode: Any, partial: bool = True) -> Refined | None:
    """The capture with ``Dim.DYNAMIC`` for the Dims whose violated guards torch.export
    could not prove but that hold over the Dim's range (``_guards_hold``); None when
    that is not so, and the violation stands."""
    sources: dict[str, set[str]] = {}
    for m in re.finditer(r"Not all values of (\w+) = (.+?) in the specified range", text):
        sources.setdefault(m.group(1), set()).add(m.group(2))
    ranges: dict[str, tuple[int, int | None]] = {}
    for a in declared:
        lo, hi = getattr(a.dim, "min", None), getattr(a.dim, "max", None)
        if a.name is not None:
            # torch.export holds a dynamic dim at 2 or more; an unbounded max is huge.
            ranges[a.name] = (max(lo if isinstance(lo, int) else 0, 2),
                              hi if isinstance(hi, int) and hi < 2**31 else None)
    logged: dict[str, tuple[set[str], list[str]]] = {}
    for name in ranges:
        axes = [a for a in declared if a.name == name]
        symbols = set(_source_symbols(axes, log))
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, symbols)) + r")\b")
        logged[name] = (symbols, sorted({g.expr.removeprefix("runtime_assert ").strip()
                                         for g in log.guards
                                         if symbols and pattern.search(g.expr)}))
    minima: dict[str, int] = {}
    holes: dict[str, list[int]] = {}
    maxima: dict[str, int] = {}
    examples: dict[str, int] = {}
    for a in declared:
        if a.name is not None:
            examples[a.name] = min(examples.get(a.name, a.size), a.size)
    # ``partial``: holes and a bound from above are allowed (not where torch.export
    # suggested a bound or a relation of its own, which comes first; a fix to one size
    # comes last); a bound from above only where the
    # capture found no general graph without one (``bounds_from_above``).
    edges: set[str] = set()
    verdict = guards_hold(text, sources, ranges, logged, minima, holes if partial else None,
                          maxima if partial and _FROM_ABOVE[0] else None, examples, edges)
    if verdict is None:
        return None
    names, notes = verdict
    if any(a.name in minima and a.size < minima[a.name] for a in declared):
        return None  # the example itself is below the new minimum
    if any(a.size in holes.get(a.name or "", ()) for a in declared):
        return None  # the example is where the guard fails
    if any(a.name in maxima and a.size > maxima[a.name] for a in declared):
        return None  # the example itself is above the new maximum
    with log, mode():
        try:
            program = _export(module, args, kwargs, as_dynamic(spec, names, minima, maxima),
                              strict)
        except Exception:
            return None
    bounded = [n for n in notes if " bounded to " in n]
    return _checked(Refined(program, spec, notes=bounded,
                            assumed=[n for n in notes if n not in bounded], holes=holes,
                            edges=edges & set(holes)),
                    bound_inputs(module, args, kwargs), log)
