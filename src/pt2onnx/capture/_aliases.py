"""A recorded in-place write into memory that other tensors share, made functional.

The recording (``_record.py``) records an in-place op as its functional form, whose
node then stands for the written tensor. Where the written tensor shares its memory
with others the recording has seen, the write reaches them too, and their nodes must
change with it. This module decides when that can be written exactly, from the
tensors' layouts alone (size, stride, storage offset: the same facts eager uses), and
records the new values.

One tensor on the memory is its *owner*: all of it, contiguous from the start, made by
an op the recording saw. Every tensor on the memory must be a *part* of the owner: a
box of it (a slice along each dim, ``attn[:, :, 1:, 1:]`` in mvit), its dims reordered
first or not (``y.transpose(0, 3)``), with up to three of its dims taken by an index
(``y[:, 2]``); or all of it in another shape (``view_as``, a flatten,
``x.data``, ``detach``). Then

- the written part goes back into the owner as nested ``slice_scatter`` /
  ``select_scatter`` ops (swin v2's ``qkv_bias[n:2 * n].zero_()``, mvit's
  ``attn[:, :, 1:, 1:] += ...``); where the written tensor is all of the memory in
  another shape, the owner becomes a ``view`` of it;
- every other tensor on the memory becomes its part of the new owner, read with
  ``slice`` / ``select`` / ``view``: a slice that overlaps the write reads it.

Anything else (a strided slice, memory with no owner in the graph, an input's or a
weight's memory) returns no plan, and the recording is given up for
torch.export, which functionalizes. Aliases are found by storage, not ``_base``:
``x.data`` and ``detach`` share memory without one, and a view's ``_base`` is set only
above the dispatcher, after the recording has seen its op.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import torch

aten = torch.ops.aten

# One step from a tensor to a part of it: ("slice", dim, start, end), ("select", dim,
# index), ("permute", dims) or ("view", shape). Dims count in the tensor the step is
# applied to.
Step = tuple[Any, ...]


@dataclass
class Plan:
    """How the write into a tensor reaches the rest of its memory."""

    owner: torch.Tensor | None  # all of the memory, when the write is a part of it
    steps: list[Step] = field(default_factory=list)  # owner -> the written part
    parts: list[tuple[torch.Tensor, list[Step]]] = field(default_factory=list)

    def apply(self, rec: Any, written: torch.Tensor) -> None:
        """After ``written``'s node became its functional write: the owner and every
        other part get their new nodes."""
        owner = written if self.owner is None else self.owner
        if self.owner is not None:
            _scatter(rec, self.owner, self.steps, written)
        for part, steps in self.parts:
            _read(rec, owner, steps, part)


def _view(t: torch.Tensor, step: Step) -> torch.Tensor:
    """The step applied to a real tensor (the recording paused)."""
    kind, *where = step
    if kind == "slice":
        dim, start, end = where
        return t.narrow(dim, start, end - start)
    if kind == "select":
        return t.select(*where)
    if kind == "permute":
        return t.permute(where[0])
    return t.view(where[0])


def _view_call(step: Step, source: torch.Tensor) -> tuple[Any, tuple[Any, ...]]:
    """The ATen op and arguments that record the step applied to ``source``."""
    kind, *where = step
    if kind == "slice":
        return aten.slice.Tensor, (source, *where)
    if kind == "select":
        return aten.select.int, (source, *where)
    if kind == "permute":
        return aten.permute.default, (source, list(where[0]))
    return aten.view.default, (source, list(where[0]))


def _put_call(step: Step, base: torch.Tensor, value: torch.Tensor
              ) -> tuple[Any, tuple[Any, ...], list[torch.Tensor]]:
    """The ATen op, arguments and tensor inputs that put ``value`` (the step's result,
    written) back into ``base``: the scatter of a slice or an index, the inverse
    permutation, or a view in the base's shape."""
    kind, *where = step
    if kind == "slice":
        return aten.slice_scatter.default, (base, value, *where), [base, value]
    if kind == "select":
        return aten.select_scatter.default, (base, value, *where), [base, value]
    if kind == "permute":
        inverse = sorted(range(len(where[0])), key=lambda i: where[0][i])
        return aten.permute.default, (value, inverse), [value]
    return aten.view.default, (value, list(base.shape)), [value]


def _paused_view(rec: Any, t: torch.Tensor, step: Step) -> torch.Tensor:
    """``_view``, unseen by the recording."""
    rec.paused += 1
    try:
        return _view(t, step)
    finally:
        rec.paused -= 1


def _read(rec: Any, owner: torch.Tensor, steps: list[Step], part: torch.Tensor) -> None:
    """Records ``part`` as ``steps`` applied to ``owner``'s node. The tensors between
    are views made with the recording paused, which nothing keeps."""
    source = owner
    for i, step in enumerate(steps):
        out = part if i == len(steps) - 1 else _paused_view(rec, source, step)
        op, args = _view_call(step, source)
        rec.record(op, args, {}, out, [rec.node_of(source)])
        source = out


def _scatter(rec: Any, owner: torch.Tensor, steps: list[Step], written: torch.Tensor) -> None:
    """Records the owner's new value: ``written`` put back through ``steps``, the
    innermost step first, each into the view of the old value around it."""
    bases = [owner]  # the old value's views, outermost first
    for step in steps[:-1]:
        source = bases[-1]
        bases.append(_paused_view(rec, source, step))
        op, args = _view_call(step, source)
        rec.record(op, args, {}, bases[-1], [rec.node_of(source)])
    value = written
    for i in range(len(steps) - 1, -1, -1):
        # The real value of the result: its memory holds the write. Below the owner, a
        # new object on that memory, distinct from the base's own.
        out = owner if i == 0 else _paused_view(rec, bases[i - 1], steps[i - 1])
        op, args, tensors = _put_call(steps[i], bases[i], value)
        rec.record(op, args, {}, out, [rec.node_of(t) for t in tensors])
        value = out


def _storage(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def _whole(t: torch.Tensor, nbytes: int) -> bool:
    """``t`` is all of its memory, contiguous from the start."""
    return t.is_contiguous() and t.storage_offset() == 0 and \
        t.numel() * t.element_size() == nbytes


def _part(t: torch.Tensor, owner: torch.Tensor) -> list[Step] | None:
    """The steps that take ``owner`` (contiguous, from the start of its memory) to
    exactly ``t``: its dims reordered (``x.transpose(0, 3)``), then a box of slices with
    up to three dims taken by an index; or a view of all of it. None where ``t`` is laid
    out otherwise (a strided slice, an overlapping view)."""
    size = list(owner.shape)
    if t.numel() == owner.numel() and t.is_contiguous() and t.storage_offset() == 0:
        return [("view", list(t.shape))]
    strides = [math.prod(size[d + 1:]) for d in range(len(size))]  # ignores size-1 dims'
    offset = t.storage_offset()
    starts = [(offset // s) % n for s, n in zip(strides, size)]
    if sum(a * s for a, s in zip(starts, strides)) != offset:
        return None
    if not 0 <= owner.dim() - t.dim() <= 3:
        return None
    orders = itertools.permutations(range(owner.dim())) if owner.dim() <= 6 else [
        tuple(range(owner.dim()))]
    for order in orders:  # the identity first
        steps = _box(t, [size[d] for d in order], [strides[d] for d in order],
                     [starts[d] for d in order])
        if steps is not None:
            return steps if list(order) == sorted(order) else [("permute", list(order))] + steps
    return None


def _box(t: torch.Tensor, size: list[int], strides: list[int], starts: list[int]
         ) -> list[Step] | None:
    """The slices and indices that take a tensor of ``size`` and ``strides`` (``t``'s
    memory in some dim order) to ``t``, whose first element is at ``starts``."""
    rank = len(size)
    for dropped in itertools.combinations(range(rank), rank - t.dim()):
        kept = [d for d in range(rank) if d not in dropped]
        if all(starts[d] + n <= size[d] and (n == 1 or t.stride(i) == strides[d])
               for i, (d, n) in enumerate(zip(kept, t.shape))):
            steps: list[Step] = []
            for d in range(rank):
                at = d - sum(1 for g in dropped if g < d)  # d in the tensor the step sees
                if d in dropped:
                    steps.append(("select", at, starts[d]))
                    continue
                n = t.shape[kept.index(d)]
                if (starts[d], n) != (0, size[d]):
                    steps.append(("slice", at, starts[d], starts[d] + n))
            return steps
    return None


def write_plan(rec: Any, t: torch.Tensor) -> Plan | None:
    """The plan for an in-place write into ``t``, or None where it is not exact."""
    rec.paused += 1  # untyped_storage is one of the function mode's escapes
    try:
        if t.numel() == 0 or t.dtype.is_complex:
            return None
        ptr, nbytes = _storage(t)
        if ptr == 0:
            return None
        others = []
        for other in list(rec.env.keys()):
            if other is not t and other.device == t.device and _storage(other)[0] == ptr:
                node = rec.env.get(other)
                if node is None or node.op != "call_function" or other.dtype != t.dtype:
                    return None  # an input's, a weight's or a constant's memory
                others.append(other)
        if not others:
            return Plan(None)  # nothing else the recording saw reads this memory
        # The owner: all of the memory, the highest rank first (a part may keep a dim of
        # size 1 that a flatter whole has not), the written tensor first among equals.
        wholes = sorted((o for o in [t, *others] if _whole(o, nbytes)),
                        key=lambda o: -o.dim())
        for owner in wholes:
            steps = _part(t, owner) if owner is not t else []
            parts = [(o, _part(o, owner)) for o in others if o is not owner]
            if steps is not None and all(where is not None for _, where in parts):
                return Plan(None if owner is t else owner, steps, parts)  # type: ignore[arg-type]
        return None  # no owner in the graph, or a tensor laid out otherwise
    except (RuntimeError, NotImplementedError):
        return None
    finally:
        rec.paused -= 1
