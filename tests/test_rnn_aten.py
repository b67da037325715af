"""RNN ops at the ATen level: ``aten.lstm.input`` / ``gru.input`` / ``rnn_tanh.input`` /
``rnn_relu.input`` with a dynamic number of steps and a dynamic batch (issue 37).

An RNN module that the pre-capture rewrite cannot see (kept in a plain list, or called
from a closure) reaches torch.export as the ATen op. Capture keeps it whole
(``_compat.whole_rnn_ops``) and its rule writes ONNX LSTM / GRU / RNN (a Loop for an
LSTM with ``proj_size``). Each export is run in onnxruntime against eager at the
example, at one step and a batch of 1, and at two other sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.export import Dim
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import pt2onnx
from pt2onnx import _compat
from pt2onnx.errors import TranslationError

FEATURES, HIDDEN = 4, 5
EXAMPLE = (6, 2)  # (steps, batch)
SIZES = [EXAMPLE, (1, 1), (9, 3), (2, 5)]

RNNS: dict[str, Callable[[], nn.RNNBase]] = {
    "LSTM": lambda: nn.LSTM(FEATURES, HIDDEN),
    "LSTM batch_first": lambda: nn.LSTM(FEATURES, HIDDEN, batch_first=True),
    "LSTM 2 layers bidirectional batch_first": lambda: nn.LSTM(
        FEATURES, HIDDEN, num_layers=2, bidirectional=True, batch_first=True),
    "LSTM proj_size bidirectional": lambda: nn.LSTM(
        FEATURES, 6, proj_size=3, bidirectional=True),
    "GRU 2 layers": lambda: nn.GRU(FEATURES, HIDDEN, num_layers=2),
    "GRU bidirectional batch_first": lambda: nn.GRU(
        FEATURES, HIDDEN, bidirectional=True, batch_first=True),
    "RNN tanh no bias": lambda: nn.RNN(FEATURES, HIDDEN, bias=False, batch_first=True),
    "RNN relu 2 layers bidirectional": lambda: nn.RNN(
        FEATURES, HIDDEN, num_layers=2, nonlinearity="relu", bidirectional=True),
}


class InList(nn.Module):
    """The RNN in a plain list: not a submodule, so model.modules() does not list it."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.rnns = [rnn]

    def forward(self, x: torch.Tensor, *h0: torch.Tensor) -> Any:
        hx = None if not h0 else h0[0] if len(h0) == 1 else h0
        return self.rnns[0](x, hx)


class InClosure(nn.Module):
    """The RNN called through a lambda, held by no attribute of the model."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.f = lambda x, hx: rnn(x, hx)

    def forward(self, x: torch.Tensor, *h0: torch.Tensor) -> Any:
        hx = None if not h0 else h0[0] if len(h0) == 1 else h0
        return self.f(x, hx)


def _inputs(rnn: nn.RNNBase, steps: int, batch: int, with_state: bool) -> tuple[Any, ...]:
    shape = (batch, steps, FEATURES) if rnn.batch_first else (steps, batch, FEATURES)
    args: tuple[Any, ...] = (torch.randn(shape),)
    if with_state:
        layers = rnn.num_layers * (2 if rnn.bidirectional else 1)
        args += (torch.randn(layers, batch, getattr(rnn, "proj_size", 0) or rnn.hidden_size),)
        if isinstance(rnn, nn.LSTM):
            args += (torch.randn(layers, batch, rnn.hidden_size),)
    return args


def _spec(rnn: nn.RNNBase, with_state: bool) -> dict[str, Any]:
    steps, batch = Dim("steps"), Dim("batch")
    t_axis, b_axis = (1, 0) if rnn.batch_first else (0, 1)
    states = 0 if not with_state else 2 if isinstance(rnn, nn.LSTM) else 1
    spec: dict[str, Any] = {"x": {t_axis: steps, b_axis: batch}}
    if states:
        spec["h0"] = tuple({1: batch} for _ in range(states))
    return spec


def _check(model: nn.Module, rnn: nn.RNNBase, with_state: bool) -> pt2onnx.OnnxProgram:
    torch.manual_seed(0)
    example = _inputs(rnn, *EXAMPLE, with_state)
    prog = pt2onnx.export(model, example, dynamic_shapes=_spec(rnn, with_state))
    # The module was out of the rewrite's sight: the ATen op was kept whole.
    assert "packed_rnn" not in prog.report.capture_strategy, prog.report.capture_strategy
    ops = {n.op_type for n in prog.model_proto.graph.node}
    expected_op = "Loop" if getattr(rnn, "proj_size", 0) else type(rnn).__name__
    assert expected_op in ops, ops
    for steps, batch in SIZES:
        args = example if (steps, batch) == EXAMPLE else _inputs(rnn, steps, batch, with_state)
        with torch.no_grad():
            expected = torch.utils._pytree.tree_leaves(model(*args))
        got = prog.run(*args)
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            assert tuple(g.shape) == tuple(e.shape), (steps, batch)
            torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-5, rtol=1e-4)
    return prog


@pytest.mark.parametrize("holder", [InList, InClosure], ids=["list", "closure"])
@pytest.mark.parametrize("name", list(RNNS))
def test_hidden_rnn_with_dynamic_steps_and_batch(name: str, holder: type[nn.Module]) -> None:
    torch.manual_seed(0)
    rnn = RNNS[name]().eval()
    _check(holder(rnn).eval(), rnn, with_state=False)


@pytest.mark.parametrize("name", ["LSTM 2 layers bidirectional batch_first",
                                  "LSTM proj_size bidirectional", "GRU 2 layers",
                                  "RNN relu 2 layers bidirectional"])
def test_hidden_rnn_with_initial_states(name: str) -> None:
    torch.manual_seed(0)
    rnn = RNNS[name]().eval()
    _check(InList(rnn).eval(), rnn, with_state=True)
    _check(InClosure(rnn).eval(), rnn, with_state=True)


def test_hidden_rnn_left_in_training_mode_without_dropout() -> None:
    """model.eval() does not reach an RNN in a list: train=True with no dropout is exact."""
    torch.manual_seed(0)
    rnn = nn.LSTM(FEATURES, HIDDEN, num_layers=2, batch_first=True)
    assert rnn.training
    _check(InList(rnn).eval(), rnn, with_state=False)


def test_hidden_rnn_with_dropout_in_training_mode_is_refused() -> None:
    rnn = nn.GRU(FEATURES, HIDDEN, num_layers=2, dropout=0.5)
    with pytest.raises(TranslationError, match=r"\.eval\(\)"):
        pt2onnx.export(InList(rnn).eval(), _inputs(rnn, *EXAMPLE, False))


class WrittenThroughAView(InList):
    """An in-place write through a view first: the program goes through torch's
    run_decompositions (functionalization), which retraces the RNN op."""

    def forward(self, x: torch.Tensor, *h0: torch.Tensor) -> Any:
        y = x.clone()
        y.transpose(1, 2)[:, 0].mul_(2)
        return self.rnns[0](y)


def test_hidden_rnn_through_functionalization() -> None:
    torch.manual_seed(0)
    rnn = nn.GRU(FEATURES, HIDDEN, batch_first=True).eval()
    prog = _check(WrittenThroughAView(rnn).eval(), rnn, with_state=False)
    assert "run_decompositions" in prog.report.decomposition


def test_static_hidden_rnn_is_one_onnx_op() -> None:
    """Without dynamic shapes the ATen op keeps its rule too: one LSTM, not an unrolled
    graph, and the file still runs at other sizes' shapes of the same example."""
    torch.manual_seed(0)
    rnn = nn.LSTM(FEATURES, HIDDEN, bidirectional=True).eval()
    model = InList(rnn).eval()
    example = _inputs(rnn, *EXAMPLE, True)
    prog = pt2onnx.export(model, example)
    assert [n.op_type for n in prog.model_proto.graph.node].count("LSTM") == 1
    with torch.no_grad():
        expected = torch.utils._pytree.tree_leaves(model(*example))
    for e, g in zip(expected, prog.run(*example)):
        torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-5, rtol=1e-4)


class PackedInList(nn.Module):
    """pack -> an RNN kept in a plain list -> unpack (torch.export would see aten.lstm.data
    on a packed size read from the lengths)."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.rnns = [rnn]

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> Any:
        first = self.rnns[0].batch_first
        packed = pack_padded_sequence(x, lengths, batch_first=first, enforce_sorted=False)
        out, state = self.rnns[0](packed)
        return pad_packed_sequence(out, batch_first=first)[0], state


class PackedInClosure(PackedInList):
    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__(rnn)
        self.rnns = []
        self.f = lambda packed: rnn(packed)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> Any:
        packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
        out, state = self.f(packed)
        return pad_packed_sequence(out)[0], state


@pytest.mark.parametrize("holder,rnn", [
    (PackedInList, lambda: nn.LSTM(FEATURES, HIDDEN, num_layers=2, bidirectional=True,
                                   batch_first=True)),
    (PackedInList, lambda: nn.GRU(FEATURES, HIDDEN)),
    (PackedInClosure, lambda: nn.LSTM(FEATURES, HIDDEN, bidirectional=True)),
    (PackedInClosure, lambda: nn.RNN(FEATURES, HIDDEN, nonlinearity="relu")),
], ids=["list-LSTM", "list-GRU", "closure-LSTM", "closure-RNN"])
def test_hidden_rnn_on_packed_sequences(holder: type[nn.Module],
                                        rnn: Callable[[], nn.RNNBase]) -> None:
    """The RNN out of sight is given a PackedSequence, whose packed size torch.export
    cannot capture (aten.lstm.data after a data-dependent pack): capture finds the RNN in
    the list or the closure, keeps the sequences padded and the RNN becomes
    pt2onnx::packed_rnn, as for a submodule."""
    torch.manual_seed(0)
    module = rnn().eval()
    model = holder(module).eval()
    first = model.rnns[0].batch_first if model.rnns else False

    def make(steps: int, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (len(lengths), steps, FEATURES) if first else (steps, len(lengths), FEATURES)
        return torch.randn(shape), torch.tensor(lengths)

    example = make(6, [6, 2, 4])
    t_axis, b_axis = (1, 0) if first else (0, 1)
    batch = Dim("batch")
    spec = {"x": {t_axis: Dim("steps"), b_axis: batch}, "lengths": {0: batch}}
    prog = pt2onnx.export(model, example, dynamic_shapes=spec)
    assert "packed_rnn" in prog.report.capture_strategy, prog.report.capture_strategy
    for args in [example, make(1, [1]), make(9, [3, 9, 1, 5]), make(2, [1, 2])]:
        with torch.no_grad():
            expected = torch.utils._pytree.tree_leaves(model(*args))
        got = prog.run(*args)
        for e, g in zip(expected, got):
            assert tuple(g.shape) == tuple(e.shape)
            torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-5, rtol=1e-4)


def test_holds_hidden_rnn() -> None:
    from pt2onnx.frontends import holds_hidden_rnn

    rnn = nn.GRU(FEATURES, HIDDEN)
    assert holds_hidden_rnn(InList(rnn)) and holds_hidden_rnn(InClosure(rnn))
    assert not holds_hidden_rnn(nn.Sequential(rnn))  # a submodule: the rewrite sees it
    assert not holds_hidden_rnn(nn.Sequential(nn.Linear(2, 2), nn.LayerNorm(2)))


def test_whole_rnn_ops_restores_torch_kernels() -> None:
    """Outside capture, torch's own Python kernels are back (eager and user traces see
    torch unchanged)."""
    from torch._decomp import decomposition_table

    op = torch.ops.aten.lstm.input
    before, table = dict(op.py_kernels), decomposition_table.get(op)
    with _compat.whole_rnn_ops():
        assert op.py_kernels != before
    assert op.py_kernels == before
    assert decomposition_table.get(op) is table
