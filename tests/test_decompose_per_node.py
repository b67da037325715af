"""An op without a rule is decomposed where it stands, not by retracing the program."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import pt2onnx
from pt2onnx import _compat
from pt2onnx.errors import UnsupportedOperatorError


class Fallbacks(nn.Module):
    """One op for each source of the chain: chunk (torch default), dist and cumprod (torch
    registry, whose prims.prod is ours), var_mean and erfc (pt2onnx), logcumsumexp."""

    def forward(self, x):
        a, b = torch.chunk(x, 2, dim=1)
        v, m = torch.var_mean(a, dim=1, keepdim=True)
        return (torch.special.erfc(b) + v, torch.cumprod(m, 0),
                torch.logcumsumexp(b, 1), a * 2, torch.dist(a, b))


# var_mean, erfc, cumprod, logcumsumexp and cummax have rules of their own now; these
# tests are about the chain an op takes when it has none, so they hide those rules.
HIDDEN = {"aten::var_mean.correction", "aten::erfc.default", "aten::cumprod.default",
          "aten::logcumsumexp.default", "aten::cummax.default"}


@pytest.fixture(autouse=True)
def _without_their_rules(monkeypatch):
    # The chain runs on torch.export's program, where composite ops (chunk, var_mean,
    # dist) are still whole; a static recording sees them already split by torch's
    # dispatcher, so these tests capture with torch.export (as every dynamic export does).
    monkeypatch.setenv("PT2ONNX_CAPTURE", "export")
    from pt2onnx.translate._registry import REGISTRY, op_name

    lookup = REGISTRY.lookup

    def hiding(op, opset, **kwargs):
        return None if op_name(op) in HIDDEN else lookup(op, opset, **kwargs)

    monkeypatch.setattr(REGISTRY, "lookup", hiding)


class InPlaceOnView(nn.Module):
    def forward(self, x):
        y = x * 2
        y[:, 0] = 1  # writes through a view: needs functionalization
        return torch.special.erfc(y)


@pytest.fixture
def whole_program(monkeypatch):
    """Counts calls of the whole-program run_decompositions."""
    calls = []
    original = _compat.run_decompositions

    def spy(ep, table):
        calls.append(ep)
        return original(ep, table)

    monkeypatch.setattr(_compat, "run_decompositions", spy)
    return calls


def _sources(prog):
    return {(op, source) for op, source, _ in prog.report.decompositions}


def test_static_shapes(whole_program):
    x = torch.randn(3, 8, 4)
    prog = pt2onnx.export(Fallbacks(), (x,))
    assert not whole_program
    assert prog.report.decomposition.startswith("per node")
    assert {
        ("aten::chunk.default", "torch default"),
        ("aten::var_mean.dim", "torch default"),
        ("aten::var_mean.correction", "pt2onnx"),
        ("aten::special_erfc.default", "torch default"),
        ("aten::erfc.default", "pt2onnx"),
        ("aten::cumprod.default", "torch registry"),
        ("prims::prod.default", "pt2onnx"),
        ("aten::logcumsumexp.default", "pt2onnx"),
        ("aten::dist.default", "torch registry"),
    } <= _sources(prog)
    result = prog.verify(x)
    assert result.ok, "\n".join(map(str, result.outputs))


def test_dynamic_shapes_stay_generic(whole_program):
    x = torch.randn(3, 8, 4)
    dims = ({0: torch.export.Dim("batch"), 1: 2 * torch.export.Dim("half")},)
    prog = pt2onnx.export(Fallbacks(), (x,), dynamic_shapes=dims)
    assert not whole_program
    assert ("aten::chunk.default", "torch default") in _sources(prog)
    shape = prog.model.graph.inputs[0].shape
    assert not isinstance(shape[0], int) and not isinstance(shape[1], int)
    for other in (x, torch.randn(5, 12, 4), torch.randn(1, 4, 4)):
        result = prog.verify(other)
        assert result.ok, "\n".join(map(str, result.outputs))


def test_chunk_of_a_dynamic_batch():
    class Halves(nn.Module):
        def forward(self, x):
            a, b = x.chunk(2, dim=0)
            return a - b

    x = torch.randn(6, 3)
    prog = pt2onnx.export(Halves(), (x,), dynamic_shapes=({0: 2 * torch.export.Dim("n")},))
    assert prog.report.decompositions == [("aten::chunk.default", "torch default", 1)]
    for other in (x, torch.randn(10, 3)):
        assert prog.verify(other).ok


def test_mutation_through_a_view_still_decomposes_the_program(whole_program):
    x = torch.randn(3, 4)
    prog = pt2onnx.export(InPlaceOnView(), (x,))
    assert len(whole_program) == 1
    assert prog.report.decomposition.startswith("run_decompositions: in-place op")
    assert prog.verify(x).ok


def test_report_lists_each_decomposition():
    x = torch.randn(3, 8, 4)
    prog = pt2onnx.export(Fallbacks(), (x,))
    text = prog.report.to_markdown()
    assert "## Decompositions (per node)" in text
    assert "| `aten::cumprod.default` | torch registry | 1 |" in text
    assert "| `aten::erfc.default` | pt2onnx | 1 |" in text


def test_decomposed_nodes_carry_the_source_node():
    x = torch.randn(3, 8, 4)
    prog = pt2onnx.export(Fallbacks(), (x,))
    nodes = [n for n in prog.model.graph
             if n.metadata_props.get("pt2onnx.decomposed", "").startswith("aten::cumprod")]
    assert nodes
    assert {n.metadata_props["pt2onnx.fx_node"] for n in nodes} == {"cumprod"}
    assert "torch.cumprod" in nodes[0].metadata_props["pt2onnx.source"]


def test_keep_ops_with_rules_are_not_decomposed():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(8)

        def forward(self, x):
            return nn.functional.gelu(self.norm(x)).chunk(2, -1)[0]

    x = torch.randn(2, 8)
    prog = pt2onnx.export(Block(), (x,))
    assert [op for op, _, _ in prog.report.decompositions] == ["aten::chunk.default"]
    assert {"LayerNormalization", "Gelu"} <= set(prog.report.op_histogram)
    assert prog.verify(x).ok


def test_op_without_any_decomposition_is_unsupported():
    class CumMax(nn.Module):
        def forward(self, x):
            return torch.cummax(x, 0).values

    with pytest.raises(UnsupportedOperatorError) as info:
        pt2onnx.export(CumMax(), (torch.randn(4, 3),))
    (missing,) = info.value.missing
    assert missing.op == "aten::cummax.default"
    assert "torch.cummax" in missing.source


def test_custom_translation_wins_over_decomposition():
    calls = []

    def erfc_rule(g, x):
        calls.append(x)
        return g.op.Sub(g.const(1.0), g.op.Erf(x))

    x = torch.randn(3, 4)
    prog = pt2onnx.export(lambda t: torch.special.erfc(t) * 2, (x,),
                          custom_translations={torch.ops.aten.special_erfc.default: erfc_rule})
    assert calls and not prog.report.decompositions
    assert prog.verify(x).ok


def test_composite_op_with_no_node_decomposition_retraces_the_program(whole_program):
    """circular pad has no rule and no table entry; torch's dispatcher still
    decomposes it when the whole program is retraced, the last link of the chain."""
    x = torch.randn(1, 4, 5)
    prog = pt2onnx.export(lambda a: nn.functional.pad(a, (1, 1), mode="circular"), (x,))
    assert len(whole_program) == 1
    assert prog.report.decomposition.startswith("run_decompositions")
    assert prog.verify(x).ok


def test_decomposition_returning_a_named_tuple_drops_unused_fields(whole_program):
    """cross_entropy decomposes into nll_loss_forward, whose (output, total_weight) named
    tuple must survive the trace dropping the unused total_weight."""
    x, target = torch.randn(4, 5), torch.tensor([0, 2, 1, 4])
    prog = pt2onnx.export(lambda a, t: nn.functional.cross_entropy(a, t), (x, target))
    assert not whole_program
    assert prog.report.decomposition.startswith("per node")
    assert prog.verify(x, target).ok


def test_nodes_from_one_decomposed_node_get_unique_names():
    x = torch.randn(3, 6)
    prog = pt2onnx.export(lambda a: torch.quantile(a, 0.3, dim=1), (x,))
    names = [n.name for n in prog.model.graph if n.name]
    assert len(names) == len(set(names))
    assert prog.verify(x).ok
