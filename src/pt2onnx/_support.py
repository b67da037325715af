"""The operator support matrix behind ``pt2onnx ops`` and docs/ops.md."""

from __future__ import annotations

import json
from typing import Any

from pt2onnx import _compat
from pt2onnx._decomp import KEEP
from pt2onnx._registry import REGISTRY, op_name

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
    "aten::bitwise_and.Tensor": ["int64 at opset 17: BitwiseAnd needs opset 18"],
    "aten::bitwise_or.Tensor": ["int64 at opset 17: BitwiseOr needs opset 18"],
    "aten::bitwise_xor.Tensor": ["int64 at opset 17: BitwiseXor needs opset 18"],
    "aten::bitwise_not.default": ["int64 at opset 17: BitwiseNot needs opset 18"],
    "aten::addmm.default": ["empty inner dimension (K=0): onnxruntime Gemm returns wrong values"],
    "aten::_cdist_forward.default": ["empty batch dimension: wrong output shape"],
    "aten::gather.default": ["index rank different from the input rank: GatherElements needs equal ranks"],
    "aten::index_put.default": ["leading None indices (indexing along a dim > 0) have no rule"],
    "aten::amax.default": ["NaN inputs: onnxruntime ReduceMax drops a NaN unless it comes first along the axis"],
    "aten::amin.default": ["NaN inputs: onnxruntime ReduceMin drops a NaN unless it comes first along the axis"],
    "aten::convolution.default": ["transposed with output_padding >= stride: onnxruntime ConvTranspose rejects it"],
    "aten::polygamma.default": ["n >= 1 with x <= 0: no reflection formula, gives NaN where torch is finite"],
    "aten::var_mean.correction": ["empty input: the mean is 0 (onnxruntime ReduceMean) where torch gives NaN"],
    "aten::std_mean.correction": ["empty input: the mean is 0 (onnxruntime ReduceMean) where torch gives NaN"],
    "aten::scaled_dot_product_attention.default": ["dropout_p > 0: exported without dropout (inference attention)"],
}

# How exact a rule is, where it is an approximation or has a cost worth knowing.
NOTES: dict[str, str] = {
    "aten::erfc.default": "float64 inside: 1 - erf near 0, a Chebyshev fit elsewhere; relative error < 2e-7",
    "aten::special_erfcx.default": "float64 Chebyshev fit; relative error < 2e-7",
    "aten::erfinv.default": "Giles' approximation in float64; relative error < 2e-7 (float32 inputs)",
    "aten::special_ndtri.default": "Giles' approximation, then two Newton steps; relative error < 1e-6",
    "aten::lgamma.default": "Lanczos (g=7) in float64 with reflection; relative error < 2e-7 away from its zeros",
    "aten::digamma.default": "recurrence + asymptotic series in float64 with reflection; relative error < 1e-7",
    "aten::cummax.default": "ONNX Scan; exact (ties take the later index, NaN propagates, as torch)",
    "aten::cummin.default": "ONNX Scan; exact (ties take the later index, NaN propagates, as torch)",
    "aten::cumprod.default": "ONNX Scan, sequential products as torch's CPU kernel",
    "aten::logcumsumexp.default": "ONNX Scan of a stable logaddexp",
    "aten::mode.default": "an n x n comparison along the reduced axis (memory grows with n squared)",
    "aten::histc.default": "exact counts (ScatterElements add over int64)",
    "aten::searchsorted.Tensor": "a comparison count (memory: values x boundaries)",
    "aten::bucketize.Tensor": "a comparison count (memory: values x boundaries)",
    "aten::_linalg_det.default": "ONNX Det; the LU and pivots outputs are not supported",
    "aten::adaptive_max_pool2d.default": "sizes that are not multiples: per-axis window gathers (static shapes)",
    "aten::_adaptive_avg_pool2d.default": "sizes that are not multiples: per-axis window gathers (static shapes)",
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


def support_matrix() -> list[dict[str, Any]]:
    """One row per core ATen overload, per op kept from decomposition and per op with a rule."""
    import torch

    import pt2onnx.rules  # noqa: F401

    ops = {op_name(op): op for op in _compat.core_aten_ops()}
    for op in KEEP:
        ops.setdefault(op_name(op), op)
    for op in REGISTRY.ops():
        # ATen and prims only: third-party rules (torchvision's, registered once it is
        # imported) and rules users add would make the page depend on what was imported.
        if isinstance(op, torch._ops.OpOverload) and op.namespace in ("aten", "prims"):
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
        "Complex tensors are carried as float tensors whose last axis, of size 2, holds "
        "(real, imag): exactly `torch.view_as_real` of the value. A complex model input is fed "
        "and a complex output returned in that form (complex64 as float32 [..., 2], complex128 "
        "as float64 [..., 2]), as torch.onnx (dynamo) does. Only the rules marked for complex "
        "tensors are used on them; any other op on a complex tensor fails to export with its "
        "name.",
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
    return "\n".join(lines) + "\n"
