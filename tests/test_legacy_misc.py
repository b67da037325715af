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


# -- complex outputs, attention ----------------------------------------------------------
def test_stft_wrong_return_complex():
    """``stft(return_complex=True)``: the TorchScript exporter raised. pt2onnx returns a
    complex output as ``torch.view_as_real`` of it (docs/ops.md), (1, 9, 5) complex as
    (1, 9, 5, 2), as torch.onnx (dynamo) does; right at other lengths (reflection
    padding needs more than n_fft / 2 samples, so the length is never 1)."""
    class STFTComplex(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.stft(x, n_fft=16, return_complex=True)

    model = STFTComplex()
    prog = _export(model, (torch.randn(1, 16),), input_names=["x"],
                   dynamic_axes={"x": {1: "time"}})
    for batch, time in [(1, 16), (1, 9), (1, 40)]:
        x = torch.randn(batch, time)
        expected = torch.view_as_real(model(x)).numpy()
        (actual,) = prog.run(x)
        assert actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)


def test_attention_opset_23():
    """float16 attention at opset 23: one output, within the test's tolerance. pt2onnx
    keeps float16 attention as MatMul/Softmax/MatMul rather than one ``Attention`` node
    on purpose (onnxruntime's CPU float16 Attention is about 10x further from a float64
    reference; docs/architecture.md, "Fused attention")."""
    class Model(torch.nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    torch.manual_seed(0)
    q, k, v = (torch.rand(4, 8, 32, 64, dtype=torch.float16) for _ in range(3))
    prog = _export(Model(), (q, k, v), opset=23)
    assert len(prog.model.graph.outputs) == 1
    (actual,) = prog.run(q, k, v)
    expected = Model()(q, k, v)
    assert actual.dtype == np.float16 and actual.shape == tuple(expected.shape)
    np.testing.assert_allclose(actual.astype(np.float32), expected.float().numpy(),
                               atol=1e-2, rtol=1e-2)


# -- dynamic shapes: names ---------------------------------------------------------------
def test_export_of_rename_dynamic_axes_required_model_with_mixed_type_of_dynamic_shapes():
    """A ``Dim``, string axis names (torch.onnx's form) and ``Dim.AUTO`` in one spec,
    where the model adds the named dims together: torch.export states the relations one
    capture at a time, and torch's own spec refiner failed on the ``AUTO`` hints beside
    them, so pt2onnx refused ("dims declared independent are related")."""
    class NestedModel(torch.nn.Module):
        def forward(self, x: torch.Tensor, ys: list[torch.Tensor],
                    zs: dict[str, torch.Tensor], c: torch.Tensor) -> Any:
            y = ys[0] + ys[1] + zs["a"] + zs["b"]
            w = 5
            if x.shape[0] < 3 and c.shape[0] != 4:
                return x + w, x + y, c
            return x - w, x - y, c

    def inputs(n: int, n_c: int) -> tuple[Any, ...]:
        return (torch.randn(n), [torch.randn(n), torch.randn(n)],
                {"a": torch.randn(n), "b": torch.randn(n)}, torch.randn(n_c))

    spec = (
        {0: torch.export.Dim("dim_x", min=3)},
        [("custom_name_axis_ys_0",), (torch.export.Dim.AUTO,)],
        {"a": {0: torch.export.Dim.AUTO}, "b": ("custom_name_axis_zs_b_0",)},
        {0: "custom_name_axis_c_0"},
    )
    model = NestedModel()
    prog = _export(model, (torch.ones(5), [torch.zeros(5), torch.ones(5)],
                           {"a": torch.zeros(5), "b": torch.ones(5)}, torch.ones(6)),
                   dynamic_shapes=spec, optimize=False)
    shapes = [v.shape for v in prog.model.graph.inputs]
    assert str(shapes[0][0]) == "dim_x" and str(shapes[-1][0]) == "custom_name_axis_c_0"
    for n, n_c in [(5, 6), (4, 5), (3, 1), (9, 2)]:
        args = inputs(n, n_c)
        expected = model(*args)
        actual = prog.run(*args)
        for a, e in zip(actual, expected, strict=True):
            np.testing.assert_allclose(a, e.numpy(), rtol=1e-6, atol=1e-6)


# -- cases where the TorchScript exporter raised -----------------------------------------
class _GridSample(torch.nn.Module):
    def __init__(self, mode: str, padding_mode: str, align_corners: bool) -> None:
        super().__init__()
        self.mode, self.padding_mode, self.align_corners = mode, padding_mode, align_corners

    def forward(self, x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.grid_sample(x, grid, self.mode, self.padding_mode,
                                               self.align_corners)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample(mode, padding_mode, align_corners):
    """PyTorch's 18 test_grid_sample cases (3 modes) each assert that the TorchScript
    exporter raised on these 12 5-D (volumetric) cases below opset 20 (torch has no 5-D
    bicubic); pt2onnx writes them as gathers (ONNX GridSample is 4-D only before opset
    20). At the suite's opset 18, with a dynamic batch."""
    model = _GridSample(mode, padding_mode, align_corners)
    torch.manual_seed(0)
    prog = _export(model, (torch.randn(1, 1, 2, 3, 2), torch.randn(1, 3, 2, 4, 3)),
                   opset=18, input_names=["x", "grid"],
                   dynamic_axes={"x": {0: "n"}, "grid": {0: "n"}})
    for n in (1, 3):
        x, grid = torch.randn(n, 1, 2, 3, 2), torch.randn(n, 3, 2, 4, 3) * 1.2
        (actual,) = prog.run(x, grid)
        np.testing.assert_allclose(actual, model(x, grid).numpy(), atol=1e-5, rtol=1e-5)


def test_interpolate_adaptive_pooling_error():
    """``interpolate(mode="area")`` (adaptive average pooling) by size and by scale
    factor, which the TorchScript exporter refused."""
    class Area(torch.nn.Module):
        def __init__(self, use_size: bool) -> None:
            super().__init__()
            self.use_size = use_size

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            f = torch.nn.functional.interpolate
            if self.use_size:
                return f(x, mode="area", size=24), f(x, mode="area", size=[16])
            return (f(x, mode="area", scale_factor=2.0, recompute_scale_factor=False),
                    f(x, mode="area", scale_factor=[2.3], recompute_scale_factor=False))

    for use_size in (True, False):
        model = Area(use_size)
        prog = _export(model, (torch.randn(1, 2, 6),), input_names=["x"],
                       dynamic_axes={"x": {0: "batch"}})
        for batch in (1, 3):
            x = torch.randn(batch, 2, 6)
            for a, e in zip(prog.run(x), model(x), strict=True):
                np.testing.assert_allclose(a, e.numpy(), atol=1e-5, rtol=1e-5)


def test_lstm_proj_no_hidden():
    """An LSTM with ``proj_size`` and no initial state, which the TorchScript exporter
    refused: the output and both final states, at other lengths and batches."""
    class LSTMModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = torch.nn.LSTM(input_size=16, hidden_size=64, proj_size=32)

        def forward(self, x: torch.Tensor) -> Any:
            return self.rnn(x)

    torch.manual_seed(0)
    model = LSTMModel().eval()
    prog = _export(model, (torch.randn(10, 16, 16),), input_names=["x"],
                   dynamic_axes={"x": {0: "steps", 1: "batch"}})
    for steps, batch in [(10, 16), (1, 1), (7, 3)]:
        x = torch.randn(steps, batch, 16)
        out, (h, c) = model(x)
        for a, e in zip(prog.run(x), (out, h, c), strict=True):
            np.testing.assert_allclose(a, e.detach().numpy(), atol=1e-5, rtol=1e-5)


def test_all_optional_default_tensor():
    """Optional tensor inputs with tensor defaults, given as (x, None), (None, y) and
    (x, y): the TorchScript exporter dropped the unused y of the last and its test
    asserted the run failed; pt2onnx keeps each given input, and each file is right."""
    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor | None = torch.ones(2, 3),
                    y: torch.Tensor | None = torch.zeros(2, 3)) -> torch.Tensor:
            if x is not None:
                return x
            if y is not None:
                return y
            return torch.tensor(-1.0)

    model = Model()
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    for args in [(x, None), (None, y), (x, y)]:
        prog = _export(model, args)
        assert len(prog.model.graph.inputs) == sum(a is not None for a in args)
        (actual,) = prog.run(*args)
        np.testing.assert_array_equal(actual, model(*args).numpy())


# -- dicts keyed by tensors --------------------------------------------------------------
def test_dict():
    """A dict input keyed by a tensor, whose key the model reads: the key is an input of
    the file (before its value, as the TorchScript exporter took it). It was a constant
    of the input's structure, so a file fed another key gave the example's answer."""
    class MyModel(torch.nn.Module):
        def forward(self, x_in: dict[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
            key = list(x_in.keys())[0]  # noqa: RUF015 (PyTorch's test, as written)
            return {"test_key_out": torch.add(x_in[key], key)}

    model = MyModel()
    x = {torch.tensor(1.0): torch.randn(1, 2, 3)}
    prog = _export(model, (x,))
    assert [v.shape.rank() for v in prog.model.graph.inputs] == [0, 3]
    for key in (1.0, 5.0, -2.5):
        other = {torch.tensor(key): torch.randn(1, 2, 3)}
        (actual,) = prog.run(other)
        np.testing.assert_allclose(actual, model(other)["test_key_out"].numpy())
        assert prog.verify(other).ok


def test_dict_tensor_keys_with_weights_and_dynamic_axes():
    """Tensor keys as inputs beside weights (their names unchanged) and ``dynamic_axes``
    by ``input_names``, which count each key: at the example, at 1 and at 5."""
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, d: dict[torch.Tensor, torch.Tensor], y: torch.Tensor) -> Any:
            ((scale, value),) = d.items()
            return self.lin(value) * scale + y

    torch.manual_seed(0)
    model = Model()
    prog = _export(model, ({torch.tensor(2.0): torch.randn(2, 3)}, torch.randn(2, 3)),
                   input_names=["d_key", "d_value", "y"],
                   dynamic_axes={"d_value": {0: "b"}, "y": {0: "b"}})
    assert [v.name for v in prog.model.graph.inputs] == ["d_key", "d_value", "y"]
    assert sorted(prog.model.graph.initializers) == ["lin.bias", "lin.weight"]
    for batch, key in [(2, 3.0), (1, -1.0), (5, 0.5)]:
        args = ({torch.tensor(key): torch.randn(batch, 3)}, torch.randn(batch, 3))
        (actual,) = prog.run(*args)
        np.testing.assert_allclose(actual, model(*args).detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_dict_str():
    class MyModel(torch.nn.Module):
        def forward(self, x_in: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            return {"test_key_out": torch.add(x_in["test_key_in"], 2.0)}

    x = {"test_key_in": torch.randn(1, 2, 3)}
    prog = _export(MyModel(), (x,))
    assert len(prog.model.graph.inputs) == 1
    assert prog.verify(x).ok
