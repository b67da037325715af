"""Where in the model's own code an op or a guard came from: the innermost frame of the
Python stack outside the libraries a capture runs through."""

from __future__ import annotations

import linecache
import os
import sys
from types import CodeType, FrameType

_TRACES: dict[tuple[CodeType, int], str] = {}


def user_frame(depth: int, skip: tuple[str, ...], files: frozenset[str] = frozenset(),
               stop: CodeType | None = None) -> FrameType | None:
    """The innermost frame, from ``depth`` frames above this call's caller, whose file is
    not under ``skip``, not one of ``files`` and not generated (``<string>``); None where
    the stack reaches ``stop`` (the frame that called the model) or its end first."""
    frame: FrameType | None = sys._getframe(depth + 1)
    while frame is not None:
        if frame.f_code is stop:
            return None
        name = frame.f_code.co_filename
        if not name.startswith(skip) and name not in files and not name.startswith("<"):
            return frame
        frame = frame.f_back
    return None


def stack_trace(frame: FrameType | None) -> str:
    """The frame as torch.export writes a node's stack trace (cached per line)."""
    if frame is None:
        return ""
    code = frame.f_code
    key = (code, frame.f_lineno)
    hit = _TRACES.get(key)
    if hit is None:
        line = linecache.getline(code.co_filename, frame.f_lineno).strip()
        hit = _TRACES[key] = (f'  File "{code.co_filename}", line {frame.f_lineno}, '
                              f"in {code.co_name}\n    {line}\n")
    return hit


def place(frame: FrameType | None) -> str:
    """``file.py:12 in forward``, or an empty string."""
    if frame is None:
        return ""
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} in {frame.f_code.co_name}"
