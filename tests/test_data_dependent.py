"""Ops with data-dependent output shapes produce dynamic dims."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import pt2onnx


class Nonzero(nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0)


class BoolMask(nn.Module):
    def forward(self, x):
        return x[x > 0] * 2


class BoolMaskRows(nn.Module):
    def forward(self, x):
        return x[x[:, 0] > 0]


class MaskedSelect(nn.Module):
    def forward(self, x):
        return torch.masked_select(x, x > 0.5)


class Item(nn.Module):
    def forward(self, x):
        n = (x > 0).sum().item()
        torch._check(n >= 0)
        return torch.zeros(n) + x.mean()


class Unique(nn.Module):
    def forward(self, x):
        return torch.unique((x * 2).round())


class MaskedAssign(nn.Module):
    def forward(self, x):
        y = x.clone()
        y[y < 0] = 0.5
        return y


@pytest.mark.parametrize("model", [Nonzero, BoolMask, BoolMaskRows, MaskedSelect, Item, Unique,
                                   MaskedAssign], ids=lambda m: m.__name__)
def test_data_dependent_shapes(model):
    prog = pt2onnx.export(model(), (torch.randn(6, 3),))
    out_shape = prog.model.graph.outputs[0].shape
    if model is not MaskedAssign:
        assert any(not isinstance(d, int) for d in out_shape), out_shape
    counts = set()
    for seed in range(4):
        torch.manual_seed(seed)
        x = torch.randn(6, 3)
        result = prog.verify(x)
        assert result.ok, result
        counts.add(prog.run(x)[0].shape)
    if model not in (MaskedAssign, Unique):
        assert len(counts) > 1, "the output size should follow the data"


class _Matches(nn.Module):
    """kornia LoFTR's fine-matching guard: an early return when no match was found."""

    def forward(self, conf: torch.Tensor, feat: torch.Tensor) -> torch.Tensor:
        b_ids, i_ids = torch.nonzero(conf > 0.5, as_tuple=True)
        if b_ids.shape[0] == 0:
            return feat.new_zeros(0, feat.shape[-1])
        return feat[b_ids, i_ids] * 2 + b_ids.shape[0]


def _conf(matches: int) -> torch.Tensor:
    conf = torch.zeros(2, 10)
    conf.view(-1)[torch.randperm(20)[:matches]] = 1.0
    return conf


def test_a_branch_on_a_data_dependent_size_takes_the_general_side():
    """torch.export stops at ``if b_ids.shape[0] == 0`` (the number of matches is known
    only at run time), and the trace that was left baked in the example's count. The
    branch now takes torch's guard_or_false side (a count other than 0 and 1), the
    program keeps the count general, and a warning names the line. Checked at 1 match
    (the example), at 7 and at 0, where this model's general side gives the same empty
    result as its early return."""
    with pytest.warns(UserWarning, match=r"branch on Eq\(u\d+, 0\) at test_data_dependent"):
        prog = pt2onnx.export(_Matches(), (_conf(1), torch.randn(2, 10, 4)))
    assert "trace" not in prog.report.capture_strategy
    for matches in (1, 7, 0, 20):
        assert prog.verify(_conf(matches), torch.randn(2, 10, 4)).ok, matches


class _NarrowByCount(nn.Module):
    # torch.export keeps aten.narrow where its length is a value it cannot name (u0);
    # pt2onnx had no rule for it, and torch's decomposition traced on such a node fixed
    # the input's dynamic size to the example's (fuzz seed 7411, program 1675).
    def __init__(self, from_end: bool) -> None:
        super().__init__()
        self.from_end = from_end

    def forward(self, x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        n = k.item()
        torch._check(n >= 1)
        torch._check(n <= x.shape[0])
        start = -n if self.from_end else x.shape[0] - n  # a negative start counts from the end
        return x.narrow(0, start, n) * 2


@pytest.mark.parametrize("from_end", [False, True])
def test_narrow_by_a_data_dependent_length(from_end: bool) -> None:
    from torch.export import Dim

    model = _NarrowByCount(from_end)
    prog = pt2onnx.export(model, (torch.randn(6, 3), torch.tensor(2)),
                          dynamic_shapes=({0: Dim("B", min=1, max=64)}, None))
    ops = {str(n.target) for n in prog._program.graph.nodes}
    assert "aten.narrow.default" in ops, ops  # the node the rule translates
    assert not any("narrow" in op for op, _, _ in prog.report.decompositions)
    for b, k in ((6, 2), (1, 1), (2, 2), (13, 5), (64, 64), (64, 1)):
        x, count = torch.randn(b, 3), torch.tensor(k)
        assert prog.verify(x, count).ok, (b, k)
