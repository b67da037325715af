"""A Python branch on a size that depends on the inputs' values, while capturing.

``if b_ids.shape[0] == 0: return empty`` (kornia's LoFTR) asks torch.export to decide a
size it only learns at run time (the number of matches), and it stops with
``GuardOnDataDependentSymNode``; the trace that was left baked in the example's count.
torch's own code answers such questions with ``guard_or_false``: the general branch,
with a runtime assert. While pt2onnx captures, a user's branch gets the same treatment:
where torch's size-oblivious reasoning decides the condition (a size that is not 0 or
1), that answer is taken, ``torch._check`` records it as the program's runtime assert,
and the export says so in a warning naming the line. Conditions it cannot decide still
stop the capture.

ONNX has no assert, so the file computes the general branch for every input; the
warning says where the model's other branch would have run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


def _decided(node: Any) -> bool | None:
    """The condition's value where every data-dependent size is at least 2, or None."""
    shape_env = getattr(node, "shape_env", None)
    if shape_env is None:
        return None
    try:
        value = shape_env._maybe_evaluate_static(node.expr, size_oblivious=True)
    except Exception:
        return None
    if value is None or not getattr(value, "is_Boolean", False):
        return None
    return bool(value)


@contextlib.contextmanager
def general_branches(notes: list[str]) -> Iterator[None]:
    """Answers data-dependent Python branches torch's size-oblivious way (see above)."""
    from torch.fx.experimental.sym_node import SymNode
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    from pt2onnx.capture._dynamic import _user_frame

    original = SymNode.guard_bool

    def guard_bool(self: Any, file: str, line: int) -> bool:
        try:
            return bool(original(self, file, line))
        except GuardOnDataDependentSymNode:
            answer = _decided(self)
            if answer is None:
                raise
            held = torch.SymBool(self)
            torch._check(held if answer else torch.sym_not(held))
            where = _user_frame() or "the model"
            note = (f"the branch on {self.expr} at {where} depends on a size known only at "
                    f"run time; the graph takes the side for sizes other than 0 and 1 "
                    f"({self.expr} is {answer}), as torch's guard_or_false does, for every "
                    "input. Where the model's other side computes something else (an empty "
                    "result built another way), write the branch with torch.cond")
            if note not in notes:
                notes.append(note)
            return answer

    SymNode.guard_bool = guard_bool  # type: ignore[method-assign]
    try:
        yield
    finally:
        SymNode.guard_bool = original  # type: ignore[method-assign]
