"""``pt2onnx::batched_nms``: torchvision's per-class NMS as one op. The trace
(``capture._trace``) swaps torchvision's ``batched_nms`` for it, and
``rules/torchvision.py`` translates it to one ONNX NonMaxSuppression."""

from __future__ import annotations

from typing import Any

import torch

from pt2onnx.frontends import _custom_ops

# torchvision's own batched_nms, called by pt2onnx::batched_nms when it runs (set by the
# trace while it swaps the function).
ORIGINAL: Any = None


def _impl(boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor,
          iou_threshold: float) -> torch.Tensor:
    return ORIGINAL(boxes, scores, idxs, iou_threshold)


def define(original: Any = None) -> None:
    """Defines the op in this process (idempotent); ``original``, where given, is
    torchvision's ``batched_nms``, which the op calls when it runs."""
    global ORIGINAL
    if original is not None:
        ORIGINAL = original
    _custom_ops.define(
        "batched_nms(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> Tensor",
        _impl)
