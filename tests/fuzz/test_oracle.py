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


_CEIL_PRODUCT = '''
import torch

B = None
HALF = False


class Program(torch.nn.Module):
    NUDGE = False  # set only while the oracle computes eager's outputs (see the test)

    def forward(self, x, s):
        p = x * s
        if Program.NUDGE:
            p = torch.nextafter(p, torch.zeros_like(p))
        return torch.ceil(p) + x


def make_inputs(b=5):
    # x * s = -(1 - 2**-46) exactly: float64 keeps it (ceil 0), float32 rounds it to -1.0
    # (ceil -1). Both are IEEE products, so every CPU and runtime gives the same bits.
    return (torch.tensor([-(1 - 2**-23), -0.5, 0.25, 2.0]),
            torch.tensor([1 + 2**-23, 1.0, 1.0, 1.0]))


def dynamic_shapes():
    return None
'''


def _nudged_eager(monkeypatch: Any) -> None:
    """Eager's outputs as a kernel that is an ulp off would give them: the product one ulp
    toward zero, before the ceil (fuzz seed 2613, program 207, was torch's float32
    ``erf(-3.9239)`` on one CPU, and exactly -1.0 on another). The ulp is planted, so the
    test does not depend on this machine's kernels."""
    real = oracle._eager

    def nudged(module: torch.nn.Module, args: Any) -> Any:
        cls = type(module)
        cls.NUDGE = True  # type: ignore[attr-defined]
        try:
            return real(module, args)
        finally:
            cls.NUDGE = False  # type: ignore[attr-defined]

    monkeypatch.setattr(oracle, "_eager", nudged)


def test_an_ulp_of_eager_rounding_before_a_discontinuity_is_not_a_mismatch(
        monkeypatch: Any) -> None:
    # onnxruntime rounds the product to -1.0f (ceil -1); eager's planted ulp gives ceil 0.
    # The float64 opinion agrees with eager (it never rounds the product); the opinion that
    # rounds each op to float32 agrees with onnxruntime.
    _nudged_eager(monkeypatch)
    out = oracle.check_source(_CEIL_PRODUCT)
    assert out.cls == "ok", out.detail


def test_without_the_rounded_opinion_the_ulp_is_a_mismatch(monkeypatch: Any) -> None:
    # The same program with the per-op opinion switched off: the planted ulp is seen, so
    # the test above passes because of that opinion, not because nothing differed.
    _nudged_eager(monkeypatch)
    monkeypatch.setattr(oracle, "_rounded_each_op", lambda *a, **k: None)
    out = oracle.check_source(_CEIL_PRODUCT)
    assert out.cls == "mismatch", out


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


_DYNAMIC = '''
import torch

B = (5, 7)
HALF = False


class Program(torch.nn.Module):
    def forward(self, x):
        return x * 2


def make_inputs(b=5):
    return (torch.randn(b, 3),)


def dynamic_shapes():
    return ({0: torch.export.Dim("B", min=2, max=64)},)
'''


@pytest.mark.parametrize(("message", "typed"), [
    ("the dynamic shapes declare a dim that can only take one size in this model: after "
     "torch.export's own suggested fixes (...), the dims it captured exclude the example "
     "itself", True),  # capture._check_example_fits (fuzz seed 3702, program 819)
    ("the dynamic shapes declare a dim that can only take one size in this model:\n"
     "  - B is fixed to 5 by the model", True),
    ("dims declared independent are related in the model:\n  - The values of C and B "
     "must always be equal", True),  # capture._capture's kind (fuzz seed 7411, program 2559)
    ("something went wrong", False),
])
def test_which_capture_errors_are_typed_refusals(monkeypatch: Any, message: str,
                                                 typed: bool) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise pt2onnx.CaptureError(message)

    monkeypatch.setattr(oracle, "export", refuse)
    out = oracle.check_source(_DYNAMIC)
    assert out.cls == "export_error" and out.typed is typed, out


_TRUNC_PRODUCT = '''
import torch

B = None
HALF = False


class Program(torch.nn.Module):
    def forward(self, x, s):
        return (x * s).to(torch.int32), x * s


def make_inputs(b=5):
    # x * s = 1 - 2**-24 exactly (0 as int32); one ulp above it is 1.0 (1 as int32).
    return (torch.tensor([1 - 2**-24, -0.5, -1.0, 2.0]), torch.tensor([1.0, 1.0, 1.0, 1.0]))


def dynamic_shapes():
    return None
'''


class _UlpAbove(torch.nn.Module):
    """The file as a runtime whose multiply is an ulp above the correctly rounded product
    (onnxruntime's float32 Tanh of 8.748283 is 1.0 where the true value rounds to
    0.99999994: fuzz seed 3805, program 121). Planted, so the test does not depend on this
    machine's kernels: ``(1 - 2**-24) * (1 + 2**-23)`` rounds to 1.0 on every CPU."""

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> Any:
        p = x * torch.where(x > 0.9, s + 2**-23, s)
        return p.to(torch.int32), p


def _export_ulp_above(monkeypatch: Any) -> None:
    real = oracle.export
    monkeypatch.setattr(oracle, "export",
                        lambda exporter, module, args, spec: real(exporter, _UlpAbove(), args, spec))


def test_a_runtime_kernel_an_ulp_off_before_a_cast_is_not_a_mismatch(monkeypatch: Any) -> None:
    # Eager, float64 and the per-op float32 opinion all give 0; the file gives 1. Eager
    # with each op an ulp away from zero gives 1, as the runtime does.
    _export_ulp_above(monkeypatch)
    out = oracle.check_source(_TRUNC_PRODUCT)
    assert out.cls == "ok", out.detail


def test_without_the_ulp_opinion_it_is_a_mismatch(monkeypatch: Any) -> None:
    _export_ulp_above(monkeypatch)
    monkeypatch.setattr(oracle, "_ulp_each_op", lambda *a, **k: None)
    out = oracle.check_source(_TRUNC_PRODUCT)
    assert out.cls == "mismatch", out


_PLAIN = '''
import torch

B = None
HALF = False


class Program(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2


def make_inputs(b=5):
    return (torch.tensor([0.5, float("nan"), -1.0]),)


def dynamic_shapes():
    return None
'''


class _OffKernel:
    """onnxruntime with a kernel that departs from the ONNX spec: NaN comes out finite
    (its LSTM does so: fuzz seed 5227, program 2966). Planted, so the test does not
    depend on this onnxruntime release's kernels."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        import numpy as np

        return [np.nan_to_num(a, nan=0.76) for a in self._session.run(*args, **kwargs)]


def test_a_runtime_kernel_off_the_onnx_spec_is_a_runtime_failure(monkeypatch: Any) -> None:
    # The reference evaluator runs the same file and matches eager: the file is right.
    real = oracle._session
    monkeypatch.setattr(oracle, "_session", lambda proto: _OffKernel(real(proto)))
    out = oracle.check_source(_PLAIN)
    assert out.cls == "runtime" and "ONNX reference evaluator" in out.detail, out


def test_without_the_reference_opinion_it_is_a_mismatch(monkeypatch: Any) -> None:
    real = oracle._session
    monkeypatch.setattr(oracle, "_session", lambda proto: _OffKernel(real(proto)))
    monkeypatch.setattr(oracle, "_reference_agrees", lambda *a, **k: False)
    out = oracle.check_source(_PLAIN)
    assert out.cls == "mismatch", out


class _WrongAtTheMaximum(torch.nn.Module):
    """The file as an exporter would write it wrong at the declared maximum only."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(torch.tensor(x.shape[0] == 64), x * 3, x * 2)


def test_a_file_wrong_at_the_declared_maximum_is_a_mismatch(monkeypatch: Any) -> None:
    """The oracle runs every dynamic program at its example, its second size, 1 where
    declared, and the declared maximum (64): a file wrong only there is a mismatch."""
    real = oracle.export
    monkeypatch.setattr(oracle, "export", lambda exporter, module, args, spec: real(
        exporter, _WrongAtTheMaximum(), args, spec))
    out = oracle.check_source(_DYNAMIC)
    assert out.cls == "mismatch" and "B=64" in out.detail, out


_UNUSED_INPUT = '''
import torch

B = (5, 7)
HALF = False


class Program(torch.nn.Module):
    def forward(self, x, unused):
        return x[: int(x.shape[0] * 0.5)] * 2


def make_inputs(b=5):
    return (torch.randn(b, 3), torch.randn(2))


def dynamic_shapes():
    return ({0: torch.export.Dim("B", min=2, max=64)}, None)
'''


def test_torchscript_is_a_peer_the_oracle_runs() -> None:
    """The oracle runs torch.onnx's TorchScript exporter too (``dynamo=False``), feeding
    only the inputs its trace kept: a file that holds the example's ``int(B * 0.5)`` is a
    failure at the second size, not a pass (peers on pt2onnx's refusals, docs/dynamic.md)."""
    out = oracle.check_source(_DYNAMIC, "torchscript")
    assert out.cls == "ok", out
    out = oracle.check_source(_UNUSED_INPUT, "torchscript")
    assert out.cls in ("mismatch", "runtime"), out
    assert oracle.check_source(_UNUSED_INPUT, "pt2onnx").cls == "ok"
