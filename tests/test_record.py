"""The static recording: one eager run recorded at the dispatcher, used only when exact.

Each case checks which capture was used and compares onnxruntime with eager, so a
recording that bakes in a value it should not would fail on the second input.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import pt2onnx
from pt2onnx.capture._capture import RECORDED, _try_record


def _export(model, *inputs, **kwargs):
    prog = pt2onnx.export(model, inputs, **kwargs)
    return prog, prog.report.capture_strategy


def _matches(prog, model, *inputs):
    got = prog.run(*inputs)
    want = model(*inputs)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(torch.from_numpy(g), w, rtol=1e-4, atol=1e-5)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        h = self.lin(x)
        h.relu_()  # in place on a fresh intermediate: recorded as relu
        h = self.norm(h) * self.scale.item()  # a buffer's value: a constant of the model
        a, b = h.chunk(2, dim=-1)
        q = a.unflatten(-1, (2, 2)).transpose(0, 1)
        att = nn.functional.scaled_dot_product_attention(q, q, q)
        return att.transpose(0, 1).flatten(1) + b


def test_static_model_is_recorded_with_composites_whole():
    model = Block().eval()
    x = torch.randn(5, 8)
    prog, strategy = _export(model, x)
    assert strategy == RECORDED, prog.report.fallbacks
    ops = prog.report.op_histogram
    assert ops.get("LayerNormalization") == 1 and "Relu" in ops
    assert "ReduceMean" not in ops  # layer_norm stayed one op
    _matches(prog, model, x)
    _matches(prog, model, torch.randn(5, 8))


class Branch(nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x - 1


class ToList(nn.Module):
    def forward(self, x):
        n = int(x.abs().argmax().tolist())
        return x[:n + 1] * 1.0


class MaskSelect(nn.Module):
    def forward(self, x):
        return x[x > 0].sum().reshape(1) + x.new_zeros(x[x > 0].shape[0] * 0 + 1)


class MutatesInput(nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


class WritesThroughView(nn.Module):
    def forward(self, x):
        y = x * 2
        y[:, 0] = 0  # select(1, 0).fill_(0): recorded as a select_scatter into y
        y[:, ::2].mul_(3)  # every second column: not a box of y, given up
        return y


class RandomValue(nn.Module):
    def forward(self, x):
        k = int(torch.randint(1, 3, ()).item())
        return x[:k]


@pytest.mark.parametrize("model, why", [
    (Branch(), "depends on the inputs"),
    (ToList(), "tolist reads values"),
    (MaskSelect(), "output shape depends"),
    (MutatesInput(), "mutates a model input"),
    (WritesThroughView(), "mutates"),
    (RandomValue(), "depends on the inputs"),
], ids=lambda v: v if isinstance(v, str) else type(v).__name__)
def test_what_a_recording_cannot_capture_goes_to_torch_export(model, why):
    x = torch.randn(3, 4)
    prog = pt2onnx.export(model, (x.clone(),))
    assert prog.report.capture_strategy != RECORDED
    assert prog.report.fallbacks[0].startswith("static recording not used")
    assert why in prog.report.fallbacks[0], prog.report.fallbacks[0]


def test_mutation_through_a_view_still_matches():
    x = torch.randn(3, 4)
    prog = pt2onnx.export(WritesThroughView(), (x,))
    _matches(prog, WritesThroughView(), torch.randn(3, 4))


def test_model_state_is_left_as_it_was():
    class Caches(nn.Module):
        grid = None

        def forward(self, x):
            if self.grid is None or self.grid.shape != x.shape[-1:]:
                self.grid = torch.arange(x.shape[-1], dtype=x.dtype)
            return x + self.grid

    model = Caches()
    prog, strategy = _export(model, torch.randn(2, 5))
    assert strategy == RECORDED and model.grid is None
    _matches(prog, model, torch.randn(2, 5))


def test_environment_variable_turns_the_recording_off(monkeypatch):
    monkeypatch.setenv("PT2ONNX_CAPTURE", "export")
    _, strategy = _export(Block().eval(), torch.randn(5, 8))
    assert strategy.startswith("torch.export")


def test_dynamic_shapes_never_record():
    prog = pt2onnx.export(Block().eval(), (torch.randn(5, 8),),
                          dynamic_shapes=({0: torch.export.Dim("n")},))
    assert prog.report.capture_strategy.startswith("torch.export")


def test_a_custom_rule_for_a_composite_op_still_fires():
    calls = []

    def chunk_rule(g, x, chunks, dim=0):
        calls.append(chunks)
        return g.op.Split(x, axis=dim, num_outputs=chunks, _outputs=chunks)

    class Chunk(nn.Module):
        def forward(self, x):
            a, b = torch.chunk(x, 2, dim=1)
            return a - b

    x = torch.randn(3, 4)
    prog = pt2onnx.export(Chunk(), (x,),
                          custom_translations={torch.ops.aten.chunk.default: chunk_rule})
    assert calls == [2] and prog.report.capture_strategy.startswith("torch.export")
    _matches(prog, Chunk(), torch.randn(3, 4))


def test_errors_name_the_model_source_line():
    class Bad(nn.Module):
        def forward(self, x):
            return torch.max(x, 0)[0]

    def one_output(g, x, dim, keepdim=False):
        return g.op.ReduceMax(x, g.const([dim]), keepdims=int(keepdim))

    with pytest.raises(pt2onnx.TranslationError, match=r"torch\.max\(x, 0\)\[0\]"):
        pt2onnx.export(Bad(), (torch.randn(3, 4),),
                       custom_translations={torch.ops.aten.max.dim: one_output})


class WritesThroughData(nn.Module):
    def forward(self, x):
        y = x * 2
        d = y.data  # an alias made outside the dispatcher
        d.add_(1)
        return y + 0


class WritesThroughDetach(nn.Module):
    def forward(self, x):
        y = x * 2
        y.detach().mul_(3)  # detach aliases y: the write shows in y
        return y + 0


class InstanceNormRelu(nn.Module):
    """instance_norm returns a view of its batch_norm's output (``view_as``), which
    ReLU(inplace=True) writes: raft, GANs, style transfer."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(3, 8, 3), nn.InstanceNorm2d(8)

    def forward(self, x):
        return torch.relu_(self.norm(self.conv(x))) * 2


class LinearRelu(nn.Module):
    """F.linear on a 3-D input returns a view of its 2-D product."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 6)

    def forward(self, x):
        h = self.lin(x)
        flat = h.flatten(0, 1)  # another whole view, read after the write
        h.relu_()
        return flat + h.sum()


class WritesWithAPartialView(nn.Module):
    def forward(self, x):
        y = x * 2
        part = y[:, :2]  # part of y: the write below changes it
        y.relu_()
        return part + 1


@pytest.mark.parametrize("model", [WritesThroughData(), WritesThroughDetach(),
                                   InstanceNormRelu(), LinearRelu()],
                         ids=lambda m: type(m).__name__)
def test_a_write_into_a_whole_alias_is_recorded(model):
    # The aliases (x.data, detach, a view_as, a flatten) are the written tensor in another
    # shape: each reads the new value. torch.export itself crashes (a segfault in torch
    # 2.13's functionalization) on WritesThroughData.
    shape = (2, 3, 9, 9) if isinstance(model, InstanceNormRelu) else (
        (2, 3, 4) if isinstance(model, LinearRelu) else (3, 4))
    prog, strategy = _export(model.eval(), torch.randn(shape))
    assert strategy == RECORDED, prog.report.fallbacks
    for _ in range(2):
        _matches(prog, model, torch.randn(shape))


def test_a_write_seen_through_part_of_a_tensor_is_recorded():
    # part reads its slice of the new value
    prog, strategy = _export(WritesWithAPartialView(), torch.randn(3, 4))
    assert strategy == RECORDED, prog.report.fallbacks
    for _ in range(2):
        _matches(prog, WritesWithAPartialView(), torch.randn(3, 4))


class _InplaceKeepsDtype(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("shift", torch.randn(5))

    def forward(self, x):  # type: ignore[no-untyped-def]
        # Constants only (folded at export), as in the fuzz program, and the same from
        # an input.
        c = torch.arange(x.shape[0]).to(torch.float16)
        c += self.shift  # float32 into float16: the result stays float16
        v = x.to(torch.float16) * 2
        v += self.shift
        w = (x > 0).to(torch.int32)
        w += torch.ones(5, dtype=torch.int64)  # int64 into int32: stays int32
        return torch.minimum(c, c), torch.minimum(v, v), w * 3


def test_an_inplace_op_keeps_its_targets_dtype():
    """The recording writes an in-place op on a fresh value as its functional form, which
    promotes; the in-place op keeps the target's dtype, so a cast follows (fuzz seed
    2612, program 10707: the file failed onnx's check)."""
    import onnx

    model = _InplaceKeepsDtype()
    x = torch.randn(5) * 3
    prog, strategy = _export(model, x)
    assert strategy == RECORDED
    onnx.checker.check_model(prog.model_proto, full_check=True)
    got, want = prog.run(x), model(x)
    assert [g.dtype for g in got] == ["float16", "float16", "int32"]
    torch.testing.assert_close(torch.from_numpy(got[0]), want[0])
    # float16: onnxruntime may keep x * 2 in float32 before the add (one rounding less)
    torch.testing.assert_close(torch.from_numpy(got[1]), want[1], rtol=1e-3, atol=4e-3)
    torch.testing.assert_close(torch.from_numpy(got[2]), want[2])


class _Heavy(nn.Module):
    """A matrix product, a convolution and attention large enough to be recorded by shape
    only, with cheap ops on their outputs, and argmax indices that must stay valid."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(256, 256)
        self.conv = nn.Conv2d(16, 32, 3, padding=1)

    def forward(self, x: torch.Tensor, img: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = torch.relu(self.fc(x))
        q = h.view(4, 64, 4, 64).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        picked = torch.gather(h, 1, h.argmax(-1, keepdim=True))
        return a.sum(-1), self.conv(img).mean((2, 3)), picked


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(256, 256), torch.randn(2, 16, 48, 48)


@pytest.fixture
def shape_only_calls(monkeypatch):
    """Counts the heavy ops taken by shape; the compute budget is 0, as for a large model."""
    from pt2onnx.capture import _shape_only

    monkeypatch.setattr(_shape_only, "_COMPUTE_BUDGET", 0)
    calls: list[int] = []
    original, own = _shape_only._zeros_like_meta, _shape_only._own_output

    def counted(value):  # type: ignore[no-untyped-def]
        calls.append(1)
        return original(value)

    def counted_own(func, args):  # type: ignore[no-untyped-def]
        out = own(func, args)
        if out is not None:
            calls.append(1)
        return out

    monkeypatch.setattr(_shape_only, "_zeros_like_meta", counted)
    monkeypatch.setattr(_shape_only, "_own_output", counted_own)
    return calls


_aten = torch.ops.aten
_OWN_CASES = [
    (_aten.convolution.default, lambda: (torch.randn(2, 16, 33, 20), torch.randn(8, 4, 3, 5),
                                         None, [2, 1], [1, 2], [1, 3], False, [0, 0], 4)),
    (_aten.convolution.default, lambda: (torch.randn(3, 16, 33), torch.randn(8, 16, 3), None,
                                         [2], [0], [1], False, [0], 1)),
    (_aten.convolution.default, lambda: (
        torch.randn(2, 8, 12, 12).to(memory_format=torch.channels_last),
        torch.randn(4, 8, 3, 3), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)),
    (_aten.convolution.default, lambda: (torch.randn(1, 3, 9, 9, 9), torch.randn(5, 3, 2, 2, 2),
                                         torch.randn(5), [3, 3, 3], [0, 0, 0], [2, 2, 2],
                                         False, [0, 0, 0], 1)),
    (_aten.mm.default, lambda: (torch.randn(7, 5), torch.randn(5, 3))),
    (_aten.addmm.default, lambda: (torch.randn(3), torch.randn(7, 5), torch.randn(5, 3))),
    (_aten.bmm.default, lambda: (torch.randn(2, 7, 5), torch.randn(2, 5, 3))),
    (_aten.baddbmm.default, lambda: (torch.randn(2, 7, 3), torch.randn(2, 7, 5),
                                     torch.randn(2, 5, 3))),
    (_aten.linear.default, lambda: (torch.randn(2, 4, 5), torch.randn(3, 5), torch.randn(3))),
    (_aten.linear.default, lambda: (torch.randn(5), torch.randn(3, 5))),
]


@pytest.mark.parametrize("case", range(len(_OWN_CASES)))
def test_own_output_shapes_match_the_op(case):
    """The shapes the recording gives a heavy op without asking torch's meta kernel (a
    convolution's would first import torch's Python meta registrations) are the op's:
    shape, dtype and strides, against the real op."""
    from pt2onnx.capture import _shape_only

    op, make = _OWN_CASES[case]
    args = make()
    got = _shape_only._own_output(op, args)
    want = op(*args)
    assert got is not None
    assert (got.shape, got.dtype, got.stride()) == (want.shape, want.dtype, want.stride())


def test_heavy_ops_are_recorded_by_shape_only(shape_only_calls):
    """Issue 30: the recording no longer pays the example's compute. Products,
    convolutions and attention on values derived from the inputs take their output's
    shape from the meta kernel (the model gets zeros, which no recorded decision can
    read), and the file still matches eager at the example and on other inputs."""
    prog = pt2onnx.export(_Heavy().eval(), _inputs())
    assert prog.report.capture_strategy == RECORDED
    assert len(shape_only_calls) >= 3  # linear, attention, convolution
    assert prog.verify().ok
    assert prog.verify(*_inputs()).ok


def test_small_ops_and_eager_mode_compute(shape_only_calls, monkeypatch):
    """Below the threshold an op is cheaper to compute than to ask its meta kernel;
    PT2ONNX_CAPTURE=eager computes everything (the recording as it was)."""
    small_model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Conv1d(4, 4, 1)).eval()
    pt2onnx.export(small_model, (torch.randn(4, 4, 8),))
    small = len(shape_only_calls)
    monkeypatch.setenv("PT2ONNX_CAPTURE", "eager")
    prog = pt2onnx.export(_Heavy().eval(), _inputs())
    assert prog.report.capture_strategy == RECORDED
    assert len(shape_only_calls) == small == 0
    assert prog.verify().ok


def test_a_small_model_computes_within_the_budget(shape_only_calls, monkeypatch):
    """Under the compute budget a heavy op that needs torch's meta kernel (attention) is
    computed: a small model's whole forward costs less than loading torch's Python meta
    registrations (YOLO11n's fresh-process export). The convolution and the Linear are
    shaped by pt2onnx itself, which costs nothing: taken by shape at any budget."""
    from pt2onnx.capture import _shape_only

    monkeypatch.setattr(_shape_only, "_COMPUTE_BUDGET", 10**12)
    prog = pt2onnx.export(_Heavy().eval(), _inputs())
    assert prog.report.capture_strategy == RECORDED
    assert len(shape_only_calls) == 2  # the Linear and the convolution
    assert prog.verify().ok


class _InplaceSameDtype(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):  # type: ignore[no-untyped-def]
        h = self.conv(x)
        h.relu_()
        h += x.sum(1, keepdim=True)  # same dtype, broadcast
        h *= h
        h -= x[:, :1]
        return h


def test_inplace_ops_of_one_dtype_need_no_meta_run(monkeypatch):
    """relu_ / add_ / mul_ / sub_ whose arguments all have the target's dtype record their
    functional form directly; the meta run that finds a promotion (the test above) is
    only for the others (a fifth of resnet50's recording went there)."""
    from pt2onnx.capture import _record

    fake = _record._Recording.fake
    meta_runs = []

    def spy(self, value):  # type: ignore[no-untyped-def]
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
            meta_runs.append(value)  # (args, kwargs) of a functional form, to be run
        return fake(self, value)

    monkeypatch.setattr(_record._Recording, "fake", spy)
    model = _InplaceSameDtype().eval()
    x = torch.randn(2, 3, 6, 6)
    prog, strategy = _export(model, x)
    assert strategy == RECORDED, prog.report.fallbacks
    assert meta_runs == []
    _matches(prog, model, x)
    _export(_InplaceKeepsDtype(), torch.randn(5))  # a promotion: the meta run is kept
    assert len(meta_runs) >= 2
    ops = prog.report.op_histogram
    assert ops.get("Relu") == 1 and ops.get("Mul") == 1 and ops.get("Sub") == 1


class ShiftedWindowMask(nn.Module):
    """swin's attention mask: x.new_zeros, filled slice by slice with constants (an
    in-place write through a view), then read: a constant for every input."""

    def forward(self, x):
        mask = x.new_zeros((4, 6))
        count = 0
        for h in ((0, 2), (2, 3), (3, None)):
            for w in ((0, -2), (-2, None)):
                mask[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        mask.add_(0.5)  # the constant itself written again
        return x + mask.reshape(-1)[:4, None] * mask.sum()


class InputWrittenIntoMask(nn.Module):
    def forward(self, x):
        mask = x.new_zeros((4, 6))
        mask[:2, :] = x[0, 0]  # an input's value through a view: not a constant
        return x[:, :1] + mask


class BufferWrittenThroughView(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.zeros(4, 6))

    def forward(self, x):
        self.table[:2].fill_(1.0)
        return x[:, :1] + self.table


def test_a_constant_written_through_views_is_recorded():
    model = ShiftedWindowMask()
    prog, strategy = _export(model, torch.randn(4, 6))
    assert strategy == RECORDED
    _matches(prog, model, torch.randn(4, 6))


def test_a_write_through_a_view_of_what_is_not_a_constant_is_not_recorded():
    why = _try_record(BufferWrittenThroughView(), (torch.randn(4, 6),), {}, lambda op: False)
    assert isinstance(why, str) and "mutates" in why, why


class SliceAndIndexWrites(nn.Module):
    """Writes into one slice or one index of a tensor made in the graph: each becomes a
    slice_scatter / select_scatter of the tensor, and a reshape of it reads the write."""

    def forward(self, x):
        y = x * 2
        flat = y.view(-1)
        y[1:3].mul_(x[0:2])  # narrow along dim 0, a tainted value
        y[:, 2].zero_()  # select along dim 1
        y.select(0, 0).add_(1)
        return flat * 1, y


class OverlappingSlices(nn.Module):
    def forward(self, x):
        y = x * 2
        a, b = y[:, :3], y[:, 1:]
        a.mul_(2)  # b sees part of it: b becomes its slice of the new y
        return b + 0, a * 1


class BoxWrites(nn.Module):
    """mvit's relative positions: ``attn[:, :, 1:, 1:] += rel`` writes a box (a slice
    along two dims) of a tensor made in the graph, read whole afterwards; a box with
    two dims taken by an index, and a box of its transpose, while the first box is
    still alive."""

    def forward(self, x):
        attn = x * 2
        inner = attn[:, :, 1:, 1:]
        inner += x[:, :, :-1, :-1] * 3
        attn[0, 1:3, 2, :2].zero_()
        attn.transpose(1, 3)[:, 1:].add_(1)  # a box of the dims reordered (fuzz seed 1207)
        return attn.softmax(-1), inner * 1


class StridedWrites(nn.Module):
    def forward(self, x):
        y = x * 2
        flat = y.view(-1)
        flat[::3].mul_(3)  # every third element: not a box of y in any dim order
        return y * 1


def test_a_write_into_one_slice_or_index_is_recorded():
    model = SliceAndIndexWrites()
    prog, strategy = _export(model, torch.randn(4, 6))
    assert strategy == RECORDED, prog.report.fallbacks
    for _ in range(2):
        _matches(prog, model, torch.randn(4, 6))
    model = InputWrittenIntoMask()  # an input's value written into a slice: in the graph
    prog, strategy = _export(model, torch.randn(4, 6))
    assert strategy == RECORDED, prog.report.fallbacks
    _matches(prog, model, torch.randn(4, 6))


@pytest.mark.parametrize("model, shape", [(OverlappingSlices(), (4, 6)),
                                          (BoxWrites(), (2, 4, 5, 6))],
                         ids=["OverlappingSlices", "BoxWrites"])
def test_a_write_into_a_box_is_recorded(model, shape):
    prog, strategy = _export(model, torch.randn(shape))
    assert strategy == RECORDED, prog.report.fallbacks
    ops = prog.report.op_histogram
    assert ops.get("ScatterND", 0) + ops.get("ScatterElements", 0) + ops.get("Concat", 0) \
        + ops.get("Pad", 0) + ops.get("Where", 0) > 0, ops  # the write is in the graph
    for _ in range(2):
        _matches(prog, model, torch.randn(shape))


def test_a_write_into_a_strided_part_is_not_recorded():
    why = _try_record(StridedWrites(), (torch.randn(4, 6),), {},
                      lambda op: False)
    assert isinstance(why, str) and "mutates a tensor that has views" in why, why
    prog = pt2onnx.export(StridedWrites(), (torch.randn(4, 6),))
    _matches(prog, StridedWrites(), torch.randn(4, 6))


class WeightWrittenIntoCopy(nn.Module):
    """A copy of a weight written through a view: it depends on the parameter, which
    export_params=False feeds at run time, so it must not become a constant."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6, 4))

    def forward(self, x):
        w = self.weight * 1.0
        w[0] = 0.0
        return x @ w.t()


def test_a_weight_written_through_a_view_is_not_made_a_constant():
    # Recorded as a select_scatter into the copy, in the graph (swin v2's qkv_bias).
    captured = _try_record(WeightWrittenIntoCopy(), (torch.randn(3, 4),), {}, lambda op: False)
    assert not isinstance(captured, str), captured
    targets = [n.target for n in captured.program.graph.nodes]
    assert torch.ops.aten.select_scatter.default in targets
    assert all(c.numel() == 1 for c in captured.program.constants.values())  # 0.0 alone
    model = WeightWrittenIntoCopy()
    prog, strategy = _export(model, torch.randn(3, 4))
    assert strategy == RECORDED
    _matches(prog, model, torch.randn(3, 4))


def test_state_names_that_are_not_identifiers_are_recorded():
    # torchvision's regnet names its blocks "block1-0": once a subtraction in the graph's
    # generated code, which gave the recording up for torch.export.
    model = nn.Sequential()
    model.add_module("block1-0", nn.Linear(4, 4))
    model.add_module("2 x+y", nn.Linear(4, 3))
    prog, strategy = _export(model.eval(), torch.randn(2, 4))
    assert strategy == RECORDED, prog.report.fallbacks
    _matches(prog, model, torch.randn(2, 4))


def test_recorded_program_still_runs_as_a_module():
    """The recorded program's GraphModules generate their code on first use, not when
    they are built (_compat.lazy_graph_module): what reads or runs one still works."""
    model = Block().eval()
    x = torch.randn(5, 8)
    result = _try_record(model, (x,), {}, lambda op: False)
    assert not isinstance(result, str), result
    program = result.program
    assert "def forward" in program.graph_module.code
    torch.testing.assert_close(program.module()(x), model(x))
