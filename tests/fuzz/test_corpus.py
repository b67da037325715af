"""Every reproduction the fuzzer saved under tests/fuzz/corpus/ is a regression test:
its program must now export, pass onnx's full check and match eager PyTorch. A file
whose ``XFAIL`` names a reason is a strict xfail (listed in docs/testing.md)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from pt2onnx.testing.fuzz.oracle import check_namespace
from pt2onnx.testing.fuzz.program import load

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.py"))


def _case(path: Path) -> object:
    ns = load(path.read_text())
    marks = [pytest.mark.xfail(reason=ns["XFAIL"], strict=True)] if ns.get("XFAIL") else []
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", [_case(p) for p in CORPUS])
def test_corpus(path: Path) -> None:
    warnings.filterwarnings("ignore")
    ns = load(path.read_text())
    outcome = check_namespace(ns, ns.get("EXPORTER", "pt2onnx"))
    assert outcome.cls == "ok", f"{path.name}: {outcome.cls}: {outcome.detail}"
