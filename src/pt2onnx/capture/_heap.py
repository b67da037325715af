"""The heap pages a recording's freed tensors leave behind, given back as it runs.

A recording frees each intermediate tensor as soon as the model drops it, as an eager
run does, but its resident set grew far past an eager run's (issue 41: a 1.1 B
parameter Sapiens2 at 1024x768 held 12.8 GiB more after its recording than after an
eager forward, with no tensor alive). The memory sat in glibc's free lists: an eager
forward has already raised glibc's mmap threshold (to the size of its largest freed
activation), so the recording's activations come from the heap, and the graph's own
small objects, allocated between them, split the freed blocks, so each new activation
takes fresh pages. ``malloc_trim(0)`` hands the free pages of the whole heap back
(``MADV_DONTNEED``); it runs each time the recording's fresh outputs pass ``EVERY``
bytes, and once at its end. Elsewhere than glibc there is no such call and this does
nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import os
import sys
from collections.abc import Iterator
from typing import Any

import torch

# Bytes of fresh outputs between two trims: the resident set stays within about this
# much of what is alive. The step is a share of the model's weights (issue 41 bounds the
# export's memory by a share of them), between these two: a light model with large
# activations (swin_t: 0.11 GiB of weights) held 51 MB more during its recording with
# the 256 MB step alone, 13 MB with 32 MB and 2 MB with 8 MB, at no measurable cost (a
# trim of a small heap is well under a millisecond; of a fragmented many-GiB one, about
# ten).
EVERY = 256 << 20
LEAST = 8 << 20
SHARE = 0.02


def step_for(weight_bytes: int) -> int:
    """The trim step for a model with ``weight_bytes`` of parameters and buffers."""
    return int(min(EVERY, max(LEAST, weight_bytes * SHARE)))


def lean_limit(weight_bytes: int) -> int:
    """The recording's resident growth past which it goes lean, for these weights."""
    return int(max(LEAN_LEAST, weight_bytes * LEAN_SHARE))


def _malloc_trim() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None


_TRIM = _malloc_trim()


def trim() -> None:
    """The heap's free pages back to the operating system (glibc only)."""
    if _TRIM is not None:
        _TRIM(0)


# The resident set when the capture began (``attempts``); ``release`` collects only once
# it has grown by RELEASE_MIN since: a small model's failed attempt leaves little to free,
# and a full collection costs 0.1-0.3 s with a large library (transformers) loaded.
_START: contextvars.ContextVar[int | None] = contextvars.ContextVar("capture_start",
                                                                   default=None)
RELEASE_MIN = 32 << 20


@contextlib.contextmanager
def attempts() -> Iterator[None]:
    """The capture's attempts run inside: ``release`` measures growth from here."""
    token = _START.set(resident())
    try:
        yield
    finally:
        _START.reset(token)


def release() -> None:
    """Frees what a failed capture attempt left behind before the next one starts.

    The export runs with Python's cyclic GC paused (``_api.export``), and a failed
    torch.export leaves its graphs, fake tensors and shape environment in reference
    cycles (frames, tracebacks, FX nodes): without this they stay until the export ends,
    and each later attempt's peak adds to theirs. A full collection: torch collects
    during a capture too, which moves the attempt's objects into the older generations
    (collecting the youngest alone left maskrcnn_resnet50_fpn's export at 1.00 GiB above
    its eager pass, a full one at 0.61 GiB). It scans every object torch and the model
    made (0.1-0.2 s), against a failed attempt's seconds. Then the heap's free pages go
    back to the OS."""
    import gc

    start = _START.get()
    if start and RELEASE_MIN > 0 and resident() - start < RELEASE_MIN:
        return
    gc.collect()
    trim()


# Resident growth of a recording, as a share of the weights (at least LEAN_LEAST), past
# which it stops computing large values it never reads (``_Recording.lean``): the
# recording's memory then follows the graph, not the example's activations.
LEAN_SHARE = 0.02
LEAN_LEAST = 16 << 20


def resident() -> int:
    """This process's resident set in bytes (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class Trimmer:
    """Counts the bytes of the tensors a recording makes and trims past ``every``; at
    each trim it also reads the resident set, and ``over`` becomes True once that has
    grown past ``limit`` since the start."""

    def __init__(self, every: int | None = None, limit: int | None = None) -> None:
        self.every = EVERY if every is None else every
        self.pending = 0
        self.trims = 0
        self.limit = limit
        self.start = resident() if limit is not None else 0
        self.over = False

    def made(self, out: Any) -> None:
        """``out`` (an op's result) was just allocated; views and scalars count nothing."""
        if isinstance(out, torch.Tensor):
            if out._base is None and out.device.type == "cpu":
                self.pending += out.numel() * out.element_size()
        elif isinstance(out, (tuple, list)):
            for item in out:
                self.made(item)
        if self.pending >= self.every:
            self.done()

    def done(self) -> None:
        self.pending = 0
        if _TRIM is not None:
            self.trims += 1
            _TRIM(0)
        if self.limit is not None and not self.over and self.start:
            self.over = resident() - self.start > self.limit
