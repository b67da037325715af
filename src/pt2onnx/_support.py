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
    "aten::_fft_r2c.default": (
        "complex output: onnxruntime runs no complex tensors, and ONNX DFT writes complex "
        "values as a trailing [re, im] axis that torch's dtype metadata cannot describe"
    ),
    "aten::_fft_c2r.default": "complex input: onnxruntime runs no complex tensors",
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
    # Linear solves and factorisations (rules/linalg_solve.py): ONNX Loops over the matrix
    # dimension in the input dtype. Errors: max |ours - eager| / max |eager|, float32,
    # random n <= 32; against a float64 reference ours is within 3x of torch's own error.
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
    "aten::adaptive_max_pool2d.default": "sizes that are not multiples: per-axis window gathers (static shapes)",
    "aten::_adaptive_avg_pool2d.default": "sizes that are not multiples: per-axis window gathers (static shapes)",
}


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
        opsets = REGISTRY.opsets(op)
        rows.append({
            "op": name,
            "supported": bool(opsets),
            "opsets": opsets,
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
        "| op | supported | opsets | notes |",
        "|---|---|---|---|",
    ]
    for r in rows:
        notes = "; ".join(([NOTES[r["op"]]] if r["op"] in NOTES else []) + r["xfail"]) \
            or r["reason"]
        lines.append(
            f"| `{r['op']}` | {'yes' if r['supported'] else 'no'} | "
            f"{', '.join(map(str, r['opsets']))} | {notes} |"
        )
    return "\n".join(lines) + "\n"
