"""A dynamic dim that is 1: every written file is right there, or the export refuses.

Each case exports once (from a size-1 example where the issue found it wrong) and is
run in onnxruntime at size 1, at the example and at a size of 3 or more (issue 26).
"""

from __future__ import annotations

import math

import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn
from torch.export import Dim
from torch.nn import functional as F
from torch.nn.functional import scaled_dot_product_attention  # by name, as whisper does

import pt2onnx
from pt2onnx.errors import CaptureError, SizeOneError, VerificationError


class One(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class Two(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, y):
        return self.fn(x, y)


def _run_at(path, model, inputs_at, sizes):
    """The file at each size against eager: same shapes, close values."""
    session = ort.InferenceSession(str(path))
    for size in sizes:
        given = inputs_at(size)  # once: the inputs are random
        inputs = [t for t in given if t is not None]
        with torch.no_grad():
            expected = model(*given)
        expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
        feed = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)}
        got = session.run(None, feed)
        for e, g in zip(expected, got):
            assert tuple(g.shape) == tuple(e.shape), (size, g.shape, e.shape)
            torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-5, rtol=1e-4)


RANK_CHANGING = {
    "squeeze(0)": (lambda x: x.squeeze(0).sum(-1), lambda b: torch.randn(b, 3, 4), 0),
    "squeeze()": (lambda x: x.squeeze(), lambda b: torch.randn(b, 3, 1), 0),
    "squeeze((0, 2))": (lambda x: x.squeeze((0, 2)) * 2, lambda b: torch.randn(b, 3, 1), 0),
    "squeeze(1) of a middle dim": (lambda x: x.squeeze(1) + 1, lambda b: torch.randn(2, b, 4), 1),
    "reshape then squeeze(-1)": (lambda x: x.reshape(x.shape[0], -1).squeeze(-1),
                                 lambda b: torch.randn(2, b), 1),
}


@pytest.mark.parametrize("case", list(RANK_CHANGING))
def test_rank_changing_op_on_a_dim_that_may_be_1_is_right_at_1_and_above(tmp_path, case):
    """The capture at 1 differs: squeeze of a dynamic dim drops it at run time, where it is
    1 (a general graph, run at 1 and kept); an op after it that needs the captured rank
    makes the file hold both graphs under an If on the input's size. Either way it is
    right at 1 and above, and the report says which."""
    fn, make, axis = RANK_CHANGING[case]
    path = tmp_path / "m.onnx"
    model = One(fn)
    prog = pt2onnx.export(model, (make(1),), path, input_names=["x"],
                          dynamic_axes={"x": {axis: "b"}})
    onnx.checker.check_model(str(path), full_check=True)
    assert any("b=1" in w and ("a graph for each side of 1" in w or "matches eager" in w)
               for w in prog.report.warnings), prog.report.warnings
    assert [d if isinstance(d, int) else str(d) for d in prog.model.graph.inputs[0].shape][
        axis] == "b"
    _run_at(path, model, lambda b: (make(b),), [1, 2, 5])


def test_squeeze_of_two_dims_that_may_be_1_is_one_general_graph(tmp_path):
    """squeeze() of two dynamic dims: each is dropped at run time where it is 1 (issue 37:
    refused before, as a second dim needing a graph of its own)."""
    path = tmp_path / "m.onnx"
    model = One(lambda x: x.squeeze() * 2)
    pt2onnx.export(model, (torch.randn(2, 3),), path, input_names=["x"],
                   dynamic_axes={"x": {0: "a", 1: "c"}})
    sizes = [(1, 1), (1, 3), (2, 1), (2, 3), (4, 5), (0, 1)]
    shapes = iter(sizes)
    _run_at(path, model, lambda _: (torch.randn(*next(shapes)),), sizes)


def test_two_dims_that_each_change_the_result_at_1_are_refused(tmp_path):
    """One If is written at most: a second dim whose 1 also changes the result is refused,
    naming the dim, the op, the line and the ways out, and no file is left."""
    path = tmp_path / "m.onnx"

    def branches(x):
        y = x * 3 if x.size(0) == 1 else x
        return y + 1 if x.size(1) == 1 else y

    with pytest.raises(SizeOneError) as info:
        pt2onnx.export(One(branches), (torch.randn(2, 3),), path,
                       input_names=["x"], dynamic_axes={"x": {0: "a", 1: "c"}})
    message = str(info.value)
    assert "=1" in message and "test_size_one.py" in message
    assert "min=2" in message
    assert not path.exists() and not list(tmp_path.iterdir())


def test_rank_changing_op_with_another_dynamic_dim(tmp_path):
    """The graph at b=1 keeps t dynamic."""
    model = One(lambda x: x.squeeze(0).transpose(0, 1) + 1)
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, (torch.randn(1, 5, 4),), path, input_names=["x"],
                   dynamic_axes={"x": {0: "b", 1: "t"}})
    sizes = iter([(1, 1), (1, 7), (3, 1), (2, 6)])
    _run_at(path, model, lambda _: (torch.randn(next(sizes)[0], 5, 4),), range(1))
    session = ort.InferenceSession(str(path))
    for b, t in [(1, 1), (1, 7), (3, 1), (2, 6)]:
        x = torch.randn(b, t, 4)
        got = session.run(None, {"x": x.numpy()})[0]
        torch.testing.assert_close(torch.from_numpy(got), model(x))


@pytest.mark.parametrize("case", list(RANK_CHANGING))
def test_rank_changing_op_exports_when_the_dim_is_never_1(tmp_path, case):
    """The way out the refusal names: Dim(min=2) and an example of 2 or more."""
    fn, make, axis = RANK_CHANGING[case]
    path = tmp_path / "m.onnx"
    model = One(fn)
    pt2onnx.export(model, (make(2),), path, dynamic_shapes={"x": {axis: Dim("b", min=2)}})
    _run_at(path, model, lambda b: (make(b),), [2, 3, 5])


def test_index_select_with_a_0d_index_keeps_the_dim(tmp_path):
    model = Two(lambda x, i: x.index_select(1, i))
    path = tmp_path / "m.onnx"
    make = lambda b: (torch.randn(b, 4), torch.tensor(2))  # noqa: E731
    pt2onnx.export(model, make(1), path, input_names=["x", "y"], dynamic_axes={"x": {0: "b"}})
    _run_at(path, model, make, [1, 2, 4])


def _bags_1d(b, include_last_offset):
    """b bags of 1..3 indices each (one empty bag when b > 2)."""
    lengths = [(i % 3) + 1 for i in range(b)]
    if b > 2:
        lengths[1] = 0
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    n = int(offsets[-1])
    indices = torch.randint(0, 10, (n,))
    indices[::2] = 0  # padding_idx hits
    return indices, (offsets if include_last_offset else offsets[:-1]), n


# per_sample_weights: torch accepts them only with mode="sum".
MODES = [("sum", False), ("sum", True), ("mean", False), ("max", False)]


@pytest.mark.parametrize(("mode", "weighted"), MODES)
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [None, 0])
def test_embedding_bag_1d_with_offsets_at_every_bag_count(tmp_path, mode, include_last_offset,
                                                         weighted, padding_idx):
    torch.manual_seed(0)
    model = nn.EmbeddingBag(10, 3, mode=mode, include_last_offset=include_last_offset,
                            padding_idx=padding_idx).eval()

    def make(b):
        indices, offsets, n = _bags_1d(b, include_last_offset)
        return indices, offsets, (torch.rand(n) if weighted else None)

    names = ["input", "offsets", "per_sample_weights"] if weighted else ["input", "offsets"]
    axes = {"input": {0: "n"}, "offsets": {0: "bags"}}
    if weighted:
        axes["per_sample_weights"] = {0: "n"}
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, make(1), path, input_names=names, dynamic_axes=axes, opset=18)
    _run_at(path, model, make, [1, 2, 5])


@pytest.mark.parametrize(("mode", "weighted"), MODES)
def test_embedding_bag_2d_with_a_dynamic_batch(tmp_path, mode, weighted):
    model = nn.EmbeddingBag(10, 3, mode=mode).eval()

    def make(b):
        return torch.randint(0, 10, (b, 4)), None, (torch.rand(b, 4) if weighted else None)

    names = ["input", "per_sample_weights"] if weighted else ["input"]
    axes = {"input": {0: "b"}}
    if weighted:
        axes["per_sample_weights"] = {0: "b"}
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, make(1), path, input_names=names, dynamic_axes=axes, opset=18)
    _run_at(path, model, make, [1, 2, 3])


def test_a_declared_dim_is_never_fixed_by_a_trace(tmp_path):
    """x (4, 3) + y (b, 3): b can only be 1 or 4. torch.export refuses the Dim, and a
    trace would fix b to the example's 1: the export refuses instead, and says why."""
    path = tmp_path / "m.onnx"
    with pytest.raises(CaptureError, match="would fix every dim") as info:
        pt2onnx.export(Two(lambda x, y: x + y), (torch.randn(4, 3), torch.randn(1, 3)), path,
                       input_names=["x", "y"], dynamic_axes={"y": {0: "b"}})
    assert "torch.export.export(strict=False) failed" in str(info.value)  # the cause, listed
    assert not path.exists()


def test_broadcasting_between_two_dynamic_dims_either_side_1(tmp_path):
    """x (a, 3) against y (c, 3), both from size-1 examples: torch.export ties c to a, and
    the file still broadcasts either side at 1, as eager does."""
    model = Two(lambda x, y: torch.where(x > 0, x, y) + x * y)
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, (torch.randn(1, 3), torch.randn(1, 3)), path,
                   input_names=["x", "y"], dynamic_axes={"x": {0: "a"}, "y": {0: "c"}})
    pairs = iter([(1, 1), (3, 3), (3, 1), (1, 3)])
    _run_at(path, model, lambda _: tuple(torch.randn(n, 3) for n in next(pairs)), range(4))


BROADCASTS = {
    # name: (fn, x's and y's feature sizes, the (b, c) eager accepts)
    "add": (lambda x, y: x + y, (4, 4), None),
    "where with a broadcast mask": (lambda x, m: torch.where(m > 0, x, 0.0).sum(0), (4, 4),
                                    None),
    "expand to the other's size": (lambda x, y: (y.expand(x.shape[0], -1) * 2, x + y),
                                   (4, 4), "c<=b"),
    "a size read from the broadcast": (
        lambda x, y: (x * y).sum(0, keepdim=True) / (x * y).shape[0], (4, 4), None),
    "squeeze of the broadcast": (lambda x, y: (x * y).squeeze(0), (4, 4), None),
    "matmul batch": (lambda x, y: torch.matmul(x, y), (2, 3, 4), None),
}


@pytest.mark.parametrize("example", [(3, 1), (1, 3)], ids=["c=1", "b=1"])
@pytest.mark.parametrize("case", list(BROADCASTS))
def test_two_dynamic_dims_that_broadcast_from_a_size_1_example(tmp_path, case, example):
    """x (b, ...) against y (c, ...), one of them 1 in the example: torch.export can only
    capture them equal (its size-oblivious broadcast), from an example grown to equal
    sizes. The file takes b = c, b = 1 or c = 1, each name kept, and is right at each
    pair eager accepts (issue 26)."""
    fn, feat, accepts = BROADCASTS[case]
    model = Two(fn)
    b0, c0 = example

    def inputs(b, c):
        if case == "matmul batch":
            return torch.randn(b, 2, 3), torch.randn(c, 3, 4)
        return torch.randn(b, feat[0]), torch.randn(c, feat[1])

    if accepts == "c<=b" and c0 > b0:
        b0, c0 = c0, b0
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, inputs(b0, c0), path, input_names=["x", "y"],
                          dynamic_axes={"x": {0: "b"}, "y": {0: "c"}})
    assert [str(v.shape).split(",")[0] for v in prog.model.graph.inputs] == ["[b", "[c"]
    pairs = [(1, 1), (3, 1), (4, 4), (1, 3)] if accepts is None else [(1, 1), (3, 1), (4, 4)]
    points = iter(pairs)
    _run_at(path, model, lambda _: inputs(*next(points)), range(len(pairs)))


def test_a_difference_at_size_1_that_changes_nothing_is_run_and_kept(tmp_path):
    """A branch on size 1 that computes the same values: the captures differ, the written
    graph is run at size 1, matches, and the export goes on."""

    def fn(x):
        if x.shape[0] == 1:
            return (x * 2).reshape(1, -1)
        return x.reshape(x.shape[0], -1) * 2

    model = One(fn)
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, (torch.randn(3, 2, 2),), path, input_names=["x"],
                          dynamic_axes={"x": {0: "b"}})
    assert any("b=1" in w and "matches eager" in w for w in prog.report.warnings), \
        prog.report.warnings
    _run_at(path, model, lambda b: (torch.randn(b, 2, 2),), [1, 3, 6])


def test_a_branch_on_size_1_that_changes_the_result_gets_a_graph_for_each_side(tmp_path):
    def fn(x):
        if x.shape[0] == 1:
            return x + 100
        return x * 2

    model = One(fn)
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, (torch.randn(3, 2),), path, input_names=["x"],
                   dynamic_axes={"x": {0: "b"}})
    _run_at(path, model, lambda b: (torch.randn(b, 2),), [1, 3, 6])


def test_verify_runs_size_1_and_raises_on_a_mismatch(tmp_path):
    model = One(lambda x: torch.relu(x) * 2)
    prog = pt2onnx.export(model, (torch.randn(3, 4),), input_names=["x"],
                          dynamic_axes={"x": {0: "b"}}, verify=True)
    assert prog.report.verification.runs == ["the example inputs (b=3)", "b=6", "b=1"]

    def wrong(g, x):
        return g.op.Identity(x)  # relu left out: the file runs, with other numbers

    path = tmp_path / "m.onnx"
    with pytest.raises(VerificationError) as info:
        pt2onnx.export(model, (torch.randn(3, 4),), path, input_names=["x"],
                       dynamic_axes={"x": {0: "b"}}, verify=True,
                       custom_translations={torch.ops.aten.relu.default: wrong})
    assert not info.value.result.ok
    assert "NO" in str(info.value)
    assert not path.exists()


class _Recurrent(nn.Module):
    def __init__(self, rnn, with_state):
        super().__init__()
        self.rnn, self.with_state = rnn, with_state

    def forward(self, x, h0):
        out, state = self.rnn(x, h0 if self.with_state else None)
        states = state if isinstance(state, tuple) else (state,)
        return (out, *states)


RNNS = {
    "LSTM": lambda: nn.LSTM(4, 5),
    "LSTM batch_first, 2 layers, bidirectional": lambda: nn.LSTM(
        4, 5, num_layers=2, bidirectional=True, batch_first=True),
    "LSTM proj_size": lambda: nn.LSTM(4, 6, proj_size=3, batch_first=True),
    "GRU": lambda: nn.GRU(4, 5),
    "GRU bidirectional batch_first": lambda: nn.GRU(4, 5, bidirectional=True, batch_first=True),
    "RNN relu, 2 layers": lambda: nn.RNN(4, 5, num_layers=2, nonlinearity="relu"),
    "RNN tanh, no bias": lambda: nn.RNN(4, 5, bias=False, batch_first=True),
}


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("name", list(RNNS))
def test_plain_rnn_with_dynamic_steps_and_batch(tmp_path, name, with_state):
    """Not packed: the steps and the batch stay dynamic, right at 1 and at 5."""
    torch.manual_seed(0)
    rnn = RNNS[name]().eval()
    model = _Recurrent(rnn, with_state).eval()
    dirs = 2 if rnn.bidirectional else 1
    out = rnn.proj_size or rnn.hidden_size

    def make(steps, batch):
        shape = (batch, steps, 4) if rnn.batch_first else (steps, batch, 4)
        h = torch.randn(rnn.num_layers * dirs, batch, out)
        if isinstance(rnn, nn.LSTM):
            h = (h, torch.randn(rnn.num_layers * dirs, batch, rnn.hidden_size))
        return torch.randn(shape), h

    x, h = make(3, 2)
    t_axis, b_axis = (1, 0) if rnn.batch_first else (0, 1)
    h_spec = {1: Dim("batch")}
    spec = {"x": {t_axis: Dim("steps"), b_axis: Dim("batch")},
            "h0": ((h_spec, h_spec) if isinstance(rnn, nn.LSTM) else h_spec) if with_state
            else None}
    path = tmp_path / "m.onnx"
    if not with_state:
        h = None
    pt2onnx.export(model, (x, h), path, dynamic_shapes=spec)
    session = ort.InferenceSession(str(path))
    for steps, batch in [(1, 1), (3, 2), (1, 4), (6, 1), (5, 3)]:
        x, h = make(steps, batch)
        h = h if with_state else None
        with torch.no_grad():
            expected = model(x, h)
        feed_values = [x] + (list(h) if isinstance(h, tuple) else [h] if h is not None else [])
        feed = {i.name: v.numpy() for i, v in zip(session.get_inputs(), feed_values)}
        for e, g in zip(expected, session.run(None, feed)):
            assert tuple(g.shape) == tuple(e.shape), (steps, batch)
            torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-5, rtol=1e-4)


def test_unbatched_rnn_with_dynamic_steps(tmp_path):
    model = _Recurrent(nn.GRU(4, 5), False).eval()
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, (torch.randn(3, 4), None), path, dynamic_shapes={"x": {0: Dim("t")},
                                                                            "h0": None})
    session = ort.InferenceSession(str(path))
    for steps in (1, 3, 7):
        x = torch.randn(steps, 4)
        with torch.no_grad():
            expected = model(x, None)
        for e, g in zip(expected, session.run(None, {session.get_inputs()[0].name: x.numpy()})):
            torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-5, rtol=1e-4)


def test_a_rule_that_reads_a_symbolic_size_as_a_number_is_refused(tmp_path):
    """int(g.shape[0]) in a rule would fix the dim to the example's size (EmbeddingBag's
    bag count did): the translator refuses it, naming the rule and the symbol."""

    def baked(g, x):
        return g.op.Reshape(x, g.const([int(g.shape[0]), -1]))  # the example's size

    path = tmp_path / "m.onnx"
    with pytest.raises(pt2onnx.TranslationError, match="BakedSize: the rule read the symbolic"):
        pt2onnx.export(One(lambda x: torch.relu(x)), (torch.randn(3, 4),), path,
                       input_names=["x"], dynamic_axes={"x": {0: "b"}},
                       custom_translations={torch.ops.aten.relu.default: baked})
    assert not path.exists()


def test_a_static_size_still_reads_as_a_number():
    def fine(g, x):
        return g.op.Reshape(g.op.Relu(x), g.const([-1, int(g.shape[1])]))

    prog = pt2onnx.export(One(lambda x: torch.relu(x)), (torch.randn(3, 4),),
                          input_names=["x"], dynamic_axes={"x": {0: "b"}},
                          custom_translations={torch.ops.aten.relu.default: fine})
    assert prog.verify(torch.randn(5, 4)).ok


def test_an_export_leaves_the_model_as_it_found_it(tmp_path):
    """transformers installs output-capturing hooks during a forward; the recorded run
    left Segformer's behind and its next eager call failed (issue 27)."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.SegformerConfig(
        num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
        hidden_sizes=[8, 16], num_attention_heads=[1, 2], decoder_hidden_size=16, num_labels=3,
        patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2])
    model = transformers.SegformerForSemanticSegmentation(cfg).eval()
    reference = transformers.SegformerForSemanticSegmentation(cfg).eval()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(1, 3, 32, 32)

    def hooks(m):
        return sum(len(sub._forward_hooks) + len(sub._forward_pre_hooks) for sub in m.modules())

    grads = [p.requires_grad for p in model.parameters()]
    for kwargs in ({}, {"input_names": ["x"], "dynamic_axes": {"x": {0: "b"}}}):
        installed = hooks(model)  # 0, then those transformers' own eager call installed
        pt2onnx.export(model, (x,), tmp_path / "m.onnx", **kwargs)
        assert hooks(model) == installed and not model.training
        assert [p.requires_grad for p in model.parameters()] == grads
        with torch.no_grad():
            torch.testing.assert_close(model(x).logits, reference(x).logits)


def test_zero_in_place_on_an_intermediate_static_and_dynamic(tmp_path):
    """The static recording keeps `y.zero_()` as aten.zero (the capture at size 1 uses it)."""
    model = One(lambda x: (lambda y: (y.zero_(), y + x)[1])(x * 2))
    for kwargs in ({}, {"input_names": ["x"], "dynamic_axes": {"x": {0: "b"}}}):
        prog = pt2onnx.export(model, (torch.randn(3, 4),), **kwargs)
        for b in (1, 3, 5) if kwargs else (3,):
            assert prog.verify(torch.randn(b, 4)).ok


# The rules that read a symbolic size (docs/dynamic.md, "Audit"): each from a size-1
# example and from a larger one, run at 1, at the example and at 4.
SIZE_READING_RULES = {
    # view / reshape to the tensor's own shape: a no-op only where the shapes are
    # provably equal (statically_known_true), for every size.
    "view to its own shape": (lambda x: x.view(x.shape[0], 3, 4) * 2, lambda b: torch.randn(b, 3, 4)),
    "reshape merging the dynamic dim": (lambda x: x.reshape(-1, 4).sum(0), lambda b: torch.randn(b, 3, 4)),
    # as_strided that renames the layout (adaptive_avg_pool2d's restride): kept as x only
    # where sizes, offset and numel are provably equal.
    "adaptive_avg_pool2d restride": (lambda x: F.adaptive_avg_pool2d(x, 1).flatten(1),
                                     lambda b: torch.randn(b, 3, 4, 4)),
    "as_strided of a contiguous tensor": (lambda x: x.as_strided(x.shape, x.stride()) + 1,
                                          lambda b: torch.randn(b, 3, 4)),
    # squeeze: a symbolic dim is never taken for 1 by the rule (the size-1 proof adds the
    # other graph where eager drops it).
    "squeeze(-1) of a static 1 beside B": (lambda x: x.squeeze(-1) * 3, lambda b: torch.randn(b, 3, 1)),
    # an index whose length follows B
    "index_select by a dynamic index": (lambda x: x.index_select(0, torch.arange(x.shape[0]).flip(0)),
                                        lambda b: torch.randn(b, 3)),
}


@pytest.mark.parametrize("example", [1, 2])
@pytest.mark.parametrize("case", list(SIZE_READING_RULES))
def test_rules_that_read_a_symbolic_size_at_1_and_above(tmp_path, case, example):
    fn, make = SIZE_READING_RULES[case]
    model = One(fn)
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, (make(example),), path, input_names=["x"],
                   dynamic_axes={"x": {0: "b"}})
    _run_at(path, model, lambda b: (make(b),), [1, example, 4])


class _WhisperLikeAttention(nn.Module):
    """whisper's self-attention: ``is_causal = mask is not None and n_ctx > 1`` (a SymBool
    with a dynamic length), sdpa imported by name, a mask buffer it never passes to sdpa,
    and ``past`` keys the query does not have (top-left causal alignment)."""

    def __init__(self, past: int) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 24)
        self.register_buffer("mask", torch.full((16, 16), float("-inf")).triu_(1))
        self.past = past

    def forward(self, x):
        n_ctx = x.shape[1]
        q, k, v = self.proj(x).view(x.shape[0], n_ctx, 3, 2, 4).permute(2, 0, 3, 1, 4)
        if self.past:
            k = torch.cat([k, k[:, :, :1].expand(-1, -1, self.past, -1)], 2)
            v = torch.cat([v, v[:, :, :1].expand(-1, -1, self.past, -1)], 2)
        mask = self.mask
        return scaled_dot_product_attention(q, k, v, is_causal=mask is not None and n_ctx > 1)


@pytest.mark.parametrize("past", [0, 2])
@pytest.mark.parametrize("example", [1, 3])
def test_sdpa_is_causal_as_a_symbool_of_the_length(tmp_path, past, example):
    """The SymBool is not evaluated (it would fix the length at a 1-token example): the
    causal mask is written with the condition inside, right at 1 and above."""
    model = _WhisperLikeAttention(past).eval()
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, (torch.randn(1, example, 8),), path, input_names=["x"],
                   dynamic_axes={"x": {1: "t"}})
    _run_at(path, model, lambda t: (torch.randn(1, t, 8),), [1, example, 5])


class _GatherThenChunk(nn.Module):
    def forward(self, x, index, y):
        return torch.gather(x.mT.mT, 0, index), torch.chunk(y, 1, 0)[-1] * 2


def test_a_size_1_example_is_scaled_into_plain_tensors(tmp_path):
    """From a size-1 example pt2onnx captures at twice the size first. The grown inputs
    were views of a repeat, which torch.export guards differently from plain tensors:
    chunk's guard then could not be proved and the dim was refused as fixed (fuzz seed
    2612, program 587)."""
    model = _GatherThenChunk()
    b = Dim("b", min=1, max=64)

    def inputs(n):
        return (torch.randn(1, n, 2), torch.zeros(3, n, 2, dtype=torch.int64),
                torch.randint(0, 5, (n,)))

    path = tmp_path / "m.onnx"
    pt2onnx.export(model, inputs(1), path, dynamic_shapes=({1: b}, {1: b}, {0: b}))
    _run_at(path, model, inputs, [1, 4])


def _write_through_contiguous(x):
    v = torch.movedim(x * -2.5, 1, 0)  # (2, b, 2): contiguous only at b = 1
    flat = v.reshape(-1, 2)  # a view at b = 1, a copy otherwise
    v.contiguous()[:, :].sub_(1.5)  # writes into v (and flat) at b = 1 only
    return flat * 1


def _write_through_reshape(x):
    t = (x * 1).transpose(0, 1)  # (2, b): contiguous only at b = 1
    t.reshape(-1).add_(3)  # writes into t at b = 1 only
    return t + 0


def _write_through_flatten(x):
    t = (x * 1).transpose(0, 1)
    t.flatten().mul_(-1)
    return t.sum(0)


WRITES_THROUGH_LAYOUT = {
    "contiguous": (_write_through_contiguous, lambda b: (torch.randn(b, 2, 2),)),
    "reshape": (_write_through_reshape, lambda b: (torch.randn(b, 2),)),
    "flatten": (_write_through_flatten, lambda b: (torch.randn(b, 3),)),
}


@pytest.mark.parametrize("case", list(WRITES_THROUGH_LAYOUT))
def test_an_in_place_write_through_a_reshape_that_is_a_view_only_at_1(tmp_path, case):
    """Both captures hold the same ops, but at b = 1 the reshape or contiguous() returns
    its input and the write reaches another tensor (fuzz seed 2613, program 8014): the
    point is run, and gets a graph of its own."""
    fn, inputs_at = WRITES_THROUGH_LAYOUT[case]
    model = One(fn)
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, inputs_at(4), path, input_names=["x"],
                          dynamic_axes={"x": {0: "b"}})
    assert any("b=1" in w and "graph for each side" in w for w in prog.report.warnings), \
        prog.report.warnings
    _run_at(path, model, inputs_at, [1, 4, 7])


def test_an_in_place_write_that_reaches_nothing_else_is_not_run_at_1(tmp_path):
    def fn(x):
        y = (x * 2).flatten(1)
        y.relu_()  # y is the only tensor read afterwards: no layout question
        return y + 1

    model = One(fn)
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, (torch.randn(4, 2, 3),), path, input_names=["x"],
                          dynamic_axes={"x": {0: "b"}})
    assert not any("b=1" in w for w in prog.report.warnings), prog.report.warnings
    _run_at(path, model, lambda b: (torch.randn(b, 2, 3),), [1, 4, 7])


def test_broadcasting_between_four_dynamic_dims_from_size_1_examples(tmp_path):
    """x * y from (1, 4) and (3, 1) examples, all four dims dynamic (issue 37: torch.export
    failed on the doubled example, 2 against 6): the size-1 dims grow as the dims they
    broadcast against, and the file is right wherever eager runs, either side at 1."""
    path = tmp_path / "m.onnx"
    model = Two(lambda x, y: x * y + 1)
    pt2onnx.export(model, (torch.randn(1, 4), torch.randn(3, 1)), path,
                   input_names=["x", "y"],
                   dynamic_axes={"x": {0: "a", 1: "b"}, "y": {0: "c", 1: "d"}})
    pairs = [((1, 4), (3, 1)), ((2, 4), (2, 4)), ((5, 1), (1, 6)), ((1, 1), (3, 3)),
             ((3, 4), (1, 1)), ((1, 1), (1, 1)), ((4, 3), (4, 1)), ((0, 2), (1, 2))]
    shapes = iter(pairs)

    def inputs(_):
        xs, ys = next(shapes)
        return torch.randn(*xs), torch.randn(*ys)

    _run_at(path, model, inputs, range(len(pairs)))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 3, 7])
def test_embedding_bag_indices_after_the_last_offset(mode, padding_idx):
    """include_last_offset with indices after the last offset (PyTorch's legacy
    test_embedding_bag; issue 37): eager leaves them out of the last bag's sum without a
    padding_idx, but divides its mean by the count to the end of indices, and takes them
    into the bag for max and with a padding_idx. The file was silently wrong there before."""
    torch.manual_seed(0)
    model = nn.EmbeddingBag(10, 5, mode=mode, include_last_offset=True, padding_idx=padding_idx)
    for indices, offsets in [([1, 2, 3, 4, 5, 6, 7], [0, 2, 5, 6]),
                             ([1, 2, 3, 4, 5, 6, 7], [0, 2, 2, 6]),
                             ([4, 3, 7], [0, 1, 1])]:
        args = (torch.tensor(indices), torch.tensor(offsets))
        prog = pt2onnx.export(model, args)
        torch.testing.assert_close(torch.from_numpy(prog.run(*args)[0]), model(*args).detach())


def test_a_size_1_the_model_cannot_run_at_is_left_out_as_reported(tmp_path):
    """``x.squeeze()`` drops B at 1, so ``sort(dim=2)`` is out of range there and eager
    fails; torch.export still captures it at 1 (its meta kernel does not check the dim),
    and the rule failed on that capture, an untyped crash (fuzz seed 7411 program 3870).
    1 is now left out of B's range, as reported, and the file is right above it."""
    model = One(lambda x: torch.sort(x.squeeze(), 2, descending=True).values)
    with pytest.raises(IndexError):
        model(torch.randn(1, 4, 3))
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, (torch.randn(5, 4, 3),), path,
                          dynamic_shapes=({0: Dim("B", min=1, max=64)},))
    assert any(n.startswith("B bounded to [2, 64]: eager fails on the example resized to B=1")
               for n in prog.report.dynamic_refinements), prog.report.dynamic_refinements
    _run_at(path, model, lambda b: (torch.randn(b, 4, 3),), (2, 5, 64))


class _TwoSymbolsOfOneDim(nn.Module):
    """B on two inputs, which torch.export keeps as two symbols; the example's index
    values (5) are out of range at B=1, so the size-1 point cannot be run as it stands."""

    def forward(self, x, index, src, y):
        kept = torch.tensor([0, 2, 1, -1], dtype=torch.int32)[-3:]
        added = torch.index_add(x, 0, index, src)
        return (added.narrow(0, 0, round(added.shape[0] / 2)),
                kept[y.size(0) - 4::math.ceil(y.size(0) / 16)])


def test_two_symbols_of_one_dim_are_1_together(tmp_path):
    """The size-1 point set one of B's two symbols to 1 and left the other input at the
    example's 6; the capture there, joined under an If for B=1, held the slice start
    at 6 - 4, and the file was wrong at 1 (fuzz seed 7411 program 4186, found once the
    ``sym_storage_offset`` rule's crash on a constant was fixed)."""
    def inputs_at(b, index=None):
        return (torch.randn(b, 5), torch.randint(0, b, (2,)) if index is None else index,
                torch.randn(2, 5), torch.randn(b))

    model = _TwoSymbolsOfOneDim()
    path = tmp_path / "m.onnx"
    b = Dim("B", min=1, max=64)
    pt2onnx.export(model, inputs_at(6, torch.tensor([5, 3])), path,
                   dynamic_shapes=({0: b}, None, None, {0: b}))
    _run_at(path, model, inputs_at, (1, 2, 3, 4, 6, 7, 17, 64))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 1, -1])
def test_embedding_bag_is_translated_whole(tmp_path, mode, padding_idx):
    """``F.embedding_bag`` reaches the exporter as ``embedding_bag.padding_idx``, which had
    no rule: torch's decomposition was traced per node, and beside a split by
    ``len(x) // 4`` it fixed the number of indices (fuzz seed 7411 programs 681, 1023, a
    typed ``SpecializedTrace``). It has a rule of its own now (a negative ``padding_idx``
    counts from the end of the weight's rows); the three outputs ``F.embedding_bag``
    unpacks and drops are not read."""
    weight = torch.randn(3, 4)
    model = One(lambda x: F.embedding_bag(x, weight, mode=mode, padding_idx=padding_idx))
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, (torch.randint(0, 3, (1, 3)),), path,
                          dynamic_shapes=({0: Dim("B", min=1, max=64)},))
    assert not any("embedding_bag" in op for op, _, _ in prog.report.decompositions), \
        prog.report.decompositions
    _run_at(path, model, lambda b: (torch.randint(0, 3, (b, 3)),), (1, 2, 5, 64))
