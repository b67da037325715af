"""Cases from PyTorch's own tests of its exporters (issue 37): the legacy TorchScript
exporter's ``test/onnx/test_pytorch_onnx_onnxruntime.py`` and the small-model tests of
the dynamo exporter, each exported the way its test calls the exporter (input names,
dynamic axes, opset) and checked numerically against eager PyTorch in onnxruntime, at the
example and, where a dim is dynamic, at other sizes (1 among them).

Each test is named after the PyTorch test it stands for.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch

import pt2onnx

# torch 2.13 deprecates eager-mode quantization (the very models these tests export).
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*quantized tensor creation functions.*:UserWarning",
    "ignore:torch.ao.quantization is deprecated:DeprecationWarning")


def _export(model: Any, args: tuple[Any, ...], **kw: Any) -> pt2onnx.OnnxProgram:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pt2onnx.export(model, args, **kw)


def _session(prog: pt2onnx.OnnxProgram) -> ort.InferenceSession:
    return ort.InferenceSession(prog.model_proto.SerializeToString(),
                                providers=["CPUExecutionProvider"])


# -- quantized tensors, TorchScript's (values, scale, zero point) convention -------------
def _triple_feeds(session: ort.InferenceSession, *args: torch.Tensor) -> dict[str, Any]:
    """The inputs as the TorchScript exporter's tests feed them: a quantized tensor as
    ``int_repr()``, ``q_scale()`` (a Python float: float64) and ``q_zero_point()``."""
    arrays: list[np.ndarray] = []
    for t in args:
        if t.is_quantized:
            arrays += [t.int_repr().numpy(), np.array(t.q_scale()),
                       np.array(t.q_zero_point())]
        else:
            arrays.append(t.numpy())
    names = [i.name for i in session.get_inputs()]
    assert len(names) == len(arrays), (names, len(arrays))
    return dict(zip(names, arrays, strict=True))


def _check_triples(actual: list[np.ndarray], expected: Any) -> None:
    """Each quantized output as (integer values, scale, zero point): the qparams exactly,
    the integers within one step (torch rounds ``x * (1 / scale)``, QuantizeLinear
    ``x / scale``: a tie may round the other way), in under 1% of the elements."""
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == 3 * len(expected)
    for i, e in enumerate(expected):
        ints, scale, zero = actual[3 * i:3 * i + 3]
        assert (scale.dtype, zero.dtype) == (np.float64, np.int64)
        assert (float(scale), int(zero)) == (e.q_scale(), e.q_zero_point())
        want = e.int_repr().numpy()
        assert ints.shape == want.shape and ints.dtype == want.dtype
        diff = np.abs(ints.astype(np.int64) - want.astype(np.int64))
        assert diff.max(initial=0) <= 1 and (diff > 0).mean() < 0.01


class _QuantizedCat(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.ao.nn.quantized.QFunctional().cat((x, y), dim=0)


class _QuantizedSelfCat(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ao.nn.quantized.QFunctional().cat((x, x), dim=1)


def _q(rows: int, cols: int, scale: float, zero_point: int, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.quantize_per_tensor(torch.randn(rows, cols) * 3, scale, zero_point,
                                     torch.quint8)


# name -> (rows of x, rows of y, x's qparams, y's qparams), as in PyTorch's test
_CAT_CASES = {
    "different_shape": (2, 1, (0.26, 128), (0.26, 128)),
    "different_scale": (2, 2, (0.26, 128), (42.0, 1)),
    "different_zero_point": (2, 2, (0.26, 128), (0.26, 63)),
    "different_zero_point_and_scale": (2, 2, (0.26, 128), (0.1, 63)),
}


@pytest.mark.parametrize("case", list(_CAT_CASES))
def test_quantized_cat(case):
    """``QFunctional().cat`` of quantized tensors whose qparams or shapes differ: eager
    dequantizes each, concatenates and quantizes with QFunctional's own qparams (1.0, 0).
    It called ``torch.ops.quantized.cat`` with ``scale``, ``zero_point`` and ``dim`` as
    keywords, which pt2onnx read in call order (``dim`` = 1.0): nothing was captured."""
    rows_x, rows_y, qx, qy = _CAT_CASES[case]
    model = _QuantizedCat()
    args = (_q(rows_x, 3, *qx, seed=0), _q(rows_y, 3, *qy, seed=1))
    prog = _export(model, args, quantized_io="triple", input_names=["x", "y"],
                   dynamic_axes={"x": {1: "n"}, "y": {1: "n"}})
    session = _session(prog)
    for i, cols in enumerate([3, 1, 5]):  # the example, then other widths
        feed = (_q(rows_x, cols, *qx, seed=2 * i), _q(rows_y, cols, *qy, seed=2 * i + 1))
        _check_triples(session.run(None, _triple_feeds(session, *feed)), model(*feed))
    # the default float boundary: the dequantized values
    float_prog = _export(model, args)
    assert float_prog.verify(*args, atol=1.0).ok


def test_quantized_cat_when_concatinating_the_same_tensor():
    model = _QuantizedSelfCat()
    qx = _q(2, 3, 0.26, 128, seed=0)
    prog = _export(model, (qx,), quantized_io="triple", input_names=["x"],
                   dynamic_axes={"x": {0: "batch"}})
    session = _session(prog)
    for i, rows in enumerate([2, 1, 4]):
        feed = _q(rows, 3, 0.26, 128, seed=i)
        _check_triples(session.run(None, _triple_feeds(session, feed)), model(feed))


def test_quantize_per_tensor():
    """Two quantized outputs are six with ``quantized_io='triple'`` (TorchScript's
    boundary, eager's six values when flattened): the integers, each scale as a double
    and each zero point. The default float boundary gives their two dequantized values."""
    class Module(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return (torch.quantize_per_tensor(x, 0.2, 0, torch.qint8),
                    torch.quantize_per_tensor(x, 0.2, 128, torch.quint8))

    torch.manual_seed(0)
    x = torch.randn(4, 6)
    model = Module()
    prog = _export(model, (x,), quantized_io="triple", input_names=["x"],
                   dynamic_axes={"x": {0: "batch"}})
    session = _session(prog)
    assert len(session.get_outputs()) == 6
    for rows in [4, 1, 7]:
        feed = torch.randn(rows, 6) * 4  # some values past the int8 range: clamped
        _check_triples(session.run(None, _triple_feeds(session, feed)), model(feed))
    float_prog = _export(model, (x,))
    assert len(float_prog.model.graph.outputs) == 2
    assert float_prog.verify(x, atol=0.2).ok
