"""Pieces the op tables share: a dim counted from either end, the other operand of a
binary op, a slice of one dim, and a boolean mask."""

from __future__ import annotations

import torch

from pt2onnx.testing.fuzz.generator import ALL_DTYPES, Builder, Var
from pt2onnx.testing.fuzz.program import Leaf, Shape


def _neg(g: Builder, d: int, rank: int) -> int:
    """d, or the same dim counted from the end."""
    return d - rank if g.rng.random() < 0.3 else d


def _operand(g: Builder, shape: Shape, dtype: torch.dtype | None = None,
             scalar_ok: bool = True, avoid_base: str | None = None) -> tuple[str, list[str], list[Leaf]]:
    """The other operand of a binary op: an existing value, a new leaf, or a scalar."""
    rng = g.rng
    r = rng.random()
    if scalar_ok and r < 0.2:
        return rng.choice(["2", "-1", "0.5", "3", "True", "-2.5"]), [], []
    if r < 0.55:
        same = [w for w in g.vars.values() if w.shape == shape and w.base != avoid_base]
        if same:
            w = rng.choice(same)
            return w.ref, [w.name], []
    part = g.partner_shape(shape) if rng.random() < 0.7 else shape
    if not g.can_leaf(part):
        part = shape
    leaf = g.leaf(part, dtype or rng.choice(ALL_DTYPES))
    return leaf.ref, [], [leaf]


def _slice_src(g: Builder, v: Var, d: int) -> str:
    """A slice of dim d: negative bounds and steps for static dims."""
    rng = g.rng
    c, size = v.shape[d]
    if c:
        k = rng.randint(0, 2)
        return rng.choice([f"{k}:", f":-{k}" if k else ":", f"{k}:-1" if k < 2 else "1:"])
    if size == 0:
        return rng.choice([":", "1:", ":-1"])
    start = rng.randint(-size, size - 1)
    stop = rng.choice([None, rng.randint(-size, size)])
    step = rng.choice([1, 1, 2, 3])
    text = f"{start}:{'' if stop is None else stop}"
    return text + (f":{step}" if step > 1 else "")


def _mask(g: Builder, shape: Shape, avoid: str | None = None) -> tuple[str, list[str], list[Leaf]]:
    rng = g.rng
    bools = [w for w in g.vars.values() if w.dtype == torch.bool and w.base != avoid
             and len(w.shape) <= len(shape) and w.shape == shape[len(shape) - len(w.shape):]]
    if bools and rng.random() < 0.5:
        w = rng.choice(bools)
        return w.ref, [w.name], []
    part = g.partner_shape(shape)
    if not g.can_leaf(part) or len(part) > len(shape):
        part = shape
    leaf = g.leaf(part, torch.bool)
    return leaf.ref, [], [leaf]
