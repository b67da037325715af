"""Bad input ends in a typed error that names the cause, and leaves no file behind."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import torch
from torch import nn

import pt2onnx


@torch.library.custom_op("pt2onnx_test::mystery", mutates_args=())
def mystery(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@mystery.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("pt2onnx_test::enigma", mutates_args=())
def enigma(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@enigma.register_fake
def _(x):
    return torch.empty_like(x)


class Inner(nn.Module):
    def forward(self, x):
        return mystery(x) + 1  # the line the error must point at


class UsesUnknownOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return enigma(self.inner(x))


def _listing(tmp_path):
    return sorted(os.listdir(tmp_path))


def test_unsupported_ops_are_listed_together_with_source_and_module(tmp_path):
    out = tmp_path / "model.onnx"
    with pytest.raises(pt2onnx.UnsupportedOperatorError) as info:
        pt2onnx.export(UsesUnknownOps(), (torch.randn(2, 3),), out)
    message = str(info.value)
    assert "pt2onnx_test::mystery" in message
    assert "pt2onnx_test::enigma" in message
    assert "return mystery(x) + 1  # the line the error must point at" in message
    assert "test_errors.py" in message
    assert "module 'inner'" in message
    assert "@pt2onnx.translation" in message
    assert {m.op for m in info.value.missing} == {"pt2onnx_test::mystery.default",
                                                   "pt2onnx_test::enigma.default"}
    assert _listing(tmp_path) == []


def test_args_must_be_a_tuple():
    with pytest.raises(pt2onnx.InvalidInputError, match=r"args=\(x,\)"):
        pt2onnx.export(nn.ReLU(), torch.randn(2))


@pytest.mark.parametrize("opset", [16, 27, "18"])
def test_opset_out_of_range(opset, tmp_path):
    with pytest.raises(pt2onnx.OpsetError, match="17"):
        pt2onnx.export(nn.ReLU(), (torch.randn(2),), tmp_path / "m.onnx", opset=opset)
    assert _listing(tmp_path) == []


def test_path_is_a_directory(tmp_path):
    with pytest.raises(pt2onnx.SaveError, match="existing directory"):
        pt2onnx.export(nn.ReLU(), (torch.randn(2),), tmp_path)


def test_parent_directory_missing(tmp_path):
    with pytest.raises(pt2onnx.SaveError, match="does not exist"):
        pt2onnx.export(nn.ReLU(), (torch.randn(2),), tmp_path / "nope" / "m.onnx")


class _DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x + 1
        return x - 1


def test_data_dependent_branch_is_traced_with_a_warning(tmp_path):
    x = torch.ones(3)
    with pytest.warns(UserWarning, match="traced with make_fx"):
        prog = pt2onnx.export(_DataDependent(), (x,), tmp_path / "m.onnx")
    assert prog.report.capture_strategy == "trace (make_fx)"
    # Why the static recording was not used, then both torch.export attempts, with
    # their errors, are kept in the report.
    recording, *exports = prog.report.fallbacks
    assert recording.startswith("static recording not used: aten")
    assert "depends on the inputs" in recording
    assert [f.split("(")[1][:12] for f in exports] == ["strict=False", "strict=True)"]
    assert any("traced with make_fx" in w for w in prog.report.warnings)
    assert prog.verify(x).ok
    # The branch taken for the example input is baked in: the trace is not general.
    np.testing.assert_allclose(prog.run(-x)[0], (-x + 1).numpy())


def test_capture_failure_reports_every_attempt(tmp_path, monkeypatch):
    def no_trace(*args, **kwargs):
        raise RuntimeError("trace refused")

    monkeypatch.setattr(pt2onnx.capture._capture, "trace", no_trace)
    with pytest.raises(pt2onnx.CaptureError) as info:
        pt2onnx.export(_DataDependent(), (torch.randn(3),), tmp_path / "m.onnx")
    message = str(info.value)
    assert "strict=False" in message and "strict=True" in message
    assert "trace refused" in message and "Next step" in message
    assert _listing(tmp_path) == []


def test_dynamic_axes_names_must_match_input_names(tmp_path):
    with pytest.raises(pt2onnx.InvalidInputError, match="input_names"):
        pt2onnx.export(nn.ReLU(), (torch.randn(2, 3),), tmp_path / "m.onnx",
                       input_names=["x"], dynamic_axes={"y": {0: "batch"}})
    assert _listing(tmp_path) == []


def test_failing_rule_names_rule_node_and_source(tmp_path):
    def broken(g, x):
        raise RuntimeError("deliberately broken")

    with pytest.raises(pt2onnx.TranslationError) as info:
        pt2onnx.export(nn.ReLU(), (torch.randn(2),), tmp_path / "m.onnx",
                       custom_translations={torch.ops.aten.relu.default: broken})
    message = str(info.value)
    assert "aten::relu.default" in message and "deliberately broken" in message
    assert _listing(tmp_path) == []


def test_model_of_wrong_type():
    with pytest.raises(pt2onnx.InvalidInputError, match="nn.Module"):
        pt2onnx.export(42, (torch.randn(2),))


def test_all_errors_are_export_errors():
    for cls in (pt2onnx.InvalidInputError, pt2onnx.CaptureError, pt2onnx.OpsetError,
                pt2onnx.SaveError, pt2onnx.TranslationError, pt2onnx.UnsupportedOperatorError):
        assert issubclass(cls, pt2onnx.ExportError)


class _ExpandFromOne(torch.nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return x.expand(3, -1, 4)


def test_failed_capture_attempts_do_not_log_torch_tracebacks(caplog):  # type: ignore[no-untyped-def]
    """pt2onnx tries several captures before it refuses; torch's ERROR logs of each failed
    one ("Error while creating guard" with a traceback, "always_classified is
    unsupported") stay off stderr, and the typed refusal says why."""
    with caplog.at_level(logging.ERROR):
        with pytest.raises(pt2onnx.CaptureError, match="fixed to 1"):
            pt2onnx.export(_ExpandFromOne(), (torch.randn(1, 1, 4),),
                           dynamic_shapes={"x": {0: torch.export.Dim("a")}})
    torch_errors = [r for r in caplog.records if r.name.startswith("torch")]
    assert not torch_errors, [r.getMessage()[:200] for r in torch_errors]
