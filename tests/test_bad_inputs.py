"""A corpus of bad inputs: each ends in a typed error whose message names the cause and
the next step, and leaves no file (not even a temporary one) in the output directory.

tests/test_errors.py covers: unsupported ops, args given as a Tensor, opsets 16/27/"18",
a directory as the path, a missing parent directory, capture failures, dynamic_axes
names, a rule that raises and a model of the wrong type. These are the others.
"""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

import pt2onnx

Dim = torch.export.Dim


class Double(nn.Module):
    def forward(self, x):
        return x * 2


class StrOut(nn.Module):
    def forward(self, x):
        return x + 1, "hello"


class TakesObject(nn.Module):
    def forward(self, x, extra):
        return x + 1


class MaxOverDim(nn.Module):
    def forward(self, x):
        return torch.max(x, 0)[0]  # max returns (values, indices)


def _max_one_output(g, x, dim, keepdim=False):
    return g.op.ReduceMax(x, g.const([dim]), keepdims=int(keepdim))


def _relu_returns_none(g, x):
    return None


def _relu_returns_two(g, x):
    return g.op.Relu(x), g.op.Relu(x)


X = torch.randn(2, 3)
# name -> (call(out_path), error type, words the message must contain)
CASES = {
    "args_is_an_int": (lambda f: pt2onnx.export(Double(), 3, f),
                       pt2onnx.InvalidInputError, ["args must be a tuple", "int"]),
    "args_is_a_dict": (lambda f: pt2onnx.export(Double(), {"x": X}, f),
                       pt2onnx.InvalidInputError, ["args must be a tuple", "Next step"]),
    "kwargs_not_a_dict": (lambda f: pt2onnx.export(Double(), (X,), f, kwargs=[X]),
                          pt2onnx.InvalidInputError, ["kwargs must be a dict"]),
    "non_tensor_input": (lambda f: pt2onnx.export(TakesObject(), (X, object()), f),
                         pt2onnx.InvalidInputError, ["args[1]", "object", "Next step"]),
    "dtype_without_onnx_type": (
        lambda f: pt2onnx.export(Double(), (X.to(torch.complex32),), f),
        pt2onnx.InvalidInputError, ["args[0]", "complex32", "cast"]),
    "non_tensor_output": (lambda f: pt2onnx.export(StrOut(), (X,), f),
                          pt2onnx.InvalidInputError, ["output 1", "str", "only tensors"]),
    "opset_is_bool": (lambda f: pt2onnx.export(Double(), (X,), f, opset=True),
                      pt2onnx.OpsetError, ["opset must be an int", "17", "26"]),
    "opset_far_above": (lambda f: pt2onnx.export(Double(), (X,), f, opset=100),
                        pt2onnx.OpsetError, ["outside the range", "Next step"]),
    "report_dir_missing": (
        lambda f: pt2onnx.export(Double(), (X,), f, report=os.path.join(
            os.path.dirname(f), "nope", "r.md")),
        pt2onnx.SaveError, ["does not exist", "mkdir"]),
    "dynamic_shapes_and_dynamic_axes": (
        lambda f: pt2onnx.export(Double(), (X,), f, input_names=["x"],
                                 dynamic_axes={"x": [0]}, dynamic_shapes=({0: Dim("b")},)),
        pt2onnx.InvalidInputError, ["not both"]),
    "dynamic_shapes_unknown_name": (
        lambda f: pt2onnx.export(Double(), (X,), f, dynamic_shapes={"y": {0: Dim("b")}}),
        pt2onnx.InvalidInputError, ["'y'", "argument names of forward"]),
    "dynamic_axes_naming_no_input": (
        lambda f: pt2onnx.export(Double(), (X,), f, dynamic_axes={"y": {0: "batch"}}),
        pt2onnx.InvalidInputError, ["match no input", "input_names", "Next step"]),
    "custom_translations_not_a_dict": (
        lambda f: pt2onnx.export(Double(), (X,), f, custom_translations=[_relu_returns_none]),
        pt2onnx.InvalidInputError, ["custom_translations must be a dict", "list"]),
    "custom_rule_not_callable": (
        lambda f: pt2onnx.export(Double(), (X,), f,
                                 custom_translations={torch.ops.aten.mul.Tensor: "Mul"}),
        pt2onnx.InvalidInputError, ["not a function", "def rule(g, x)"]),
    "rule_returns_too_few_outputs": (
        lambda f: pt2onnx.export(MaxOverDim(), (X,), f,
                                 custom_translations={torch.ops.aten.max.dim: _max_one_output}),
        pt2onnx.TranslationError,
        ["_max_one_output", "aten::max.dim", "2 tensor output(s)", "torch.max(x, 0)[0]",
         "_outputs=n"]),
    "rule_returns_none": (
        lambda f: pt2onnx.export(nn.ReLU(), (X,), f,
                                 custom_translations={torch.ops.aten.relu.default:
                                                      _relu_returns_none}),
        pt2onnx.TranslationError, ["_relu_returns_none", "returned None", "1 tensor output"]),
    "rule_returns_two_for_one": (
        lambda f: pt2onnx.export(nn.ReLU(), (X,), f,
                                 custom_translations={torch.ops.aten.relu.default:
                                                      _relu_returns_two}),
        pt2onnx.TranslationError, ["returned 2 output(s)", "1 tensor output"]),
}


@pytest.mark.filterwarnings("ignore:ComplexHalf")
@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input(name, tmp_path):
    call, error, words = CASES[name]
    with pytest.raises(error) as info:
        call(str(tmp_path / "model.onnx"))
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in:\n{message}"
    assert isinstance(info.value, pt2onnx.ExportError)
    assert os.listdir(tmp_path) == []


def test_corpus_is_large_enough():
    assert len(CASES) >= 15


@torch.library.custom_op("pt2onnx_bad::unknown", mutates_args=())
def _unknown(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@_unknown.register_fake
def _(x):
    return torch.empty_like(x)


class UsesUnknown(nn.Module):
    def forward(self, x):
        return _unknown(x) + 1  # the report names this line


def test_unsupported_op_still_writes_the_report(tmp_path):
    with pytest.raises(pt2onnx.UnsupportedOperatorError):
        pt2onnx.export(UsesUnknown(), (X,), tmp_path / "m.onnx", report=True)
    assert os.listdir(tmp_path) == ["m.report.md"]
    report = (tmp_path / "m.report.md").read_text()
    assert "## Unsupported operators" in report
    assert "pt2onnx_bad::unknown.default" in report
    assert "return _unknown(x) + 1  # the report names this line" in report
    assert "| capture |" in report and "torch:" in report


def test_run_with_wrong_number_of_inputs():
    prog = pt2onnx.export(Double(), (X,))
    with pytest.raises(pt2onnx.InvalidInputError, match="takes 1 tensor inputs"):
        prog.run(X, X)


def test_a_dim_the_model_runs_only_at_is_written_static_with_a_warning(tmp_path):
    """A feature dim declared dynamic (nn.Linear's 3): eager raises at every other size
    tried, so the file with that dim static computes what the model computes wherever
    it computes anything; the warning names the dim and the sizes eager refused (issue
    37, capture/_fixed_dims.py; before: a CaptureError)."""
    f = tmp_path / "m.onnx"
    model = nn.Linear(3, 4)
    with pytest.warns(UserWarning, match=r"feat was declared dynamic, but the model runs only at feat=3"):
        prog = pt2onnx.export(model, (X,), f, dynamic_shapes=({1: Dim("feat")},))
    assert f.exists()
    assert [d for d in prog.model.graph.inputs[0].shape] == [2, 3]
    assert prog.verify(X).ok


class _Broadcasts(nn.Module):
    def forward(self, x, y):
        return x * y


def test_a_dim_that_broadcasts_is_not_taken_as_running_at_one_size_only():
    """``x * y`` with y's C at 1 and x's B at 6: eager raises at C = 2, 3, ... but runs at
    C = 6. The probe that decides "the model runs only at C=1" (and writes C static) tries
    the other declared dims' sizes too (fuzz seed 4111, program 508: the file was written
    with C static and onnxruntime refused C = 6)."""
    from pt2onnx.capture._fixed_dims import probe

    args = (torch.randn(6, 2), torch.randn(1, 2))
    spec = ({0: Dim("B", min=4, max=64)}, {0: Dim("C", min=1, max=64)})
    verdict = probe(_Broadcasts(), args, {}, spec, [("C", 1)])
    assert "C" not in verdict.static, verdict.notes
