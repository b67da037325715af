"""Where the model's own state, not its computation, stops torch.export.

Two kinds of state do that, and neither is part of what the file computes (an ONNX file
holds no state between runs; it computes the forward from its inputs):

- **A cache keyed by the input shape, left at another size** by an earlier eager call
  (YOLO's Detect head: ``if self.shape != shape:`` refill ``self.anchors``). torch.export
  compares a dynamic size with the stale one (``batch != 3``), a guard no declared range
  holds. One eager call at the example refills it (``_model_state.refill_state``), and
  the capture runs again.
- **A registered buffer the forward replaces with a tensor of another shape**
  (``self.register_buffer("grid", torch.empty(0))``, then ``self.grid = make_grid(h, w)``
  where the input's size changed). torch.export keeps the buffer in step with a last
  ``copy_(buffer, new)``, which torch's functionalization then fails on ("expand:
  attempting to expand a dimension of length s0 -> 5"). Nothing the forward computes
  reads that copy (the forward reads ``new`` itself), and the file holds no state
  between runs, so it is dropped (``drop_resized_buffer_writes``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

from pt2onnx.capture._model_state import refill_state
from pt2onnx.errors import CaptureError

T = TypeVar("T")


def drop_resized_buffer_writes(program: torch.export.ExportedProgram) -> list[str]:
    """Removes each ``copy_(buffer, value)`` whose value's shape is not the buffer's for
    every size (a buffer the forward replaced), where nothing after it reads the buffer
    and nothing reads the copy; returns the buffers' names."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    buffers = program.graph_signature.inputs_to_buffers
    graph = program.graph_module.graph
    order = {node: i for i, node in enumerate(graph.nodes)}
    dropped: list[str] = []
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.aten.copy_.default:
            continue
        dst, src = node.args[0], node.args[1]
        if not (isinstance(dst, torch.fx.Node) and dst.op == "placeholder"
                and dst.name in buffers and isinstance(src, torch.fx.Node)):
            continue
        dst_val, src_val = dst.meta.get("val"), src.meta.get("val")
        if not (isinstance(dst_val, torch.Tensor) and isinstance(src_val, torch.Tensor)):
            continue
        same = dst_val.dim() == src_val.dim() and all(
            statically_known_true(a == b) for a, b in zip(dst_val.shape, src_val.shape))
        if same or node.users or any(order[u] > order[node] for u in dst.users if u is not node):
            continue
        graph.erase_node(node)
        dropped.append(buffers[dst.name])
    if dropped:
        program.graph_module.recompile()
    return dropped


def with_state_retries(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                       dynamic: bool, attempt: Callable[[], T], notes: list[str]) -> T:
    """``attempt()``; where it fails with a CaptureError and shapes are dynamic, the
    refill above, then ``attempt()`` once more. The first error stands if that fails
    too; a note for the export report says what was done."""
    try:
        bounded = attempt()
    except CaptureError as exc:
        refilled = refill_state(module, args, kwargs) if dynamic else []
        if not refilled:
            raise
        first: CaptureError | None = exc
    else:
        # Bounded from above (the last resort) where a stale state may be the cause:
        # refilled, the capture may be general.
        if not dynamic or not any(" at most " in r for r in getattr(bounded, "refinements", [])):
            return bounded
        refilled = refill_state(module, args, kwargs)
        if not refilled:
            return bounded
        first = None
    try:
        result = attempt()
    except CaptureError:
        if first is None:
            return bounded
        raise first from None
    if first is None and any(" at most " in r for r in getattr(result, "refinements", [])):
        return bounded
    shown = ", ".join(refilled[:4]) + (", ..." if len(refilled) > 4 else "")
    notes.append(f"the model's state keyed by its input ({shown}) was left at another size "
                 "by an earlier eager call; one eager call at the example refilled it "
                 "before the capture")
    return result
