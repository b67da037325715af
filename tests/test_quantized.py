"""Quantized models: PT2E's quantize/dequantize ops, fake quantization (QAT) and
eager-mode quantized modules, exported as QuantizeLinear/DequantizeLinear (QDQ).

The check, per the issue: onnxruntime matches eager within one quantization step. An
integer output may differ by at most 1 (torch rounds ``x * (1 / scale)``,
QuantizeLinear ``x / scale``: a tie can round the other way), a fake-quantized float
output by at most one ``scale``; and such differences must be rare (under 1% of the
elements), so a systematic off-by-one fails.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch

import pt2onnx
from pt2onnx import _compat

qd = _compat.quantized_decomposed_ops()
needs_qd = pytest.mark.skipif(qd is None, reason="this torch has no quantized_decomposed ops")


class _Fn(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> Any:
        return self.fn(*args)


def _export(model: torch.nn.Module, args: tuple[Any, ...], **kw: Any) -> pt2onnx.OnnxProgram:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pt2onnx.export(model, args, **kw)


def _run(prog: pt2onnx.OnnxProgram, *args: torch.Tensor, fuse: bool = True) -> list[np.ndarray]:
    """onnxruntime's outputs; ``fuse=False`` turns off its QDQ fusion into integer kernels."""
    options = ort.SessionOptions()
    if not fuse:
        options.add_session_config_entry("session.disable_quant_qdq", "1")
    session = ort.InferenceSession(prog.model_proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args, strict=True)}
    return list(session.run(None, feeds))


def _within_one_step(actual: np.ndarray, expected: torch.Tensor, step: Any = 1) -> float:
    """Asserts |actual - expected| <= one step everywhere and rarely nonzero; returns the
    largest difference in steps."""
    e = expected.detach().numpy()
    assert actual.shape == e.shape and actual.dtype == e.dtype, (actual.dtype, e.dtype)
    step = np.asarray(step, dtype=np.float64)
    diff = np.abs(actual.astype(np.float64) - e.astype(np.float64)) / step
    assert diff.max(initial=0) <= 1 + 1e-3, f"off by {diff.max()} steps"
    flips = (diff > 0.5).mean()  # a rounding that went the other way (not float noise)
    assert flips < 0.01, f"{flips:.2%} of the elements are a step off"
    return float(diff.max(initial=0))


def _ops(prog: pt2onnx.OnnxProgram) -> list[str]:
    return [n.op_type for n in prog.model.graph]


# -- PT2E's quantized_decomposed ops ----------------------------------------------------
@needs_qd
@pytest.mark.parametrize("opset", [17, 21])
def test_per_tensor_ops(opset):
    def fn(x, scale, zp):
        u8 = qd.quantize_per_tensor(x, 0.05, 3, 0, 255, torch.uint8)
        i8 = qd.quantize_per_tensor(x, 0.02, 0, -127, 127, torch.int8)  # narrow range
        u7 = qd.quantize_per_tensor(x, 0.03, 64, 0, 127, torch.uint8)  # reduce_range
        t8 = qd.quantize_per_tensor.tensor(x, scale, zp, -128, 127, torch.int8)
        return (u8, i8, u7, t8,
                qd.dequantize_per_tensor(u8, 0.05, 3, 0, 255, torch.uint8),
                qd.dequantize_per_tensor.tensor(t8, scale, zp, -128, 127, torch.int8),
                qd.dequantize_per_tensor(i8, 0.02, 0, -127, 127, torch.int8,
                                         out_dtype=torch.float16))

    torch.manual_seed(0)
    args = (torch.randn(4, 64) * 3, torch.tensor([0.04], dtype=torch.float64),
            torch.tensor([-5]))
    prog = _export(_Fn(fn), args, opset=opset)
    assert _ops(prog).count("QuantizeLinear") == 4 and "DequantizeLinear" in _ops(prog)
    expected = fn(*args)
    for actual, e, step in zip(prog.run(*args), expected, [1, 1, 1, 1, 0.05, 0.04, 0.02],
                               strict=True):
        _within_one_step(actual, e, step)
    # the narrow ranges hold: -128 and 128..255 never appear
    out = prog.run(*args)
    assert out[1].min() == -127 and out[2].max() == 127


@needs_qd
@pytest.mark.parametrize("axis", [0, -1])
def test_per_channel_ops(axis):
    def fn(w, scales, zps):
        q = qd.quantize_per_channel(w, scales, zps, axis, -128, 127, torch.int8)
        narrow = qd.quantize_per_channel(w, scales, zps, axis, -127, 127, torch.int8)
        return (q, narrow, qd.dequantize_per_channel(q, scales, zps, axis, -128, 127, torch.int8),
                qd.dequantize_per_channel(q, scales, None, axis, -128, 127, torch.int8))

    torch.manual_seed(0)
    w = torch.randn(6, 5, 6) * 4
    scales, zps = torch.rand(6) * 0.05 + 0.01, torch.randint(-10, 10, (6,))
    prog = _export(_Fn(fn), (w, scales, zps))
    assert _ops(prog).count("QuantizeLinear") == 2
    shape = [1, 1, 1]
    shape[axis] = 6
    step = scales.view(shape).numpy()
    for actual, e, s in zip(prog.run(w, scales, zps), fn(w, scales, zps), [1, 1, step, step],
                            strict=True):
        _within_one_step(actual, e, s)


@needs_qd
@pytest.mark.parametrize("opset", [17, 21])
def test_wide_dtypes(opset):
    """int16 QuantizeLinear exists from opset 21 (arithmetic before); int32 is dequantized
    (a bias); both match."""
    def fn(x, b):
        q16 = qd.quantize_per_tensor(x, 0.001, 7, -32768, 32767, torch.int16)
        return (q16, qd.dequantize_per_tensor(q16, 0.001, 7, -32768, 32767, torch.int16),
                qd.dequantize_per_tensor(b, 0.0002, 0, -(2**31), 2**31 - 1, torch.int32))

    torch.manual_seed(0)
    args = (torch.randn(3, 50) * 10, torch.randint(-100000, 100000, (20,), dtype=torch.int32))
    prog = _export(_Fn(fn), args, opset=opset)
    assert ("QuantizeLinear" in _ops(prog)) == (opset >= 21)
    for actual, e, s in zip(prog.run(*args), fn(*args), [1, 0.001, 0.0002], strict=True):
        _within_one_step(actual, e, s)


@needs_qd
def test_dynamic_quantization_choose_qparams():
    def fn(x):
        scale, zp = qd.choose_qparams.tensor(x, 0, 255, torch.finfo(torch.float32).eps,
                                             torch.uint8)
        q = qd.quantize_per_tensor.tensor(x, scale, zp, 0, 255, torch.uint8)
        return scale, zp, q, qd.dequantize_per_tensor.tensor(q, scale, zp, 0, 255, torch.uint8)

    torch.manual_seed(0)
    x = torch.randn(8, 32) * 2 + 0.5
    prog = _export(_Fn(fn), (x,))
    x2 = torch.rand(8, 32) * 7 + 1  # all positive: the range is widened to include 0
    for inp in (x, x2):
        scale, zp, q, dq = prog.run(inp)
        e_scale, e_zp, e_q, e_dq = fn(inp)
        np.testing.assert_allclose(scale, e_scale.numpy(), rtol=1e-6)
        np.testing.assert_array_equal(zp, e_zp.numpy())
        _within_one_step(q, e_q)
        _within_one_step(dq, e_dq, float(e_scale))


@needs_qd
def test_int8_weights_stay_int8():
    """A dequantized constant weight is not folded to float: the int8 tensor is stored and a
    DequantizeLinear feeds the Conv, which onnxruntime fuses into an integer kernel."""
    class QConv(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            w = torch.randn(8, 3, 3, 3)
            self.register_buffer("scales", w.abs().amax((1, 2, 3)) / 127)
            self.register_buffer("zps", torch.zeros(8, dtype=torch.int64))
            self.register_buffer("w_int8", qd.quantize_per_channel(
                w, self.scales, self.zps, 0, -127, 127, torch.int8))

        def forward(self, x):
            x = qd.quantize_per_tensor(x, 0.05, 64, 0, 127, torch.uint8)
            x = qd.dequantize_per_tensor(x, 0.05, 64, 0, 127, torch.uint8)
            w = qd.dequantize_per_channel(self.w_int8, self.scales, self.zps, 0, -127, 127,
                                          torch.int8)
            return torch.nn.functional.conv2d(x, w, padding=1)

    model = QConv()
    x = torch.randn(2, 3, 10, 10)
    prog = _export(model, (x,))
    dtypes = {v.name: v.dtype for v in prog.model.graph.initializers.values()}
    assert pt2onnx._builder.ir.DataType.INT8 in dtypes.values(), dtypes
    assert all(tuple(v.shape) != (8, 3, 3, 3) or v.dtype.name == "INT8"
               for v in prog.model.graph.initializers.values())
    np.testing.assert_allclose(prog.run(x)[0], model(x).numpy(), rtol=1e-5, atol=1e-5)


# -- fake quantization -------------------------------------------------------------------
_RANGES = [((0, 255), 21), ((-128, 127), 21), ((0, 15), 21), ((-127, 127), 21),
           ((0, 65535), 21), ((0, 255), 17), ((0, 65535), 17)]


@pytest.mark.parametrize(("qrange", "opset"), _RANGES,
                         ids=[f"{r[0]}..{r[1]}-opset{o}" for r, o in _RANGES])
def test_fake_quantize(qrange, opset):
    qmin, qmax = qrange
    zp = (qmin + qmax) // 2 + 1

    def fn(x, scale, zps, fzps):
        return (torch.fake_quantize_per_tensor_affine(x, 0.07, zp, qmin, qmax),
                torch.fake_quantize_per_tensor_affine(x, scale[:1].clone(),
                                                      zps[:1].clone(), qmin, qmax),
                torch.fake_quantize_per_channel_affine(x, scale, zps, 1, qmin, qmax),
                torch.fake_quantize_per_channel_affine(x, scale, fzps, 1, qmin, qmax),
                torch._fake_quantize_learnable_per_tensor_affine(x, scale[:1], fzps[:1],
                                                                 qmin, qmax),
                torch._fake_quantize_learnable_per_channel_affine(x, scale, fzps, 1,
                                                                  qmin, qmax))

    torch.manual_seed(0)
    x = torch.randn(4, 3, 40) * (qmax - qmin) * 0.04
    scale = torch.tensor([0.07, 0.05, 0.11])
    zps = torch.tensor([zp, qmin + 1, qmax - 2], dtype=torch.int32)
    fzps = zps.float() + torch.tensor([0.0, 0.3, -0.6])
    args = (x, scale, zps, fzps)
    prog = _export(_Fn(fn), args, opset=opset)
    per_channel = scale.view(1, 3, 1).numpy()
    steps = [0.07, 0.07, per_channel, per_channel, 0.07, per_channel]
    for actual, e, s in zip(prog.run(*args), fn(*args), steps, strict=True):
        _within_one_step(actual, e, s)
    qdq = qmax <= 255 or opset >= 21
    assert ("QuantizeLinear" in _ops(prog)) == qdq


def test_qat_model_fake_quantizes_with_stored_qparams():
    """A QAT-prepared model (FusedMovingAvgObsFakeQuantize) with its observers off."""
    import torch.ao.quantization as tq

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.relu = torch.nn.ReLU()
            self.fc = torch.nn.Linear(8 * 6 * 6, 5)

        def forward(self, x):
            x = self.relu(self.conv(self.quant(x)))
            return self.dequant(self.fc(x.flatten(1)))

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = Net().train()
        model.qconfig = tq.get_default_qat_qconfig("x86")
        tq.fuse_modules_qat(model, [["conv", "relu"]], inplace=True)
        model = tq.prepare_qat(model)
        for _ in range(3):
            model(torch.randn(4, 3, 6, 6))
        model.eval()
    x = torch.randn(2, 3, 6, 6)
    model.apply(tq.enable_observer)
    with pytest.raises(pt2onnx.ExportError, match="disable_observer"):
        _export(model, (x,))
    model.apply(tq.disable_observer)
    prog = _export(model, (x,))
    assert _ops(prog).count("QuantizeLinear") == 5
    scale = float(model.fc.activation_post_process.scale)
    _within_one_step(_run(prog, x, fuse=False)[0], model(x), scale)
