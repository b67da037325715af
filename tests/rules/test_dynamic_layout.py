"""Resize and as_strided with a dynamic batch dim: export at batch 2, run at batch 3."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import export_and_verify


class Interpolate(torch.nn.Module):
    def __init__(self, **kwargs: object) -> None:
        super().__init__()
        self.kwargs = kwargs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, **self.kwargs)


class PoolAfterPermute(torch.nn.Module):
    """ConvNeXt's and Swin's head: a channels-last tensor pooled to 1x1 becomes
    mean + as_strided (a restride to channels-last) when decomposed."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(5, 1, 1))
        self.pool = torch.nn.AdaptiveAvgPool2d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.scale * x.permute(0, 3, 1, 2)).flatten(1)


RESIZE = {
    "bilinear_size": {"size": (7, 9), "mode": "bilinear", "align_corners": False},
    "bilinear_size_align": {"size": (7, 9), "mode": "bilinear", "align_corners": True},
    "bilinear_scale_align": {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True},
    "nearest_size": {"size": (10, 3), "mode": "nearest"},
    "bicubic_size": {"size": (6, 6), "mode": "bicubic", "align_corners": False},
}


def _dynamic_batch(model: torch.nn.Module, shape: tuple[int, ...], tmp_path: Path,
                   opset: int) -> None:
    x = torch.randn(shape)
    prog = export_and_verify(model, (x,), tmp_path, input_names=["x"],
                             dynamic_axes={"x": {0: "batch"}}, opset=opset)
    result = prog.verify(torch.randn((3, *shape[1:])))
    assert result.ok, f"at batch 3:\n{result}"


@pytest.mark.parametrize("opset", [17, 21])
@pytest.mark.parametrize("name", sorted(RESIZE))
def test_resize_dynamic_batch(name: str, opset: int, tmp_path: Path) -> None:
    _dynamic_batch(Interpolate(**RESIZE[name]), (2, 4, 5, 6), tmp_path, opset)


@pytest.mark.parametrize("opset", [17, 21])
def test_as_strided_restride_dynamic_batch(opset: int, tmp_path: Path) -> None:
    _dynamic_batch(PoolAfterPermute(), (2, 6, 8, 5), tmp_path, opset)
