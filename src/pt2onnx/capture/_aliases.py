"""A recorded in-place write into memory that other tensors share, made functional.

The recording (``_record.py``) records an in-place op as its functional form, whose
node then stands for the written tensor. Where the written tensor shares its memory
with others the recording has seen, the write reaches them too, and their nodes must
change with it. This module decides when that can be written exactly, from the
tensors' layouts alone (size, stride, storage offset: the same facts eager uses), and
records the new values:

- every other tensor on that memory is all of it in another shape (``view_as``, a
  flatten, ``x.data``, ``detach``): each becomes a view of the new value;
- the written tensor is one slice (``narrow``) or one index (``select``) along one dim
  of the memory's owner, which the recording saw made by an op: the owner becomes a
  ``slice_scatter`` / ``select_scatter`` of the new value (swin v2's
  ``qkv_bias[n:2 * n].zero_()``), and the other tensors on it, all of it in another
  shape, views of that.

Anything else (two overlapping slices, a strided view, an input's or a weight's
memory) returns no plan, and the recording is given up for torch.export, which
functionalizes. Aliases are found by storage, not ``_base``: ``x.data`` and
``detach`` share memory without one, and a view's ``_base`` is set only above the
dispatcher, after the recording has seen its op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

aten = torch.ops.aten


@dataclass
class Plan:
    """How the write into a tensor reaches the rest of its memory."""

    owner: torch.Tensor | None  # the memory's owner the recording saw, when not whole
    scatter: tuple[Any, ...] | None  # (op, dim, start[, end]) putting the write in owner
    wholes: list[torch.Tensor] = field(default_factory=list)  # all of it, reshaped

    def apply(self, rec: Any, written: torch.Tensor) -> None:
        """After ``written``'s node became its functional write: the owner and every
        whole alias get their new nodes."""
        source = written
        if self.owner is not None and self.scatter is not None:
            op, *where = self.scatter
            rec.record(op, (self.owner, written, *where), {}, self.owner,
                       [rec.node_of(self.owner), rec.node_of(written)])
            source = self.owner
        for alias in self.wholes:  # each reads the new value in its own shape
            rec.record(aten.view.default, (source, list(alias.shape)), {}, alias,
                       [rec.node_of(source)])


def _storage(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def _whole(t: torch.Tensor, nbytes: int) -> bool:
    """``t`` is all of its memory, contiguous from the start."""
    return t.is_contiguous() and t.storage_offset() == 0 and \
        t.numel() * t.element_size() == nbytes


def _placed(t: torch.Tensor, owner: torch.Tensor) -> tuple[Any, ...] | None:
    """``(slice_scatter, dim, start, end)`` or ``(select_scatter, dim, index)`` where
    ``t`` is exactly ``owner.narrow(...)`` / ``owner.select(...)``; None otherwise."""
    size, stride, offset = list(owner.shape), list(owner.stride()), t.storage_offset()
    for dim in range(owner.dim()):
        step = stride[dim]
        if step <= 0 or offset % step:
            continue
        start = offset // step
        if t.dim() == owner.dim() and start + t.shape[dim] <= size[dim]:
            want = size[:dim] + [t.shape[dim]] + size[dim + 1:]
            if list(t.shape) == want and list(t.stride()) == stride:
                return aten.slice_scatter.default, dim, start, start + t.shape[dim]
        if t.dim() == owner.dim() - 1 and start < size[dim]:
            if list(t.shape) == size[:dim] + size[dim + 1:] and \
                    list(t.stride()) == stride[:dim] + stride[dim + 1:]:
                return aten.select_scatter.default, dim, start
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
            return Plan(None, None)  # nothing else the recording saw reads this memory
        if _whole(t, nbytes):
            if all(_whole(o, nbytes) for o in others):
                return Plan(None, None, others)
            return None
        owners = [o for o in others if _whole(o, nbytes)]
        if not owners or any(not _whole(o, nbytes) for o in others):
            return None  # another part of the memory: overlaps can't be told apart here
        owner = owners[0]
        placed = _placed(t, owner)
        if placed is None:
            return None
        return Plan(owner, placed, owners[1:])
    except (RuntimeError, NotImplementedError):
        return None
    finally:
        rec.paused -= 1
