"""Torch-version differences live in _compat.py only, and the tested set is stated once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pt2onnx import _compat

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
    assert _compat.TORCH_VERSION >= (2, 13)
    major, minor = _compat.TORCH_VERSION
    assert _compat.TORCH_VERSION_STRING.startswith(f"{major}.{minor}.")


@pytest.mark.parametrize(
    ("name", "version", "expected"),
    [
        ("torch", "2.13.0+cpu", True),
        ("torch", "2.14.1+cu130", True),
        ("torch", "2.14.0", False),
        ("onnx-ir", "1.1.3", True),
        ("onnx-ir", "1.10.0", False),
        ("onnxruntime", "1.31.1", True),
        ("pt2onnx", "0.1.0", None),
    ],
)
def test_is_tested_matches_whole_version_components(name, version, expected):
    assert _compat.is_tested(name, version) is expected


def test_running_torch_is_a_tested_one():
    assert _compat.is_tested("torch", _compat.TORCH_VERSION_STRING), (
        f"torch {_compat.TORCH_VERSION_STRING} is not in _compat.TESTED; add it there, to the "
        "CI matrix (.ci/run, Makefile) and to docs/compatibility.md"
    )


def test_docs_state_the_tested_set():
    docs = (ROOT / "docs" / "compatibility.md").read_text()
    for name, versions in _compat.TESTED.items():
        row = next((line for line in docs.splitlines() if line.startswith(f"| {name} |")), "")
        assert row, f"docs/compatibility.md has no '| {name} |' row in its tested table"
        for version in versions:
            assert version in row, f"docs/compatibility.md does not list {name} {version}"


def test_ci_runs_every_tested_torch():
    makefile = (ROOT / "Makefile").read_text()
    constraints = {p.name: p.read_text() for p in ROOT.glob("constraints*.txt")}
    for version in _compat.TESTED["torch"]:
        assert any(f"torch=={version}" in text for text in constraints.values()), version
    assert "test-2.14:" in makefile
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test\n" in ci and "make test-2.14" in ci
