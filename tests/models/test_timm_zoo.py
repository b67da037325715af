"""timm models with random weights (pretrained=False): export, check, run, compare.

Inputs are 1x3x64x64 wherever the model allows; transformers with a fixed grid
are built for that size (``img_size=64``) and with fewer blocks (``depth=2``)
where a block repeats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from conftest import export_and_verify, export_dynamic_and_verify

try:
    timm = pytest.importorskip("timm", reason="timm is not installed")
except RuntimeError as exc:  # torchvision (a timm dependency) built for another torch
    pytest.skip(f"timm is not importable with torch {torch.__version__} ({exc})",
                allow_module_level=True)

pytestmark = pytest.mark.models

SIZE = 64
SMALL = dict(img_size=SIZE)
SHALLOW = dict(img_size=SIZE, depth=2)


@dataclass(frozen=True)
class Case:
    """One model: its family, timm name, create_model kwargs and input side."""

    family: str
    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    size: int = SIZE
    xfail: str | None = None


CASES = [
    Case("resnet", "resnet18"),
    Case("resnet", "resnet26"),
    Case("resnet", "resnetv2_50"),
    Case("resnet", "seresnext26d_32x4d"),
    Case("resnet", "skresnet18"),
    Case("resnet", "resnest14d"),
    Case("resnet", "res2net50_26w_4s"),
    Case("resnet", "nf_resnet26"),
    Case("resnext", "resnext26ts"),
    Case("efficientnet", "efficientnet_b0"),
    Case("efficientnet", "efficientnet_lite0"),
    Case("efficientnet", "tf_efficientnet_b0"),
    Case("efficientnet", "efficientnetv2_rw_t"),
    Case("efficientnet", "tinynet_e"),
    Case("efficientnet", "mixnet_s"),
    Case("mobilenet", "mobilenetv2_050"),
    Case("mobilenet", "mobilenetv3_small_050"),
    Case("mobilenet", "mobilenetv3_large_100"),
    Case("mobilenet", "tf_mobilenetv3_small_minimal_100"),
    Case("mobilenet", "mobilenetv4_conv_small"),
    Case("mobilenet", "lcnet_050"),
    Case("mobilenet", "mnasnet_small"),
    Case("mobilenet", "fbnetc_100"),
    Case("mobilenet", "hardcorenas_a"),
    Case("mobilenet", "rexnet_100"),
    Case("convnext", "convnext_atto"),
    Case("convnext", "convnextv2_atto"),
    Case("vit", "vit_tiny_patch16_224", SHALLOW),
    Case("vit", "vit_small_patch32_224", SHALLOW),
    Case("vit", "deit_tiny_patch16_224", SHALLOW),
    Case("vit", "deit_tiny_distilled_patch16_224", SHALLOW),
    Case("vit", "deit3_small_patch16_224", SHALLOW),
    Case("vit", "cait_xxs24_224", SHALLOW),
    Case("vit", "beit_base_patch16_224", SHALLOW),
    Case("vit", "beitv2_base_patch16_224", SHALLOW),
    Case("vit", "eva02_tiny_patch14_224", SHALLOW),
    Case("vit", "xcit_nano_12_p16_224", SHALLOW),
    Case("vit", "pit_ti_224", SMALL),
    Case("vit", "levit_128s", SMALL),
    Case("vit", "coat_lite_tiny", SMALL),
    Case("vit", "visformer_tiny", SMALL),
    Case("vit", "pvt_v2_b0"),
    Case("vit", "crossvit_tiny_240", size=240),
    Case("swin", "swin_tiny_patch4_window7_224", dict(SMALL, window_size=4, depths=(1, 1, 1, 1))),
    Case("swin", "swinv2_tiny_window8_256", dict(SMALL, window_size=4, depths=(1, 1, 1, 1))),
    Case("swin", "nest_tiny", SMALL),
    Case("swin", "gcvit_xxtiny", SMALL),
    Case("swin", "maxvit_nano_rw_256", SMALL),
    Case("swin", "coatnet_nano_rw_224", SMALL),
    Case("regnet", "regnetx_002"),
    Case("regnet", "regnety_002"),
    Case("densenet", "densenet121"),
    Case("densenet", "dpn68"),
    Case("mlp", "mixer_s32_224", SMALL),
    Case("mlp", "gmlp_ti16_224", SMALL),
    Case("mlp", "resmlp_12_224", SMALL),
    Case("metaformer", "poolformer_s12"),
    Case("metaformer", "poolformerv2_s12"),
    Case("metaformer", "convmixer_768_32"),
    Case("metaformer", "efficientformerv2_s0", SMALL),
    Case("hybrid", "mobilevit_xxs"),
    Case("hybrid", "mobilevitv2_050"),
    Case("hybrid", "edgenext_xx_small"),
    Case("hybrid", "fastvit_t8"),
    Case("ghostnet", "ghostnet_100"),
    Case("ghostnet", "ghostnetv2_100"),
    Case("ghostnet", "repghostnet_050"),
    Case("cnn", "hrnet_w18_small"),
    Case("cnn", "dla34"),
    Case("cnn", "cspresnet50"),
    Case("cnn", "repvgg_a0"),
    Case("cnn", "ese_vovnet19b_dw"),
    Case("cnn", "hgnet_tiny"),
    Case("cnn", "inception_v3", size=96),
]


def _params() -> list[Any]:
    marks = {c.name: [pytest.mark.xfail(reason=c.xfail, strict=True)] if c.xfail else []
             for c in CASES}
    return [pytest.param(c, id=f"{c.family}-{c.name}", marks=marks[c.name]) for c in CASES]


@pytest.mark.parametrize("case", _params())
def test_timm_zoo(case: Case, tmp_path) -> None:
    model = timm.create_model(case.name, pretrained=False, **case.kwargs).eval()
    x = torch.randn(1, 3, case.size, case.size)
    export_and_verify(model, (x,), tmp_path, name=case.name)


@pytest.mark.parametrize("case", _params())
def test_timm_zoo_dynamic(case: Case, tmp_path) -> None:
    """A batch-1 example with a dynamic batch, checked at a second batch size."""
    model = timm.create_model(case.name, pretrained=False, **case.kwargs).eval()
    x = torch.randn(1, 3, case.size, case.size)
    export_dynamic_and_verify(model, (x,), tmp_path, {"x": {0: "batch"}}, name=case.name)
