"""Sizes a guard cut off below a dim's declared minimum, where the model still runs:
the written graph is run there, and the dim keeps them where it matches eager
(capture/_below_minimum.py; fuzz seed 2613, programs 3390 and 4290)."""

from __future__ import annotations

import onnxruntime as ort
import torch
from torch import nn

import pt2onnx
from pt2onnx.capture import _size_one


class _CopyIntoAllButLast(nn.Module):
    """``y[:, 0:-1]`` is ``b - 1`` long: torch.export's broadcast guard ``Ne(b - 1, 1)``
    holds only from b = 3, but eager runs at b = 1 (an empty slice) and b = 2."""

    def __init__(self, needs_two: bool = False) -> None:
        super().__init__()
        self.register_buffer("b", torch.tensor([1.5]))
        self.needs_two = needs_two

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y[:, 0:-1].copy_(self.b)
        if self.needs_two:
            return y + x.select(1, 1).unsqueeze(1)  # eager fails at b = 1
        return y


def _export(model, tmp_path):
    b = torch.export.Dim("B", min=1, max=64)
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, (torch.randn(4, 5),), path, dynamic_shapes=({1: b},))
    return prog, path


def _run_at(path, model, sizes):
    session = ort.InferenceSession(str(path))
    for size in sizes:
        x = torch.randn(4, size)
        with torch.no_grad():
            expected = model(x)
        (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
        torch.testing.assert_close(torch.from_numpy(got), expected)


def test_sizes_a_guard_cut_off_are_run_and_kept(tmp_path):
    model = _CopyIntoAllButLast()
    prog, path = _export(model, tmp_path)
    assert prog.report.dynamic_refinements == []
    assert any("B = 1, 2" in w and "keeps its sizes from 1" in w for w in prog.report.warnings), \
        prog.report.warnings
    _run_at(path, model, [1, 2, 3, 5, 9])


def test_a_size_where_eager_fails_stays_cut_off(tmp_path):
    model = _CopyIntoAllButLast(needs_two=True)
    prog, path = _export(model, tmp_path)
    assert [r.split(":")[0] for r in prog.report.dynamic_refinements] == ["B bounded to [2, 64]"]
    assert any("B = 2" in w and "bounded from 2" in w for w in prog.report.warnings)
    _run_at(path, model, [2, 3, 5, 9])


def test_a_size_where_the_graph_is_wrong_stays_cut_off(tmp_path, monkeypatch):
    real = _size_one._run

    def wrong_at_two(prog, point):
        return "wrong there" if point.label == "B=2" else real(prog, point)

    monkeypatch.setattr(_size_one, "_run", wrong_at_two)
    prog, _ = _export(_CopyIntoAllButLast(), tmp_path)
    assert [r.split(":")[0] for r in prog.report.dynamic_refinements] == ["B bounded to [3, 64]"]
    assert not any("keeps its sizes" in w or "bounded from" in w for w in prog.report.warnings)
