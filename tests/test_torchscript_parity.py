"""Issue 28: what the TorchScript exporter exported and pt2onnx refused, by group, each
a general mechanism tested beyond the PyTorch test that found it."""

from __future__ import annotations

import warnings

import onnx
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import pt2onnx


def _export(model: nn.Module, args: tuple, **kw):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pt2onnx.export(model, args, **kw)


class _Scaled(nn.Module):
    def __init__(self, fn) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.fn = fn

    def forward(self, x, a, b, alpha, beta):  # type: ignore[no-untyped-def]
        return self.fn(x, a, b, alpha=alpha, beta=beta)


@pytest.mark.parametrize(("fn", "shapes"), [
    (torch.baddbmm, ((2, 3, 5), (2, 3, 4), (2, 4, 5))),
    (torch.addbmm, ((3, 5), (2, 3, 4), (2, 4, 5))),
], ids=["baddbmm", "addbmm"])
def test_tensor_alpha_and_beta_are_inputs(fn, shapes):  # type: ignore[no-untyped-def]
    """alpha and beta given as tensors (test_baddbmm_dynamic's form): the rule multiplies
    by them at run time, and a beta of 0 ignores the NaN in ``self``, as eager does."""
    x, a, b = (torch.randn(s) for s in shapes)
    x[0] = float("nan")
    prog = _export(_Scaled(fn), (x, a, b, torch.tensor(0.5), torch.tensor(2.0)))
    for alpha, beta in [(0.5, 2.0), (1.5, 0.0), (-1.0, 1.0)]:
        assert prog.verify(x, a, b, torch.tensor(alpha), torch.tensor(beta)).ok, (alpha, beta)


class _Pixel(nn.Module):
    def __init__(self, fn, r: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.fn, self.r = fn, r

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.fn(x, self.r)


@pytest.mark.parametrize("batch_dims", [1, 2])
@pytest.mark.parametrize(("fn", "channels"), [(F.pixel_unshuffle, 3), (F.pixel_shuffle, 12)],
                         ids=["unshuffle", "shuffle"])
def test_pixel_shuffles_with_dynamic_dims(fn, channels, batch_dims):  # type: ignore[no-untyped-def]
    """Every dim dynamic but the channels, with one or two batch dims (torch takes any)."""
    lead = (1,) * batch_dims
    x = torch.randn(*lead, channels, 4, 6)
    rank = x.dim()
    axes = {**{i: f"b{i}" for i in range(batch_dims)}, rank - 2: "h", rank - 1: "w"}
    prog = _export(_Pixel(fn, 2), (x,), input_names=["x"], dynamic_axes={"x": axes})
    for sizes in [(1,) * batch_dims, (3,) * batch_dims]:
        for h, w in [(2, 2), (4, 6), (8, 10)]:
            assert prog.verify(torch.randn(*sizes, channels, h, w)).ok, (sizes, h, w)


class _Two(nn.Module):
    def forward(self, x, y):  # type: ignore[no-untyped-def]
        return x * 2 + y.sum(), y[: x.shape[0]]


def test_axis_names_as_strings_in_dynamic_shapes():
    """torch.onnx's dynamo exporter takes ``{0: "batch"}`` in dynamic_shapes (the small
    suite's mixed_type_of_dynamic_shapes); one name is one dim, and the file names it."""
    x, y = torch.randn(2, 3), torch.randn(5)
    prog = _export(_Two(), (x, y), dynamic_shapes=({0: "batch"}, {0: "n"}))
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in prog.model_proto.graph.input]
    assert dims == [["batch", 3], ["n"]]
    assert prog.verify(torch.randn(4, 3), torch.randn(7)).ok
    onnx.checker.check_model(prog.model_proto, full_check=True)


def test_grid_sample_5d_below_opset_20_is_not_gridsample():
    """The one that could have been a real bug: ONNX GridSample is 4-D only before opset
    20. A 5-D grid_sample at opset 18 is written out as gathers, and matches eager."""
    class Sample(nn.Module):
        def forward(self, x, grid):  # type: ignore[no-untyped-def]
            return F.grid_sample(x, grid, align_corners=False)

    x, grid = torch.randn(1, 2, 3, 4, 5), torch.rand(1, 2, 3, 4, 3) * 2 - 1
    prog = _export(Sample(), (x, grid), opset=18)
    assert "GridSample" not in {n.op_type for n in prog.model.graph}
    assert prog.verify(x, grid).ok
