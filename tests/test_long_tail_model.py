"""A small model made of ops from the long tail (rules of our own and decompositions)
exports and matches eager PyTorch in onnxruntime, with static and dynamic batch."""

from __future__ import annotations

import torch
from torch import nn

import pt2onnx
from conftest import export_and_verify, export_dynamic_and_verify


class LongTail(nn.Module):
    """var_mean, erfc, cumprod and a 7x7 adaptive average pool over a 10x10 map: the
    pool's windows overlap and differ in size (10 is not a multiple of 7)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d((7, 7))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.pool(self.conv(x))  # (N, 4, 7, 7)
        var, mean = torch.var_mean(y, dim=(2, 3), keepdim=True)
        z = torch.special.erfc((y - mean) / (var + 1e-3).sqrt())
        return z, torch.cumprod(1.0 + 0.1 * torch.tanh(y), dim=-1), var, mean


def test_long_tail_ops_match_eager(tmp_path):
    x = torch.randn(2, 3, 10, 10)
    prog = export_and_verify(LongTail().eval(), (x,), tmp_path)
    ops = {node.op_type for node in prog.model.graph}
    # The pool is exact per-window averaging, not a resize or a fixed-size AveragePool.
    assert "Resize" not in ops
    assert prog.model.graph.outputs[0].shape.dims[2:] == (7, 7)


def test_long_tail_ops_with_dynamic_batch(tmp_path):
    x = torch.randn(1, 3, 10, 10)
    export_dynamic_and_verify(LongTail().eval(), (x,), tmp_path, {"x": {0: "batch"}})


class CachesOnSelf(nn.Module):
    """Keeps a tensor computed in forward on ``self``, keyed by the input shape, with
    class-level defaults, as YOLO's Detect head does with its anchors."""

    shape = None
    grid = torch.empty(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.shape != x.shape:
            self.grid = torch.arange(x.shape[-1], dtype=x.dtype)
            self.shape = x.shape
        return x + self.grid


def test_export_leaves_no_tracing_tensors_on_the_model(tmp_path):
    model = CachesOnSelf()
    x = torch.randn(2, 5)
    first = pt2onnx.export(model, (x,))
    assert model.shape is None and model.grid.numel() == 0  # as before the export
    # A second export runs the same forward again instead of reading a fake cache.
    second = export_and_verify(model, (x,), tmp_path, name="second")
    torch.testing.assert_close(model(x), x + torch.arange(5.0))  # eager still runs
    # A third export reads the cache eager filled, a real tensor.
    third = export_and_verify(model, (x,), tmp_path, name="third")
    expected = (x + torch.arange(5.0)).tolist()
    assert first.run(x)[0].tolist() == second.run(x)[0].tolist() == expected
    assert third.run(x)[0].tolist() == expected
