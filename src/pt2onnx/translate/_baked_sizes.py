"""A rule may not read a symbolic size as a number.

Rules read shapes from the FX node's metadata (``g.shape``, ``g.meta``), where a dynamic
dim is a ``torch.SymInt``. ``int(d)``, ``range(d)`` or ``if d == 1:`` on one does not
fail: torch answers with the example's size, and the graph silently holds that size
(``EmbeddingBag`` baked its number of bags this way, issue 26). While a rule runs,
:func:`no_baked_sizes` makes those conversions raise :class:`BakedSize` instead, which
the translator reports as the rule's error: the export refuses instead of writing a
file that is right only at the example's size. A SymInt whose value is a constant
converts as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


class BakedSize(Exception):
    """A rule converted a symbolic size to a Python number."""


def _refuse(kind: str, original: Any) -> Any:
    def convert(self: Any) -> Any:
        expr = self.node.expr
        if getattr(expr, "is_number", False) or (getattr(expr, "is_Boolean", False) and (
                not getattr(expr, "free_symbols", ()))):
            return original(self)
        raise BakedSize(
            f"the rule read the symbolic {kind} {expr} as a Python value ({original.__name__}); "
            "in the file it would be fixed to the example's value. Emit it from the graph "
            "instead (g.op.Shape of the input, or the 0-d value a SymInt argument arrives as)")
    return convert


_PATCHES = [(torch.SymInt, "__int__", "size"), (torch.SymInt, "__index__", "size"),
            (torch.SymBool, "__bool__", "condition"), (torch.SymFloat, "__float__", "value")]
_SAVED = {(cls, name): cls.__dict__.get(name) for cls, name, _ in _PATCHES}
_REFUSING = {(cls, name): _refuse(kind, _SAVED[(cls, name)])
             for cls, name, kind in _PATCHES if _SAVED[(cls, name)] is not None}


@contextlib.contextmanager
def no_baked_sizes() -> Iterator[None]:
    """While it is active, converting a symbolic SymInt/SymBool/SymFloat raises BakedSize."""
    for (cls, name), fn in _REFUSING.items():
        setattr(cls, name, fn)
    try:
        yield
    finally:
        for cls, name in _REFUSING:
            setattr(cls, name, _SAVED[(cls, name)])
