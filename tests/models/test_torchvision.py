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
    """One model: its torchvision builder name, builder kwargs and example input shape."""

    name: str
    shape: tuple[int, ...] = IMAGE
    kwargs: dict[str, Any] = field(default_factory=dict)
    xfail: str | None = None


# No network: every builder gets weights=None; segmentation also weights_backbone=None.
NO_BACKBONE = {"weights_backbone": None}

CLASSIFICATION = [
    Case("resnet18"),
    Case("resnet50"),
    Case("mobilenet_v2"),
    Case("mobilenet_v3_small"),
    Case("mobilenet_v3_large"),
    Case("efficientnet_b0"),
    Case("efficientnet_v2_s"),
    Case("convnext_tiny"),
    Case("regnet_y_400mf"),
    Case("regnet_x_400mf"),
    Case("densenet121"),
    Case("squeezenet1_0"),
    Case("squeezenet1_1"),
    Case("shufflenet_v2_x0_5"),
    Case("mnasnet0_5"),
    Case("alexnet"),
    Case("vgg11"),
    Case("googlenet", kwargs={"init_weights": True}),
    Case("inception_v3", shape=(1, 3, 299, 299), kwargs={"init_weights": True}),
    Case("resnext50_32x4d"),
    Case("wide_resnet50_2"),
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
    Case("r3d_18", shape=(1, 3, 8, 112, 112)),
    Case("r2plus1d_18", shape=(1, 3, 8, 112, 112)),
]


def _params(cases: list[Case]) -> list[Any]:
    return [
        pytest.param(c, id=c.name, marks=[pytest.mark.xfail(reason=c.xfail, strict=True)])
        if c.xfail else pytest.param(c, id=c.name)
        for c in cases
    ]


def _export_and_check(case: Case, tmp_path: Path) -> None:
    model = torchvision.models.get_model(case.name, weights=None, **case.kwargs).eval()
    x = torch.randn(case.shape)
    # Saves to a file, runs onnx.checker (full_check, by path), then prog.verify(x) must be ok:
    # max abs diff <= 1e-4 + 1e-3 * max|eager| for every output.
    export_and_verify(model, (x,), tmp_path, name=case.name)


@pytest.mark.parametrize("case", _params(CLASSIFICATION))
def test_classification(case: Case, tmp_path: Path) -> None:
    _export_and_check(case, tmp_path)


@pytest.mark.parametrize("case", _params(SEGMENTATION))
def test_segmentation(case: Case, tmp_path: Path) -> None:
    _export_and_check(case, tmp_path)


@pytest.mark.parametrize("case", _params(VIDEO))
def test_video(case: Case, tmp_path: Path) -> None:
    _export_and_check(case, tmp_path)
