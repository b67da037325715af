"""torchvision models with random weights (weights=None): export, check, run, compare.

Run with ``make test-models``: torchvision imports only with the torch pinned in
constraints-2.14.txt, so that target uses its own venv (.venv-tv).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import export_and_verify

_WHY = (
    f"torchvision is not importable with torch {torch.__version__}; run `make test-models`, "
    "which builds .venv-tv with the torch and torchvision pinned in constraints-2.14.txt"
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


@pytest.mark.parametrize("name", DYNAMIC_BATCH)
def test_dynamic_batch(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    model = torchvision.models.get_model(case.name, weights=None, **case.kwargs).eval()
    x = torch.randn((2, *case.shape[1:]))
    prog = export_and_verify(model, (x,), tmp_path, name=name, input_names=["x"],
                             dynamic_axes={"x": {0: "batch"}})
    result = prog.verify(torch.randn((3, *case.shape[1:])))
    assert result.ok, f"{name} at batch 3:\n{result}"
