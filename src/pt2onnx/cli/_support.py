"""The operator support matrix behind ``pt2onnx ops`` and docs/ops.md."""

from __future__ import annotations

import json
from typing import Any

from pt2onnx import _compat
from pt2onnx.translate import KEEP_WHOLE, REGISTRY, op_name

# Core ATen ops with no rule, and why.
MISSING_REASONS: dict[str, str] = {
    "aten::resize_.default": "in-place resize of a tensor's storage; ONNX values have no storage to resize, and export graphs use functional reshapes instead",
    "aten::convolution_backward.default": (
        "training-only; the weight gradient needs a grouped, dilated correlation that "
        "no single ONNX op expresses"
    ),
    "aten::native_group_norm_backward.default": "training-only",
}
# Known failures of rules that exist: op name -> list of reasons (see tests/rules).
XFAILS: dict[str, list[str]] = {
    "aten::topk.default": ["int64 with ties: onnxruntime orders equal values differently"],
    "aten::scatter_reduce.two": ["reduce='amax'/'amin' needs opset 18 (ScatterElements max/min)"],
    "aten::index_reduce.default": ["reduce='amax'/'amin' needs opset 18 (ScatterElements max/min)"],
    "aten::bitwise_and.Tensor": ["int64 at opset 17: BitwiseAnd needs opset 18"],
    "aten::bitwise_or.Tensor": ["int64 at opset 17: BitwiseOr needs opset 18"],
    "aten::bitwise_xor.Tensor": ["int64 at opset 17: BitwiseXor needs opset 18"],
    "aten::bitwise_not.default": ["int64 at opset 17: BitwiseNot needs opset 18"],
    "aten::gather.default": ["index rank different from the input rank: GatherElements needs equal ranks"],
    "aten::amax.default": ["NaN inputs: onnxruntime ReduceMax drops a NaN unless it comes first along the axis"],
    "aten::amin.default": ["NaN inputs: onnxruntime ReduceMin drops a NaN unless it comes first along the axis"],
    "aten::convolution.default": [
        "transposed with output_padding >= stride: onnxruntime ConvTranspose rejects it",
        "quantized ConvTranspose2d (QDQ): where onnxruntime's fused integer kernel differs "
        "from the op's definition on a CPU (reported on AVX-512), tests/test_quantized.py "
        "xfails naming the kernel (its fused one, or torch's fbgemm); the file matches with the fusion off "
        "(tools/repro_ort_qdq_conv.py)"],
    "aten::var_mean.correction": ["empty input: the mean is 0 (onnxruntime ReduceMean) where torch gives NaN"],
    "aten::std_mean.correction": ["empty input: the mean is 0 (onnxruntime ReduceMean) where torch gives NaN"],
    "aten::scaled_dot_product_attention.default": ["dropout_p > 0: exported without dropout (inference attention)"],
    "aten::max_pool3d_with_indices.default": ["some ceil_mode/indices samples: an intermediate annotated with torch's shape and an untyped Mod input fail onnx's full check (onnxruntime runs the file and matches)"],
    "aten::unique_consecutive.default": ["dim=-1 on a 1-D input: torch's meta kernel gives the values the shape (u0, n) where eager returns (k,), so the file declares a wrong output shape (onnxruntime runs it and matches)"],
}

# How exact a rule is, where it is an approximation or has a cost worth knowing.
NOTES: dict[str, str] = {
    "aten::upsample_bilinear2d.vec": "integer (uint8) images: one axis at a time in float32, rounded and clamped in between as torch's fixed-point kernel does; within 1 of eager (a few percent of pixels)",
    "aten::upsample_bilinear2d.default": "integer (uint8) images: one axis at a time in float32, rounded and clamped in between as torch's fixed-point kernel does; within 1 of eager (a few percent of pixels)",
    "aten::upsample_bicubic2d.vec": "integer (uint8) images: one axis at a time in float32, rounded and clamped in between as torch's fixed-point kernel does; within 1 of eager (a few percent of pixels)",
    "aten::upsample_bicubic2d.default": "integer (uint8) images: one axis at a time in float32, rounded and clamped in between as torch's fixed-point kernel does; within 1 of eager (a few percent of pixels)",
    "aten::_upsample_bilinear2d_aa.default": "integer (uint8) images: one axis at a time in float32, rounded and clamped in between as torch's fixed-point kernel does; within 1 of eager (a few percent of pixels)",
    "aten::_upsample_bilinear2d_aa.vec": "integer (uint8) images: one axis at a time in float32, rounded and clamped in between as torch's fixed-point kernel does; within 1 of eager (a few percent of pixels)",
    "aten::_upsample_bicubic2d_aa.default": "integer (uint8) images: one axis at a time in float32, rounded and clamped in between as torch's fixed-point kernel does; within 1 of eager (a few percent of pixels)",
    "aten::_upsample_bicubic2d_aa.vec": "integer (uint8) images: one axis at a time in float32, rounded and clamped in between as torch's fixed-point kernel does; within 1 of eager (a few percent of pixels)",
    "aten::prod.default": "integers: a tree of Mul (an ONNX Loop over a dynamic length), which wraps on overflow as eager does; onnxruntime's integer ReduceProd saturates",
    "aten::prod.dim_int": "integers: a tree of Mul (an ONNX Loop over a dynamic length), which wraps on overflow as eager does; onnxruntime's integer ReduceProd saturates",
    "aten::erfc.default": "float64 inside: 1 - erf near 0, a Chebyshev fit elsewhere; relative error < 2e-7",
    "aten::special_erfcx.default": "float64 Chebyshev fit; relative error < 2e-7",
    "aten::erfinv.default": "Giles' approximation in float64; relative error < 2e-7 (float32 inputs)",
    "aten::special_ndtri.default": "Giles' approximation, then two Newton steps on erf (float32 inside: onnxruntime has no float64 Erf); vs torch float64 on 2e5 points over (1e-30, 1): absolute error < 5e-7, relative < 3.1e-5 where abs(ndtri) > 1e-3 (the worst is near p = 0.5); float64 inputs are no more accurate (abs error 1.6e-7)",
    "aten::lgamma.default": "Lanczos (g=7) in float64 with reflection; relative error < 2e-7 away from its zeros",
    "aten::digamma.default": "recurrence + asymptotic series in float64 with reflection; relative error < 1e-7",
    "aten::polygamma.default": (
        "n = 1: torch's trigamma (reflection with sin(pi x) rounded to the dtype as torch, so "
        "poles give its huge finite values), within 4e-7 relative of torch float32; n >= 2: "
        "(-1)^(n+1) n! zeta(n + 1, x), relative error < 2e-7 vs torch float64 1e-3 away from poles"
    ),
    "aten::special_zeta.default": (
        "Cephes' Euler-Maclaurin steps (torch's algorithm) in float64, the direct terms in an "
        "ONNX Loop (q < -1e6 gives NaN rather than over 2^20 terms); float64 bit-identical to "
        "torch, float32 relative error < 1e-7 vs torch float64"
    ),
    "aten::igamma.default": (
        "float64 power series, continued fraction or small-x series (torch's regimes) converged "
        "in one ONNX Loop of at most 10000 terms (a up to ~1e6 near x); absolute error < 1e-7 "
        "(float32) and < 5e-10 (float64) vs torch float64, whose asymptotic series for large a "
        "is itself off by up to 2e-9"
    ),
    "aten::nextafter.default": "exact for float32 and float64: ulp steps from the exact binary exponent (no bit cast before opset 26)",
    "aten::cummax.default": "ONNX Scan; exact (ties take the later index, NaN propagates, as torch)",
    "aten::cummin.default": "ONNX Scan; exact (ties take the later index, NaN propagates, as torch)",
    "aten::cumprod.default": "ONNX Scan, sequential products as torch's CPU kernel",
    "aten::logcumsumexp.default": "ONNX Scan of a stable logaddexp",
    "aten::mode.default": "an n x n comparison along the reduced axis (memory grows with n squared)",
    "aten::index.Tensor": "Gather for one index, else GatherND over the indexed dims transposed to the front; indices broadcast, negatives wrap, bool and uint8 masks become NonZero positions; the result dims go where torch puts them (in place when the indexed dims are consecutive, else in front); exact",
    "aten::set.source_Tensor": "the source itself: x.set_(y) on any tensor, a graph input included, is a rebinding to y (views of x taken before keep x's old values, as in eager)",
    "aten::index_put.default": "ScatterND (reduction add for accumulate) over the indexed dims transposed to the front, then transposed back; any pattern of None and tensor indices, bool and uint8 masks, values broadcast to x[indices]; exact (duplicate indices without accumulate: one of the writes wins, as in torch)",
    "aten::histc.default": "exact counts (ScatterElements add over int64); integer input (CUDA's) binned in float64",
    "aten::_grouped_mm.default": (
        "mixture-of-experts form (input [S, K], weight [E, K, N], offs [E]): per expert, a "
        "Slice of its rows and one MatMul, for any grouping; bfloat16 computed in float32 and "
        "rounded once. Also the rule of transformers::grouped_mm_fallback"
    ),
    "aten::histogram.bin_ct": "torch's linspace edges (within 1 ulp) and torch's upper_bound search, unrolled; exact counts",
    "aten::histogram.bins_tensor": "torch's upper_bound search, unrolled (unsorted edges as torch); exact counts",
    "aten::_histogramdd_from_bin_cts.default": "per-dim upper_bound search, one ScatterElements add; exact counts",
    "aten::_histogramdd_from_bin_tensors.default": "per-dim upper_bound search, one ScatterElements add; exact counts",
    "aten::round.decimals": "torch's kernel: scale by 10^|d| in float32 (float64 for doubles), Round (half to even), unscale; exact",
    "aten::segment_reduce.default": "a segments x length mask, one reduction (memory: segments x data)",
    "aten::unique_consecutive.default": "a run-start mask, Compress and NonZero; exact",
    "aten::index_reduce.default": "ScatterElements reductions; mean divides by counts as torch",
    "aten::sym_storage_offset.default": "a data-dependent view's offset: the view chain replayed on element positions",
    "aten::resize.default": "the first elements in storage order; memory torch leaves uninitialised reads as zeros",
    "aten::searchsorted.Tensor": "a comparison count (memory: values x boundaries)",
    "aten::bucketize.Tensor": "a comparison count (memory: values x boundaries)",
    "aten::_linalg_det.default": "ONNX Det; the LU and pivots outputs are not supported",
    # Bessel family and Airy Ai (rules/bessel.py): measured against torch float64.
    "aten::i0.default": "Cephes Chebyshev series in float64 (torch's coefficients and branches); vs torch float64 on a 1e5-point sweep over [-90, 90]: float32 output within 6e-8 relative (correctly rounded), float64 within 1e-15; inf where torch's float32 exp(abs(x)) overflows (abs(x) >= 88.72)",
    "aten::special_modified_bessel_i0.default": "Cephes Chebyshev series in float64 (torch's coefficients and branches); vs torch float64 on a 1e5-point sweep over [-90, 90]: float32 output within 6e-8 relative (correctly rounded), float64 within 1e-15; inf where torch's float32 exp(abs(x)) overflows (abs(x) >= 88.72)",
    "aten::special_i0e.default": "Cephes Chebyshev series in float64 (torch's coefficients and branches); vs torch float64 on a 1e5-point sweep over [-1e4, 1e4]: float32 output within 6e-8 relative (correctly rounded), float64 within 1e-15",
    "aten::special_i1.default": "Cephes Chebyshev series in float64 (torch's coefficients and branches); vs torch float64 on a 1e5-point sweep over [-90, 90]: float32 output within 6e-8 relative (correctly rounded), float64 within 2e-15; inf where torch's float32 exp(abs(x)) overflows (abs(x) >= 88.72)",
    "aten::special_modified_bessel_i1.default": "Cephes Chebyshev series in float64 (torch's coefficients and branches); vs torch float64 on a 1e5-point sweep over [-90, 90]: float32 output within 6e-8 relative (correctly rounded), float64 within 2e-15; inf where torch's float32 exp(abs(x)) overflows (abs(x) >= 88.72)",
    "aten::special_i1e.default": "Cephes Chebyshev series in float64 (torch's coefficients and branches); vs torch float64 on a 1e5-point sweep over [-1e4, 1e4]: float32 output within 6e-8 relative (correctly rounded), float64 within 2e-15",
    "aten::special_modified_bessel_k0.default": "Cephes Chebyshev series in float64 (torch's coefficients and branches); vs torch float64 on a 1e5-point sweep over (0, 100]: float32 output within 6e-8 relative (correctly rounded) where normal, float64 within 2e-15",
    "aten::special_modified_bessel_k1.default": "Cephes Chebyshev series in float64 (torch's coefficients and branches); vs torch float64 on a 1e5-point sweep over (0, 100]: float32 output within 6e-8 relative (correctly rounded) where normal, float64 within 2e-15; at the smallest float32 subnormal input inf where torch's float32 kernel gives NaN",
    "aten::special_scaled_modified_bessel_k0.default": "Cephes Chebyshev series in float64 (torch's coefficients and branches); vs torch float64 on a 1e5-point sweep over (0, 1e4]: float32 output within 6e-8 relative (correctly rounded), float64 within 2e-15",
    "aten::special_scaled_modified_bessel_k1.default": "Cephes Chebyshev series in float64 (torch's coefficients and branches); vs torch float64 on a 1e5-point sweep over (0, 1e4]: float32 output within 6e-8 relative (correctly rounded), float64 within 1e-15; at the smallest float32 subnormal input inf where torch's float32 kernel gives NaN",
    "aten::special_bessel_j0.default": "Cephes rational approximations in float64 (torch's polynomials and branches); vs torch float64 on a 1e5-point sweep over [-1e3, 1e3]: float32 output within 6e-8 relative (correctly rounded), float64 within 2e-13 where abs(J0) > 1e-3 (5e-12 nearer its zeros)",
    "aten::special_bessel_j1.default": "Cephes rational approximations in float64 (torch's polynomials and branches); vs torch float64 on a 1e5-point sweep over [-1e3, 1e3]: float32 output within 6e-8 relative (correctly rounded), float64 within 2e-13 where abs(J1) > 1e-3 (3e-12 nearer its zeros)",
    "aten::special_bessel_y0.default": "Cephes rational approximations in float64 (torch's polynomials and branches); vs torch float64 on a 1e5-point sweep over (0, 1e3]: float32 output within 6e-8 relative (correctly rounded), float64 within 5e-13 where abs(Y0) > 1e-3 (1e-11 nearer its zeros)",
    "aten::special_bessel_y1.default": "Cephes rational approximations in float64 (torch's polynomials and branches); vs torch float64 on a 1e5-point sweep over (0, 1e3]: float32 output within 6e-8 relative (correctly rounded), float64 within 1e-13 where abs(Y1) > 1e-3 (5e-11 nearer its zeros)",
    "aten::special_spherical_bessel_j0.default": "sin(x)/x, Taylor series for abs(x) < 0.5, in float64; vs torch float64 on a 1e5-point sweep over [-1e3, 1e3]: float32 output within 6e-8 relative (correctly rounded), float64 within 4e-14 where abs(j0) > 1e-3 (2e-11 nearer its zeros)",
    "aten::special_airy_ai.default": "Cephes rational approximations (abs(x) >= 2.09) and the Maclaurin series to x^39 in float64; vs torch float64 on a 1e5-point sweep over [-60, 30]: float32 output within 6e-8 relative (correctly rounded), float64 within 2e-13 where abs(Ai) > 1e-3 (6e-12 nearer its zeros)",
    # Linear solves and factorisations (rules/linalg_solve.py, rules/linalg_factor.py):
    # ONNX Loops over the matrix dimension in the input dtype. Errors: max |ours - eager| /
    # max |eager|, float32, random n <= 32; against a float64 reference ours is within 3x
    # of torch's own error.
    "aten::linalg_lu_factor_ex.default": "Loop: getf2 partial pivoting (first largest pivot magnitude); pivots and info exact, LU within 5e-7 relative of eager",
    "aten::linalg_lu.default": "Loop: getf2 partial pivoting; P exact, L and U within 5e-7 relative of eager",
    "aten::lu_unpack.default": "exact (masks and a Loop of the recorded swaps)",
    "aten::linalg_lu_solve.default": "permutation product, then forward and back substitution Loops; relative error < 1e-6",
    "aten::linalg_inv_ex.default": "Loop LU, then the solve with the identity (as torch); singular input gives inf/NaN; relative error ~ torch's own float32 error (1e-5 at n=32)",
    "aten::_linalg_solve_ex.default": "Loop LU, then substitution Loops; singular input gives inf/NaN; relative error ~ torch's own float32 error",
    "aten::_linalg_check_errors.default": "dropped: ONNX cannot raise, so a singular or not positive definite input gives inf/NaN instead of an error",
    "aten::linalg_cholesky_ex.default": "Loop: potf2 column by column; info exact, and a matrix that is not positive definite leaves L as LAPACK does; relative error < 2e-7",
    "aten::linalg_solve_triangular.default": "substitution Loop (column-oriented, as trsm); relative error < 1e-6",
    "aten::triangular_solve.default": "substitution Loop (column-oriented, as trsm); relative error < 1e-6",
    "aten::cholesky_solve.default": "two substitution Loops; relative error < 3e-7",
    "aten::cholesky_inverse.default": "substitution Loop for the factor's inverse, then one MatMul (as potri); relative error < 3e-7",
    "aten::linalg_qr.default": "Loop: Householder reflections as geqr2 (LAPACK's signs), Q applied in reverse as orgqr; relative error < 2e-6; a NaN leading entry of a column gives NaN where MKL's norm drops it",
    "aten::geqrf.default": "Loop: Householder reflections as geqr2; relative error < 3e-6 (a), < 1e-5 (tau)",
    "aten::linalg_ldl_factor_ex.default": "Loop: Bunch-Kaufman as sytf2, each matrix with its own 1x1/2x2 block counter; pivots exact, LD bitwise equal to eager on the tests",
    "aten::linalg_ldl_solve.default": "two Loops as sytrs (the recorded interchanges and 2x2 blocks); relative error < 5e-7",
    "aten::adaptive_max_pool1d.default": "sizes that are not multiples: per-axis window gathers (static pooled dims; batch and channels may be dynamic); the indices, where read, need static pooled dims only",
    "aten::adaptive_max_pool2d.default": "sizes that are not multiples: per-axis window gathers (static pooled dims; batch and channels may be dynamic); the indices, where read, need static pooled dims only",
    "aten::adaptive_max_pool3d.default": "sizes that are not multiples: per-axis window gathers (static pooled dims; batch and channels may be dynamic); the indices, where read, need static pooled dims only",
    "aten::_adaptive_avg_pool2d.default": "sizes that are not multiples: per-axis window gathers (static shapes)",
    # Random ops: values come from onnxruntime's generator (see RANDOM_NOTE).
    "aten::rand.default": "random; ONNX RandomUniform; float16/bfloat16 drawn as float32, clamped below 1, then cast",
    "aten::rand.generator": "random; as rand; the generator's seed does not carry over (a warning says so)",
    "aten::rand_like.default": "random; ONNX RandomUniform(Like)",
    "aten::randn.default": "random; ONNX RandomNormal; float16/bfloat16 drawn as float32, then cast",
    "aten::randn.generator": "random; as randn; the generator's seed does not carry over (a warning says so)",
    "aten::randn_like.default": "random; ONNX RandomNormal(Like)",
    "aten::uniform.default": "random; from + (to - from) * U[0, 1)",
    "aten::normal.Tensor_Tensor": "random; mean + std * N(0, 1) in the broadcast shape",
    "aten::normal.float_float": "random; mean + std * N(0, 1)",
    "aten::normal_functional.default": "random; mean + std * N(0, 1)",
    "aten::log_normal.default": "random; exp(mean + std * N(0, 1))",
    "aten::exponential.default": "random; inverse CDF: -log(1 - U) / lambda",
    "aten::geometric.default": "random; inverse CDF: max(ceil(log(1 - U) / log1p(-p)), 1), integer-valued",
    "aten::cauchy.default": "random; inverse CDF: median + sigma * tan(pi (U - 1/2)) (sin/cos for float64)",
    "aten::randint.low": "random; floor(low + U (high - low)) in float64, high exclusive; exact while high - low <= 2**53",
    "aten::randint_like.low_dtype": "random; floor(low + U (high - low)) in float64, high exclusive",
    "aten::randperm.default": "random; TopK order of uniform keys",
    "aten::random.default": "random; as randint over [0, 2**digits] for floats or the integer type's range; int64 beyond 2**53 gets float64 resolution",
    "aten::random.from": "random; as randint over [from, to)",
    "aten::bernoulli.default": "random; U < p; not ONNX Bernoulli, which onnxruntime 1.31 runs as P(1) = 1 - p (measured)",
    "aten::bernoulli.p": "random; U < p",
    "aten::multinomial.default": "random; with replacement: ONNX Multinomial on log weights; without: Gumbel-top-k (distinct indices); torch's error for too few non-zero weights is not raised",
    "aten::rrelu_with_noise_functional.default": "random; training: slopes U[lower, upper) where x <= 0; eval: leaky relu with slope (lower + upper) / 2",
    "aten::rrelu.default": "random; training: slopes U[lower, upper) where x <= 0; eval: leaky relu with slope (lower + upper) / 2",
    "aten::fractional_max_pool2d.default": "not random given random_samples: exact (torch's intervals in the samples' float type; NaN as torch); static spatial sizes",
    "aten::fractional_max_pool3d.default": "not random given random_samples: exact (torch's intervals in the samples' float type; NaN as torch); static spatial sizes",
    "aten::_fft_r2c.default": (
        "ONNX DFT per transformed dim, onesided on the last; float64 inside for float32 sizes "
        "that are not powers of 2; max error relative to the largest output < 1e-6 in float32 (sizes up to 4096), "
        "< 1e-12 in float64"
    ),
    "aten::_fft_c2c.default": (
        "ONNX DFT per dim, the inverse as conj(DFT(conj x)) (onnxruntime's inverse DFT loses "
        "float64 precision); accuracy as _fft_r2c"
    ),
    "aten::_fft_c2r.default": (
        "inverse DFTs of the other dims, then the last dim completed by Hermitian symmetry and "
        "one DFT (the imaginary parts of its DC and Nyquist terms are ignored, as torch does); "
        "accuracy as _fft_r2c"
    ),
    "aten::abs.default": "complex: sqrt(re^2 + im^2) in float64, scaled by the larger part for float64 inputs; +inf where a part is infinite; error within 1 ulp",
    "aten::view_as_real.default": "complex tensors are (real, imag) pairs in a trailing axis: an Identity",
    "aten::view_as_complex.default": "complex tensors are (real, imag) pairs in a trailing axis: an Identity",
}
# Said of the ops with a rule for complex tensors: also real ones, or only complex ones.
COMPLEX_NOTE = ("also on complex tensors, as (real, imag) pairs",
                "on complex tensors, as (real, imag) pairs")

RANDOM_NOTE = (
    "Random ops (notes starting \"random;\") sample from onnxruntime's generator, so their values "
    "never equal eager's: the OpInfo table checks their shapes and dtypes (`shape_only`), and "
    "tests/test_random_rules.py checks each distribution on 100k draws (mean and variance "
    "within 5 standard errors, support, integer values, rates, frequencies, distinct indices "
    "without replacement). A `torch.Generator` argument's seed does not carry over (a warning "
    "says so); seed onnxruntime with `onnxruntime.set_seed` before creating the session. "
    "Measured with onnxruntime 1.31 (CPU): the random nodes of one session are seeded with "
    "consecutive seeds of one linear congruential engine (minstd), so their draws are not "
    "independent: after `set_seed(0)` the first two nodes draw identical values, after "
    "`set_seed(1)` three nodes draw u, 2u mod 1 and 3u mod 1, and in general the second "
    "node's draws are the first's plus a fixed sequence, mod 1."
)


# Issue 14's smaller groups (bit shifts, legacy convolutions, repeat_interleave with
# tensor repeats, grid_sampler_3d, training-mode batch norm, dynamic diagonal).
_SHIFT = (
    "ONNX BitShift is unsigned-only: int64 working values shifted as uint64, signed "
    "right shifts arithmetic (-1 - ((-1 - a) >> b) for a < 0), torch's results for shift "
    "amounts < 0 or >= the bit width; exact on every integer dtype"
)
for _name in ("__lshift__.Tensor", "__lshift__.Scalar", "__rshift__.Tensor",
              "__rshift__.Scalar", "bitwise_left_shift.Tensor",
              "bitwise_left_shift.Tensor_Scalar", "bitwise_left_shift.Scalar_Tensor",
              "bitwise_right_shift.Tensor", "bitwise_right_shift.Tensor_Scalar",
              "bitwise_right_shift.Scalar_Tensor"):
    NOTES[f"aten::{_name}"] = _SHIFT
_TRAIN_BN = (
    "normalised with the batch's statistics, as eager's train() (max error "
    "7e-7 in float32); torch's running-stat update is computed, but the buffer writes are "
    "not in the graph (a warning says so)"
)
NOTES.update({
    "aten::conv_tbc.default": "Conv over (batch, channels, time) with the weight "
    "transposed; max error 5e-7 in float32",
    "aten::_convolution.default": "as convolution: the flags benchmark, deterministic, "
    "cudnn_enabled and allow_tf32 pick a kernel, not the result",
    "aten::_convolution.deprecated": "as convolution",
    "aten::repeat_interleave.Tensor": "each output position searched in cumsum(repeats) "
    "(an output size x len(repeats) comparison); exact; the size comes from the repeats' "
    "values at run time",
    "aten::grid_sampler_2d.default": "ONNX GridSample; bicubic (cubic) matches torch "
    "within 2e-6 in float32 at opsets 17 and 21",
    "aten::grid_sampler_3d.default": "opset 20 on: ONNX GridSample (5-D); before: torch's "
    "CPU sampling written out (unnormalise, border/reflection folding, 8 corners or the "
    "nearest, GatherND); max error 1.2e-7 in float32 over all modes",
    "aten::_native_batch_norm_legit_functional.default": "training: " + _TRAIN_BN,
    "aten::_batch_norm_with_update.default": _TRAIN_BN,
    "aten::_batch_norm_with_update_functional.default": _TRAIN_BN,
    "aten::native_batch_norm.default": "training=True: " + _TRAIN_BN,
    "aten::_native_batch_norm_legit.default": "training=True: " + _TRAIN_BN,
    "aten::diagonal.default": "dims of dynamic size: a Range over the flattened plane",
    "aten::_linalg_svd.default": "singular values only (svdvals, matrix_norm ord 2/-2/'nuc', "
    "cond, matrix_rank): one-sided Jacobi in float64, a Loop of (12 + log2 n) sweeps, "
    "static sizes; relative error vs torch < 7e-7 in float32 (torch's own float32 "
    "error), < 1e-15 in float64; U and Vh raise (their signs follow LAPACK)",
})
_QUANTIZE = (
    "QuantizeLinear (uint8/int8; int16/uint16 from opset 21; other dtypes as Round/Clip/Cast); "
    "a quant range narrower than the dtype's clamps the float input first, so Q and DQ stay "
    "adjacent; torch rounds x * (1/scale), QuantizeLinear x / scale, so a tie may land one "
    "step away (measured on a PT2E CNN run as written, without onnxruntime's QDQ fusion: every "
    "activation equals eager's; at most 1 step in tests)"
)
_DEQUANTIZE = (
    "DequantizeLinear (uint8/int8/int32; int16/uint16 from opset 21); exact; never folded, "
    "so a constant int8 weight stays int8 in the file"
)
_FAKE_QUANTIZE = (
    "QuantizeLinear -> DequantizeLinear over the smallest of uint8/int8/uint16/int16 that "
    "holds [quant_min, quant_max] (16-bit from opset 21), else Round/Clip arithmetic; a float "
    "zero point is added before rounding, as torch does (arithmetic); within one scale step of "
    "eager, a step only on ties"
)
for _name in ("quantize_per_tensor.default", "quantize_per_tensor.tensor",
              "quantize_per_tensor.tensor2", "quantize_per_channel.default"):
    NOTES[f"quantized_decomposed::{_name}"] = _QUANTIZE
for _name in ("dequantize_per_tensor.default", "dequantize_per_tensor.tensor",
              "dequantize_per_tensor.tensor2", "dequantize_per_channel.default"):
    NOTES[f"quantized_decomposed::{_name}"] = _DEQUANTIZE
NOTES["quantized_decomposed::choose_qparams_symmetric.tensor"] = (
    "torch.ao's determine_qparams (per-tensor symmetric) as ReduceMin/ReduceMax "
    "arithmetic; equal to eager's in tests")
NOTES["quantized_decomposed::choose_qparams.tensor"] = (
    "torch.ao's determine_qparams (per-tensor affine) as ReduceMin/ReduceMax arithmetic; "
    "scale and zero point equal eager's in tests")
for _name in ("fake_quantize_per_tensor_affine.default",
              "fake_quantize_per_tensor_affine.tensor_qparams",
              "fake_quantize_per_tensor_affine_cachemask.default",
              "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default",
              "fake_quantize_per_channel_affine.default",
              "fake_quantize_per_channel_affine_cachemask.default",
              "_fake_quantize_learnable_per_tensor_affine.default",
              "_fake_quantize_learnable_per_channel_affine.default"):
    NOTES[f"aten::{_name}"] = _FAKE_QUANTIZE
NOTES["aten::_fused_moving_avg_obs_fq_helper_functional.default"] = (
    "QAT's FusedMovingAvgObsFakeQuantize with its observer off (an error says to call "
    "disable_observer otherwise): as fake_quantize with the stored scale and zero point; "
    "matches eager exactly in tests")
NOTES["aten::dequantize.self"] = (
    "identity: quantized tensors travel as their dequantized float values (docs/migration.md)")
NOTES["aten::igammac.default"] = NOTES["aten::igamma.default"]
for _overload in ("default", "other_scalar", "self_scalar"):
    NOTES.setdefault(f"aten::special_zeta.{_overload}", NOTES["aten::special_zeta.default"])
_RECURRENCE = (
    "torch's three-term recurrence in the input dtype (its fma rounding) in one ONNX Loop "
    "with a data-dependent trip count, and its special cases; float32: bit-identical to "
    "torch on a dense sweep"
)
_TRIG = (
    "; Chebyshev kinds with abs(x) < 1 and large n use torch's trig formula, where torch's "
    "acosf is up to 1 ulp off (differences < 4e-5 for n <= 20, 97% of a sweep bit-identical)"
)
for _kind in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
              "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
              "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
              "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
              "laguerre_polynomial_l", "legendre_polynomial_p"):
    for _overload in ("default", "x_scalar", "n_scalar"):
        NOTES[f"aten::special_{_kind}.{_overload}"] = _RECURRENCE + (
            _TRIG if "chebyshev" in _kind else "")


def support_matrix() -> list[dict[str, Any]]:
    """One row per core ATen overload, per op kept from decomposition and per op with a rule."""
    import torch

    import pt2onnx.rules  # noqa: F401

    ops = {op_name(op): op for op in _compat.core_aten_ops()}
    for op in KEEP_WHOLE:
        ops.setdefault(op_name(op), op)
    for op in REGISTRY.ops():
        # ATen, prims and PT2E's quantize ops (rules/quantized.py registers them) only:
        # third-party rules (torchvision's, registered once it is imported) and rules
        # users add would make the page depend on what was imported.
        if isinstance(op, torch._ops.OpOverload) and op.namespace in (
                "aten", "prims", "quantized_decomposed"):
            ops.setdefault(op_name(op), op)
    rows = []
    for name in sorted(ops):
        op = ops[name]
        complex_opsets = REGISTRY.opsets(op, complex=True)
        opsets = sorted(set(REGISTRY.opsets(op)) | set(complex_opsets))
        rows.append({
            "op": name,
            "supported": bool(opsets),
            "opsets": opsets,
            "complex": bool(complex_opsets),
            "complex_only": bool(complex_opsets) and not REGISTRY.opsets(op),
            "xfail": XFAILS.get(name, []),
            "reason": MISSING_REASONS.get(name, "") if not opsets else "",
        })
    return rows


def to_json(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, indent=1)


def to_markdown(rows: list[dict[str, Any]]) -> str:
    supported = sum(r["supported"] for r in rows)
    lines = [
        "# Operator support",
        "",
        "Generated by `pt2onnx ops --markdown` (`make docs`); a test fails when this file is stale.",
        "",
        f"{supported} of {len(rows)} ops (core ATen, the ops kept from decomposition and every "
        "other op with a rule) have a rule. `opsets` lists the `since=` versions of each rule; "
        "notes give known failures and, for approximations, the measured accuracy.",
        "",
        RANDOM_NOTE,
        "",
        "Complex tensors are carried as float tensors whose last axis, of size 2, holds "
        "(real, imag): exactly `torch.view_as_real` of the value. A complex model input is fed "
        "and a complex output returned in that form (complex64 as float32 [..., 2], complex128 "
        "as float64 [..., 2]), as torch.onnx (dynamo) does. Only the rules marked for complex "
        "tensors are used on them; any other op on a complex tensor fails to export with its "
        "name.",
        "",
        "Packed RNN sequences (`pack_padded_sequence` -> `nn.LSTM` / `nn.GRU` / `nn.RNN` -> "
        "`pad_packed_sequence`) are captured as one op, `pt2onnx::packed_rnn`, translated to "
        "ONNX LSTM / GRU / RNN with `sequence_lens` (a Loop of torch's cell for `proj_size` "
        "and float64); float32 within 5e-7 of eager, float64 within 1e-15 (2-layer bidirectional, hidden 32, 20 steps). What is covered "
        "and what is refused: docs/models.md, \"Packed RNN sequences\". Plain `nn.LSTM` / `nn.GRU` / `nn.RNN` "
        "calls take the same path; one the rewrite cannot see (kept in a plain list, called from a closure) "
        "reaches torch.export as `aten::lstm.input` / `gru.input` / `rnn_tanh.input` / `rnn_relu.input`, "
        "which capture keeps whole with dynamic steps and batch, translated to the same ONNX ops. NaN inputs: onnxruntime's CPU LSTM and GRU kernels (1.31, 1.32) give finite "
        "outputs where eager and ONNX's definition give NaN from that step on (its RNN kernel carries the NaN); "
        "a strict xfail in the fuzz corpus (`mismatch_lstm_nan_input_ort.py`) tracks it.",
        "",
        "export-llm's fused attention is captured as one op, `pt2onnx::gqa` (the query, the "
        "new keys and values, the past, the attention mask; optional rotary tables), "
        "translated to com.microsoft `GroupQueryAttention`; its eager implementation equals "
        "onnxruntime's op within 1e-6 in float32 (grouped heads, empty and non-empty past, "
        "sliding window, soft-capping, rotary; tests/test_llm_fused.py). Only export-llm "
        "emits it: docs/llm.md, \"Fused ops\". Where the attention can't rotate the query "
        "and key itself, export-llm captures the rotation as `pt2onnx::rotary` (the tensor, "
        "`position_ids`, the cos/sin tables, `interleaved`), translated to com.microsoft "
        "`RotaryEmbedding` (`src/pt2onnx/rules/rotary.py`); its eager implementation equals "
        "onnxruntime's op within 1e-5 in float32 and 2e-3 in float16 (whole and partial, "
        "halves and interleaved, head sizes 8 to 64; tests/test_llm_fused.py).",
        "",
        "| op | supported | opsets | notes |",
        "|---|---|---|---|",
    ]
    for r in rows:
        complex_note = ([COMPLEX_NOTE[bool(r.get("complex_only"))]]
                        if r.get("complex") and r["op"] not in NOTES else [])
        notes = "; ".join(([NOTES[r["op"]]] if r["op"] in NOTES else []) + complex_note
                          + r["xfail"]) or r["reason"]
        lines.append(
            f"| `{r['op']}` | {'yes' if r['supported'] else 'no'} | "
            f"{', '.join(map(str, r['opsets']))} | {notes} |"
        )
    return "\n".join(lines + _opinfo_gap_lines()) + "\n"


def _opinfo_gap_lines() -> list[str]:
    from pt2onnx.cli._opinfo_gaps import CAUSES, GAPS, MEASURED

    lines = ["", "## OpInfo entries that do not pass, by cause", "",
             "`benchmarks/opinfo_compare.py --all` exports the first two float32 samples of "
             "every entry of torch's `op_db` at the default opset and compares onnxruntime "
             "with eager PyTorch. " + MEASURED + " Each entry that does not pass is below, "
             "with its reason; tests/test_docs_ops.py checks this list against the latest "
             "run (`benchmarks/results/opinfo_all.json`).", ""]
    for cause, text in CAUSES.items():
        entries = sorted((name, why) for name, (c, why) in GAPS.items() if c == cause)
        if not entries:
            continue
        lines += [f"### {text} ({len(entries)})", "", "| entry | reason |", "|---|---|"]
        lines += [f"| `{name}` | {why} |" for name, why in entries]
        lines.append("")
    return lines[:-1] if lines[-1] == "" else lines
