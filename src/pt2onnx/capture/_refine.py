"""Capture with the dynamic shapes as declared, refined: which examples are captured
(a grown one when a declared dim is 1 in the given one; another size where the first
capture is bounded by the model's state, by a size computed from the example, by a
residue class or by a window around it), each refined once (``_refine_once``). The
spec helpers and guard logging they use are in ``_dynamic``."""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator
from typing import Any

import torch

from pt2onnx.capture._dynamic import (
    DeclaredAxis,
    Refined,
    _check_ranges,
    bound_inputs,
    declared_axes,
    is_constraint_violation,
)
from pt2onnx.capture._refine_once import _export_refined, _guards_hold_module
from pt2onnx.errors import CaptureError, InvalidInputError


def export_refined(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any,
    strict: bool,
) -> Refined:
    """torch.export with ``spec``, size-obliviously; on a constraint violation, apply
    torch.export's suggested bounds and relations and try once more. A dim is bounded
    from above where a guard stops holding only when no capture is found without that."""
    with _guards_hold_module().bounds_from_above(False):
        try:
            return _export_refined_all(module, args, kwargs, spec, strict)
        except InvalidInputError:
            raise
        except Exception:  # a violation, or a refusal: the last resort below decides
            pass
    return _export_refined_all(module, args, kwargs, spec, strict)


def _export_refined_all(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any,
    strict: bool,
) -> Refined:
    refined = _export_refined_any(module, args, kwargs, spec, strict)
    return _at_a_state_threshold(module, args, kwargs, spec, refined)


# ``B = 2*_B - 1``: a declared dim tied to a residue class of a new root.
_RESIDUE = re.compile(r"^(\d+)\*(\w+)(?: ([+-]) (\d+))?$")


def _residue_ties(notes: list[str], names: set[str]) -> dict[str, tuple[int, str, int]]:
    """Declared dim -> (k, root, residue) for each ``name = k*root + c`` tie (k >= 2) on
    a root no declared dim is named."""
    found: dict[str, tuple[int, str, int]] = {}
    for note in notes:
        m = TIED_NOTE.match(note)
        r = _RESIDUE.match(m.group(2).strip()) if m is not None else None
        if m is None or r is None or m.group(1) not in names or r.group(2) in names:
            continue
        k = int(r.group(1))
        c = int(r.group(4) or 0) * (-1 if r.group(3) == "-" else 1)
        if k >= 2:
            found[m.group(1)] = (k, r.group(2), c % k)
    return found


def _captured_at(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                 spec: Any, strict: bool, sizes: dict[str, int],
                 check: Any = None) -> Refined | None:
    """The model captured on the example with the declared dims ``sizes`` names grown
    to those sizes, where eager runs there (or ``check(module, args, kwargs)`` holds);
    None where those inputs cannot be built, the check fails or the capture raises."""
    from pt2onnx.capture._resize import _grown

    inputs = bound_inputs(module, args, kwargs)
    grown = _grown(args, kwargs, inputs, declared_axes(inputs, spec), None, sizes)
    if grown is None or not (check or _eager_runs)(module, *grown):
        return None
    try:
        return _export_refined(module, *grown, spec, strict)
    except Exception:
        return None


def _general_but_a_minimum(refined: Refined, names: set[str],
                           tops: dict[str, int | None]) -> bool:
    """Whether ``refined`` holds no declared dim to a residue class, needs no split,
    and bounds the dims ``tops`` names (each with its declared maximum) only from below,
    where the sizes below can be run one by one (``_from_below_only``)."""
    return not _residue_ties(refined.notes, names) and refined.split is None and all(
        _from_below_only(n, name, top) for n in refined.notes for name, top in tops.items())


def _from_below_only(note: str, name: str, top: int | None) -> bool:
    """Whether ``note`` leaves ``name`` general but for a minimum whose sizes below can
    be run one by one (``_below_minimum``): no bound from above, no tie."""
    from pt2onnx.capture._below_minimum import MOST

    if not note.startswith(f"{name} "):
        return True
    m = BOUNDED_RANGE.match(note)
    if m is None:
        return False
    high = m.group(3)
    return int(m.group(2)) <= MOST and (not high.isdigit() or top is None or int(high) >= top)


def _at_a_state_threshold(module: torch.nn.Module, args: tuple[Any, ...],
                          kwargs: dict[str, Any], spec: Any, refined: Refined) -> Refined:
    """``refined``, marked to split (``Refined.split``) where its range starts above the
    example at a size where the model's state changes: captured on a grown example, the
    refill of a cache the example's size does not reach was traced (a cache left at 7,
    an example of 6, captured at 12: B >= 8). The sizes up to 7 then take a capture of
    their own where they cannot all be run against eager (``_up_to``)."""
    if refined.split is not None:
        return refined
    from pt2onnx.capture._resize import _grown

    inputs = bound_inputs(module, args, kwargs)
    declared = declared_axes(inputs, spec)
    sizes = {a.name: a.size for a in declared if a.name is not None}
    from pt2onnx.capture._below_minimum import BOUNDED

    lows = [(m.group(1), int(m.group(2))) for m in map(BOUNDED.match, refined.notes)
            if m is not None and m.group(1) in sizes and sizes[m.group(1)] < int(m.group(2))]
    if len(lows) != 1:
        return refined
    name, low = lows[0]
    grown = _grown(args, kwargs, inputs, declared, None,
                   _with_ties({name: low}, refined.notes))
    if grown is None or _writes_state(module, args, kwargs) or not _writes_state(module, *grown):
        return refined
    refined.split = (name, low - 1)
    return refined


def _export_refined_any(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any,
    strict: bool,
) -> Refined:
    inputs = bound_inputs(module, args, kwargs)
    declared = declared_axes(inputs, spec)
    _check_ranges(declared)
    from pt2onnx.capture._resize import scaled_examples  # sympy: only for dynamic exports

    for scaled in scaled_examples(args, kwargs, inputs, declared):
        # No declared dim is 1 there, so an ordinary capture does not specialise, and
        # it states every bound and relation it needs as a suggested fix. Where it
        # still fixes a dim (a guard such as s == 12 that only the example decides), a
        # size-oblivious capture of the same inputs may not.
        # The ordinary capture also narrows a range for a size it treats as never 0 or
        # 1 (``x[:, 2:]`` of b gives b >= 4); the size-oblivious one may keep it whole.
        narrowed = None
        for oblivious in (False, True):
            try:
                refined = _export_refined(module, *scaled, spec, strict, oblivious=oblivious)
            except Exception:
                continue
            if not _raises_a_minimum(refined.notes, declared):
                return _past_a_cap(module, *scaled, spec, strict, refined)
            narrowed = narrowed or refined
        if narrowed is not None:
            return _past_a_cap(module, *scaled, spec, strict, narrowed)
        del scaled  # before the next candidate is made
    # The example as given, size-obliviously: its errors are the ones to show.
    try:
        refined = _export_refined(module, args, kwargs, spec, strict)
    except CaptureError as exc:
        other = _past_a_stale_key(module, args, kwargs, spec, strict, exc)
        if other is None:
            other = _past_a_window(module, args, kwargs, spec, strict)
        if other is None:
            raise
        return other
    except Exception as exc:
        other = _past_a_window(module, args, kwargs, spec, strict) if (
            is_constraint_violation(exc)) else None
        if other is None:
            raise
        return other
    return _past_a_cap(module, args, kwargs, spec, strict, refined)


def _past_a_window(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                   spec: Any, strict: bool) -> Refined | None:
    """A capture from the example with every declared dim doubled, where the example's
    own is refused and that one is general but for a minimum whose sizes below can be
    run one by one (``_below_minimum``); None otherwise.

    A size computed from a dim can be 1 at the example and only in a window around it:
    ``v.narrow(0, 0, n // 4 * 4).reshape(n // 4, 4, 1)`` from an example of 5 guards
    ``n // 4 == 1``, true for 4 <= n <= 7 only, which no range states (fuzz seed 6301,
    program 487). At 10 the count is 2 and the capture holds from 8 on. torch.export
    proves it over its range; the sizes below are run against eager, and the export is
    refused where the example is not among those that match."""

    inputs = bound_inputs(module, args, kwargs)
    declared = declared_axes(inputs, spec)
    tops: dict[str, int | None] = {}
    targets: dict[str, int] = {}
    for a in declared:
        if a.name is None:
            continue
        top = getattr(a.dim, "max", None)
        tops[a.name] = top if isinstance(top, int) and top < 2**31 else None
        target = 2 * max(a.size, 1)
        limit = tops[a.name]
        if limit is not None and target > limit:
            return None
        targets[a.name] = target
    if not targets:
        return None
    other = _captured_at(module, args, kwargs, spec, strict, targets)
    return other if other is not None and _general_but_a_minimum(
        other, set(targets), tops) else None


def _past_a_stale_key(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                      spec: Any, strict: bool, exc: CaptureError) -> Refined | None:
    """A capture at another size, where a dim was fixed to the example's size by the
    model's own state: a cache keyed by the input shape, filled at the example (``if
    self.shape != x.shape: refill``). The capture traced the hit and guarded
    ``len == 5``; at another size, the refill is traced, and the guard ``len != 5``
    fails at one size, where the file is run against eager (``_guards_hold``'s holes).
    None where the dims are not fixed, or no eager call at another size writes state."""

    fixed = dict(getattr(exc, "fixed_dims", None) or [])
    inputs = bound_inputs(module, args, kwargs)
    declared = declared_axes(inputs, spec)
    sizes: dict[str, int] = {}
    for a in declared:
        if a.name is not None and a.name in fixed and a.size == fixed[a.name]:
            top = getattr(a.dim, "max", None)
            grown = a.size + 1 if isinstance(top, int) and top <= 2 * a.size else 2 * a.size
            if isinstance(top, int) and grown > top:
                return None
            sizes[a.name] = grown
    if not sizes:
        return None
    return _captured_at(module, args, kwargs, spec, strict, sizes, check=_writes_state)


def _past_a_cap(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                spec: Any, strict: bool, refined: Refined) -> Refined:
    """``refined`` (captured on ``args``), or a capture above a bound from above it has.

    A guard that holds up to a size at or above the example's (a growing cache, ``if
    self.n < len: refill``, then a slice, filled at the example or left longer by an
    earlier eager call: the capture traced the hit and guards len <= n): captured again
    just above it, the refill is traced, bounded from n + 1, and the sizes below are run
    against eager (``_below_minimum``)."""
    from pt2onnx.capture._below_minimum import MOST
    from pt2onnx.capture._resize import _grown

    inputs = bound_inputs(module, args, kwargs)
    declared = declared_axes(inputs, spec)
    lows = {a.name: max(int(getattr(a.dim, "min", 1) or 1), 1) for a in declared}
    # Only where every size cut off below the new minimum can be run (a cache left at
    # 2,048 keeps its bound: the sizes under it are too many to run one by one).
    every = _capped_above_example(refined, declared)
    capped = {name: top for name, top in every.items() if top + 1 - lows[name] <= MOST}
    if not capped and len(every) == 1 and FAR_SPLIT.get():
        # A cache left further above (at 2,048): the sizes under it are too many to run
        # one by one, but they take a capture of their own (``_up_to``).
        capped = every
    if not capped:
        return _past_a_computed_cap(module, args, kwargs, spec, strict, refined, every)
    sizes = _with_ties({name: top + 1 for name, top in capped.items()}, refined.notes)
    grown = _grown(args, kwargs, inputs, declared, None, sizes)
    if grown is None or not _writes_state(module, *grown):
        # A bound the model's own state does not set: from the computation.
        return _past_a_computed_cap(module, args, kwargs, spec, strict, refined, every)
    try:
        other = _export_refined(module, *grown, spec, strict)
    except Exception:
        return refined
    if _capped_above_example(other, declared_axes(bound_inputs(module, *grown), spec)):
        return refined
    if len(capped) == 1:
        other.split = next(iter(capped.items()))
    return other


def _past_a_computed_cap(module: torch.nn.Module, args: tuple[Any, ...],
                         kwargs: dict[str, Any], spec: Any, strict: bool, refined: Refined,
                         every: dict[str, int]) -> Refined:
    """``refined``, or a capture just above its bounds from above where that one is
    general. A bound from the computation can be the example's and not the model's: a
    pad to a multiple of 4 then a view (``view(ceil(n / 4), 4, ...)``) captured at n = 2
    (a size-1 example grown) guards ``ceil(n / 4) == 1`` and bounds n to [1, 4], where a
    capture at 5 holds for every n. Taken only where eager runs just above the bound
    (BERT's positions end at 512: eager fails at 513, and the bound stays) and the
    capture there is bounded nowhere; torch.export proves it over the whole range, and
    the example's own size is checked as any size is (size 1 by ``_size_one``)."""

    if not every:
        return refined
    other = _captured_at(module, args, kwargs, spec, strict, _with_ties(
        {name: top + 1 for name, top in every.items()}, refined.notes))
    if other is None or any(" bounded to " in n for n in other.notes) or (
            other.split is not None):
        return refined
    return other


def _eager_runs(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an eager call on ``args`` runs; the model is put back as it was."""
    from pt2onnx.capture._model_state import preserved_state

    args, kwargs = torch.utils._pytree.tree_map_only(
        torch.Tensor, lambda t: t.clone(), (args, kwargs))
    with preserved_state(module):
        try:
            with torch.no_grad():
                module(*args, **kwargs)
        except Exception:
            return False
    return True


# Whether a dim capped by a cache left more than MOST sizes above its minimum is captured
# above the cache (the file then needs a capture up to it too, ``_up_to``); the export
# is run again without that where the capture up to it cannot be joined.
FAR_SPLIT: contextvars.ContextVar[bool] = contextvars.ContextVar("far_split", default=True)


@contextlib.contextmanager
def without_far_split() -> Iterator[None]:
    token = FAR_SPLIT.set(False)
    try:
        yield
    finally:
        FAR_SPLIT.reset(token)


TIED_NOTE = re.compile(r"^(\w+) tied to other dims: \1 = (.+?)(?: by the guard .*)?$")


def _with_ties(sizes: dict[str, int], notes: list[str]) -> dict[str, int]:
    """``sizes`` with each dim a refinement ties to them (``C = B``, ``D = 2*B``) set
    to the size the tie gives there: growing B alone would make an input the model
    cannot take (``torch.maximum(x, y)`` with B and C tied)."""
    import sympy

    out = dict(sizes)
    for note in notes:
        m = TIED_NOTE.match(note)
        if m is None or m.group(1) in out:
            continue
        try:
            expr = sympy.sympify(m.group(2))
        except (sympy.SympifyError, TypeError, SyntaxError, ValueError):
            continue  # a root's own range (``_t = Dim('_t', min=3, max=oo)``)
        names = {str(s) for s in expr.free_symbols}
        if names and names <= set(sizes):
            value = expr.subs({sympy.Symbol(n): sizes[n] for n in names})
            if value.is_Integer and int(value) >= 1:
                out[m.group(1)] = int(value)
    return out


def _writes_state(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an eager call on ``args`` changes the model's attributes or buffers (a
    cache refilled); the model is put back as it was."""
    from pt2onnx.capture._model_state import preserved_state, refill_state

    with preserved_state(module):
        return bool(refill_state(module, args, kwargs))


_BOUNDED_NOTE = re.compile(r"^(\w+) bounded to (?:\[\d+, |at most )(\d+)")


def _capped_above_example(refined: Refined, declared: list[DeclaredAxis]) -> dict[str, int]:
    """The declared dims a refinement bounds from above at or above the example's own
    size, below the declared maximum: name -> the bound."""
    capped: dict[str, int] = {}
    for note in refined.notes:
        m = _BOUNDED_NOTE.match(note)
        if m is None:
            continue
        for a in declared:
            top = getattr(a.dim, "max", None)
            if a.name is not None and a.name == m.group(1) and a.size <= int(m.group(2)) and (
                    not isinstance(top, int) or top > int(m.group(2))):
                capped[a.name] = int(m.group(2))
    return capped


BOUNDED_RANGE = re.compile(r"^(\w+) bounded to \[(\d+), (\w+)\]")


def _raises_a_minimum(notes: list[str], declared: list[DeclaredAxis]) -> bool:
    """Whether the only narrowing in ``notes`` raises a dim's minimum (``x[:, 2:]`` of b
    gives b >= 4 in an ordinary capture, which treats sizes as never 0 or 1). A new
    maximum is the model's own (BERT's positions end at 512): that capture is kept."""
    raised = False
    maxima = {a.name: getattr(a.dim, "max", None) for a in declared if a.name}
    for note in notes:
        m = BOUNDED_RANGE.match(note)
        if m is None:
            continue
        upper, declared_max = m.group(3), maxima.get(m.group(1))
        if upper not in ("inf", "oo", "int_oo") and (
                not isinstance(declared_max, int) or int(upper) < declared_max):
            return False
        raised = True
    return raised
