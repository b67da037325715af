"""The tools people run on an exported file, run on one: onnxruntime's symbolic shape
inference and transformer optimizer, onnxslim, float16 conversion (onnxconverter-common)
and onnxruntime's dynamic and static quantization.

Each tool's result is a :class:`ToolResult`: whether it ran, whether its output still
loads and runs in onnxruntime, how far that output is from eager PyTorch, and what the
tool reports (fused operators). ``tests/models/test_downstream_tools.py`` asserts on
pt2onnx's files; ``benchmarks/downstream_tools.py`` prints the table beside torch.onnx's
for docs/compatibility.md. A tool that is not installed gives ``skipped`` and says so.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

TOOLS = ("symbolic shape inference", "transformer optimizer", "onnxslim", "float16",
         "dynamic quantization", "static quantization")


@dataclass
class ToolResult:
    tool: str
    status: str  # ok | failed | skipped
    detail: str = ""
    max_error: float | None = None  # of the tool's output file against eager, where run
    fused: dict[str, int] = field(default_factory=dict)

    def cell(self) -> str:
        if self.status != "ok":
            return f"{self.status}: {self.detail}"[:80] if self.detail else self.status
        text = "ok"
        if self.fused:
            text += " (" + ", ".join(f"{k} {v}" for k, v in sorted(self.fused.items())) + ")"
        return text


def _run(path: str | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return list(session.run(None, {n: feeds[n] for n in names}))


def _error(got: list[np.ndarray], expected: list[np.ndarray]) -> float:
    worst = 0.0
    for g, e in zip(got, expected):
        if g.shape != e.shape:
            return float("inf")
        if e.size:
            worst = max(worst, float(np.abs(g.astype(np.float64) - e.astype(np.float64)).max()))
    return worst


def run_tools(path: str | Path, feeds: dict[str, np.ndarray], expected: list[np.ndarray],
              optimizer: dict[str, Any] | None = None,
              tools: tuple[str, ...] = TOOLS) -> dict[str, ToolResult]:
    """Runs each tool on the file at ``path`` and its output file on ``feeds``.

    ``expected``: eager's outputs on ``feeds``, in the file's output order.
    ``optimizer``: ``optimize_model`` keyword arguments (``model_type``, ``num_heads``,
    ``hidden_size``); None skips the transformer optimizer (it is for transformers)."""
    results: dict[str, ToolResult] = {}
    path = Path(path).resolve()
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        # Some tools write scratch files (uuid-named .data) to the working directory.
        os.chdir(tmp)
        try:
            return _run_all(path, feeds, expected, optimizer, tools, Path(tmp), results)
        finally:
            os.chdir(cwd)


def _run_all(path: Path, feeds: dict[str, np.ndarray], expected: list[np.ndarray],
             optimizer: dict[str, Any] | None, tools: tuple[str, ...], tmp: Path,
             results: dict[str, ToolResult]) -> dict[str, ToolResult]:
    import onnx

    out = tmp / "out.onnx"
    steps: dict[str, Callable[[], dict[str, int] | None]] = {
        "symbolic shape inference": lambda: _symbolic(path, out),
        "transformer optimizer": lambda: _optimizer(path, out, optimizer),
        "onnxslim": lambda: _slim(path, out),
        "float16": lambda: _float16(path, out),
        "dynamic quantization": lambda: _quantize_dynamic(path, out),
        "static quantization": lambda: _quantize_static(path, out, feeds),
    }
    for tool in tools:
        if tool == "transformer optimizer" and optimizer is None:
            results[tool] = ToolResult(tool, "skipped", "not a transformer")
            continue
        try:
            fused = steps[tool]()
        except ImportError as e:
            results[tool] = ToolResult(tool, "skipped", f"not installed ({e.name})")
            continue
        except Exception as e:  # the tool refused the file: the finding itself
            results[tool] = ToolResult(tool, "failed", f"{type(e).__name__}: {e}")
            continue
        try:
            onnx.checker.check_model(str(out))
            err = _error(_run(out, feeds), expected)
        except Exception as e:
            results[tool] = ToolResult(tool, "failed", f"its output does not run: "
                                       f"{type(e).__name__}: {str(e)[:200]}")
            continue
        results[tool] = ToolResult(tool, "ok", max_error=err, fused=fused or {})
    return results


def _symbolic(path: str | Path, out: Path) -> None:
    import onnx
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    inferred = SymbolicShapeInference.infer_shapes(onnx.load(str(path)), auto_merge=True)
    if inferred is None:
        raise RuntimeError("symbolic shape inference returned nothing")
    onnx.save(inferred, str(out))


def _optimizer(path: str | Path, out: Path, kwargs: dict[str, Any] | None) -> dict[str, int]:
    import logging

    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    model = optimize_model(str(path), **(kwargs or {}))
    model.save_model_to_file(str(out))
    return {k: v for k, v in model.get_fused_operator_statistics().items() if v}


def _slim(path: str | Path, out: Path) -> None:
    import onnx
    import onnxslim

    onnx.save(onnxslim.slim(onnx.load(str(path))), str(out))


def _float16(path: str | Path, out: Path) -> None:
    import onnx
    from onnxconverter_common import float16

    # Cast nodes stay float32 (the converter's block list): the converter types a
    # Cast(to=FLOAT)'s output float16 but leaves its ``to``, so onnxruntime refuses the
    # file (pt2onnx's and torch.onnx's alike, onnxconverter-common 1.16).
    blocked = [*float16.DEFAULT_OP_BLOCK_LIST, "Cast"]
    onnx.save(float16.convert_float_to_float16(onnx.load(str(path)), keep_io_types=True,
                                               op_block_list=blocked), str(out))


def _preprocessed(path: str | Path, out: Path) -> Path:
    """The file after onnxruntime's recommended pre-processing for quantization
    (``quant_pre_process``: symbolic shape inference, optimization, onnx shape
    inference), as its quantizers ask users to run first; the file as it is where the
    pre-processing itself gives up (its symbolic shape inference runs without
    ``auto_merge`` and stops on BERT's attention mask, torch.onnx's file alike)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = out.with_name("pre_" + out.name)
    try:
        quant_pre_process(str(path), str(pre))
    except Exception:
        return Path(path)
    return pre


def _quantize_dynamic(path: str | Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(_preprocessed(path, out)), str(out), weight_type=QuantType.QInt8)


def _quantize_static(path: str | Path, out: Path, feeds: dict[str, np.ndarray]) -> None:
    from onnxruntime.quantization import CalibrationDataReader, quantize_static

    path = _preprocessed(path, out)

    class Reader(CalibrationDataReader):  # type: ignore[misc]  # untyped onnxruntime
        def __init__(self) -> None:
            self.left = [feeds]

        def get_next(self) -> dict[str, np.ndarray] | None:
            return self.left.pop() if self.left else None

    quantize_static(str(path), str(out), Reader())
