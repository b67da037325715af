"""torchvision's detection ops: nms, roi_align, and pt2onnx::batched_nms.

torchvision registers its ops when it is imported, so these rules are added
by ``register()``, which the exporter calls before translating; importing
pt2onnx never imports torchvision. ``pt2onnx::batched_nms`` is the op the
trace fallback substitutes for ``torchvision.ops.batched_nms`` (see capture/_trace.py).
"""

from __future__ import annotations

import sys

import onnx_ir as ir
import torch

from pt2onnx.rule_api import REGISTRY, Registry, RuleContext


def _kept_boxes(g: RuleContext, boxes: ir.Value, scores: ir.Value, iou_threshold: float,
                score_threshold: float | None = None) -> ir.Value:
    """Indices of the boxes NonMaxSuppression keeps; ``scores`` is [classes, N].

    One batch; boxes with IoU > iou_threshold are dropped, as torchvision does.
    NonMaxSuppression takes float32 only, so boxes and scores are cast.
    """
    inputs = [
        g.op.Unsqueeze(g.cast(boxes, ir.DataType.FLOAT), g.const([0])),
        g.op.Unsqueeze(g.cast(scores, ir.DataType.FLOAT), g.const([0])),
        g.op.Slice(g.op.Shape(boxes), g.const([0]), g.const([1])),
        g.const([float(iou_threshold)], ir.DataType.FLOAT),
    ]
    if score_threshold is not None:
        inputs.append(g.const([score_threshold], ir.DataType.FLOAT))
    selected = g.op.NonMaxSuppression(*inputs)  # rows of (batch, class, box)
    return g.op.Squeeze(g.op.Slice(selected, g.const([2]), g.const([3]), g.const([1])),
                        g.const([1]))


def nms(g: RuleContext, boxes: ir.Value, scores: ir.Value, iou_threshold: float) -> ir.Value:
    """torchvision::nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"""
    # One class: the kept boxes come out in decreasing score order, as in torchvision.
    return _kept_boxes(g, boxes, g.op.Unsqueeze(scores, g.const([0])), iou_threshold)


def batched_nms(g: RuleContext, boxes: ir.Value, scores: ir.Value, idxs: ir.Value,
                iou_threshold: float) -> ir.Value:
    """pt2onnx::batched_nms(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> Tensor"""
    # NMS within each category, as one multi-class NonMaxSuppression: class c sees
    # the scores of its own boxes and the lowest float elsewhere, which the score
    # threshold (strictly greater passes) removes. Results are then sorted by score.
    lowest = float(torch.finfo(torch.float32).min)
    idxs = g.cast(idxs, ir.DataType.INT64)
    n_classes = g.op.Add(
        g.op.ReduceMax(g.op.Concat(idxs, g.const([0]), axis=0), keepdims=1), g.const([1])
    )
    classes = g.op.Range(g.const(0), g.op.Squeeze(n_classes, g.const([0])), g.const(1))
    member = g.op.Equal(g.op.Unsqueeze(classes, g.const([1])), g.op.Unsqueeze(idxs, g.const([0])))
    scores32 = g.cast(scores, ir.DataType.FLOAT)
    per_class = g.op.Where(member, g.op.Unsqueeze(scores32, g.const([0])),
                           g.const(lowest, ir.DataType.FLOAT))
    kept = _kept_boxes(g, boxes, per_class, iou_threshold, lowest)
    # torchvision sorts the kept indices, ascending, by decreasing score with a
    # stable sort; TopK breaks ties by position, so sort the indices first.
    count = g.op.Shape(kept)
    kept, _ = g.op.TopK(kept, count, axis=0, largest=0, sorted=1, _outputs=2)
    _, order = g.op.TopK(g.op.Gather(scores32, kept), count, axis=0, largest=1, sorted=1,
                         _outputs=2)
    return g.op.Gather(kept, order)


def roi_align(g: RuleContext, x: ir.Value, rois: ir.Value, spatial_scale: float,
              pooled_height: int, pooled_width: int, sampling_ratio: int,
              aligned: bool) -> ir.Value:
    """torchvision::roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor"""
    # rois are [K, 5] (batch index, x1, y1, x2, y2). aligned=True shifts by half a
    # pixel (half_pixel); aligned=False is the legacy mode, which also clamps the
    # roi size to at least 1 (output_half_pixel). sampling_ratio <= 0 is adaptive.
    dtype = x.dtype
    compute = dtype if dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE) else ir.DataType.FLOAT
    batch = g.cast(g.op.Squeeze(g.op.Slice(rois, g.const([0]), g.const([1]), g.const([1])),
                                g.const([1])), ir.DataType.INT64)
    boxes = g.cast(g.op.Slice(rois, g.const([1]), g.const([5]), g.const([1])), compute)
    out = g.op.RoiAlign(
        g.cast(x, compute), boxes, batch,
        coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
        mode="avg",
        output_height=int(pooled_height),
        output_width=int(pooled_width),
        sampling_ratio=max(int(sampling_ratio), 0),
        spatial_scale=float(spatial_scale),
    )
    return g.cast(out, dtype) if compute != dtype else out  # type: ignore[arg-type]


def register(registry: Registry = REGISTRY) -> None:
    """Adds the rules for the ops that exist in this process (idempotent)."""
    from pt2onnx.frontends import define_batched_nms

    define_batched_nms()
    if torch.ops.pt2onnx.batched_nms.default not in registry:
        registry.register(torch.ops.pt2onnx.batched_nms.default, batched_nms)
    if "torchvision" not in sys.modules:
        return
    ns = torch.ops.torchvision
    for name, fn in (("nms", nms), ("roi_align", roi_align)):
        try:
            op = getattr(ns, name).default
        except (AttributeError, RuntimeError):
            continue
        if op not in registry:
            registry.register(op, fn)


register()
