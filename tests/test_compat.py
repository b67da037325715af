"""Torch-version differences live in _compat.py only, and the tested set is stated once (_tested.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from pt2onnx import _compat, _tested

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "pt2onnx"


def test_only_compat_reads_the_torch_version():
    pattern = re.compile(r"torch\.__version__|torch\.version\.|TorchVersion")
    offenders = [
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
        if p.name != "_compat.py" and pattern.search(p.read_text())
    ]
    assert offenders == [], f"move these torch-version checks into _compat.py: {offenders}"


def test_torch_version_is_parsed():
    assert _compat.TORCH_VERSION >= (2, 12)
    major, minor = _compat.TORCH_VERSION
    assert _compat.TORCH_VERSION_STRING.startswith(f"{major}.{minor}.")


@pytest.mark.parametrize(
    ("name", "version", "expected"),
    [
        ("torch", "2.13.0+cpu", True),
        ("torch", "2.14.1+cu130", True),
        ("torch", "2.14.0", False),
        ("torch", "2.12.1", True),
        ("torch", "2.15.0+cu132", True),
        ("torch", "2.16.0", False),
        ("onnx-ir", "1.1.3", True),
        ("onnx-ir", "1.10.0", False),
        ("onnxruntime", "1.31.1", True),
        ("onnxruntime", "1.32.0", True),
        ("onnxruntime", "1.31.0", False),
        ("pt2onnx", "0.1.0", None),
    ],
)
def test_is_tested_matches_whole_version_components(name, version, expected):
    assert _tested.is_tested(name, version) is expected


def test_running_torch_is_a_tested_one():
    assert _tested.is_tested("torch", _compat.TORCH_VERSION_STRING), (
        f"torch {_compat.TORCH_VERSION_STRING} is not in _tested.TESTED; add it there, to the "
        "CI matrix (.ci/run, Makefile) and to docs/compatibility.md"
    )


def test_docs_state_the_tested_set():
    docs = (ROOT / "docs" / "compatibility.md").read_text()
    for name, versions in _tested.TESTED.items():
        row = next((line for line in docs.splitlines() if line.startswith(f"| {name} |")), "")
        assert row, f"docs/compatibility.md has no '| {name} |' row in its tested table"
        for version in versions:
            assert version in row, f"docs/compatibility.md does not list {name} {version}"


@pytest.mark.parametrize(
    ("name", "version", "nearest"),
    [
        ("torch", "2.16.0", "2.15.0"),
        ("torch", "3.0.0", "2.15.0"),
        ("torch", "2.14.0", "2.14.1"),
        ("torch", "2.13.5+cpu", "2.13.0"),
        ("torch", "2.11.0", "2.12.1"),
        ("onnxruntime", "1.33.0", "1.32.0"),
        ("onnxruntime", "not installed", None),
        ("pt2onnx", "0.1.0", None),
    ],
)
def test_nearest_tested(name, version, nearest):
    assert _tested.nearest_tested(name, version) == nearest


def test_doctor_names_the_nearest_tested_release_and_what_to_run(monkeypatch, capsys):
    from pt2onnx import cli, report

    found = {"pt2onnx": "0.1.0", "torch": "2.16.0+cu132", "onnx": "1.23.2",
             "onnx-ir": "1.1.0", "onnxruntime": "1.33.0", "python": "3.11.7"}
    monkeypatch.setattr(report, "versions", lambda: found)
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "not tested; nearest tested 2.15.0" in out
    assert "not tested; nearest tested 1.32.0" in out
    assert "make test-torch VERSION=2.16.0" in out


def test_ci_runs_every_tested_version():
    """Each tested torch is pinned by a constraints file and has a leg in .ci/run."""
    makefile = (ROOT / "Makefile").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    constraints = {p.name: p.read_text().splitlines() for p in ROOT.glob("constraints*.txt")}
    assert "make test\n" in ci, "CI must run the README's command first"
    for version in _tested.TESTED["torch"]:
        assert any(f"torch=={version}" in lines for lines in constraints.values()), version
        assert (
            f"torch=={version}" in constraints["constraints.txt"]  # make test
            or f"make test-torch VERSION={version}" in ci
            or (f"TV_VERSION ?= {version}" in makefile and "make test-2.14" in ci)
        ), f"no CI leg runs torch {version}"
    for version in _tested.TESTED["onnxruntime"]:
        assert any(f"onnxruntime=={version}" in lines for lines in constraints.values()), version
    assert "make typecheck" in ci or "typecheck" in ci


# Each _compat branch, run on the torch that takes it.

@pytest.mark.skipif(_compat.TORCH_VERSION >= (2, 13), reason="torch 2.12 only")
def test_torch_2_12_keeps_undischarged_guards_as_runtime_asserts(tmp_path, monkeypatch):
    """2.12 adds a parity guard on a CNN's image size; 2.13+ never emits it."""
    import onnx_ir as ir
    from torch.export import Dim

    import pt2onnx
    from pt2onnx.examples import tiny_resnet

    assert _compat._EXPORT_OPTIONS == {"prefer_deferred_runtime_asserts_over_guards": True}
    model, (x,) = tiny_resnet()
    shapes = {"x": {2: Dim("height", min=16, max=512)}}
    prog = pt2onnx.export(model, (x,), tmp_path / "cnn.onnx", dynamic_shapes=shapes)
    height = prog.model.graph.inputs[0].shape[2]
    assert isinstance(height, ir.SymbolicDim) and height.value == "height"
    assert prog.verify(torch.randn(*x.shape[:2], 24, x.shape[3])).ok
    assert not prog.report.dynamic_refinements
    # Without the branch, torch.export's own fix for that guard is applied (pt2onnx's
    # dynamic-shape refinement) and holds height to even sizes; the odd ones get a
    # capture of their own under If(height % 2 == 1) (capture/_residue.py).
    monkeypatch.setattr(_compat, "_EXPORT_OPTIONS", {})
    with pytest.warns(UserWarning, match="height = 2"):
        joined = pt2onnx.export(model, (x,), dynamic_shapes=shapes)
    assert not joined.report.dynamic_refinements
    assert any("residue class mod 2" in w for w in joined.report.warnings)
    for h in (17, 24, 511):
        assert joined.verify(torch.randn(*x.shape[:2], h, x.shape[3])).ok, h


@pytest.mark.skipif(_compat.TORCH_VERSION < (2, 13), reason="torch 2.13+")
def test_torch_2_13_and_later_export_with_default_options():
    assert _compat._EXPORT_OPTIONS == {}
    assert _compat.META_DEVICE_EXPORT


@pytest.mark.skipif(_compat.META_DEVICE_EXPORT, reason="torch 2.12 only")
def test_torch_2_12_refuses_meta_device_export_with_the_reason():
    import pt2onnx
    from pt2onnx.errors import CaptureError

    model = torch.nn.Linear(4, 2, device="meta")
    with pytest.raises(CaptureError, match="meta device needs torch 2.13 or later"):
        pt2onnx.export(model, (torch.randn(1, 4),))


def test_default_decompositions_is_a_mutable_table():
    table = _compat.default_decompositions()
    op = torch.ops.aten.gelu.default
    table.pop(op, None)
    assert op not in table
