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

# torch 2.13 deprecates eager-mode quantization (the very models these tests export).
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*quantized tensor creation functions.*:UserWarning",
    "ignore:torch.ao.quantization is deprecated:DeprecationWarning")

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


def _within_one_step(actual: np.ndarray, expected: torch.Tensor, step: Any = 1,
                     rare: float = 0.01) -> float:
    """Asserts |actual - expected| <= one step everywhere and a step off in under ``rare``
    of the elements; returns the largest difference in steps."""
    e = expected.detach().numpy()
    assert actual.shape == e.shape and actual.dtype == e.dtype, (actual.dtype, e.dtype)
    step = np.asarray(step, dtype=np.float64)
    diff = np.abs(actual.astype(np.float64) - e.astype(np.float64)) / step
    assert diff.max(initial=0) <= 1 + 1e-3, f"off by {diff.max()} steps"
    flips = (diff > 0.5).mean()  # a rounding that went the other way (not float noise)
    assert flips < rare, f"{flips:.2%} of the elements are a step off"
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
def test_per_token_and_per_group_ops():
    """torchao's 8-bit dynamic activation / 4-bit weight pattern: per-token activations,
    per-group weights (torch's own implementations traced as decompositions), and
    symmetric qparams."""
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.register_buffer("w", torch.randint(-8, 8, (8, 32), dtype=torch.int8))
            self.register_buffer("w_scales", torch.rand(8, 4) * 0.1 + 0.01)
            self.register_buffer("w_zps", torch.zeros(8, 4, dtype=torch.int64))

        def forward(self, x: torch.Tensor) -> Any:
            scales, zps = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
            q = qd.quantize_per_token(x, scales, zps, -128, 127, torch.int8)
            xq = qd.dequantize_per_token(q, scales, zps, -128, 127, torch.int8, torch.float32)
            w = qd.dequantize_per_channel_group(self.w, self.w_scales, self.w_zps, -8, 7,
                                                torch.int8, 8, torch.float32)
            sym_scale, sym_zp = qd.choose_qparams_symmetric.tensor(x, -128, 127, 1e-7,
                                                                   torch.int8)
            return q, torch.nn.functional.linear(xq, w), sym_scale, sym_zp

    model, x = Net(), torch.randn(2, 5, 32)
    prog = _export(model, (x,))
    q, y, sym_scale, sym_zp = prog.run(x)
    e_q, e_y, e_scale, e_zp = model(x)
    _within_one_step(q, e_q)
    np.testing.assert_allclose(y, e_y.numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(sym_scale, e_scale.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(sym_zp, e_zp.numpy())


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
    assert pt2onnx.translate._builder.ir.DataType.INT8 in dtypes.values(), dtypes
    assert all(tuple(v.shape) != (8, 3, 3, 3) or v.dtype.name == "INT8"
               for v in prog.model.graph.initializers.values())
    np.testing.assert_allclose(prog.run(x)[0], model(x).numpy(), rtol=1e-5, atol=1e-5)


# -- fake quantization -------------------------------------------------------------------
_RANGES = [((0, 255), 21), ((-128, 127), 21), ((-127, 127), 21), ((0, 65535), 21),
           ((0, 15), 17), ((0, 65535), 17)]


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

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = torch.nn.Sequential(tq.QuantStub(), torch.nn.Linear(6, 5), tq.DeQuantStub())
        model.train().qconfig = tq.get_default_qat_qconfig("x86")
        model = tq.prepare_qat(model)
        for _ in range(3):
            model(torch.randn(4, 6))
        model.eval()
    x = torch.randn(3, 6)
    model.apply(tq.enable_observer)
    with pytest.raises(pt2onnx.ExportError, match="disable_observer"):
        _export(model, (x,))
    model.apply(tq.disable_observer)
    prog = _export(model, (x,))
    assert _ops(prog).count("QuantizeLinear") == 3  # input, weight, output
    scale = float(model[1].activation_post_process.scale)
    _within_one_step(_run(prog, x, fuse=False)[0], model(x), scale)


# -- eager-mode quantized models ---------------------------------------------------------
def _quantize_eager(model: torch.nn.Module, fuse: list[list[str]], *shape: int
                    ) -> torch.nn.Module:
    import torch.ao.quantization as tq

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.eval()
        # MinMax observers calibrate fast; reduce_range as the x86 backend's own qconfig
        model.qconfig = tq.QConfig(
            activation=tq.MinMaxObserver.with_args(reduce_range=True),
            weight=tq.default_per_channel_weight_observer)
        if fuse:
            tq.fuse_modules(model, fuse, inplace=True)
        prepared = tq.prepare(model)
        for _ in range(4):
            prepared(torch.randn(*shape))
        return tq.convert(prepared)


class _CNN(torch.nn.Module):
    """QuantStub, Conv+ReLU, Conv+BN, a FloatFunctional add, Hardswish, a requantizing
    pool, flatten, Linear, DeQuantStub."""

    def __init__(self) -> None:
        import torch.ao.quantization as tq

        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv, self.relu = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.bn = torch.nn.BatchNorm2d(8)
        self.skip = torch.nn.quantized.FloatFunctional()
        self.act, self.pool = torch.nn.Hardswish(), torch.nn.AdaptiveAvgPool2d(2)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.conv(self.quant(x)))
        x = self.act(self.skip.add(x, self.bn(self.conv2(x))))
        return self.dequant(self.fc(self.pool(x).flatten(1)))


def test_eager_quantized_cnn():
    model = _quantize_eager(_CNN(), [["conv", "relu"], ["conv2", "bn"]], 4, 3, 8, 8)
    x = torch.randn(4, 3, 8, 8)
    prog = _export(model, (x,))
    assert "quantize/dequantize form" in prog.report.capture_strategy
    ops = _ops(prog)
    assert ops.count("QuantizeLinear") == 7 and "AveragePool" in ops
    # the pool rounds onto its input's grid, as torch's quantized pool does
    assert ops[ops.index("AveragePool") + 1] == "QuantizeLinear"
    expected = model(x)
    for fuse in (True, False):  # onnxruntime's integer kernels, then the graph as written
        steps = np.abs(_run(prog, x, fuse=fuse)[0] - expected.numpy()) / model.fc.scale
        assert steps.max() <= 1 + 1e-3, (fuse, steps.max())
    # the export left the model as it was
    assert type(model.conv).__module__.startswith("torch.ao.nn.intrinsic.quantized")
    torch.testing.assert_close(model(x), expected)


@pytest.mark.parametrize("reference", [False, True], ids=["convert_fx", "reference"])
def test_fx_graph_mode_quantized(reference):
    """FX graph mode: a GraphModule with quantized modules and torch.quantize_per_tensor
    calls whose qparams are buffers (convert_fx), or reference modules that quantize
    their weights in forward (convert_to_reference_fx)."""
    import torch.ao.quantization as tq
    from torch.ao.quantization import quantize_fx

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.fc = torch.nn.Conv2d(3, 8, 3), torch.nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1)
            return self.fc(x.flatten(1))

    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = quantize_fx.prepare_fx(Net().eval(), tq.get_default_qconfig_mapping("x86"),
                                          (x,))
        for _ in range(3):
            prepared(torch.randn(2, 3, 8, 8))
        convert = quantize_fx.convert_to_reference_fx if reference else quantize_fx.convert_fx
        model = convert(prepared)
    prog = _export(model, (x,))
    assert "QuantizeLinear" in _ops(prog)
    step = float(model.fc_scale_0 if reference else model.fc.scale)  # the output's qparams
    _within_one_step(prog.run(x)[0], model(x), step, rare=0.05)


def test_quantized_inputs_outputs_and_functional_ops():
    """torch.onnx's quantized tests' style: quantized tensors in and out (they travel as
    their dequantized float values), and quantized ops called in forward."""
    import torch.ao.nn.quantized as nnq

    linear = nnq.Linear(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = torch.quantize_per_tensor(torch.arange(32.0).view(8, 4), 0.5, 0, torch.qint8)
        linear.set_weight_bias(w, torch.arange(8.0))
        qx = torch.quantize_per_tensor(torch.arange(16.0).view(4, 4) - 8, 0.5, 128,
                                       torch.quint8)
    prog = _export(linear, (qx,))
    assert prog.model.graph.inputs[0].dtype.name == "FLOAT"
    expected = linear(qx)
    _within_one_step(prog.run(qx)[0], expected.dequantize(), expected.q_scale())

    class Functional(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
            qx = torch.quantize_per_tensor(x, 0.02, 10, torch.quint8)
            qy = torch.quantize_per_tensor(y, 0.02, 10, torch.quint8)
            z = torch.ops.quantized.add(qx, qy, 0.03, 12)
            z = torch.nn.functional.avg_pool2d(z, 2)
            # fixed qparams (1/256, 0), then requantized on the input's grid
            s = torch.nn.functional.hardtanh(torch.sigmoid(qx), 0.1, 0.7)
            return z.dequantize(), torch.ops.quantized.cat([qx, qy], 1, 0.05, 20), s

    torch.manual_seed(0)
    args = (torch.rand(1, 2, 6, 6), torch.rand(1, 2, 6, 6))
    prog = _export(Functional(), args)
    # plain float inputs: torch.export fails on torch.quantize_per_tensor, then the rewrite runs
    assert "quantize/dequantize form" in prog.report.capture_strategy
    out, cat, sig = prog.run(*args)
    e_out, e_cat, e_sig = Functional()(*args)
    _within_one_step(out, e_out, 0.03)
    _within_one_step(cat, e_cat.dequantize(), 0.05)
    assert e_sig.q_scale() == 1 / 256
    _within_one_step(sig, e_sig.dequantize(), 1 / 256)


@pytest.mark.parametrize("qdtype", [torch.quint8, torch.qint8])
def test_quantized_io_triple_is_the_torchscript_exporters_boundary(tmp_path, qdtype):
    """quantized_io='triple': a quantized input is fed as (int_repr, scale, zero point) and a
    quantized output comes back as (its integer values, its scale, its zero point), as
    torch.onnx's TorchScript exporter wrote them; float inputs and outputs stay as they
    are; the file is checked, run by onnxruntime on a triple of other values, and
    verify() compares dequantized values."""
    import onnx

    zp = 128 if qdtype == torch.quint8 else 0

    class Model(torch.nn.Module):
        def forward(self, qx: torch.Tensor, bias: torch.Tensor) -> Any:
            y = torch.relu(qx.dequantize() * 2 - 0.1) + bias[:, None]
            q = torch.quantize_per_tensor(y, 0.2, zp, qdtype)
            return q, q.dequantize().sum(-1) + bias

    def quantized(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        return torch.quantize_per_tensor(torch.randn(3, 4), 0.1, zp, qdtype)

    model, qx, bias = Model(), quantized(0), torch.randn(3)
    path = tmp_path / "q.onnx"
    prog = _export(model, (qx, bias), f=path, quantized_io="triple", verify=True)
    onnx.checker.check_model(str(path), full_check=True)
    names = [(v.name, v.dtype.name) for v in prog.model.graph.inputs]
    int_type = "UINT8" if qdtype == torch.quint8 else "INT8"
    # The scale is a double, as the TorchScript exporter wrote it (issue 37: its own
    # tests feed q_scale() as float64, which a float32 input refused).
    assert names == [("qx", int_type), ("qx_scale", "DOUBLE"), ("qx_zero_point", "INT64"),
                     ("bias", "FLOAT")]
    assert [v.dtype.name for v in prog.model.graph.outputs] == [int_type, "DOUBLE", "INT64",
                                                                "FLOAT"]
    other = quantized(1)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ints, scale, zero, total = session.run(None, {
        "qx": other.int_repr().numpy(), "qx_scale": np.array(other.q_scale(), np.float64),
        "qx_zero_point": np.array(other.q_zero_point(), np.int64), "bias": bias.numpy()})
    expected, expected_total = model(other, bias)
    assert (float(scale), int(zero)) == (expected.q_scale(), expected.q_zero_point())
    assert np.abs(ints.astype(int) - expected.int_repr().numpy().astype(int)).max() <= 1
    np.testing.assert_allclose(total, expected_total.numpy(), atol=8 * 0.2)
    assert prog.verify(other, bias, atol=0.2).ok  # dequantized, within one output step
    assert len(prog.run(other, bias)) == 4


def test_quantized_io_is_checked():
    with pytest.raises(pt2onnx.InvalidInputError, match="quantized_io='tuple'"):
        pt2onnx.export(torch.nn.ReLU(), (torch.randn(2),), quantized_io="tuple")
    with pytest.warns(UserWarning, match="changes nothing"):
        pt2onnx.export(torch.nn.ReLU(), (torch.randn(2),), quantized_io="triple")


def _q(shape: tuple[int, ...], dtype: torch.dtype = torch.quint8) -> torch.Tensor:
    torch.manual_seed(0)
    zp = 0 if dtype == torch.qint8 else 120
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(torch.randn(*shape), 0.05, zp, dtype)


def _modules() -> list[tuple[str, Callable[[], torch.nn.Module], tuple[int, ...]]]:
    import torch.ao.nn.intrinsic.quantized as nniq
    import torch.ao.nn.quantized as nnq

    p = torch.nn.Parameter
    return [
        ("Conv1d", lambda: nnq.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
        ("Conv2d-reflect", lambda: nnq.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
         (1, 3, 5, 5)),
        ("ConvTranspose2d", lambda: nnq.ConvTranspose2d(3, 4, 3, stride=2), (1, 3, 5, 5)),
        ("ConvReLU2d", lambda: nniq.ConvReLU2d(3, 4, 3), (1, 3, 5, 5)),
        ("LinearReLU", lambda: nniq.LinearReLU(6, 5), (3, 6)),
        ("BatchNorm2d", lambda: nnq.BatchNorm2d(3), (2, 3, 4, 4)),
        ("LayerNorm", lambda: nnq.LayerNorm((6,), p(torch.rand(6)), p(torch.rand(6)), 0.05, 100),
         (3, 6)),
        ("GroupNorm", lambda: nnq.GroupNorm(2, 4, p(torch.rand(4)), p(torch.rand(4)), 0.05, 100),
         (2, 4, 3, 3)),
        ("Hardswish", lambda: nnq.Hardswish(0.05, 30), (3, 6)),
        ("Sigmoid", lambda: nnq.Sigmoid(1 / 256, 0), (3, 6)),
        ("LeakyReLU", lambda: nnq.LeakyReLU(0.05, 60, 0.1), (3, 6)),
        ("ELU", lambda: nnq.ELU(0.05, 60, 0.5), (3, 6)),
        ("Softmax", lambda: nnq.Softmax(1, 1 / 256, 0), (3, 6)),
        ("ReLU6", lambda: nnq.ReLU6(), (3, 6)),
    ]


@pytest.mark.parametrize(("name", "make", "shape"), _modules(), ids=[m[0] for m in _modules()])
def test_quantized_modules(name, make, shape):
    torch.manual_seed(0)
    module = make()
    if hasattr(module, "set_weight_bias"):  # torch leaves a quantized weight uninitialized
        w = module.weight()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module.set_weight_bias(
                torch.quantize_per_tensor(torch.randn(w.shape) * 0.3, 0.01, 0, torch.qint8),
                torch.randn(module.bias().shape) * 0.1)
        module.scale, module.zero_point = 0.05, 100
    x = _q(shape)
    prog = _export(module, (x,))
    expected = module(x)
    reference = _float_reference(module, x)
    if reference is None:
        # torch's integer kernels round the bias and the requantization multiplier: a few
        # ties go the other way
        _within_one_step(prog.run(x)[0], expected.dequantize(), expected.q_scale(), rare=0.05)
        return
    # A module with weights: the file against the op's definition (float math on the
    # dequantized input and weight, requantized), with onnxruntime's QDQ fusion into
    # integer kernels off (the file's own semantics) and on (what users run). torch's
    # fbgemm kernel is held to the same reference, so a CPU-specific kernel shows up as
    # the one that is off.
    step = expected.q_scale()
    _within_one_step(_run(prog, x.dequantize(), fuse=False)[0], reference, step, rare=0.05)
    # The file is right (above). Where a CPU-specific integer kernel is not, the test
    # says whose: onnxruntime's fused one, or torch's own (the expected values).
    off = []
    for who, values in (("onnxruntime's fused integer", lambda: _run(prog, x.dequantize())[0]),
                        ("torch's (fbgemm)", lambda: expected.dequantize().numpy())):
        try:
            _within_one_step(values(), reference, step, rare=0.05)
        except AssertionError as e:
            off.append(f"{who} {name} kernel ({e})")
    if off:
        pytest.xfail("differs from the op's definition on this CPU: " + "; ".join(off)
                     + "; the unfused file matches it (docs/ops.md, "
                     "tools/repro_ort_qdq_conv.py)")


def _float_reference(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor | None:
    """A weighted quantized module's output by its definition: the float op on the
    dequantized input and weight plus the float bias, requantized to the module's grid,
    dequantized. None for a module without weights."""
    import torch.ao.nn.intrinsic.quantized as nniq
    import torch.ao.nn.quantized as nnq
    import torch.nn.functional as F

    if not hasattr(module, "weight") or not callable(module.weight):
        return None
    w, b, xf = module.weight().dequantize(), module.bias(), x.dequantize()
    if isinstance(module, nnq.ConvTranspose2d):
        out = F.conv_transpose2d(xf, w, b, module.stride, module.padding,
                                 module.output_padding, module.groups, module.dilation)
    elif isinstance(module, (nnq.Conv1d, nnq.Conv2d)):
        if module.padding_mode != "zeros":
            pad = [p for p in reversed(module.padding) for _ in range(2)]
            xf = F.pad(xf, pad, mode=module.padding_mode)
            padding: Any = 0
        else:
            padding = module.padding
        conv = F.conv1d if isinstance(module, nnq.Conv1d) else F.conv2d
        out = conv(xf, w, b, module.stride, padding, module.dilation, module.groups)
    elif isinstance(module, nnq.Linear):
        out = F.linear(xf, w, b)
    else:
        return None
    if isinstance(module, (nniq.ConvReLU2d, nniq.LinearReLU)):
        out = F.relu(out)
    return torch.quantize_per_tensor(out, module.scale, module.zero_point,
                                     torch.quint8).dequantize()


def test_qint8_activations():
    """qnnpack's symmetric configs quantize activations to qint8: the output requantizes
    to int8, the dtype the module returned on the example."""
    import torch.ao.nn.quantized as nnq

    module, x = nnq.Hardswish(0.05, 0), _q((3, 8), torch.qint8)
    prog = _export(module, (x,))
    dequantize = next(n for n in prog.model.graph if n.op_type == "DequantizeLinear")
    assert dequantize.inputs[0].dtype.name == "INT8"
    expected = module(x)
    _within_one_step(prog.run(x)[0], expected.dequantize(), expected.q_scale())


@pytest.mark.parametrize("dtype", [torch.qint8, torch.float16])
def test_dynamic_quantization(dtype):
    """quantize_dynamic's Linear: the input's qparams are chosen per call (choose_qparams,
    7-bit under reduce_range as fbgemm does), the output stays float."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 8)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dynamic = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=dtype)
    prog = _export(dynamic, (torch.randn(5, 16),))
    assert ("DynamicQuantizeLinear" in _ops(prog) or "QuantizeLinear" in _ops(prog)) == (
        dtype == torch.qint8)
    for scale in (1.0, 4.0):  # the input's range, and so its qparams, change per call
        x = torch.randn(5, 16) * scale
        expected = dynamic(x).detach()
        # as eager to float rounding; quantization itself moves outputs by ~1e-2 here
        np.testing.assert_allclose(prog.run(x)[0], expected.numpy(), rtol=0, atol=1e-5)


class _RNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[0]


def test_what_has_no_qdq_form_is_refused():
    import torch.ao.nn.quantized as nnq

    with pytest.raises(pt2onnx.InvalidInputError, match="Embedding"):
        _export(torch.nn.Sequential(nnq.Embedding(10, 4)), (torch.tensor([1, 2]),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rnn = torch.ao.quantization.quantize_dynamic(_RNN(), {torch.nn.LSTM})
    with pytest.raises(pt2onnx.InvalidInputError, match="LSTM"):
        _export(rnn, (torch.randn(3, 1, 4),))

    class IntRepr(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.int_repr()

    with pytest.raises(pt2onnx.ExportError, match="int_repr"):
        _export(IntRepr(), (_q((2, 3)),))


def test_pt2e_cnn_with_torchao():
    """A CNN quantized by PT2E (torchao's X86InductorQuantizer): every quantized activation
    equals eager's when onnxruntime runs the graph as written."""
    pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    x86 = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2)
            self.fc = torch.nn.Linear(16 * 3 * 3, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.relu(self.c2(torch.relu(self.c1(x))))
            return self.fc(torch.nn.functional.max_pool2d(x, 2).flatten(1))

    torch.manual_seed(0)
    x = torch.randn(2, 3, 16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = torch.export.export(Net().eval(), (x,)).module()
        quantizer = x86.X86InductorQuantizer().set_global(
            x86.get_default_x86_inductor_quantization_config())
        prepared = pt2e.prepare_pt2e(graph, quantizer)
        for _ in range(4):
            prepared(torch.randn(2, 3, 16, 16))
        model = pt2e.convert_pt2e(prepared)
    prog = _export(model, (x,))
    dtypes = {v.dtype.name for v in prog.model.graph.initializers.values()}
    assert "INT8" in dtypes and _ops(prog).count("QuantizeLinear") == 3
    _within_one_step(_run(prog, x, fuse=False)[0], model(x), 1e-5)
