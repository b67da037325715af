"""The sizes of one residue class of a dim, read from a capture's notes, and the moduli
class captures are tried by (``_residue``): which sizes torch.export proved for the
class, which lie below, and which to run the joined file at."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

from pt2onnx.capture._refine import _RESIDUE, BOUNDED_RANGE, TIED_NOTE, _residue_ties

# The moduli a class capture is tried by, in order; 6 holds a dim read both mod 2 and
# mod 3.
_MODULI = (2, 3, 4, 6)
_SKIPPED: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "residue_moduli_skipped", default=frozenset())
_CHOSEN: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "residue_moduli_chosen", default=None)


@contextlib.contextmanager
def residue_moduli(skipped: frozenset[int] = frozenset()) -> Iterator[list[int]]:
    """Class captures (``capture_by_residue``) skip the moduli in ``skipped``; the list
    yielded records the modulus of each one made."""
    chosen: list[int] = []
    tokens = (_SKIPPED.set(skipped), _CHOSEN.set(chosen))
    try:
        yield chosen
    finally:
        _CHOSEN.reset(tokens[1])
        _SKIPPED.reset(tokens[0])


def _root_range(notes: list[str], root: str) -> tuple[int, float] | None:
    for note in notes:
        m = BOUNDED_RANGE.match(note)
        if m is not None and m.group(1) == root:
            high = m.group(3)
            return int(m.group(2)), float(high) if high.isdigit() else float("inf")
    return None


def _class_of(notes: list[str], names: set[str]) -> tuple[list[str], int, str, int] | None:
    """(tied dims, k, root, residue) where ``notes`` hold declared dims to one residue
    class of one root; None otherwise."""
    ties = _residue_ties(notes, names)
    groups = set(ties.values())
    if len(groups) != 1:
        return None
    k, root, residue = next(iter(groups))
    return sorted(ties), k, root, residue


def _below(notes: list[str], tied: list[str], k: int, residue: int, low: int,
           high: float) -> list[int] | None:
    """The sizes of class ``residue`` mod ``k`` in [low, high] below the range
    torch.export proved for the tied dims (a root at 1 is not proved: torch specializes
    sizes 0 and 1), to be run one by one; None where ``notes`` do not hold the tied dims
    to that class or do not reach ``high``."""
    found = _class_of(notes, set(tied))
    if found is None or found[0] != tied or found[1] != k or found[3] != residue:
        return None
    span = _root_range(notes, found[2])
    c = _offset(notes, tied[0])
    if span is None or c is None:
        return None
    first = k * max(span[0], 2) + c
    last = high if high == float("inf") else max(
        n for n in range(int(high) - k + 1, int(high) + 1) if n % k == residue)
    if last != float("inf") and k * span[1] + c < last:
        return None
    return [n for n in range(max(low, 0), first) if n % k == residue]


def _lowest_of_class(notes: list[str], tied: list[str], k: int, residue: int, size: int,
                     grown_to: Callable[[int], Any]) -> list[tuple[int, Any, bool]]:
    """The lowest size torch.export proved for the example's class, where it is not the
    example and eager runs there, as a point to run the joined file at (a capture of its
    own where it does not match)."""
    found = _class_of(notes, set(tied))
    span = _root_range(notes, found[2]) if found is not None else None
    c = _offset(notes, tied[0])
    if found is None or span is None or c is None or found[1] != k or found[3] != residue:
        return []
    first = k * max(span[0], 2) + c
    grown = grown_to(first) if first != size and first <= k * span[1] + c else None
    return [] if grown is None else [(first, grown, True)]


def _offset(notes: list[str], name: str) -> int | None:
    for note in notes:
        m = TIED_NOTE.match(note)
        r = _RESIDUE.match(m.group(2).strip()) if m is not None and m.group(1) == name else None
        if r is not None:
            return int(r.group(4) or 0) * (-1 if r.group(3) == "-" else 1)
    return None


def _about(note: str) -> str:
    """The dim a refinement note is about (its first word)."""
    return note.split(" ", 1)[0]


def _more_of_class(size: int, k: int, high: float, grown_to: Callable[[int], Any],
                   ) -> list[tuple[int, Any]]:
    """The inputs at the next size of ``size``'s class mod ``k`` and at its last one up to
    ``high`` (64 sizes on where the range is open), where eager runs there."""
    last = (int(min(high, size + 64 * k)) - size) // k * k + size
    sizes = dict.fromkeys(n for n in (size + k, last) if size < n <= high)
    return [(n, g) for n in sizes if (g := grown_to(n)) is not None]
