"""Issue 14's smaller groups, as modules: bit shifts, conv_tbc, _convolution,
repeat_interleave with tensor repeats, grid_sample 3-D (both opset paths) and bicubic,
stft / istft, training-mode batch norm, diagonal with dynamic dims. Each exports and
matches eager PyTorch in onnxruntime."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import pt2onnx
from conftest import export_and_verify


class Fn(nn.Module):
    def __init__(self, fn) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor):  # type: ignore[no-untyped-def]
        return self.fn(*args)


def _run(model: nn.Module, args: tuple, **kw):  # type: ignore[no-untyped-def]
    prog = pt2onnx.export(model, args, **kw)
    return prog, [torch.as_tensor(t) for t in prog.run(*args)]


# -- bit shifts --------------------------------------------------------------------------


def test_bit_shifts_match_torch_edge_cases() -> None:
    """Every integer dtype in one model: negative values (arithmetic right shift), shift
    amounts past the bit width and negative amounts, tensor and scalar forms."""
    dtypes = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
    args = []
    for dtype in dtypes:
        info = torch.iinfo(dtype)
        a = torch.randint(info.min, info.max, (4, 24), dtype=torch.int64).to(dtype)
        a[0, :4] = torch.tensor([info.min, info.max, -1 if info.min < 0 else 0, 1]).to(dtype)
        low = -3 if info.min < 0 else 0
        s = torch.randint(low, info.bits + 4, (4, 24), dtype=torch.int64).to(dtype)
        args += [a, s, torch.randint(0, 7, (24,), dtype=torch.int64).to(dtype)]

    def shifts(*xs: torch.Tensor) -> list[torch.Tensor]:
        out = []
        for a, s, small in zip(xs[::3], xs[1::3], xs[2::3], strict=True):
            bits = torch.iinfo(a.dtype).bits
            out += [a << s, a >> s, torch.bitwise_left_shift(a, 3),
                    torch.bitwise_right_shift(a, 2), a >> (bits - 1),
                    torch.bitwise_right_shift(5, small)]
        return out

    _, got = _run(Fn(shifts), tuple(args))
    for g_, e in zip(got, shifts(*args), strict=True):
        assert g_.dtype == e.dtype
        torch.testing.assert_close(g_, e, rtol=0, atol=0)


# -- convolutions ------------------------------------------------------------------------


def test_conv_tbc_module(tmp_path) -> None:  # type: ignore[no-untyped-def]
    class TBC(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.randn(3, 4, 6))
            self.bias = nn.Parameter(torch.randn(6))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.conv_tbc(x, self.weight, self.bias, 1)

    export_and_verify(TBC(), (torch.randn(7, 2, 4),), tmp_path)


@pytest.mark.parametrize("transposed", [False, True])
def test_legacy_convolution_flags(tmp_path, transposed: bool) -> None:  # type: ignore[no-untyped-def]
    w = torch.randn(4, 3, 3, 3) if transposed else torch.randn(6, 2, 3, 3)
    b = torch.randn(6)

    def conv(x: torch.Tensor) -> torch.Tensor:
        return torch._convolution(x, w, b, [2, 1], [1, 0], [1, 2], transposed,
                                  [1, 0] if transposed else [0, 0], 2, False, True, False,
                                  True)

    export_and_verify(Fn(conv), (torch.randn(2, 4, 7, 8),), tmp_path)


# -- repeat_interleave -------------------------------------------------------------------


def test_repeat_interleave_tensor_repeats_new_values() -> None:
    """The repeats are an input: a second run with other values (and another total)
    matches eager too."""
    model = Fn(lambda x, r: (torch.repeat_interleave(x, r, dim=1),
                             torch.repeat_interleave(r), torch.repeat_interleave(x[0], r)))
    x, r = torch.randn(2, 4), torch.tensor([1, 0, 3, 2])
    prog = pt2onnx.export(model, (x, r))
    for reps in (r, torch.tensor([0, 5, 1, 0]), torch.zeros(4, dtype=torch.int64)):
        got = prog.run(x, reps)
        for g_, e in zip(got, model(x, reps), strict=True):
            torch.testing.assert_close(torch.as_tensor(g_), e, rtol=0, atol=0)


def test_repeat_interleave_output_size(tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = torch.tensor([2, 1, 0, 3])
    export_and_verify(
        Fn(lambda x, r: torch.repeat_interleave(x, r, dim=0, output_size=6)),
        (torch.randn(4, 3), r), tmp_path)


# -- grid_sample -------------------------------------------------------------------------


class Sampler(nn.Module):
    def __init__(self, mode: str, padding: str, align: bool) -> None:
        super().__init__()
        self.args = (mode, padding, align)

    def forward(self, x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        mode, padding, align = self.args
        return nn.functional.grid_sample(x, grid, mode=mode, padding_mode=padding,
                                         align_corners=align)


class AllModes(nn.Module):
    """grid_sample in every (mode, padding, align_corners) combination at once."""

    def __init__(self, modes: tuple[str, ...]) -> None:
        super().__init__()
        self.samplers = nn.ModuleList(
            Sampler(mode, padding, align) for mode in modes
            for padding in ("zeros", "border", "reflection") for align in (False, True))

    def forward(self, x: torch.Tensor, grid: torch.Tensor) -> list[torch.Tensor]:
        return [s(x, grid) for s in self.samplers]


def _check_all(model: nn.Module, x: torch.Tensor, grid: torch.Tensor, opset: int) -> None:
    _, got = _run(model, (x, grid), opset=opset)
    for g_, e in zip(got, model(x, grid), strict=True):
        torch.testing.assert_close(g_, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [17, 21])
def test_grid_sample_3d_modes(opset: int) -> None:
    """Every mode, padding and align_corners; opset 17 takes the gather formulation,
    21 ONNX GridSample. The grid reaches outside [-1, 1] and hits the corners."""
    x = torch.randn(2, 3, 4, 5, 6)
    grid = torch.rand(2, 3, 4, 2, 3) * 3.0 - 1.5
    grid[0, 0, 0] = torch.tensor([1.0, -1.0, 1.0])
    _check_all(AllModes(("bilinear", "nearest")), x, grid, opset)


def test_grid_sample_3d_dynamic_at_opset_17() -> None:
    model = Sampler("bilinear", "reflection", False)
    x, grid = torch.randn(2, 3, 4, 5, 6), torch.rand(2, 3, 4, 2, 3) * 2.4 - 1.2
    batch, depth = torch.export.Dim("batch", max=8), torch.export.Dim("depth", max=16)
    prog = pt2onnx.export(model, (x, grid), opset=17,
                          dynamic_shapes={"x": {0: batch, 2: depth}, "grid": {0: batch}})
    assert "GridSample" not in {n.op_type for n in prog.model.graph}
    x2, grid2 = torch.randn(3, 3, 7, 5, 6), torch.rand(3, 3, 4, 2, 3) * 2.4 - 1.2
    torch.testing.assert_close(torch.as_tensor(prog.run(x2, grid2)[0]), model(x2, grid2),
                               rtol=1e-5, atol=1e-5)


def test_grid_sample_3d_module(tmp_path) -> None:  # type: ignore[no-untyped-def]
    class Warp(nn.Module):
        """A 3-D spatial transformer: an affine grid from a small head, then sampling."""

        def __init__(self) -> None:
            super().__init__()
            self.head = nn.Linear(8, 12)

        def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
            theta = self.head(z).view(-1, 3, 4)
            grid = nn.functional.affine_grid(theta, list(x.shape), align_corners=False)
            return nn.functional.grid_sample(x, grid, align_corners=False)

    args = (torch.randn(2, 2, 4, 5, 6), torch.randn(2, 8))
    export_and_verify(Warp(), args, tmp_path, opset=17)
    export_and_verify(Warp(), args, tmp_path, name="opset21")


@pytest.mark.parametrize("opset", [17, 21])
def test_grid_sample_bicubic_2d(opset: int) -> None:
    x, grid = torch.randn(2, 3, 6, 7), torch.rand(2, 5, 4, 2) * 2.6 - 1.3
    _check_all(AllModes(("bicubic",)), x, grid, opset)


# -- stft / istft ------------------------------------------------------------------------


class Spectrograms(nn.Module):
    """stft with window, hop, win_length < n_fft; center with reflect padding, normalized
    with constant padding, and not centred two-sided."""

    VARIANTS = ({}, {"normalized": True, "pad_mode": "constant"},
                {"center": False, "onesided": False})

    def __init__(self, return_complex: bool) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(48))
        self.return_complex = return_complex

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        out = []
        for kw in self.VARIANTS:
            spec = torch.stft(x, 64, hop_length=16, win_length=48, window=self.window,
                              return_complex=self.return_complex, **kw)
            out.append(torch.view_as_real(spec) if self.return_complex else spec)
        return out


def test_stft_real_layout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """return_complex=False gives (..., freq, frames, 2); return_complex=True the same
    numbers through the complex-as-pair layout."""
    x = torch.randn(2, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates return_complex=False
        export_and_verify(Spectrograms(False), (x,), tmp_path, name="real")
    export_and_verify(Spectrograms(True), (x,), tmp_path, name="complex")


def test_istft_of_a_spectrogram_input(tmp_path) -> None:  # type: ignore[no-untyped-def]
    window = torch.hann_window(64)
    x = torch.randn(2, 400)
    spec = torch.view_as_real(torch.stft(x, 64, hop_length=16, window=window,
                                         return_complex=True)).contiguous()

    def inverse(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = torch.view_as_complex(s)
        return (torch.istft(c, 64, hop_length=16, window=window),
                torch.istft(c, 64, hop_length=16, window=window, length=420,
                            normalized=False))

    prog = export_and_verify(Fn(inverse), (spec,), tmp_path)
    assert "ScatterND" not in {n.op_type for n in prog.model.graph}


class Denoiser(nn.Module):
    """stft -> a magnitude mask -> istft in one graph (torch's own istft decomposition
    overlap-adds with index_put on complex tensors; ours sums shifted chunks)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(64))
        self.mask = nn.Linear(33, 33)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(x, 64, hop_length=16, window=self.window, return_complex=True)
        gain = torch.sigmoid(self.mask(spec.abs().transpose(1, 2))).transpose(1, 2)
        return torch.istft(spec * gain, 64, hop_length=16, window=self.window,
                           length=x.shape[-1])


def test_stft_mask_istft_module(tmp_path) -> None:  # type: ignore[no-untyped-def]
    export_and_verify(Denoiser(), (torch.randn(2, 400),), tmp_path)


# -- training-mode batch norm ------------------------------------------------------------


class ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.bn1 = nn.BatchNorm1d(5, affine=False)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.bn(self.conv(x)).relu(), self.bn1(y)


def test_train_mode_batch_norm_uses_batch_statistics(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = ConvBN().train()
    with torch.no_grad():
        model.bn.running_mean.fill_(3.0)  # far from the batch's: a wrong pick shows
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.randn(4, 3, 8, 8), torch.randn(6, 5, 7)
    with pytest.warns(UserWarning, match="running_mean, running_var and num_batches"):
        prog = pt2onnx.export(model, (x, y), tmp_path / "m.onnx")
    # Exporting neither runs the model's updates nor changes its mode.
    assert model.training
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k])
    got = prog.run(x, y)
    reference = ConvBN().train()
    reference.load_state_dict(before)
    for g_, e in zip(got, reference(x, y), strict=True):
        torch.testing.assert_close(torch.as_tensor(g_), e, rtol=1e-5, atol=1e-5)


def test_training_keyword_picks_the_statistics() -> None:
    model = ConvBN().eval()
    x, y = torch.randn(4, 3, 8, 8), torch.randn(6, 5, 7)
    with pytest.warns(UserWarning, match="batch norm in training mode"):
        prog = pt2onnx.export(model, (x, y), training=torch.onnx.TrainingMode.TRAINING)
    assert not model.training
    expected = ConvBN().train()
    expected.load_state_dict(model.state_dict())
    for g_, e in zip(prog.run(x, y), expected(x, y), strict=True):
        torch.testing.assert_close(torch.as_tensor(g_), e, rtol=1e-5, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", message=".*LeafSpec.*")
        prog = pt2onnx.export(model, (x, y), training=torch.onnx.TrainingMode.EVAL)
    assert "BatchNormalization" in {n.op_type for n in prog.model.graph}


def test_functional_batch_norm_running_stat_update() -> None:
    """The functional op's updated running statistics (its outputs 3 and 4) are
    torch's: momentum-weighted, with the unbiased batch variance."""
    def bn(x, w, b, rm, rv):  # type: ignore[no-untyped-def]
        return torch.ops.aten._native_batch_norm_legit_functional(x, w, b, rm, rv, True,
                                                                   0.3, 1e-3)

    args = (torch.randn(3, 4, 5), torch.randn(4), torch.randn(4), torch.randn(4),
            torch.rand(4) + 0.5)
    with pytest.warns(UserWarning, match="batch norm in training mode"):
        _, got = _run(Fn(bn), args)
    for g_, e in zip(got, bn(*args), strict=True):
        torch.testing.assert_close(g_, e, rtol=1e-5, atol=1e-5)


# -- linalg.norm --------------------------------------------------------------------------


def test_linalg_norm_every_ord() -> None:
    """Vector and matrix orders, 'nuc', 2 and -2 through the singular values."""
    a = torch.randn(3, 4, 5)
    matrix = (None, "fro", "nuc", 2, -2, 1, -1, float("inf"), -float("inf"))
    vector = (None, 0, 1, 2, 3.5, -1, float("inf"), -float("inf"))

    def norms(a: torch.Tensor) -> list[torch.Tensor]:
        return ([torch.linalg.norm(a, ord=o, dim=(1, 2)) for o in matrix]
                + [torch.linalg.norm(a, ord=o, dim=-1) for o in vector]
                + [torch.linalg.svdvals(a.transpose(1, 2)), torch.linalg.cond(a[:, :4])])

    _, got = _run(Fn(norms), (a,))
    for g_, e in zip(got, norms(a), strict=True):
        torch.testing.assert_close(g_, e, rtol=2e-6, atol=1e-6)


def test_singular_vectors_raise_a_clear_error() -> None:
    with pytest.raises(pt2onnx.ExportError, match="singular vectors"):
        pt2onnx.export(Fn(lambda a: torch.linalg.svd(a)), (torch.randn(3, 3),))


# -- diagonal, dynamic -------------------------------------------------------------------


class Diagonal(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.diagonal(x, -1, 2, 0)


def test_diagonal_with_dynamic_dims() -> None:
    model = Diagonal()
    x = torch.randn(5, 3, 6)
    d, e = torch.export.Dim("d", max=20), torch.export.Dim("e", max=20)
    prog = pt2onnx.export(model, (x,), dynamic_shapes={"x": {0: d, 2: e}})
    for xx in (x, torch.randn(8, 3, 4), torch.randn(2, 3, 9)):
        torch.testing.assert_close(torch.as_tensor(prog.run(xx)[0]), model(xx))
