"""Complex tensors as (real, imag) pairs: inputs, outputs, constants, ops, errors.

Every check runs the exported model in onnxruntime and compares with eager
PyTorch through ``torch.view_as_real``.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx_ir as ir
import pytest
import torch

import pt2onnx

OPSETS = (17, pt2onnx.DEFAULT_OPSET)


def _export(model: torch.nn.Module, args: tuple, opset: int) -> pt2onnx.OnnxProgram:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pt2onnx.export(model, args, opset=opset)


def _as_real(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    return (torch.view_as_real(t.resolve_conj()) if t.is_complex() else t).numpy()


def _check(model: torch.nn.Module, args: tuple, opset: int, rtol: float = 1e-5) -> list:
    prog = _export(model, args, opset)
    with torch.no_grad():
        expected = model(*args)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    actual = prog.run(*args)
    assert len(actual) == len(expected)
    for e, a in zip(expected, actual):
        ref = _as_real(e)
        assert a.shape == ref.shape
        assert a.dtype == ref.dtype
        if ref.dtype == np.bool_:
            assert np.array_equal(a, ref)
        else:
            scale = max(float(np.abs(ref).max()), 1.0) if ref.size else 1.0
            np.testing.assert_allclose(a, ref, rtol=0, atol=rtol * scale)
    return actual


class Arithmetic(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", torch.randn(3, 4, dtype=torch.complex64))
        self.p = torch.nn.Parameter(torch.randn(4, dtype=torch.complex64))

    def forward(self, z: torch.Tensor, r: torch.Tensor) -> tuple:
        a = z * self.w + r
        b = a / (self.p + 1) - 2j * z
        c = torch.cat([b, z.conj()], dim=-1).reshape(3, 2, 4).permute(2, 0, 1)
        d = torch.stack([c, c * 0.5], dim=-1).sum(dim=-1).mean(dim=0, keepdim=True)
        return d, b.abs(), b.angle(), b.real, b.imag, b.exp(), z.to(torch.bool), c[..., -1]


@pytest.mark.parametrize("opset", OPSETS)
def test_complex_inputs_constants_and_arithmetic(opset: int) -> None:
    torch.manual_seed(0)
    z = torch.randn(3, 4, dtype=torch.complex64)
    z[0, 0] = 0  # to(bool) of 0
    r = torch.randn(3, 4)
    prog = _export(Arithmetic(), (z, r), opset)
    # The complex input is a float input with a trailing 2; the first output too.
    first = prog.model.graph.inputs[0]
    assert first.dtype == ir.DataType.FLOAT and list(first.shape) == [3, 4, 2]
    out = prog.model.graph.outputs[0]
    assert out.dtype == ir.DataType.FLOAT and list(out.shape) == [1, 3, 2, 2]
    assert not any(i.dtype in (ir.DataType.COMPLEX64, ir.DataType.COMPLEX128)
                   for i in prog.model.graph.initializers.values())
    _check(Arithmetic(), (z, r), opset)
    assert prog.verify(z, r).ok


class Spectra(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple:
        spec = torch.fft.rfft(x, norm="ortho")
        return (
            torch.fft.fft(x, dim=0),
            torch.fft.ifft2(x, s=(3, 6), norm="forward"),
            torch.fft.irfft(spec, n=x.shape[-1], norm="ortho"),
            torch.fft.hfftn(spec, s=(4, 7)),
            torch.fft.ihfft(x, n=9),
        )


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fft_family(opset: int, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    x = torch.randn(5, 12, dtype=dtype)
    _check(Spectra(), (x,), opset, rtol=1e-5 if dtype == torch.float32 else 1e-12)


class OddSizes(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.irfft(torch.fft.fft(x)[..., : x.shape[-1] // 2 + 1], n=x.shape[-1])


def test_fft_float32_sizes_not_powers_of_two_stay_accurate() -> None:
    # onnxruntime's direct DFT in float32 reaches relative errors near 2e-4 at 1000 points.
    torch.manual_seed(0)
    x = torch.randn(2, 1000)
    _check(OddSizes(), (x,), pt2onnx.DEFAULT_OPSET, rtol=2e-6)


class ComplexInOut(torch.nn.Module):
    def forward(self, z: torch.Tensor) -> tuple:
        return torch.fft.ifft(z), torch.view_as_real(z * z), torch.polar(z.abs(), z.angle())


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_input_and_output_layout(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    z = torch.randn(4, 6, dtype=dtype)
    out = _check(ComplexInOut(), (z,), pt2onnx.DEFAULT_OPSET)
    part = np.float32 if dtype == torch.complex64 else np.float64
    assert all(o.dtype == part and o.shape == (4, 6, 2) for o in out)


class Sigmoid(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.fft.fft(x))


def test_op_without_a_complex_rule_is_reported() -> None:
    # The real rule for sigmoid must not be used on a pair tensor.
    with pytest.raises(pt2onnx.UnsupportedOperatorError, match="on complex tensors"):
        _export(Sigmoid(), (torch.randn(8),), pt2onnx.DEFAULT_OPSET)


class DynamicSpectra(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple:
        return torch.fft.rfft(x, norm="ortho"), torch.fft.ifft(x, norm="forward")


def test_fft_over_a_dynamic_dim_normalizes_at_run_time() -> None:
    torch.manual_seed(0)
    t = torch.export.Dim("t", min=8, max=4096)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(DynamicSpectra(), (torch.randn(2, 64),),
                              dynamic_shapes={"x": {1: t}})
    for n in (64, 100, 37):
        assert prog.verify(torch.randn(2, n)).ok
