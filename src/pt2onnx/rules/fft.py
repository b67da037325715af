"""FFTs: ATen's _fft_r2c, _fft_c2c and _fft_c2r as ONNX DFT, one DFT per transformed dim.

Complex values are (real, imag) pairs in a trailing axis (see rules/complex.py),
which is the layout DFT reads and writes. torch.fft's functions (fft, rfftn,
ihfft2, stft, ...) decompose into these three ops plus padding, slicing and
conjugation. DFT takes its axis as an attribute up to opset 19 and as an input
from opset 20.

ATen's ``normalization`` is 0 (none), 1 (divide by sqrt(n)) or 2 (divide by n),
with n the product of the signal sizes over the transformed dims. Every DFT here
is a forward one, and the inverse is conj(DFT(conj(x))): onnxruntime's inverse DFT
loses precision in float64 (relative errors near 1e-8 for sizes that are not
powers of two, where its forward DFT stays near 1e-15).
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, dtype_of, translation
from pt2onnx.rules._common import aten, normalize_dim, rank
from pt2onnx.rules.complex import conj, real_part


def _dft(g: RuleContext, x: ir.Value, axis: int, *, onesided: bool = False) -> ir.Value:
    """One forward DFT along ``axis`` (a non-negative axis of the pair tensor ``x``)."""
    if g.opset >= 20:
        return g.op.DFT(x, None, g.const(axis), onesided=int(onesided))
    return g.op.DFT(x, axis=axis, onesided=int(onesided))


def _widen(g: RuleContext, x: ir.Value, sizes: list[Any]) -> tuple[ir.Value, ir.DataType]:
    """x in the dtype to transform in: float64 for float32 sizes that are not powers of 2.

    onnxruntime's DFT is a radix-2 FFT for powers of two and a direct sum
    otherwise, whose float32 error grows with the size (relative 2e-4 at 1000
    points, against 1e-6 at 1024); in float64 it stays below 1e-6 after rounding.
    """
    # A symbolic size may be anything: float64 then too.
    if x.dtype == ir.DataType.FLOAT and any(not isinstance(s, int) or s & (s - 1) for s in sizes):
        return g.cast(x, ir.DataType.DOUBLE), ir.DataType.DOUBLE
    return x, dtype_of(x)


def _finish(g: RuleContext, y: ir.Value, normalization: int, sizes: list[Any],
            source: ir.Value, dims: list[int], dtype: ir.DataType) -> ir.Value:
    """y normalized as ATen says, in the output dtype.

    ``sizes`` are the transformed sizes; a symbolic one is read at run time from
    dim ``dims[i]`` of ``source``.
    """
    if normalization != 0:
        if all(isinstance(s, int) for s in sizes):
            y = g.op.Mul(y, g.const(_norm_factor(normalization, math.prod(sizes)), dtype))
        else:
            parts = [g.const([s]) if isinstance(s, int) else g.op.Shape(source, start=d, end=d + 1)
                     for s, d in zip(sizes, dims, strict=True)]
            n = g.op.Cast(g.op.ReduceProd(g.op.Concat(*parts, axis=0), keepdims=0), to=dtype)
            if normalization == 1:
                n = g.op.Sqrt(n)
            elif normalization != 2:
                raise ValueError(f"unknown FFT normalization {normalization}")
            y = g.op.Div(y, n)
    return g.cast(y, g.dtype) if dtype != g.dtype else y


def _norm_factor(normalization: int, n: int) -> float:
    """What ATen multiplies an unnormalized transform by."""
    if normalization == 0 or n == 0:
        return 1.0
    if normalization == 1:
        return 1.0 / math.sqrt(n)
    if normalization == 2:
        return 1.0 / n
    raise ValueError(f"unknown FFT normalization {normalization}")


def _input_sizes(g: RuleContext, dims: list[int]) -> list[Any]:
    assert g.node is not None
    val = g.node.args[0].meta["val"]  # type: ignore[union-attr]
    return [val.shape[d] for d in dims]


def _check_float(x: ir.Value) -> None:
    if x.dtype not in (ir.DataType.FLOAT, ir.DataType.DOUBLE):
        raise NotImplementedError(
            f"FFT of {x.dtype}: ONNX DFT in onnxruntime takes float32 and float64 only; "
            "cast the input to torch.float32 first")


@translation(aten._fft_r2c.default, complex=True)
def fft_r2c(g: RuleContext, x: ir.Value, dim: list[int], normalization: int,
            onesided: bool) -> ir.Value:
    """_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor"""
    _check_float(x)
    r = rank(x)
    dims = [normalize_dim(d, r) for d in dim]
    sizes = _input_sizes(g, dims)
    source = x
    x, dtype = _widen(g, x, sizes)
    # Real input: a trailing axis of size 1. The last dim is the one a onesided
    # transform halves; the others are complex transforms of that.
    y = g.op.Unsqueeze(x, g.const([-1]))
    y = _dft(g, y, dims[-1], onesided=onesided)
    for d in dims[:-1]:
        y = _dft(g, y, d)
    return _finish(g, y, normalization, sizes, source, dims, dtype)


@translation(aten._fft_c2c.default, complex=True)
def fft_c2c(g: RuleContext, x: ir.Value, dim: list[int], normalization: int,
            forward: bool) -> ir.Value:
    """_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor"""
    _check_float(x)
    r = rank(x) - 1
    dims = [normalize_dim(d, r) for d in dim]
    if not dims:
        return x
    sizes = _input_sizes(g, dims)
    source = x
    x, dtype = _widen(g, x, sizes)
    y = x if forward else conj(g, x, dtype)
    for d in dims:
        y = _dft(g, y, d)
    y = y if forward else conj(g, y, dtype)
    return _finish(g, y, normalization, sizes, source, dims, dtype)


@translation(aten._fft_c2r.default, complex=True)
def fft_c2r(g: RuleContext, x: ir.Value, dim: list[int], normalization: int,
            last_dim_size: Any) -> ir.Value:
    """_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor"""
    _check_float(x)
    if not isinstance(last_dim_size, int):
        raise NotImplementedError(
            "_fft_c2r with a symbolic output size (irfft's n): the Hermitian completion "
            "slices by it; give irfft a fixed n or export with that dim static")
    r = rank(x) - 1
    dims = [normalize_dim(d, r) for d in dim]
    m = last_dim_size
    sizes = [*_input_sizes(g, dims[:-1]), m]
    source = x
    x, dtype = _widen(g, x, sizes)
    # Inverse DFTs as conj(DFT(conj(x))); the final conj would only flip the sign of
    # imaginary parts, which are dropped, and the Hermitian completion below
    # commutes with conj, so one conj at the start does.
    y = conj(g, x, dtype)
    for d in dims[:-1]:
        y = _dft(g, y, d)
    # The last dim holds X[0..m//2]; the rest of the spectrum is Hermitian:
    # X[k] = conj(X[m - k]). The imaginary parts of X[0] (and X[m/2]) only add an
    # imaginary part to the result, which is dropped, as torch's c2r ignores them.
    last = dims[-1]
    half = m // 2 + 1
    have = _input_sizes(g, [last])[0]
    if isinstance(have, int) and have > half:
        y = g.op.Slice(y, g.const([0]), g.const([half]), g.const([last]))
    elif isinstance(have, int) and have < half:
        pads = [0] * (2 * (r + 1))
        pads[r + 1 + last] = half - have
        y = g.op.Pad(y, g.const(pads), g.const(0.0, dtype), mode="constant")
    if (m - 1) // 2 >= 1:
        mirror = g.op.Slice(y, g.const([(m - 1) // 2]), g.const([0]), g.const([last]),
                            g.const([-1]))
        y = g.op.Concat(y, conj(g, mirror, dtype), axis=last)
    y = real_part(g, _dft(g, y, last))
    return _finish(g, y, normalization, sizes, source, dims, dtype)

