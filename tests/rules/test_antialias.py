"""interpolate(..., antialias=True) matches torch: its own filter weights, not ONNX
Resize's antialias, which weighs source pixels differently when downsampling."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import pt2onnx


class Interp(torch.nn.Module):
    def __init__(self, **kw: object) -> None:
        super().__init__()
        self.kw = kw

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, antialias=True, **self.kw)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kw", [
    {"size": (5, 7)}, {"size": (20, 30)}, {"size": (1, 1)}, {"size": (6, 40)},
    {"size": (5, 7), "align_corners": True}, {"scale_factor": 0.3}, {"scale_factor": 1.7},
], ids=str)
def test_antialiased_interpolation_matches_eager(mode, kw):
    x = torch.randn(2, 3, 12, 16)
    prog = pt2onnx.export(Interp(mode=mode, **kw), (x,))
    assert "Resize" not in {n.op_type for n in prog.model.graph}
    result = prog.verify(x)
    assert result.ok, result
