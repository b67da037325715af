"""The recording frees what no later step reads (issue 41): intermediates die as the
model drops them, and the heap pages they leave are handed back as the run goes
(``capture/_heap.py``). Structural checks, not resident-set thresholds."""

from __future__ import annotations

import platform
import weakref

import pytest
import torch
from torch import nn

from pt2onnx.capture import _heap
from pt2onnx.capture._capture import _try_record


class Chain(nn.Module):
    """Eight 1 MiB intermediates, each dropped by the next step; keeps weak refs."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(512, 512))
        self.seen: list[weakref.ref[torch.Tensor]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(8):
            x = torch.tanh(x * self.scale)
            self.seen.append(weakref.ref(x))
        return x.sum(dim=0)


class Reads(Chain):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if y.sum() > 0:  # data-dependent: the recording gives up here
            return y
        return -y


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(_heap, "_TRIM", lambda pad: calls.append(pad))
    monkeypatch.setattr(_heap, "EVERY", 3 << 20)
    return calls


def test_a_recording_holds_no_intermediate_and_trims_as_it_goes(trims: list[int]) -> None:
    model = Chain().eval()
    captured = _try_record(model, (torch.randn(512, 512),), {}, lambda op: False)
    assert not isinstance(captured, str), captured
    assert len(model.seen) == 8
    assert all(ref() is None for ref in model.seen[:-1])  # only the output's input lives
    # 8 MiB of mul and 8 of tanh outputs, a trim each 3 MiB, and one at the end.
    assert len(trims) >= 5 and trims[-1] == 0


def test_a_recording_given_up_still_trims(trims: list[int]) -> None:
    why = _try_record(Reads().eval(), (torch.randn(512, 512),), {}, lambda op: False)
    assert isinstance(why, str) and "data-dependent" in why
    assert trims  # the finally: its pages go back before torch.export runs


def test_the_step_follows_the_weights() -> None:
    # A light model trims often (swin_t's activations outweigh its 0.11 GiB of weights),
    # a heavy one at most every EVERY bytes.
    assert _heap.step_for(0) == _heap.LEAST
    assert _heap.step_for(1 << 30) == int((1 << 30) * _heap.SHARE)
    assert _heap.step_for(1 << 40) == _heap.EVERY


def test_a_light_model_trims_at_the_least_step(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_heap, "_TRIM", lambda pad: calls.append(pad))
    model = Chain().eval()  # 1 MiB of weights: the 8 MiB step
    captured = _try_record(model, (torch.randn(512, 512),), {}, lambda op: False)
    assert not isinstance(captured, str), captured
    # 16 MiB of fresh outputs (each a 1 MiB tensor): 2 trims on the way, 1 at the end.
    assert len(calls) == 3


def test_views_and_scalars_count_nothing() -> None:
    heap = _heap.Trimmer(every=1 << 40)
    x = torch.zeros(1024)
    heap.made((x.view(32, 32), 3, None))
    assert heap.pending == 0
    heap.made([x, x[:10]])
    assert heap.pending == 4096


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="malloc_trim is glibc's")
def test_glibc_has_malloc_trim() -> None:
    assert _heap._TRIM is not None


class _Cycle:
    """Freed only by the cyclic GC (it refers to itself)."""

    def __init__(self) -> None:
        self.me = self


_MADE: list[weakref.ref[_Cycle]] = []  # module-level: an attempt may run a copy of the model
_ALIVE: list[int] = []


class FailsUntilTraced(nn.Module):
    """Each capture attempt leaves a reference cycle behind (its forward's garbage) and
    fails on a data-dependent branch until the last resort, the make_fx trace, runs it.
    ``_ALIVE`` records, at each call, how many earlier calls' cycles are still alive."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_dynamo_compiling():  # dynamo would graph-break on these
            _ALIVE.append(sum(r() is not None for r in _MADE))
            _MADE.append(weakref.ref(_Cycle()))
        if x.sum() > 0:
            return x + 1
        return x - 1


def test_a_failed_capture_attempts_garbage_is_freed_before_the_next_one(monkeypatch):
    """The export runs with the cyclic GC paused; a failed attempt's cycles (graphs, fake
    tensors, the traceback's frames) are collected before the next attempt
    (``_heap.release``), so its peak does not stack on theirs (the 12 detection models:
    0.64x the peak above their eager pass, median; docs/performance.md)."""
    import pt2onnx

    released = []
    real = _heap.release
    monkeypatch.setattr(_heap, "release", lambda: (released.append(1), real()))
    monkeypatch.setattr(_heap, "RELEASE_MIN", 0)  # a tiny model's attempts leave little
    _MADE.clear()
    _ALIVE.clear()
    prog = pt2onnx.export(FailsUntilTraced().eval(), (torch.ones(3),))
    assert prog.report.capture_strategy.startswith("trace"), prog.report.capture_strategy
    assert len(_ALIVE) >= 3, _ALIVE  # the recording, torch.export, the trace
    assert released, "no attempt's garbage was released"
    assert _ALIVE[-1] == 0, _ALIVE  # when the trace ran, no earlier attempt's was left
