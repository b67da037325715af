"""A lean recording (issue 41): once the recording's resident set has grown past its
limit (2% of the weights, at least 16 MB: ``_heap.lean_limit``), large floating values
that derive from the inputs are taken by shape, not computed, so its memory follows the
graph, not the example's activations. ``PT2ONNX_CAPTURE=lean`` makes it lean from the
first op; each file is checked against eager."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import pt2onnx
from pt2onnx.capture import _heap
from pt2onnx.capture import _shape_only as so
from pt2onnx.capture._capture import RECORDED

_BIG = (4, 64, 32, 32)  # 1 MiB of float32 per activation: above LEAN_BYTES


@pytest.fixture
def lean(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Lean from the start; counts the ops taken by shape and the writes skipped."""
    monkeypatch.setenv("PT2ONNX_CAPTURE", "lean")
    seen = {"outputs": 0, "writes": 0}
    output, write = so.lean_output, so.lean_write

    def counted_output(*args):  # type: ignore[no-untyped-def]
        out = output(*args)
        seen["outputs"] += out is not None
        return out

    def counted_write(func, target):  # type: ignore[no-untyped-def]
        skip = write(func, target)
        seen["writes"] += skip
        return skip

    monkeypatch.setattr(so, "lean_output", counted_output)
    monkeypatch.setattr(so, "lean_write", counted_write)
    return seen


def _check(model: nn.Module, *shapes: tuple[int, ...]) -> pt2onnx.OnnxProgram:
    model = model.eval()
    args = tuple(torch.randn(s) for s in shapes)
    prog = pt2onnx.export(model, args)
    assert prog.report.capture_strategy == RECORDED, prog.report.fallbacks
    for _ in range(2):
        args = tuple(torch.randn(s) for s in shapes)
        with torch.no_grad():
            want = model(*args)
        want = [want] if isinstance(want, torch.Tensor) else list(want)
        for got, w in zip(prog.run(*args), want):
            torch.testing.assert_close(torch.from_numpy(got), w, rtol=1e-4, atol=1e-4)
    return prog


class ConvBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(64, 64, 3, padding=1)
        self.norm = nn.BatchNorm2d(64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.norm(self.conv(x)))
        y = y + x  # pointwise ops on large values: taken by shape
        return torch.softmax(y.flatten(2), -1).mean(-1)


class Writes(nn.Module):
    """In-place writes into large values (skipped: they write values only), one into a
    box of the tensor and read through a view of all of it."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x * 2
        flat = y.view(-1)
        y.add_(1)
        y[:, :, 1:, 1:].mul_(3)
        y.relu_()
        z = x.clone()
        z.copy_(y.flip(1))
        return flat * 1, y.sum((2, 3)), z.mean((2, 3))


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(64, 192)
        self.norm = nn.LayerNorm(64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm(x)).chunk(3, -1)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        idx = (a[..., 0] > 0).long()  # integer values from the inputs: computed
        return a + idx.unsqueeze(-1)


@pytest.mark.parametrize(("model", "shapes"), [
    (ConvBlock(), [_BIG]), (Writes(), [_BIG]), (Attention(), [(2, 1024, 64)]),
], ids=["conv_block", "writes", "attention"])
def test_a_lean_recording_writes_the_same_file(lean: dict[str, int], model: nn.Module,
                                               shapes: list[tuple[int, ...]]) -> None:
    _check(model, *shapes)
    assert lean["outputs"] > 0
    if isinstance(model, Writes):
        assert lean["writes"] >= 3


def test_lean_takes_only_fresh_pointwise_and_listed_ops() -> None:
    x = torch.randn(_BIG)
    fake = lambda v: torch.utils._pytree.tree_map(  # noqa: E731
        lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t, v)
    aten = torch.ops.aten
    assert so.lean_output(aten.add.Tensor, (x, x), {}, [x, x], fake) is not None
    assert so.lean_output(aten.clone.default, (x,), {}, [x], fake) is not None
    # A view makes no memory; _unsafe_view shares its input's without saying so; batch
    # norm's saved statistics have another shape on the meta device: all run.
    assert so.lean_output(aten.view.default, (x, [-1]), {}, [x], fake) is None
    assert so.lean_output(aten._unsafe_view.default, (x, [-1]), {}, [x], fake) is None
    w = torch.ones(64)
    args = (x, w, w, w.clone(), w.clone(), False, 0.1, 1e-5)
    assert so.lean_output(aten.native_batch_norm.default, args, {}, [x, w], fake) is None
    # Integer outputs (an index must stay in range) and small values run.
    assert so.lean_output(aten.gt.Scalar, (x, 0), {}, [x], fake) is None
    s = torch.randn(8)
    assert so.lean_output(aten.add.Tensor, (s, s), {}, [s, s], fake) is None
    assert so.lean_write(aten.add_.Tensor, x)
    assert not so.lean_write(aten.transpose_.default, x)
    assert not so.lean_write(aten.add_.Tensor, s)


def test_the_recording_goes_lean_past_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = iter([1000, 1000 + (8 << 20), 1000 + (40 << 20)])
    monkeypatch.setattr(_heap, "resident", lambda: next(sizes))
    monkeypatch.setattr(_heap, "_TRIM", None)
    heap = _heap.Trimmer(every=1, limit=_heap.lean_limit(0))
    assert _heap.lean_limit(0) == _heap.LEAN_LEAST
    assert _heap.lean_limit(10 << 30) == int((10 << 30) * _heap.LEAN_SHARE)
    heap.made(torch.zeros(4))
    assert not heap.over  # 8 MB above the start
    heap.made(torch.zeros(4))
    assert heap.over  # 40 MB above
