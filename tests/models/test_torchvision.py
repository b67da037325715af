"""torchvision models with random weights (weights=None): export, check, run, compare.

Run with ``make test-models``: torchvision imports only with the torch pinned in
constraints-2.14.txt, so that target uses its own venv (tools/mkvenv.sh).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch

import pt2onnx
from conftest import export_and_verify, export_dynamic_and_verify

_WHY = (
    f"torchvision is not importable with torch {torch.__version__}; run `make test-models`, "
    "which builds a venv with the torch and torchvision pinned in constraints-2.14.txt"
)
try:
    torchvision = pytest.importorskip("torchvision", reason=_WHY)
except RuntimeError as exc:  # installed, but built for another torch (missing C++ ops)
    pytest.skip(f"{_WHY} ({exc})", allow_module_level=True)

pytestmark = pytest.mark.models

IMAGE = (1, 3, 224, 224)


@dataclass(frozen=True)
class Case:
    """One model: its torchvision builder name and kwargs, and its example inputs."""

    name: str
    shape: tuple[int, ...] = IMAGE
    kwargs: dict[str, Any] = field(default_factory=dict)
    inputs: int = 1  # how many tensors of ``shape`` forward takes
    forward_kwargs: dict[str, Any] = field(default_factory=dict)
    xfail: str | None = None
    slow: bool = False


# No network: every builder gets weights=None; segmentation also weights_backbone=None.
NO_BACKBONE = {"weights_backbone": None}
CLIP = (1, 3, 8, 112, 112)

CLASSIFICATION = [
    Case("resnet18"),
    Case("resnet50"),
    Case("resnext50_32x4d"),
    Case("mobilenet_v2"),
    Case("mobilenet_v3_small"),
    Case("mobilenet_v3_large"),
    Case("efficientnet_b0"),
    Case("efficientnet_v2_s"),
    Case("convnext_tiny"),
    Case("regnet_y_400mf"),
    Case("densenet121"),
    Case("squeezenet1_0"),
    Case("shufflenet_v2_x0_5"),
    Case("mnasnet0_5"),
    Case("alexnet"),
    Case("googlenet", kwargs={"init_weights": True}),
    Case("inception_v3", shape=(1, 3, 299, 299), kwargs={"init_weights": True}),
    Case("vit_b_16"),
    Case("swin_t"),
    Case("swin_v2_t"),
    Case("maxvit_t"),
]

SEGMENTATION = [
    Case("fcn_resnet50", kwargs=NO_BACKBONE),
    Case("deeplabv3_mobilenet_v3_large", kwargs=NO_BACKBONE),
    Case("lraspp_mobilenet_v3_large", kwargs=NO_BACKBONE),
]

VIDEO = [
    Case("r3d_18", shape=CLIP),
    Case("mc3_18", shape=CLIP),
    Case("r2plus1d_18", shape=CLIP),
    Case("swin3d_t", shape=CLIP),
    # S3D's final pooling wants 7x7 maps, MViT's positional terms a 16x224x224 clip.
    Case("s3d", shape=(1, 3, 16, 224, 224)),
    Case("mvit_v2_s", shape=(1, 3, 16, 224, 224), slow=True),
]

OPTICAL_FLOW = [
    Case("raft_small", shape=(1, 3, 128, 128), inputs=2,
         forward_kwargs={"num_flow_updates": 3}),
]

# Detection: torch.export fails on all of them (data-dependent guards in postprocessing),
# so they go through the make_fx trace fallback. Every one is listed; none is expected to fail.
DETECTION = [
    "fasterrcnn_resnet50_fpn",
    "fasterrcnn_resnet50_fpn_v2",
    "fasterrcnn_mobilenet_v3_large_fpn",
    "fasterrcnn_mobilenet_v3_large_320_fpn",
    "maskrcnn_resnet50_fpn",
    "maskrcnn_resnet50_fpn_v2",
    "keypointrcnn_resnet50_fpn",
    "retinanet_resnet50_fpn",
    "retinanet_resnet50_fpn_v2",
    "fcos_resnet50_fpn",
    "ssd300_vgg16",
    "ssdlite320_mobilenet_v3_large",
]
DETECTION_IMAGE = (3, 256, 256)

# Models whose ops span most rule families, exported at the ends of the opset range.
OPSET_SPREAD = ["mobilenet_v3_small", "swin_t", "vit_b_16", "lraspp_mobilenet_v3_large"]
# Exported with a dynamic batch and run at another batch size: these resize to a size taken
# from another tensor (LR-ASPP) or restride after pooling (Swin: as_strided).
DYNAMIC_BATCH = ["resnet18", "lraspp_mobilenet_v3_large", "swin_t"]
CASES = {c.name: c for c in CLASSIFICATION + SEGMENTATION + VIDEO + OPTICAL_FLOW}


def _params(cases: list[Case]) -> list[Any]:
    params = []
    for c in cases:
        marks = [pytest.mark.slow] if c.slow else []
        if c.xfail:
            marks.append(pytest.mark.xfail(reason=c.xfail, strict=True))
        params.append(pytest.param(c, id=c.name, marks=marks))
    return params


def _export_and_check(case: Case, tmp_path: Path, **export_kwargs: Any) -> None:
    model = torchvision.models.get_model(case.name, weights=None, **case.kwargs).eval()
    args = tuple(torch.randn(case.shape) for _ in range(case.inputs))
    # Saves to a file, runs onnx.checker (full_check, by path), then prog.verify(...) must be
    # ok: max abs diff <= 1e-4 + 1e-3 * max|eager| for every output.
    export_and_verify(model, args, tmp_path, kwargs=case.forward_kwargs or None,
                      name=case.name, **export_kwargs)


@pytest.mark.parametrize("case", _params(CLASSIFICATION))
def test_classification(case: Case, tmp_path: Path) -> None:
    _export_and_check(case, tmp_path)


@pytest.mark.parametrize("case", _params(SEGMENTATION))
def test_segmentation(case: Case, tmp_path: Path) -> None:
    _export_and_check(case, tmp_path)


@pytest.mark.parametrize("case", _params(VIDEO))
def test_video(case: Case, tmp_path: Path) -> None:
    _export_and_check(case, tmp_path)


@pytest.mark.parametrize("case", _params(OPTICAL_FLOW))
def test_optical_flow(case: Case, tmp_path: Path) -> None:
    _export_and_check(case, tmp_path)


@pytest.mark.parametrize("opset", [17, 26])
@pytest.mark.parametrize("name", OPSET_SPREAD)
def test_opset_range(name: str, opset: int, tmp_path: Path) -> None:
    _export_and_check(CASES[name], tmp_path, opset=opset)


def _dynamic_params() -> list[Any]:
    # RAFT-small included: torch.export cannot prove its guard
    # ``(3*batch - 1) // batch == 2``, which holds for every batch >= 2, and pt2onnx
    # checks it over the range (capture/_guards_hold.py) instead of refusing.
    params = []
    for p in _params(CLASSIFICATION + SEGMENTATION + VIDEO + OPTICAL_FLOW):
        case = p.values[0]
        marks = [m for m in p.marks if m.name != "xfail"]
        params.append(pytest.param(case, id=case.name, marks=marks))
    return params


@pytest.mark.parametrize("case", _dynamic_params())
def test_dynamic_batch_from_one(case: Case, tmp_path: Path) -> None:
    """Every family but detection (traced, so static): a batch-1 example, dynamic batch."""
    model = torchvision.models.get_model(case.name, weights=None, **case.kwargs).eval()
    args = tuple(torch.randn((1, *case.shape[1:])) for _ in range(case.inputs))
    names = [f"x{i}" for i in range(case.inputs)]
    export_dynamic_and_verify(model, args, tmp_path, {n: {0: "batch"} for n in names},
                              kwargs=case.forward_kwargs or None, name=case.name,
                              input_names=names)


@pytest.mark.parametrize("name", DYNAMIC_BATCH)
def test_dynamic_batch(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    model = torchvision.models.get_model(case.name, weights=None, **case.kwargs).eval()
    x = torch.randn((2, *case.shape[1:]))
    prog = export_and_verify(model, (x,), tmp_path, name=name, input_names=["x"],
                             dynamic_axes={"x": {0: "batch"}})
    result = prog.verify(torch.randn((3, *case.shape[1:])))
    assert result.ok, f"{name} at batch 3:\n{result}"


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["resnet18", "swin_t"])
def test_half_precision(name: str, precision: str, tmp_path: Path) -> None:
    """precision= (issue 39): a float32 model written in float16 / bfloat16 loads in
    onnxruntime's CPU provider and matches the model run in that precision (verify's
    tolerance for the dtype), at batch 2 and, with a dynamic batch, at 1 and 3."""
    case = CASES[name]
    model = torchvision.models.get_model(case.name, weights=None, **case.kwargs).eval()
    x = torch.randn((2, *case.shape[1:]))
    prog = export_and_verify(model, (x,), tmp_path, name=f"{name}_{precision}",
                             input_names=["x"], dynamic_axes={"x": {0: "batch"}},
                             precision=precision)
    assert next(model.parameters()).dtype == torch.float32
    for batch in (1, 3):
        result = prog.verify(torch.randn((batch, *case.shape[1:])))
        assert result.ok, f"{name} in {precision} at batch {batch}:\n{result}"


def _detection_model(name: str) -> torch.nn.Module:
    # Score threshold 0 keeps boxes despite random weights. The default init leaves the
    # features near zero and every score equal, so NMS order would be arbitrary; a
    # fan-in normal init gives distinct scores. R-CNN, RetinaNet and FCOS resize to 256.
    kwargs: dict[str, Any] = {"weights": None, "weights_backbone": None}
    kwargs["box_score_thresh" if "rcnn" in name else "score_thresh"] = 0.0
    if not name.startswith("ssd"):
        kwargs.update(min_size=DETECTION_IMAGE[1], max_size=DETECTION_IMAGE[2])
    model = torchvision.models.get_model(name, **kwargs).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
                torch.nn.init.kaiming_normal_(module.weight, nonlinearity="linear")
                if module.bias is not None:
                    module.bias.normal_(0, 0.1)
    return model


def _assert_detections_match(ref: dict[str, torch.Tensor], got: dict[str, np.ndarray]) -> None:
    """Every eager detection has an ONNX one with the same score, label, box, mask, keypoints.

    Rows are matched, not compared in order: detections whose scores tie (to float
    rounding) may come out of NMS and the final sort in either order.
    """
    assert set(got) == set(ref), f"outputs {sorted(got)} != {sorted(ref)}"
    n = len(ref["scores"])
    assert n > 0, "no detections to compare"
    assert all(len(v) == n for v in got.values()), {k: v.shape for k, v in got.items()}
    expected = {k: v.numpy() for k, v in ref.items()}
    tol = {k: 1e-4 + 1e-3 * float(np.abs(v).max()) for k, v in expected.items()}
    scores = got["scores"]
    unused = set(range(n))
    for i in range(n):
        close = [j for j in unused if abs(scores[j] - expected["scores"][i]) <= tol["scores"]]
        match = next((j for j in sorted(close, key=lambda j: abs(j - i)) if all(
            np.abs(got[k][j].astype(np.float64) - expected[k][i]).max() <= tol[k]
            for k in expected
        )), None)
        assert match is not None, (
            f"eager detection {i} (score {expected['scores'][i]:.6g}, label "
            f"{expected['labels'][i]}, box {expected['boxes'][i]}) has no ONNX match"
        )
        unused.discard(match)


@pytest.mark.parametrize("name", DETECTION)
def test_detection(name: str, tmp_path: Path) -> None:
    model = _detection_model(name)
    image = torch.rand(DETECTION_IMAGE)
    path = tmp_path / f"{name}.onnx"
    with pytest.warns(UserWarning, match="traced with make_fx"):
        prog = pt2onnx.export(model, ([image],), path)
    assert prog.report.capture_strategy == "trace (make_fx)"
    onnx.checker.check_model(str(path), full_check=True)
    with torch.no_grad():
        (ref,) = model([image])
    names = [o.name for o in prog.model_proto.graph.output]
    got = {name.removeprefix("output_0_"): value for name, value in zip(names, prog.run([image]))}
    _assert_detections_match(ref, got)


class _Ops(torch.nn.Module):
    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> Any:
        return self.fn(*xs)


def _boxes(n: int) -> torch.Tensor:
    xy = torch.rand(n, 2) * 50
    return torch.cat([xy, xy + 5 + torch.rand(n, 2) * 30], dim=1)


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("sampling_ratio", [-1, 2])
def test_roi_align(aligned: bool, sampling_ratio: int, tmp_path: Path) -> None:
    x = torch.randn(2, 4, 32, 32)
    rois = torch.cat([torch.tensor([[0.0], [1.0], [1.0], [0.0]]), _boxes(4) / 2], dim=1)
    rois[3, 1:] = torch.tensor([3.0, 3.0, 3.2, 3.1])  # smaller than a pixel: legacy clamps to 1
    model = _Ops(lambda x, r: torchvision.ops.roi_align(x, r, (5, 3), 0.5, sampling_ratio,
                                                        aligned))
    export_and_verify(model, (x, rois), tmp_path, name="roi_align")


def test_nms(tmp_path: Path) -> None:
    boxes, scores = _boxes(60), torch.rand(60)
    model = _Ops(lambda b, s: torchvision.ops.nms(b, s, 0.3))
    prog = export_and_verify(model, (boxes, scores), tmp_path, name="nms")
    # nms is data-dependent but torch.export captures it: other boxes keep another count.
    assert prog.report.capture_strategy.startswith("torch.export")
    boxes, scores = _boxes(60), torch.rand(60)
    assert prog.verify(boxes, scores).ok


def test_batched_nms(tmp_path: Path) -> None:
    # Above 1,000 boxes torchvision loops over the classes present in Python; the trace
    # fallback captures the call as one pt2onnx::batched_nms op instead of unrolling it.
    n = 1500
    boxes, scores, idxs = _boxes(n), torch.rand(n), torch.randint(0, 5, (n,))
    model = _Ops(lambda b, s, i: torchvision.ops.batched_nms(b, s, i, 0.4))
    with pytest.warns(UserWarning, match="pt2onnx::batched_nms"):
        prog = export_and_verify(model, (boxes, scores, idxs), tmp_path, name="batched_nms")
    assert prog.report.capture_strategy == "trace (make_fx)"
    ops = {node.op_type for node in prog.model_proto.graph.node}
    assert "NonMaxSuppression" in ops and "Loop" not in ops
    # The classes are not baked in: a class unseen while tracing is handled too.
    boxes, scores, idxs = _boxes(n), torch.rand(n), torch.randint(0, 7, (n,))
    assert prog.verify(boxes, scores, idxs).ok
