"""Shared helpers: export, check with onnx's full checker by path, verify in onnxruntime."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import onnx
import pytest
import torch

import pt2onnx

warnings.filterwarnings("ignore", message=".*LeafSpec.*")


def export_and_verify(
    model: Any, args: tuple[Any, ...], tmp_path: Path, *, kwargs: dict[str, Any] | None = None,
    name: str = "model", **export_kwargs: Any,
) -> pt2onnx.OnnxProgram:
    """Exports to a file, runs onnx.checker (full_check, by path) and checks parity."""
    path = tmp_path / f"{name}.onnx"
    prog = pt2onnx.export(model, args, path, kwargs=kwargs, **export_kwargs)
    assert path.exists()
    onnx.checker.check_model(str(path), full_check=True)
    result = prog.verify(*args, **(kwargs or {}))
    assert result.outputs, "the model has no outputs to compare"
    assert result.ok, f"onnxruntime does not match eager PyTorch:\n{result}"
    return prog


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
