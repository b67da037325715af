"""Issue 28: what the TorchScript exporter exported and pt2onnx refused, by group, each
a general mechanism tested beyond the PyTorch test that found it."""

from __future__ import annotations

import warnings

import onnx
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

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


@pytest.mark.parametrize(("fn", "shapes"), [
    (torch.addmm, ((3, 5), (3, 4), (4, 5))),
    (torch.addmm, ((5,), (3, 4), (4, 5))),  # input broadcast
    (torch.addmv, ((3,), (3, 4), (4,))),
    (torch.addr, ((3, 4), (3,), (4,))),
    (torch.Tensor.addmm, ((3, 5), (3, 4), (4, 5))),
], ids=["addmm", "addmm-broadcast", "addmv", "addr", "Tensor.addmm"])
def test_tensor_alpha_and_beta_of_addmm_addmv_addr(fn, shapes):  # type: ignore[no-untyped-def]
    """torch reads a tensor alpha / beta as a number and checks beta == 0 itself, which
    stopped torch.export; the capture now writes the arithmetic on the tensors, so the
    file is general in alpha and beta (no trace, no warning), NaN in ``self`` ignored
    where beta is 0, as eager."""
    x, a, b = (torch.randn(s) for s in shapes)
    x.view(-1)[0] = float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a trace fallback warns
        prog = pt2onnx.export(_Scaled(fn), (x, a, b, torch.tensor(0.5), torch.tensor(2.0)))
    assert "trace" not in prog.report.capture_strategy
    for alpha, beta in [(0.5, 2.0), (1.5, 0.0), (-1.0, 1.0), (0.0, 3.0)]:
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


class _Quantize(nn.Module):
    def __init__(self, dtype: torch.dtype, per_channel: bool, tensor_qparams: bool) -> None:
        super().__init__()
        self.dtype, self.per_channel, self.tensor_qparams = dtype, per_channel, tensor_qparams

    def forward(self, x):  # type: ignore[no-untyped-def]
        if self.per_channel:
            q = torch.quantize_per_channel(x, torch.tensor([0.05, 0.1, 0.3]),
                                           torch.tensor([0, 3, 2]), 1, self.dtype)
        elif self.tensor_qparams:
            q = torch.quantize_per_tensor(x, torch.tensor(0.07), torch.tensor(5), self.dtype)
        else:
            q = torch.quantize_per_tensor(x, 0.07, 5, self.dtype)
        return q.dequantize() * 2, q


@pytest.mark.parametrize("dtype", [torch.quint8, torch.qint8, torch.qint32],
                         ids=["quint8", "qint8", "qint32"])
@pytest.mark.parametrize("form", ["scalars", "tensor_qparams", "per_channel"])
def test_quantize_in_a_float_model(dtype: torch.dtype, form: str) -> None:
    """``torch.quantize_per_tensor`` / ``quantize_per_channel`` in a model that is not
    otherwise quantized: the values round onto the grid and clamp at the dtype's range
    (inputs reach past it), and a quantized output is its dequantized float."""
    x = torch.randn(2, 3, 4) * 20
    model = _Quantize(dtype, form == "per_channel", form == "tensor_qparams")
    prog = _export(model, (x,))
    assert prog.verify(x, atol=1e-5).ok
    assert prog.verify(torch.randn(2, 3, 4) * 5, atol=1e-5).ok


class _UniqueDim(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x):  # type: ignore[no-untyped-def]
        return torch.unique(x, dim=self.dim, return_inverse=True, return_counts=True)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_unique_along_a_dim(dim: int, dtype: torch.dtype) -> None:
    """``torch.unique(x, dim=d)``: distinct slices in torch's lexicographic order, with
    the inverse and the counts; also at a shape the example did not have, and with one
    slice only."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 3, (6, 4, 5), generator=g).to(dtype)
    x.select(dim, 1).copy_(x.select(dim, 3))  # a repeated slice, whatever the dim
    prog = _export(_UniqueDim(dim), (x,), dynamic_shapes=({0: torch.export.Dim("a"),
                                                          1: torch.export.Dim("b")},))
    assert prog.verify(x).ok
    y = torch.randint(0, 2, (7, 4, 5), generator=g).to(dtype)
    assert prog.verify(y).ok
    one = x.narrow(dim, 0, 1).expand_as(x)
    assert prog.verify(one.contiguous()).ok


class _Stft(nn.Module):
    def __init__(self, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.kw = kw

    def forward(self, x):  # type: ignore[no-untyped-def]
        return torch.stft(x, 16, hop_length=4, return_complex=False, **self.kw)


@pytest.mark.parametrize("kw", [{}, {"window": "hann"}, {"onesided": False},
                                {"normalized": True, "center": False}],
                         ids=["plain", "window", "two_sided", "normalized_uncentered"])
def test_stft_real_output(kw) -> None:  # type: ignore[no-untyped-def]
    """``stft(..., return_complex=False)``: the (real, imaginary) pair in a last dim of 2,
    as eager returns it; a dynamic signal length changes the number of frames."""
    if kw.get("window") == "hann":
        kw = {"window": torch.hann_window(16)}
    x = torch.randn(2, 64)
    prog = _export(_Stft(**kw), (x,), dynamic_shapes=({1: torch.export.Dim("n", min=32)},))
    assert prog.verify(x).ok
    assert prog.verify(torch.randn(2, 100)).ok


class _Unfold(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return x.unfold(-1, 4, 3) * 2, torch.as_strided(x, (x.shape[0], x.shape[1] - 1, 2),
                                                       (x.shape[1], 1, 1))


def test_strided_windows_of_a_dynamic_length() -> None:
    """``unfold`` and ``as_strided`` whose sizes and strides follow a dynamic dim (the
    TorchScript exporter's test_unfold_infer_shape): the flat positions are computed at
    run time; at the smallest length there is one window."""
    x = torch.randn(2, 10)
    prog = _export(_Unfold(), (x,), dynamic_shapes=({0: torch.export.Dim("b"),
                                                    1: torch.export.Dim("n", min=4)},))
    for shape in [(2, 10), (3, 13), (1, 4), (2, 6)]:
        assert prog.verify(torch.randn(*shape)).ok, shape


class _DimArange(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return torch._dim_arange(x, 1) * 2


class _Pairs(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return x.view(-1, 2).view(1, -1) + 1


def test_dim_arange_with_dynamic_dims():
    """test_dim_arange: torch reads the size as a number in C++ and fixed both dims; it is
    captured as torch.arange(x.shape[1])."""
    prog = _export(_DimArange(), (torch.ones(5, 6),), input_names=["input_1"],
                   dynamic_axes={"input_1": [0, 1]})
    for shape in [(8, 5), (1, 1), (3, 9)]:
        assert prog.verify(torch.randn(shape)).ok, shape


def test_view_into_pairs_of_a_dynamic_dim():
    """test_view_dynamic_zero_dim: view(-1, 2) of a dynamic length ties it to 2 * half,
    whose root is 1 in the example (2 elements); torch then fixed it. The refined spec is
    captured from the example doubled, and the file runs at 0 elements too."""
    prog = _export(_Pairs(), (torch.ones(2),), input_names=["input_1"],
                   dynamic_axes={"input_1": [0]})
    for n in (0, 2, 6, 10):
        assert prog.verify(torch.randn(n)).ok, n


class _Tensordot(nn.Module):
    def forward(self, x, y):  # type: ignore[no-untyped-def]
        return torch.tensordot(x, y, dims=([1, 0], [0, 1]))


def test_tensordot_with_every_dim_dynamic():
    """test_tensordot_dynamic_dim: torch ties the contracted dims across the inputs, then
    the size-oblivious capture guarded them != 1, which their ranges violate; the tied
    spec is now captured by an ordinary capture. torch.tensordot also broadcasts a
    contracted dim of 1 (it sums the other side's dim away), which the graph traced for
    equal sizes does not: with the dims declared down to 1, each side's 1 is run, and
    where two ties would each need a graph of their own the export refuses, typed, with
    the way out; declared from 2, the file is general."""
    names = ["input_1", "input_2"]
    example = (torch.randn(3, 4, 5), torch.randn(4, 3, 2))
    with pytest.raises(pt2onnx.SizeOneError, match=r"Dim\('input_\d_dim\d', min=2\)"):
        _export(_Tensordot(), example, input_names=names,
                dynamic_axes={"input_1": [0, 1, 2], "input_2": [0, 1, 2]})
    a, b, c, d = (Dim(n, min=2) for n in "abcd")
    prog = _export(_Tensordot(), example, dynamic_shapes=({0: a, 1: b, 2: c}, {0: b, 1: a, 2: d}))
    for x, y in [((6, 7, 2), (7, 6, 3)), ((2, 5, 3), (5, 2, 4))]:
        assert prog.verify(torch.randn(x), torch.randn(y)).ok, (x, y)


class _Chunk(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return torch.chunk(x, 3, dim=1)


def test_chunk_of_a_dynamic_dim_narrows_to_where_the_count_holds():
    """test_chunk: chunk(x, 3) along a dynamic dim gives 3 chunks only at 3 and from 5 on
    (4 gives 2). torch.export cannot prove its guard and fixed the dim at the example's
    13; the guard is evaluated size by size, and the dim is bounded to [5, inf] and
    reported, where the file is right."""
    kw = {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch_size", 1: "dims"}}}
    if tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13):
        # torch 2.12 fixes the dim without naming the chunk-count guard: a typed refusal,
        # or a capture from the example's parity (capture/_residue.py), reported.
        try:
            held = _export(_Chunk(), (torch.randn(1, 13),), **kw)
        except pt2onnx.CaptureError as exc:
            assert "dims" in str(exc) and "fixed to 13" in str(exc)
            return
        assert any(r.startswith("dims tied to other dims") for r in
                   held.report.dynamic_refinements)
        for shape in [(1, 13), (2, 15), (1, 41)]:
            assert held.verify(torch.randn(shape)).ok, shape
        return
    # The warning at capture may name a later minimum (the size-oblivious guards hold
    # from 8); the sizes cut off are then run in the written graph and given back
    # (_below_minimum), which the report states.
    with pytest.warns(UserWarning, match=r"dims bounded to \["):
        prog = pt2onnx.export(_Chunk(), (torch.randn(1, 13),), **kw)
    assert any("dims bounded to [5, inf]" in r for r in prog.report.dynamic_refinements)
    for shape in [(1, 14), (2, 15), (3, 5), (1, 40)]:
        assert prog.verify(torch.randn(shape)).ok, shape
