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


# -- in-place writes and mutation of inputs ----------------------------------------------
class _CopySlice(torch.nn.Module):
    def forward(self, x: torch.Tensor, data: torch.Tensor) -> torch.Tensor:
        x[1:3] = data
        return x


class _CopySliceSelect(torch.nn.Module):
    def forward(self, x: torch.Tensor, data: torch.Tensor) -> torch.Tensor:
        x[1:3, 0] = data
        return x


class _CopySelectSlice(torch.nn.Module):
    def forward(self, x: torch.Tensor, data: torch.Tensor) -> torch.Tensor:
        x[1, 1:3] = data
        return x


class _CopyTensorIndex(torch.nn.Module):
    def forward(self, x: torch.Tensor, ind: torch.Tensor, data: torch.Tensor) -> torch.Tensor:
        x[ind] = data
        return x


class _CopyTensorIndexSlice(torch.nn.Module):
    def forward(self, x: torch.Tensor, ind: torch.Tensor, data: torch.Tensor) -> torch.Tensor:
        x[..., ind, 1:3] = data
        return x


class _CopyWhole(torch.nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor | None:
        if mask is not None:
            x.copy_(mask)
            return x
        return None


def _same_as_eager(prog: pt2onnx.OnnxProgram, model: torch.nn.Module,
                   *args: torch.Tensor) -> None:
    """The file's outputs equal eager's on fresh copies (the model writes its inputs)."""
    expected = model(*(a.clone() for a in args))
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = prog.run(*(a.clone() for a in args))
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert a.shape == tuple(e.shape)
        np.testing.assert_allclose(a, e.numpy(), rtol=1e-6, atol=1e-6)


_R = torch.randn
_COPY_FORMS = {
    "slice": (_CopySlice(), (_R(3, 4), _R(2, 4))),
    "slice_select_one": (_CopySliceSelect(), (_R(3, 4), torch.tensor([0.0]))),
    "slice_select_two": (_CopySliceSelect(), (_R(3, 4), torch.tensor([2.0, 3.0]))),
    "slice_select_random": (_CopySliceSelect(), (_R(3, 4), _R(2))),
    "select_slice_one": (_CopySelectSlice(), (_R(3, 4), torch.tensor([0.0]))),
    "select_slice_two": (_CopySelectSlice(), (_R(3, 4), torch.tensor([2.0, 3.0]))),
    "select_slice_random": (_CopySelectSlice(), (_R(3, 4), _R(2))),
    "copy_broadcast": (_CopyWhole(), (_R(3, 4), _R(3, 1))),
}


@pytest.mark.parametrize("form", list(_COPY_FORMS))
def test_copy_(form):
    """The forms of PyTorch's test_copy_ with a Python index."""
    model, args = _COPY_FORMS[form]
    _same_as_eager(_export(model, args), model, *args)


def test_copy_tensor_index():
    """``x[ind] = data`` (PyTorch's test_copy_) with ``ind`` a 0-d integer tensor had no
    general capture (torch reads the index as a Python int), and the trace left
    ``aten::copy_``, which has no rule; the index is now a graph input (any value, a
    negative one included)."""
    model = _CopyTensorIndex()
    x, data = torch.randn(3, 4), torch.randn(4)
    prog = _export(model, (x, torch.tensor(2), data))
    for ind in [2, 0, -1, -3]:
        _same_as_eager(prog, model, x, torch.tensor(ind), data)


def test_copy_tensor_index_dynamic():
    """The 0-d tensor index with dynamic dims: rows (where it indexes) and columns, each
    at the example, at 1 and at a larger size; with a slice and an ellipsis beside it."""
    model = _CopyTensorIndex()
    prog = _export(model, (torch.randn(3, 4), torch.tensor(2), torch.randn(4)),
                   input_names=["x", "ind", "data"],
                   dynamic_axes={"x": {0: "rows", 1: "cols"}, "data": {0: "cols"}})
    for rows, cols in [(3, 4), (1, 1), (6, 5)]:
        for ind in {0, rows - 1, -1}:
            _same_as_eager(prog, model, torch.randn(rows, cols), torch.tensor(ind),
                           torch.randn(cols))
    model2 = _CopyTensorIndexSlice()
    prog = _export(model2, (torch.randn(2, 3, 4), torch.tensor(1), torch.randn(2)),
                   input_names=["x", "ind", "data"], dynamic_axes={"x": {0: "batch"}})
    for batch in [2, 1, 5]:
        for ind in [0, 2, -2]:
            _same_as_eager(prog, model2, torch.randn(batch, 3, 4), torch.tensor(ind),
                           torch.randn(2))


def test_set_():
    """``x.set_(y)`` makes x y itself: a rebinding, also of a graph input (the
    functionalization torch.export needed for it failed)."""
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            x.set_(y)
            return x

    model = M()
    x, y = torch.ones(2, 3), torch.randn(4, 6)
    _same_as_eager(_export(model, (x, y)), model, x, y)
    prog = _export(model, (x, y), input_names=["x", "y"],
                   dynamic_axes={"x": [0, 1], "y": [0, 1]})
    for shape in [(4, 6), (1, 1), (5, 2)]:
        _same_as_eager(prog, model, torch.ones(2, 3), torch.randn(*shape))


def test_set_keeps_earlier_views():
    """A view of x taken before ``x.set_(y)`` keeps x's old values, as in eager."""
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
            before = x[0]
            x.set_(y)
            return x + 1, before * 2

    model = M()
    _same_as_eager(_export(model, (torch.randn(2, 3), torch.randn(4, 6))), model,
                   torch.randn(2, 3), torch.randn(4, 6))


# -- pooling -----------------------------------------------------------------------------
def test_maxpool_adaptive():
    """The batch is dynamic, the pooled length static: the indices need only that."""
    model = torch.nn.AdaptiveMaxPool1d(5, return_indices=False)
    prog = _export(model, (torch.randn(20, 16, 50),), input_names=["x"],
                   dynamic_axes={"x": [0]})
    for batch in [20, 1, 32]:
        x = torch.randn(batch, 16, 50)
        np.testing.assert_array_equal(prog.run(x)[0], model(x).numpy())
    with_indices = torch.nn.AdaptiveMaxPool1d(5, return_indices=True)
    prog = _export(with_indices, (torch.randn(20, 16, 50),), input_names=["x"],
                   dynamic_axes={"x": [0]})
    for batch in [20, 1, 3]:
        x = torch.randn(batch, 16, 50)
        values, indices = prog.run(x)
        e_values, e_indices = with_indices(x)
        np.testing.assert_array_equal(values, e_values.numpy())
        np.testing.assert_array_equal(indices, e_indices.numpy())
