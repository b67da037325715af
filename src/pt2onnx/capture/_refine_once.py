"""One capture with the dynamic shapes as declared, refined once: torch.export runs
size-obliviously or not, as asked; on a constraint violation torch.export's suggested
bounds and relations are applied and it runs again (up to ``_ROUNDS`` times, each
adding what the last one stated); a guard it cannot prove is checked over the declared
ranges (``_guards_hold``). ``_refine`` chooses the examples and the tries around it."""

from __future__ import annotations

import contextlib
import re
from typing import Any

import torch

from pt2onnx import _compat
from pt2onnx.capture._dynamic import (
    DeclaredAxis,
    GuardLog,
    Refined,
    _checked,
    _describe_fix,
    _export,
    _torch_message,
    bound_inputs,
    declared_axes,
    fixed_size_error,
    is_constraint_violation,
    suggested_fixes,
)
from pt2onnx.errors import CaptureError

# How many captures apply torch.export's suggested relations, each adding what the last
# one stated.
_ROUNDS = 3


def _guards_hold_module() -> Any:
    from pt2onnx.capture import _guards_hold  # sympy: only when a guard must be checked

    return _guards_hold


def _export_refined(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any,
    strict: bool, oblivious: bool = True, tie_equal: bool = True,
) -> Refined:
    inputs = bound_inputs(module, args, kwargs)
    declared = declared_axes(inputs, spec)
    log = GuardLog()
    mode = _compat.size_oblivious if oblivious else contextlib.nullcontext
    fraction: BaseException | None = None
    with log, mode():
        try:
            program = _export(module, args, kwargs, spec, strict)
        except Exception as exc:
            if not is_constraint_violation(exc):
                if _FRACTION.search(str(exc)) is None:
                    raise
                fraction = exc
            else:
                first: BaseException = exc
    if fraction is not None:
        return _past_a_fractional_bound(module, args, kwargs, spec, strict, oblivious,
                                        declared, fraction)
    if "first" not in locals():
        try:
            return _checked(Refined(program, spec), inputs, log)
        except CaptureError:
            # torch 2.12 specialises a Dim whose guards it cannot prove without saying
            # so: the guards it logged decide, as for a violation.
            held = _guards_hold_module().export_if_guards_hold(
                module, args, kwargs, spec, strict, "", declared, log, mode)
            if held is None:
                raise
            return held
    fixes = suggested_fixes(str(first))
    real = {name for name, fix in fixes}  # what the size-oblivious capture itself fixes
    text = str(first)
    if not fixes:
        # A size-oblivious capture states a bound only as a failed guard; an ordinary
        # capture turns the same guards into suggested fixes.
        with log:
            try:
                program = _export(module, args, kwargs, spec, strict)
                return _checked(Refined(program, spec), inputs, log)
            except Exception as exc:
                if not is_constraint_violation(exc):
                    raise first from None
                fixes, text = suggested_fixes(str(exc)), str(exc)
    # A guard torch.export suggests no fix for (``b - round(b / 2) >= 0``) may still
    # hold over the whole range: evaluated before giving up. The size-oblivious
    # capture's own guards come first where the ordinary one was asked for its fixes:
    # it can state fewer (a cache kept at 13 guards ``b != 13`` only, a hole, where the
    # ordinary capture adds ``b % 2 != 0`` from a size it treats as never 1; fuzz seed
    # 7411, program 213).
    for said in dict.fromkeys((str(first), text) if oblivious else (text,)):
        held = _guards_hold_module().export_if_guards_hold(
            module, args, kwargs, spec, strict, said, declared, log, mode,
            partial=said != text or all(re.fullmatch(r"-?\d+", fix) for _, fix in fixes))
        if held is not None:
            return held
    if not fixes:
        raise first
    by_name: dict[str, list[DeclaredAxis]] = {}
    for a in declared:
        by_name.setdefault(a.name or "", []).append(a)
    fixed, applied, notes = [], [], []
    fixes = [(f.split(" = ", 1)[0], f.split(" = ", 1)[1])
             for f in _bounded_roots([f"{n} = {f}" for n, f in fixes], by_name)]
    for name, fix in fixes:
        axis = by_name.get(name, [])
        if re.fullmatch(r"-?\d+", fix):
            if axis and axis[0].size in (0, 1) and int(fix) == axis[0].size and name not in real:
                continue  # the 0/1 specialisation that size-oblivious capture avoids
            fixed.append((name, int(fix), axis))
            continue
        applied.append(f"{name} = {fix}")
        notes.append(_describe_fix(name, fix, axis, log))
    if fixed:
        tied = _tied_first(module, args, kwargs, spec, strict, oblivious, text, fixed,
                           by_name, log) if tie_equal else None
        if tied is None:
            raise fixed_size_error(fixed, log)
        return tied
    if not applied:
        raise first
    failed: BaseException | None = None
    for _ in range(_ROUNDS):
        applied = _bounded_roots(applied, by_name)
        try:
            refined = _compat.refine_dynamic_shapes(applied, spec)
        except Exception:
            raise first from None
        failed = None
        with log, mode():
            try:
                program = _export(module, args, kwargs, refined, strict)
            except Exception as exc:
                failed = exc
        if failed is None or not is_constraint_violation(failed):
            break
        # torch states the relations it meets one capture at a time (a dim named in a
        # spec found equal to another, then the next): the new ones are applied too.
        more = [(name, fix) for name, fix in suggested_fixes(str(failed))
                if not re.fullmatch(r"-?\d+", fix) and f"{name} = {fix}" not in applied]
        if not more:
            break
        for name, fix in more:
            applied.append(f"{name} = {fix}")
            notes.append(_describe_fix(name, fix, by_name.get(name, []), log))
    if failed is not None and is_constraint_violation(failed):
        # The relations applied, a guard torch cannot prove may be left (``C = B``, then
        # ``B - round(B / 3) >= 0``): evaluated over the range as for the first capture.
        held = _guards_hold_module().export_if_guards_hold(
            module, args, kwargs, refined, strict, str(failed), declared, log, mode)
        if held is not None:
            held.notes[:0] = notes
            return held
    if failed is not None:
        with log:  # outside the size-oblivious mode: the retries choose their own
            grown = _grown_refined(module, args, kwargs, declared, refined, strict, failed)
        if grown is not None:
            return _checked(Refined(grown, refined, notes=notes), inputs, log)
        if is_constraint_violation(failed):
            raise CaptureError(
                "torch.export rejected the dynamic shapes even after applying its own "
                "suggested fixes (" + "; ".join(applied) + "):\n  - "
                + _torch_message(failed)
                + "\nNext step: the dims above are tied together in a way torch.export "
                "cannot express; declare fewer of them dynamic, or make them one Dim."
            ) from None
        raise failed
    return _checked(Refined(program, refined, notes=notes), inputs, log)


# torch's solver on a bound with a fraction (``x.flatten().narrow(0, 35, 1)`` of a
# (B, 2, 5) input: 36 <= 10*B): "Expected op to be '==', got <= for 18/5 <= B".
_FRACTION = re.compile(r"Expected op to be '==', got (<=|<|>=|>) for (\S+) (<=|<|>=|>) (\S+)$",
                       re.MULTILINE)


def _past_a_fractional_bound(module: torch.nn.Module, args: tuple[Any, ...],
                             kwargs: dict[str, Any], spec: Any, strict: bool,
                             oblivious: bool, declared: list[DeclaredAxis],
                             exc: BaseException) -> Refined:
    """The capture with the bound torch.export's solver failed on (a fraction: ``18/5 <=
    B``, an assertion inside torch) stated as the Dim's range (``B >= 4``), and the bound
    reported as any (the sizes cut off are run against eager where few,
    ``_below_minimum``). Raises ``exc`` where the bound cannot be read or leaves the
    example out."""
    import math
    from fractions import Fraction

    m = _FRACTION.search(str(exc))
    assert m is not None
    op, left, right = m.group(3), m.group(2), m.group(4)
    said = f"{left} {op} {right}"
    if re.fullmatch(r"\w+", right) and not re.fullmatch(r"-?\d+(/\d+)?", right):
        name, value, op = right, left, {"<=": ">=", "<": ">", ">=": "<=", ">": "<"}[op]
    else:
        name, value = left, right
    try:
        bound = Fraction(value)
    except (ValueError, ZeroDivisionError):
        raise exc from None
    axes = [a for a in declared if a.name == name]
    if not axes:
        raise exc
    low = max(int(getattr(axes[0].dim, "min", 0) or 0), 0)
    high = getattr(axes[0].dim, "max", None)
    high = high if isinstance(high, int) and high < 2**31 else None
    if op in (">=", ">"):  # name >= bound
        low = max(low, math.ceil(bound) if op == ">=" else math.floor(bound) + 1)
    else:
        top = math.floor(bound) if op == "<=" else math.ceil(bound) - 1
        high = top if high is None else min(high, top)
    if any(a.size < low or (high is not None and a.size > high) for a in axes):
        raise exc
    shown = "" if high is None else f", max={high}"
    try:
        bounded = _compat.refine_dynamic_shapes([f"{name} = Dim('{name}', min={low}{shown})"],
                                                spec)
        refined = _export_refined(module, args, kwargs, bounded, strict, oblivious)
    except Exception:
        raise exc from None
    refined.notes.insert(0, f"{name} bounded to [{low}, {high if high is not None else 'inf'}]"
                            f": torch.export's solver could not state the bound {said} itself")
    return refined


# "The values of C = L['y'].size()[0] and B = L['x'].size()[0] must always be equal."
_EQUAL = re.compile(r"The values of (\w+) = .+? and (\w+) = .+? must always be equal")


def _tied_first(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                spec: Any, strict: bool, oblivious: bool, text: str,
                fixed: list[Any], by_name: dict[str, list[DeclaredAxis]],
                log: GuardLog) -> Refined | None:
    """The capture with the dims torch.export found equal tied first, where its solver
    turned that relation and a guard it could not prove into one size for each (``x1 +
    x19`` with ``B = C``, beside ``(2*B - 1) // B == 1``: "B = 12, C = 12"); the guard
    is then judged over the range as any (``_guards_hold``). None where there is no
    such relation, or the tied capture fails too (the fixed sizes stand)."""
    pairs = [(m.group(1), m.group(2)) for m in _EQUAL.finditer(text)
             if m.group(1) in by_name and m.group(2) in by_name]
    names = {n for pair in pairs for n in pair}
    if not pairs or not {name for name, _, _ in fixed} <= names:
        return None
    relation = [f"{a} = {b}" for a, b in pairs]
    try:
        tied = _compat.refine_dynamic_shapes(relation, spec)
        refined = _export_refined(module, args, kwargs, tied, strict, oblivious,
                                  tie_equal=False)
    except Exception:
        return None
    refined.notes[:0] = [_describe_fix(a, b, by_name.get(a, []), log) for a, b in pairs]
    return refined


_LINEAR = re.compile(r"(\w+) = (?:(\d+)\*)?(\w+)(?: ([+-]) (\d+))?$")
_ROOT = re.compile(r"(\w+) = Dim\('\w+'(?:, min=(\d+))?(?:, max=(\d+))?\)$")


def _bounded_roots(fixes: list[str], by_name: dict[str, list[DeclaredAxis]]) -> list[str]:
    """torch.export suggests ``B = 4*_B - 3`` with ``_B = Dim('_B', max=16)`` and no
    minimum, then refuses the spec: "Expected derived min value of 4*_B - 3 to be >= 0"
    (``torch.cat([x, x[:3]]).view(-1, 4)``, where B is 1, 5, 9, ...). Each root gets the
    smallest minimum that keeps every dim derived from it at or above that dim's declared
    minimum (and 0)."""
    roots = {m.group(1): m for f in fixes if (m := _ROOT.match(f))}
    need: dict[str, int] = {}
    for f in fixes:
        m = _LINEAR.match(f)
        if m is None or m.group(3) not in roots or m.group(1) == m.group(3):
            continue
        scale = int(m.group(2) or 1)
        offset = int(m.group(5) or 0) * (-1 if m.group(4) == "-" else 1)
        axes = by_name.get(m.group(1), [])
        low = getattr(axes[0].dim, "min", 0) if axes else 0
        low = max(low if isinstance(low, int) else 0, 0)
        need[m.group(3)] = max(need.get(m.group(3), 0), -(-(low - offset) // scale))
    out = []
    for f in fixes:
        m = _ROOT.match(f)
        if m is not None and m.group(1) in need:
            current = int(m.group(2)) if m.group(2) else 0
            if need[m.group(1)] > current:
                hi = f", max={m.group(3)}" if m.group(3) else ""
                f = f"{m.group(1)} = Dim('{m.group(1)}', min={need[m.group(1)]}{hi})"
        out.append(f)
    return out


def _grown_refined(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                   declared: list[DeclaredAxis], refined: Any, strict: bool,
                   exc: BaseException) -> torch.export.ExportedProgram | None:
    """The refined spec captured another way, where the example failed it:

    - an ordinary capture of the same example: a size-oblivious one guards ``s != 1``
      (tensordot), which a range that holds 1 violates; the size-1 proof checks 1;
    - the example with every declared dim doubled: a fix such as ``n = 2*half`` can put
      a new root at 1 (``view(-1, 2)`` of 2 elements), which torch then specialises.
    """
    from pt2onnx.capture._resize import _grown

    if not is_constraint_violation(exc):
        return None
    grown = _grown(args, kwargs, bound_inputs(module, args, kwargs), declared, None)
    tries: list[tuple[tuple[tuple[Any, ...], dict[str, Any]], Any]] = [
        ((args, kwargs), contextlib.nullcontext)]
    if grown is not None:
        tries += [(grown, _compat.size_oblivious), (grown, contextlib.nullcontext)]
    for (a, k), mode in tries:
        try:
            with mode():
                return _export(module, a, k, refined, strict)
        except Exception:
            continue
    return None
