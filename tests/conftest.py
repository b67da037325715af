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


def _eager(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> list[Any]:
    """The model's outputs on copies of the inputs (a cache input grows in place)."""
    import copy

    import torch.utils._pytree as pytree

    from pt2onnx.frontends._containers import register_output_containers

    register_output_containers()  # a transformers cache flattens to its tensors, as after
    if isinstance(model, torch.export.ExportedProgram):
        model = model.module()
    with torch.no_grad():
        out = model(*copy.deepcopy(args), **copy.deepcopy(kwargs or {}))
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def export_and_verify(
    model: Any, args: tuple[Any, ...], tmp_path: Path, *, kwargs: dict[str, Any] | None = None,
    name: str = "model", **export_kwargs: Any,
) -> pt2onnx.OnnxProgram:
    """Exports to a file, runs onnx.checker (full_check, by path) and checks parity; the
    model's eager outputs after the export are those before it (an export leaves the
    model as it found it: hooks, training flags, attributes, buffers)."""
    path = tmp_path / f"{name}.onnx"
    before = _eager(model, args, kwargs)
    prog = pt2onnx.export(model, args, path, kwargs=kwargs, **export_kwargs)
    assert path.exists()
    after = _eager(model, args, kwargs)
    assert len(before) == len(after) and all(
        torch.equal(a, b) for a, b in zip(before, after)), "the export changed the model"
    onnx.checker.check_model(str(path), full_check=True)
    result = prog.verify(*args, **(kwargs or {}))
    assert result.outputs, "the model has no outputs to compare"
    assert result.ok, f"onnxruntime does not match eager PyTorch:\n{result}"
    return prog


def export_dynamic_and_verify(
    model: Any, args: tuple[Any, ...], tmp_path: Path, dynamic_axes: dict[str, Any], *,
    kwargs: dict[str, Any] | None = None, name: str = "model", **export_kwargs: Any,
) -> pt2onnx.OnnxProgram:
    """Exports with ``dynamic_axes`` (keyed by input names), then checks the file and
    compares with eager at the example and at a second size of every dynamic dim."""
    path = tmp_path / f"{name}.onnx"
    prog = pt2onnx.export(model, args, path, kwargs=kwargs, dynamic_axes=dynamic_axes,
                          **export_kwargs)
    onnx.checker.check_model(str(path), full_check=True)
    assert prog.report.capture_strategy.startswith("torch.export"), prog.report.fallbacks
    result = prog.verify()
    assert len(result.runs) >= 2, f"no second size was run: {result.runs}"
    assert result.ok, f"onnxruntime does not match eager PyTorch:\n{result}"
    return prog


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


_SLOW = frozenset(
    line.strip() for line in (Path(__file__).parent / "slow_tests.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks `slow` the tests listed in tests/slow_tests.txt (by node id)."""
    for item in items:
        if item.nodeid in _SLOW:
            item.add_marker(pytest.mark.slow)
