"""onnxruntime against eager PyTorch: the per-output comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

from pt2onnx.errors import ExportError


@dataclass(frozen=True)
class OutputComparison:
    """How one ONNX output compares with its eager PyTorch counterpart."""

    name: str
    max_abs_error: float
    max_rel_error: float
    tolerance: float
    shape_ok: bool
    dtype_ok: bool

    @property
    def ok(self) -> bool:
        return self.shape_ok and self.dtype_ok and self.max_abs_error <= self.tolerance


@dataclass(frozen=True)
class VerificationResult:
    outputs: list[OutputComparison]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    def __str__(self) -> str:
        rows = ["| output | max abs err | max rel err | tolerance | ok |", "|---|---|---|---|---|"]
        for o in self.outputs:
            rows.append(
                f"| {o.name} | {o.max_abs_error:.3g} | {o.max_rel_error:.3g} | "
                f"{o.tolerance:.3g} | {'yes' if o.ok else 'NO'} |"
            )
        return "\n".join(rows)


def default_tolerance(ref: np.ndarray, atol: float = 1e-4, rtol: float = 1e-3) -> float:
    """atol + rtol * max|ref|: the bar for an exported model to match eager."""
    if ref.size == 0 or ref.dtype == np.bool_:
        return 0.0
    return atol + rtol * float(np.max(np.abs(ref.astype(np.float64))))


def require_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise ExportError(
            "verification needs onnxruntime. Next step: pip install 'pt2onnx[verify]'"
        ) from None
    return onnxruntime


def flatten_tensors(tree: Any) -> list[torch.Tensor]:
    """The tensor leaves of a (nested) output in pytree order."""
    leaves = pytree.tree_leaves(tree)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes  # shipped with onnx

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def compare(
    names: list[str], expected: list[torch.Tensor], actual: list[np.ndarray],
    atol: float = 1e-4, rtol: float = 1e-3,
) -> VerificationResult:
    if len(expected) != len(actual):
        raise ExportError(
            f"the ONNX model has {len(actual)} outputs but eager PyTorch returned "
            f"{len(expected)} tensors"
        )
    results = []
    for name, exp_t, act in zip(names, expected, actual):
        exp = to_numpy(exp_t)
        shape_ok = tuple(exp.shape) == tuple(act.shape)
        dtype_ok = exp.dtype == act.dtype
        if shape_ok and exp.size:
            e64 = exp.astype(np.float64) if exp.dtype != np.bool_ else exp.astype(np.int8)
            a64 = act.astype(np.float64) if act.dtype != np.bool_ else act.astype(np.int8)
            diff = np.abs(e64 - a64)
            both_nan = np.isnan(e64) & np.isnan(a64)
            same_inf = np.isinf(e64) & (e64 == a64)
            diff = np.where(both_nan | same_inf, 0.0, diff)
            diff = np.where(np.isnan(diff), np.inf, diff)
            max_abs = float(diff.max())
            denom = np.maximum(np.abs(e64), 1e-12)
            max_rel = float((diff / denom).max())
        else:
            max_abs = 0.0 if shape_ok else float("inf")
            max_rel = max_abs
        finite = exp[np.isfinite(exp)] if exp.dtype.kind == "f" else exp
        results.append(
            OutputComparison(
                name, max_abs, max_rel, default_tolerance(finite, atol, rtol), shape_ok, dtype_ok
            )
        )
    return VerificationResult(results)
