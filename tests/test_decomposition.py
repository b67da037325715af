"""Decomposition runs only when the captured program needs it."""

from __future__ import annotations

import torch
from torch import nn

import pt2onnx


class InPlaceOnFresh(nn.Module):
    def forward(self, x):
        y = x * 2
        a = y + 1  # reads y before the update
        y.add_(3)
        y.mul_(a)
        return y.relu_(), a


class InPlaceOnView(nn.Module):
    def forward(self, x):
        y = x * 2
        y[:, 0] = 1  # writes through a view: needs functionalization
        return y + 1


def test_rebinding_in_place_ops_skips_decomposition():
    x = torch.randn(3, 4)
    prog = pt2onnx.export(InPlaceOnFresh(), (x,))
    assert prog.report.decomposition.startswith("skipped")
    assert prog.report.timings["decompose"] < 0.5
    assert prog.verify(x).ok


def test_mutation_through_a_view_is_decomposed(monkeypatch):
    # The recording takes this write as a select_scatter (capture/_aliases.py): the
    # torch.export path, which functionalizes it by decomposing, is what is tested here.
    monkeypatch.setenv("PT2ONNX_CAPTURE", "export")
    x = torch.randn(3, 4)
    prog = pt2onnx.export(InPlaceOnView(), (x,))
    assert prog.report.decomposition.startswith("run_decompositions")
    assert "fill_" in prog.report.decomposition
    assert prog.verify(x).ok


def test_op_without_rule_is_decomposed_per_node(monkeypatch):
    monkeypatch.setenv("PT2ONNX_CAPTURE", "export")  # a recording sees cosine_similarity split

    class Cosine(nn.Module):  # a composite op with no rule: it decomposes to core ops
        def forward(self, x, y):
            return torch.nn.functional.cosine_similarity(x, y)

    x, y = torch.randn(4, 5), torch.randn(4, 5)
    prog = pt2onnx.export(Cosine(), (x, y))
    assert prog.report.decomposition.startswith("per node")
    assert ("aten::cosine_similarity.default", "torch default", 1) in prog.report.decompositions
    assert prog.verify(x, y).ok
