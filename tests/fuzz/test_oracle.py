"""The oracle's second opinions (a wider dtype) accept eager's own rounding artifacts
and still catch a wrong model."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import pt2onnx
from pt2onnx.testing.fuzz import oracle

_SOURCE = '''
import torch
import torch.nn.functional as F

B = None
HALF = {half}


class Program(torch.nn.Module):
    def forward(self, x):
        return (torch.atan2(F.gelu(x), x), x.prod())


def make_inputs(b=5):
    return (torch.tensor([-9.0, -6.0, -3.0, 0.5, 2.0, 1e4, 1e4, 1e4, 0.0]).to({dtype}),)


def dynamic_shapes():
    return None
'''


@pytest.mark.parametrize("half", [False, True])
def test_eager_rounding_artifacts_are_not_mismatches(half: bool) -> None:
    # float32: gelu far left of 0 is +0.0 in torch, -0.0 in onnxruntime (true value
    # ~ -1e-19), and atan2 turns the sign into 2*pi. float16: the product overflows to
    # inf in eager's order before meeting the 0.
    dtype = "torch.float16" if half else "torch.float32"
    out = oracle.check_source(_SOURCE.format(half=half, dtype=dtype))
    assert out.cls == "ok", out.detail


_CEIL_ERF = '''
import torch

B = None
HALF = False


class Program(torch.nn.Module):
    def forward(self, x):
        return torch.ceil(torch.erf(x)) + x


def make_inputs(b=5):
    return (torch.tensor([-3.9239, -0.5, 0.25, 2.0]),)


def dynamic_shapes():
    return None
'''


def test_an_ulp_of_eager_rounding_before_a_discontinuity_is_not_a_mismatch() -> None:
    # Fuzz seed 2613, program 207: torch's float32 erf(-3.9239) is -0.99999994, one ulp
    # above the correctly rounded -1.0f that onnxruntime gives, so ceil differs by 1.
    # float64 agrees with torch (its erf is not rounded before the ceil); a program whose
    # every op is rounded to float32 agrees with onnxruntime.
    x = torch.tensor([-3.9239])
    assert torch.ceil(torch.erf(x)).item() == 0.0
    assert torch.ceil(torch.erf(x.double()).float()).item() == -1.0
    out = oracle.check_source(_CEIL_ERF)
    assert out.cls == "ok", out.detail


def test_a_wrong_model_is_still_a_mismatch(monkeypatch: Any) -> None:
    real = oracle.export

    class Wrong(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> Any:
            import torch.nn.functional as F
            return torch.atan2(F.gelu(x), x) * 1.01, x.prod()

    def wrong_export(exporter: str, module: torch.nn.Module, args: Any, spec: Any) -> Any:
        return real(exporter, Wrong(), args, spec)

    monkeypatch.setattr(oracle, "export", wrong_export)
    out = oracle.check_source(_SOURCE.format(half=False, dtype="torch.float32"))
    assert out.cls == "mismatch", out
    assert pt2onnx  # the exporter under test


def test_a_wrong_dtype_gets_no_second_opinion(monkeypatch: Any) -> None:
    # float16 eager, float32 exported: the float32 opinion would agree in value.
    real = oracle.export

    class Wider(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> Any:
            import torch.nn.functional as F
            return torch.atan2(F.gelu(x.float()), x.float()), x.float().prod()

    monkeypatch.setattr(oracle, "export",
                        lambda exporter, module, args, spec: real(exporter, Wider(), args, spec))
    out = oracle.check_source(_SOURCE.format(half=True, dtype="torch.float16"))
    assert out.cls == "mismatch" and "dtype" in out.detail, out
