"""Torch-version differences live in _compat.py only; deprecations warn first."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from pt2onnx._deprecation import deprecated, renamed_kwarg

SRC = Path(__file__).resolve().parents[1] / "src" / "pt2onnx"


def test_only_compat_reads_the_torch_version():
    pattern = re.compile(r"torch\.__version__|torch\.version\.|TorchVersion")
    offenders = [
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
        if p.name != "_compat.py" and pattern.search(p.read_text())
    ]
    assert offenders == [], f"move these torch-version checks into _compat.py: {offenders}"


def test_deprecated_function_warns_and_still_works():
    @deprecated(since="0.1", removed_in="0.3", instead="new_fn")
    def old_fn(x):
        return x + 1

    with pytest.warns(DeprecationWarning, match="use new_fn instead"):
        assert old_fn(1) == 2


def test_renamed_keyword_argument():
    @renamed_kwarg("opset_version", "opset", since="0.1", removed_in="0.3")
    def fn(*, opset=None):
        return opset

    with pytest.warns(DeprecationWarning, match="use opset="):
        assert fn(opset_version=18) == 18
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fn(opset=19) == 19
    with pytest.raises(TypeError, match="both"):
        fn(opset_version=18, opset=19)
