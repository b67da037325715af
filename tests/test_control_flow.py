"""torch.cond, while_loop, scan and map become If, Loop and Scan, nested too."""

from __future__ import annotations

import onnx
import pytest
import torch
from torch import nn
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

import pt2onnx


def _export_check(model, args, tmp_path, dynamic_shapes=None):
    path = tmp_path / "m.onnx"
    prog = pt2onnx.export(model, args, path, dynamic_shapes=dynamic_shapes)
    onnx.checker.check_model(str(path), full_check=True)
    return prog


class Cond(nn.Module):
    def forward(self, x, y):
        def true_fn(x, y):
            return x.sin() + y, x.sum()

        def false_fn(x, y):
            return x.cos() - y, x.amax()

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))


def test_cond_takes_both_branches(tmp_path):
    x, y = torch.randn(3, 4), torch.randn(4)
    prog = _export_check(Cond(), (x, y), tmp_path)
    assert prog.report.op_histogram.get("If") == 1
    for sample in (x.abs() + 0.1, -x.abs() - 0.1):
        assert prog.verify(sample, y).ok


class WhileLoop(nn.Module):
    def forward(self, x, limit):
        def cond_fn(i, acc):
            return i < limit.sum()

        def body_fn(i, acc):
            return i + 1, acc * 1.5 + x

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x * 0))


@pytest.mark.parametrize("trips", [0, 1, 5])
def test_while_loop_trip_counts(trips, tmp_path):
    x = torch.randn(2, 3)
    prog = _export_check(WhileLoop(), (x, torch.tensor(2)), tmp_path)
    assert prog.report.op_histogram.get("Loop") == 1
    result = prog.verify(x, torch.tensor(trips))
    assert result.ok, result
    assert prog.run(x, torch.tensor(trips))[0] == trips


class Scan(nn.Module):
    def forward(self, xs, h0, w):
        def step(h, x):
            h = torch.tanh(h @ w + x)
            return h, h * 2

        return scan(step, h0, xs)


@pytest.mark.parametrize("length", [1, 4, 9])
def test_scan_over_lengths(length, tmp_path):
    w = torch.randn(4, 4) * 0.5
    steps = torch.export.Dim("steps")
    prog = _export_check(Scan(), (torch.randn(3, 4), torch.randn(4), w), tmp_path,
                         dynamic_shapes=({0: steps}, None, None))
    assert prog.report.op_histogram.get("Scan") == 1
    assert prog.verify(torch.randn(length, 4), torch.randn(4), w).ok


class Map(nn.Module):
    def forward(self, xs, y):
        return hop_map(lambda x, y: x.relu() * y + 1, xs, y)


def test_map(tmp_path):
    y = torch.randn(5)
    prog = _export_check(Map(), (torch.randn(3, 5), y), tmp_path,
                         dynamic_shapes=({0: torch.export.Dim("n")}, None))
    for n in (1, 3, 7):
        assert prog.verify(torch.randn(n, 5), y).ok


class Nested(nn.Module):
    """A cond inside a scan body, and a while_loop inside a cond branch."""

    def forward(self, xs, h0, limit):
        def step(h, x):
            def pos(h, x):
                return (h + x,)

            def neg(h, x):
                return (h - x,)

            (h,) = torch.cond(x.sum() > 0, pos, neg, (h, x))
            return h, h.clone()

        h, ys = scan(step, h0, xs)

        def big(h, limit):
            def c(i, v):
                return i < limit.sum()

            def b(i, v):
                return i + 1, v * 0.5

            return (while_loop(c, b, (torch.zeros((), dtype=torch.int64), h))[1],)

        def small(h, limit):
            return (h * 3,)

        (out,) = torch.cond(h.sum() > 0, big, small, (h, limit))
        return out, ys


def test_nested_control_flow(tmp_path):
    prog = _export_check(Nested(), (torch.randn(4, 3), torch.randn(3), torch.tensor(2)),
                         tmp_path, dynamic_shapes=({0: torch.export.Dim("steps")}, None, None))
    for seed in range(4):
        torch.manual_seed(seed)
        xs, h0 = torch.randn(5, 3), torch.randn(3)
        for limit in (0, 3):
            assert prog.verify(xs, h0, torch.tensor(limit)).ok
