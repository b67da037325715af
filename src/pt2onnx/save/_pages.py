"""Mapped file pages a written weight touched, handed back once it is written.

A model loaded with ``from_pretrained`` (transformers 5) holds its weights as pages
mapped from the checkpoint's safetensors files, which the export itself never reads
(it captures on fake tensors). Writing the file reads each weight once, and every page
read stays in the process's resident set until the model is freed: the whole
checkpoint, on top of the export's own memory (Whisper: +70 MB of 550). After a weight
is written, its pages are handed back with ``madvise(MADV_PAGEOUT)`` (Linux 5.4+):
the kernel drops them from the process and keeps the file's data; the next read
faults them in again. Only pages of file mappings are touched (never anonymous
memory, which PAGEOUT would push to swap), and no data can change: a page the
process wrote to is anonymous, which PAGEOUT only swaps out or keeps.
"""

from __future__ import annotations

import bisect
import ctypes
import sys
from typing import Any

import torch

_MADV_PAGEOUT = 21
_PAGE = 4096


class FilePages:
    """The process's file mappings, read once; ``release`` a tensor lying in one."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._madvise: Any = None
        if not sys.platform.startswith("linux"):
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            madvise = libc.madvise
            madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            madvise.restype = ctypes.c_int
            with open("/proc/self/maps") as f:
                ranges = []
                for line in f:
                    parts = line.split(maxsplit=5)
                    # address perms offset dev inode path: a file's mapping has an inode.
                    if len(parts) == 6 and parts[4] != "0" and parts[5].startswith("/"):
                        lo, hi = (int(x, 16) for x in parts[0].split("-"))
                        ranges.append((lo, hi))
        except (OSError, AttributeError, ValueError):
            return
        ranges.sort()
        self._starts = [lo for lo, _ in ranges]
        self._ends = [hi for _, hi in ranges]
        self._madvise = madvise

    def release(self, t: Any) -> bool:
        """Hands back the pages of ``t``'s bytes if a file mapping holds them all;
        whether the kernel took the advice (an old kernel's EINVAL: nothing done)."""
        if self._madvise is None or not isinstance(t, torch.Tensor) or t.is_meta \
                or t.device.type != "cpu" or not t.is_contiguous():
            return False
        start = t.data_ptr()
        end = start + t.numel() * t.element_size()
        i = bisect.bisect_right(self._starts, start) - 1
        if i < 0 or end > self._ends[i] or end - start < _PAGE:
            return False
        lo = start - start % _PAGE
        return bool(self._madvise(lo, end - lo, _MADV_PAGEOUT) == 0)
