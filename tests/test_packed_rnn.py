"""Packed sequences: pack_padded_sequence -> nn.LSTM / nn.GRU / nn.RNN -> pad_packed_sequence.

Each export is compared with eager in onnxruntime on the example and on batches
whose lengths differ from the example's (a shorter longest sequence included, so
the output's time axis shrinks as torch's does).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn
from torch.export import Dim
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import pt2onnx
from pt2onnx.errors import CaptureError

FEATURES, HIDDEN = 5, 6
_FORWARDS = {cls: cls.forward for cls in (nn.LSTM, nn.GRU, nn.RNN)}


class PackedRNN(nn.Module):
    def __init__(self, kind: str, *, batch_first: bool = False, enforce_sorted: bool = False,
                 total_length: int | None = None, padding_value: float = 0.0,
                 **rnn: Any) -> None:
        super().__init__()
        if kind.startswith("RNN_"):
            rnn["nonlinearity"] = kind[4:].lower()
            kind = "RNN"
        self.rnn = getattr(nn, kind)(FEATURES, HIDDEN, batch_first=batch_first, **rnn)
        self.batch_first, self.enforce_sorted = batch_first, enforce_sorted
        self.total_length, self.padding_value = total_length, padding_value

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, *states: torch.Tensor) -> Any:
        packed = pack_padded_sequence(x, lengths, batch_first=self.batch_first,
                                      enforce_sorted=self.enforce_sorted)
        hx = None if not states else states[0] if len(states) == 1 else states
        out, final = self.rnn(packed, hx)
        out, out_lengths = pad_packed_sequence(out, batch_first=self.batch_first,
                                               padding_value=self.padding_value,
                                               total_length=self.total_length)
        return out, final, out_lengths


def _inputs(model: PackedRNN, lengths: list[int], steps: int, with_h0: bool,
            dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    batch = len(lengths)
    shape = (batch, steps, FEATURES) if model.batch_first else (steps, batch, FEATURES)
    args: tuple[torch.Tensor, ...] = (torch.randn(shape, dtype=dtype), torch.tensor(lengths))
    if with_h0:
        rnn = model.rnn
        layers = rnn.num_layers * (2 if rnn.bidirectional else 1)
        out_size = getattr(rnn, "proj_size", 0) or HIDDEN
        args += (torch.randn(layers, batch, out_size, dtype=dtype),)
        if isinstance(rnn, nn.LSTM):
            args += (torch.randn(layers, batch, HIDDEN, dtype=dtype),)
    return args


def _check(model: nn.Module, example: tuple[torch.Tensor, ...],
           others: list[tuple[torch.Tensor, ...]], **export_kwargs: Any) -> pt2onnx.OnnxProgram:
    """Exports on ``example``; onnxruntime matches eager on it and on ``others``."""
    model.eval()
    prog = pt2onnx.export(model, example, **export_kwargs)
    assert "packed_rnn" in prog.report.capture_strategy, prog.report.capture_strategy
    proto = prog.model_proto
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for args in [example, *others]:
        with torch.no_grad():
            expected = [t.numpy() for t in torch.utils._pytree.tree_leaves(model(*args))]
        got = session.run(None, {n: a.numpy() for n, a in zip(names, args)})
        assert len(got) == len(expected)
        for e, o in zip(expected, got):
            assert e.shape == o.shape, (e.shape, o.shape)
            assert e.dtype == o.dtype, (e.dtype, o.dtype)
            np.testing.assert_allclose(o, e, rtol=1e-5, atol=1e-6)
    return prog


class TextClassifier(nn.Module):
    """Embedding -> packed bidirectional 2-layer LSTM -> Linear (per token and per sequence)."""

    def __init__(self, vocab: int = 50, embed: int = 16, hidden: int = 24, classes: int = 5):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed, padding_idx=0)
        self.lstm = nn.LSTM(embed, hidden, num_layers=2, bidirectional=True, batch_first=True,
                            dropout=0.3)
        self.tagger = nn.Linear(2 * hidden, classes)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> Any:
        packed = pack_padded_sequence(self.embed(tokens), lengths, batch_first=True,
                                      enforce_sorted=False)
        out, (h, _) = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True)
        return self.tagger(out), self.head(torch.cat([h[-2], h[-1]], dim=1))


def test_text_model_dynamic_batch_and_length() -> None:
    model = TextClassifier()
    example = (torch.randint(1, 50, (3, 7)), torch.tensor([5, 7, 2]))
    others = [(torch.randint(1, 50, (5, 10)), torch.tensor([3, 10, 8, 1, 6])),
              (torch.randint(1, 50, (2, 9)), torch.tensor([4, 2]))]  # max(lengths) < 9
    batch, steps = Dim("batch", min=2), Dim("steps")
    _check(model, example, others,
           dynamic_shapes={"tokens": {0: batch, 1: steps}, "lengths": {0: batch}})


def test_gru_total_length_padding_value_sorted() -> None:
    model = PackedRNN("GRU", num_layers=2, enforce_sorted=True, total_length=9,
                      padding_value=-2.0)
    example = _inputs(model, [6, 4, 1], 6, with_h0=True)
    _check(model, example, [_inputs(model, [5, 5, 2], 6, with_h0=True)])


def test_lstm_proj_size_bias_free() -> None:
    model = PackedRNN("LSTM", proj_size=3, bias=False, bidirectional=True, batch_first=True)
    example = _inputs(model, [4, 6, 2], 6, with_h0=True)
    _check(model, example, [_inputs(model, [3, 5, 1], 6, with_h0=True)])


def test_float64_through_loops() -> None:
    # onnxruntime has no float64 LSTM/GRU/RNN kernels: these are Loops of torch's cells.
    model = PackedRNN("GRU", bidirectional=True).double()
    example = _inputs(model, [4, 6, 2], 6, with_h0=False, dtype=torch.float64)
    _check(model, example, [_inputs(model, [2, 3, 1], 6, with_h0=False, dtype=torch.float64)])


def test_reading_packed_data_is_refused() -> None:
    class Direct(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.GRU(FEATURES, HIDDEN)

        def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            out, _ = self.rnn(pack_padded_sequence(x, lengths, enforce_sorted=False))
            return out.data

    example = (torch.randn(4, 2, FEATURES), torch.tensor([4, 2]))
    with pytest.raises(CaptureError, match="pad_packed_sequence before using"):
        pt2onnx.export(Direct().eval(), example)
    returned = PackedRNN("GRU")
    returned.forward = lambda x, lengths: returned.rnn(  # type: ignore[method-assign]
        pack_padded_sequence(x, lengths, enforce_sorted=False))
    with pytest.raises(CaptureError, match="returns a PackedSequence"):
        pt2onnx.export(returned.eval(), example)


def test_training_dropout_is_refused() -> None:
    model = PackedRNN("LSTM", num_layers=2, dropout=0.5).train()
    with pytest.raises(CaptureError, match="model.eval"):
        pt2onnx.export(model, _inputs(model, [3, 2], 3, with_h0=False))


def test_plain_call_unchanged_and_substitution_undone() -> None:
    class Both(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.LSTM(FEATURES, HIDDEN)

        def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> Any:
            plain, (h, _) = self.rnn(x)  # a padded tensor: nn.LSTM's own forward
            out, _ = self.rnn(pack_padded_sequence(x, lengths, enforce_sorted=False))
            return plain, h, pad_packed_sequence(out)[0]

    x = torch.randn(3, 2, FEATURES)
    prog = _check(Both(), (x, torch.tensor([2, 3])), [(x, torch.tensor([3, 1]))])
    assert "(1 call(s))" in prog.report.capture_strategy
    packed = pack_padded_sequence(torch.randn(3, 2, FEATURES), torch.tensor([3, 2]))
    assert type(packed) is torch.nn.utils.rnn.PackedSequence
    assert torch.nn.utils.rnn.pad_packed_sequence is pad_packed_sequence
    assert {cls: cls.forward for cls in _FORWARDS} == _FORWARDS


_GRID = list(itertools.product(
    ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"],  # kind
    [False, True],  # bidirectional
    [False, True],  # batch_first
    [1, 2],  # num_layers
    [False, True],  # initial states
    [False, True],  # enforce_sorted
))


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "bidirectional", "batch_first", "layers", "with_h0", "sort"),
                         _GRID)
def test_grid(kind: str, bidirectional: bool, batch_first: bool, layers: int, with_h0: bool,
              sort: bool) -> None:
    model = PackedRNN(kind, bidirectional=bidirectional, batch_first=batch_first,
                      num_layers=layers, enforce_sorted=sort, dropout=0.2 if layers > 1 else 0.0)
    lengths, other = ([7, 5, 5, 2], [6, 4, 3, 1]) if sort else ([5, 7, 2, 5], [3, 1, 6, 4])
    _check(model, _inputs(model, lengths, 7, with_h0), [_inputs(model, other, 7, with_h0)])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN_RELU"])
def test_float64_grid(kind: str) -> None:
    model = PackedRNN(kind, num_layers=2, bidirectional=True, batch_first=True).double()
    example = _inputs(model, [4, 6, 2], 6, with_h0=True, dtype=torch.float64)
    _check(model, example, [_inputs(model, [2, 3, 1], 6, with_h0=True, dtype=torch.float64)])


@pytest.mark.slow
def test_stacked_rnns_and_opset17() -> None:
    class Stacked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.GRU(FEATURES, HIDDEN, bidirectional=True)
            self.second = nn.LSTM(2 * HIDDEN, HIDDEN, proj_size=2)

        def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> Any:
            packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
            out, _ = self.first(packed)
            out, (h, c) = self.second(out)
            return pad_packed_sequence(out)[0], h, c

    example = (torch.randn(6, 3, FEATURES), torch.tensor([4, 6, 2]))
    steps, batch = Dim("steps"), Dim("batch", min=2)
    _check(Stacked(), example, [(torch.randn(8, 4, FEATURES), torch.tensor([3, 8, 1, 5]))],
           opset=17, dynamic_shapes={"x": {0: steps, 1: batch}, "lengths": {0: batch}})


@pytest.mark.slow
def test_weights_computed_in_the_graph() -> None:
    # weight_norm makes two weights graph values: their gates are reordered in the graph.
    from torch.nn.utils.parametrizations import weight_norm

    model = PackedRNN("LSTM", bidirectional=True, batch_first=True)
    weight_norm(model.rnn, "weight_hh_l0")
    weight_norm(model.rnn, "weight_ih_l0_reverse")
    prog = _check(model, _inputs(model, [4, 6, 2], 6, True), [_inputs(model, [3, 5, 1], 6, True)])
    assert prog.report.op_histogram.get("Split", 0) > 0


@pytest.mark.slow
def test_pack_sequence_of_a_list() -> None:
    class FromList(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.GRU(FEATURES, HIDDEN, batch_first=True)

        def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> Any:
            packed = torch.nn.utils.rnn.pack_sequence([a, b, c], enforce_sorted=False)
            out, h = self.rnn(packed.to(torch.float32).cpu())
            return pad_packed_sequence(out, batch_first=True), h

    example = (torch.randn(3, FEATURES), torch.randn(5, FEATURES), torch.randn(2, FEATURES))
    _check(FromList(), example, [tuple(torch.randn_like(t) for t in example)])


@pytest.mark.slow
def test_total_length_with_dynamic_steps() -> None:
    # No guard may bound the steps below total_length (a batch as long as it is valid).
    model = PackedRNN("LSTM", batch_first=True, total_length=12, bidirectional=True)
    batch, steps = Dim("batch"), Dim("steps", max=12)
    prog = _check(model, _inputs(model, [4, 6, 2], 6, False),
                  [_inputs(model, [3, 9, 1, 2], 10, False), _inputs(model, [12, 5], 12, False)],
                  dynamic_shapes={"x": {0: batch, 1: steps}, "lengths": {0: batch}})
    assert not prog.report.dynamic_refinements


_FRESH_PROCESS = """
import sys, torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
import pt2onnx
assert "torch._dynamo" not in sys.modules
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(5, 7)
    def forward(self, x, lengths):
        out, h = self.rnn(pack_padded_sequence(x, lengths, enforce_sorted=False))
        return pad_packed_sequence(out)[0], h
pt2onnx.export(M().eval(), (torch.randn(4, 2, 5), torch.tensor([4, 2])))
from torch._dynamo import trace_rules
rules = trace_rules.get_torch_obj_rule_map()
assert pack_padded_sequence in rules
assert not any(getattr(k, "__module__", "") == "pt2onnx.frontends._packed_rnn" for k in rules)
"""


@pytest.mark.slow
def test_dynamo_keeps_torchs_functions() -> None:
    # Dynamo's table of torch functions, built once per process, must not be built
    # while the substitutes are in place (the first capture may import Dynamo).
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _FRESH_PROCESS], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_plain_rnn_final_states_keep_their_shape(kind: str) -> None:
    """A plain (unpacked) call's final states are [layers * directions, batch, hidden], as
    in eager (torch 2.12's decompositions stacked them one dim too many)."""
    rnn = getattr(nn, kind)(FEATURES, HIDDEN, num_layers=2, bidirectional=True)

    class Plain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = rnn

        def forward(self, x: torch.Tensor) -> Any:
            return self.rnn(x)

    x = torch.randn(5, 3, FEATURES)
    prog = pt2onnx.export(Plain().eval(), (x,))
    with torch.no_grad():
        expected = torch.utils._pytree.tree_leaves(Plain().eval()(x))
    got = prog.run(x)
    assert [tuple(o.shape) for o in got] == [tuple(e.shape) for e in expected]
    for e, o in zip(expected, got):
        np.testing.assert_allclose(o, e.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_plain_rnn_over_an_empty_batch(kind: str) -> None:
    """A batch of 0 with a dynamic number of steps (fuzz seed 2612, program 2032): empty
    outputs of eager's shapes, and no recurrent op, which onnxruntime 1.31 crashes on
    (the GRU segfaults) for a 0 batch. Checked before the file is run, so a regression
    fails here instead of taking the test process down."""
    torch.manual_seed(0)
    model = getattr(nn, kind)(2, 3, num_layers=2, bidirectional=True).eval()
    x = torch.randn(6, 0, 2)
    prog = pt2onnx.export(model, (x,), dynamic_shapes=({0: Dim("T", min=2, max=64)},))
    assert not {"LSTM", "GRU", "RNN"} & {n.op_type for n in prog.model.graph}
    session = ort.InferenceSession(prog.model_proto.SerializeToString())
    for steps in (2, 9):
        xs = torch.randn(steps, 0, 2)
        with torch.no_grad():
            expected = [t for t in torch.utils._pytree.tree_leaves(model(xs))]
        got = session.run(None, {session.get_inputs()[0].name: xs.numpy()})
        assert [g.shape for g in got] == [tuple(e.shape) for e in expected]


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_plain_rnn_captured_by_torch_export_with_static_shapes(kind: str, monkeypatch) -> None:
    """Static shapes and no recording (PT2ONNX_CAPTURE=export, or a model the recording
    refuses: fuzz seed 2612, program 1863): torch.export alone left aten::lstm.input,
    which has no rule; the plain RNN is captured as pt2onnx::packed_rnn there too."""
    monkeypatch.setenv("PT2ONNX_CAPTURE", "export")
    torch.manual_seed(0)
    model = getattr(nn, kind)(3, 4, num_layers=2, bidirectional=True).eval()
    x = torch.randn(5, 2, 3)
    prog = pt2onnx.export(model, (x,))
    assert kind in {n.op_type for n in prog.model.graph}
    assert prog.verify(x).ok
