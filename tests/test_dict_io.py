"""Models that take or return dicts (nested with lists and tuples): the ONNX inputs and
outputs are the tensors inside, named by their keys, and onnxruntime matches eager."""

from __future__ import annotations

import textwrap
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch
from torch.export import Dim

import pt2onnx
from pt2onnx import cli


class Batch(torch.nn.Module):
    """forward(batch: dict) -> dict, nested both ways."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 6)

    def forward(self, batch):
        h = self.proj(batch["x"]) * batch["scale"]["value"]
        return {
            "logits": h,
            "aux": {"mask": batch["masks"][0] * 2, "pair": (h.sum(-1), [h.mean(-1) + batch["masks"][1]])},
        }


def _batch(n=2):
    return {"x": torch.randn(n, 3, 4), "scale": {"value": torch.rand(6)},
            "masks": [torch.ones(n, 3), torch.randn(3)]}


def _names(values):
    return [v.name for v in values]


def _flat_expected(out):
    return [t.detach().numpy() for t in pt2onnx.verify.flatten_outputs(out)]


def _assert_runs_like_eager(prog, model, args, kwargs=None):
    with torch.no_grad():
        expected = _flat_expected(model(*args, **(kwargs or {})))
    actual = prog.run(*args, **(kwargs or {}))
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)


def test_dict_in_dict_out_named_by_keys():
    model = Batch().eval()
    batch = _batch()
    prog = pt2onnx.export(model, (batch,))
    assert _names(prog.model.graph.inputs) == [
        "batch_x", "batch_scale_value", "batch_masks_0", "batch_masks_1"]
    assert _names(prog.model.graph.outputs) == [
        "logits", "aux_mask", "aux_pair_0", "aux_pair_1_0"]
    assert prog.verify().ok
    _assert_runs_like_eager(prog, model, (_batch(),))


def test_dynamic_shapes_given_as_a_dict_like_the_input():
    model, b = Batch().eval(), Dim("b")
    # A None (or a missing key) inside stands for a whole static entry.
    specs = [
        {"batch": {"x": {0: b}, "scale": {"value": None}, "masks": [{0: b}, None]}},
        {"batch": {"x": {0: b}, "scale": None, "masks": [{0: b}, None]}},
        ({"x": {0: b}, "masks": [{0: b}, None]},),
    ]
    for spec in specs:
        prog = pt2onnx.export(model, (_batch(),), dynamic_shapes=spec)
        shapes = {v.name: str(v.shape) for v in prog.model.graph.inputs}
        assert shapes["batch_x"].startswith("[b,") and shapes["batch_masks_1"] == "[3]"
        result = prog.verify()  # the example, then b at a second size
        assert result.ok and len(result.runs) >= 2
        _assert_runs_like_eager(prog, model, (_batch(5),))


def test_dynamic_axes_and_names_for_tensors_inside_a_dict():
    model = Batch().eval()
    prog = pt2onnx.export(model, (_batch(),),
                          dynamic_axes={"batch.x": {0: "b"}, "batch_masks_0": {0: "b"}})
    assert str(prog.model.graph.inputs[0].shape).startswith("[b,")
    _assert_runs_like_eager(prog, model, (_batch(4),))
    prog = pt2onnx.export(model, (_batch(),), input_names=["x", "s", "m0", "m1"],
                          output_names=["out"])
    assert _names(prog.model.graph.inputs) == ["x", "s", "m0", "m1"]
    assert _names(prog.model.graph.outputs)[:2] == ["out", "aux_mask"]


class Output(OrderedDict):
    """A dict subclass torch.export does not know (torch.onnx accepted such outputs)."""


class ReturnsSubclass(torch.nn.Module):
    def forward(self, a, b):
        return Output(tensor_out=a * 2, tuple_out=(a + b, b), list_out=[b - 1])


@pytest.mark.parametrize("capture", ["export", "recorded"])  # export first: it registers
def test_dict_subclass_output_is_captured(capture, monkeypatch):
    if capture == "export":
        monkeypatch.setenv("PT2ONNX_CAPTURE", "export")
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    prog = pt2onnx.export(ReturnsSubclass(), (a, b))
    assert prog.report.capture_strategy.startswith(
        "torch.export" if capture == "export" else "recorded")
    assert _names(prog.model.graph.outputs) == [
        "tensor_out", "tuple_out_0", "tuple_out_1", "list_out_0"]
    assert prog.verify().ok
    _assert_runs_like_eager(prog, ReturnsSubclass(), (torch.randn(2, 3), torch.randn(2, 3)))


class Features(OrderedDict):
    pass


def test_dict_subclass_input():
    model = KeyIn()
    prog = pt2onnx.export(model, (Features(test_key_in=torch.randn(3)),))
    assert _names(prog.model.graph.inputs) == ["x_in_test_key_in"]
    assert prog.verify().ok


class KeyIn(torch.nn.Module):
    def forward(self, x_in):
        return {"test_key_out": x_in["test_key_in"] + 2.0}


class Masked(torch.nn.Module):
    def forward(self, x, mask=None, scale=1.0):
        return {"y": (x if mask is None else x * mask) * scale}


def test_torch_onnx_trailing_dict_holds_keyword_inputs():
    x = torch.randn(2, 3)
    # torch.onnx's way to pass a dict positionally: an empty dict after it.
    prog = pt2onnx.export(KeyIn(), ({"test_key_in": x}, {}))
    assert _names(prog.model.graph.inputs) == ["x_in_test_key_in"]
    assert prog.verify({"test_key_in": x}, {}).ok
    # A dict forward cannot take positionally is the keyword inputs.
    mask = torch.rand(2, 3)
    prog = pt2onnx.export(Masked(), (x, {"mask": mask}))
    assert _names(prog.model.graph.inputs) == ["x", "mask"]
    assert _names(prog.model.graph.outputs) == ["y"]
    _assert_runs_like_eager(prog, Masked(), (x,), {"mask": mask})
    # The dict alone, where forward takes it positionally, stays positional.
    prog = pt2onnx.export(KeyIn(), ({"test_key_in": x},))
    assert prog.verify().ok


def test_non_tensor_outputs_in_a_dict_are_verified():
    class Mixed(torch.nn.Module):
        def forward(self, x):
            return {"a": x + 1, "skipped": None, "n": 3, "b": {"c": x * 2}}

    prog = pt2onnx.export(Mixed(), (torch.randn(3),))
    assert _names(prog.model.graph.outputs) == ["a", "n", "b_c"]
    assert prog.verify().ok


def test_cli_exports_and_verifies_a_dict_model(tmp_path, capsys):
    src = tmp_path / "dict_model.py"
    src.write_text(textwrap.dedent("""
        import torch

        class M(torch.nn.Module):
            def forward(self, batch):
                return {"logits": batch["x"] * 2 + batch["extra"]["bias"]}

        def make():
            return M()

        def inputs():
            return ({"x": torch.randn(2, 3), "extra": {"bias": torch.randn(3)}},)
    """))
    out = tmp_path / "m.onnx"
    common = [f"{src}:make", "--inputs-factory", f"{src}:inputs", "-q"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(["export", *common, "-o", str(out), "--dynamic", "batch_x:0=b",
                         "--verify"]) == 0
        assert cli.main(["verify", *common, "--onnx", str(out)]) == 0
    text = capsys.readouterr().out
    assert "logits" in text and "verify: ok" in text
    import onnx

    graph = onnx.load(out).graph
    assert [i.name for i in graph.input] == ["batch_x", "batch_extra_bias"]
    assert graph.input[0].type.tensor_type.shape.dim[0].dim_param == "b"


def test_a_dict_with_tensor_keys_feeds_each_key_before_its_value():
    """PyTorch's exporter test_dict_input: a dict keyed by tensors. As with the
    TorchScript exporter, each key is an ONNX input before its value (issue 37: a key
    the model reads is data; kept as the example's constant, a file fed other keys gave
    the example's answer)."""

    class Keyed(torch.nn.Module):
        def forward(self, x_in, *args, **kwargs):
            first, second = list(x_in.keys())
            return {"out": torch.add(x_in[first], first) * x_in[second] - second}

    k1, k2 = torch.tensor(1.5), torch.tensor(-2.0)
    prog = pt2onnx.export(Keyed(), ({k1: torch.randn(1, 2, 3), k2: torch.randn(3)}, {}))
    assert [v.shape.rank() for v in prog.model.graph.inputs] == [0, 3, 0, 1]
    for a, b in [(k1, k2), (torch.tensor(3.0), torch.tensor(0.5))]:
        fresh = {a: torch.randn(1, 2, 3), b: torch.randn(3)}
        (got,) = prog.run(fresh)
        np.testing.assert_allclose(got, ((fresh[a] + a) * fresh[b] - b).numpy(), rtol=1e-6)
        assert prog.verify(fresh).ok
