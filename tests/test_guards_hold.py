"""Guards torch.export cannot prove over a Dim's range but that hold there keep the dim
dynamic (src/pt2onnx/_guards_hold.py); guards that fail somewhere still refuse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch.export import Dim

import pt2onnx
from conftest import export_dynamic_and_verify
from pt2onnx.capture import guards_hold


class _ChunkOne(torch.nn.Module):
    # The first half along a dynamic dim: torch guards 0 <= B - round(B / 2), true for
    # every B >= 0, which its solver cannot prove. (This was ``chunk(x, 1)[-1]``, whose
    # guard ``((2*B - 1) // B) == 1`` is the same kind (fuzz seed 100, 289 and 295); a
    # piece of a split is now a slice from the size, with no such guard.)
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> object:
        return (x.narrow(1, 0, round(x.shape[1] / 2)) * 2,
                y.narrow(0, 0, round(y.shape[0] / 2)) + 1)


@pytest.mark.parametrize("bounded", [True, False])
def test_unproved_guard_that_holds_keeps_the_dim_dynamic(bounded: bool,
                                                          tmp_path: Path) -> None:
    b = Dim("B", min=4, max=64) if bounded else Dim("B")
    args = (torch.randn(3, 6), torch.randn(6))
    prog = pt2onnx.export(_ChunkOne(), args, tmp_path / "m.onnx",
                          dynamic_shapes=({1: b}, {0: Dim("C", min=2)}))
    assert [str(d) for d in prog.model.graph.inputs[0].shape] == ["3", "B"]
    assert [str(d) for d in prog.model.graph.inputs[1].shape] == ["C"]
    assert not prog.report.dynamic_refinements
    assert any("could not prove" in w and "B stays dynamic" in w for w in prog.report.warnings)
    result = prog.verify()
    assert result.ok and len(result.runs) >= 2


def test_the_dynamic_axes_path_too(tmp_path: Path) -> None:
    export_dynamic_and_verify(_ChunkOne(), (torch.randn(3, 6), torch.randn(6)), tmp_path,
                              {"x": {1: "b"}, "y": {0: "c"}}, input_names=["x", "y"])


class _Fixes(torch.nn.Module):
    def forward(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return torch.take_along_dim(x, i, 1)  # broadcasts i's 1 against B: B == example


def test_a_dim_torch_export_fixes_is_refused_or_right_everywhere() -> None:
    """torch.export fixes B (i's 1 broadcast against it), where eager runs at every B:
    on torch 2.13 a typed refusal; on 2.12 the capture from each parity is general and
    joined (capture/_residue.py), right at every size checked."""
    i = torch.zeros(1, 3, dtype=torch.long)
    try:
        prog = pt2onnx.export(_Fixes(), (torch.randn(5, 3), i),
                              dynamic_shapes=({0: Dim("B", min=4, max=64)}, None))
    except pt2onnx.CaptureError as exc:
        assert "can only take one size" in str(exc)
        return
    assert not prog.report.dynamic_refinements
    for n in (4, 5, 6, 9, 63, 64):
        assert prog.verify(torch.randn(n, 3), i).ok, n


_MESSAGE = """Constraints violated (B)! For more information, run with TORCH_LOGS="+dynamic".
  - Not all values of B = L['x'].size()[0] in the specified range 4 <= B <= 64 satisfy the generated guard {guard}.

Suggested fixes:
  B = 6
"""


@pytest.mark.parametrize(("guard", "holds"), [
    ("(((-1) + 2*L['x'].size()[0]) // L['x'].size()[0]) == 1", True),
    ("(L['x'].size()[0] % 3) == 0", False),  # a multiple of 3 only
    ("L['x'].size()[0] <= 63", False),  # fails at the top of the range only
    ("L['x'].size()[0] != L['y'].size()[0]", None),  # reads another input's size
    ("__import__('os').getpid() > 0", None),  # only arithmetic is evaluated
])
def test_guard_evaluation(guard: str, holds: bool | None) -> None:
    sources = {"B": {"L['x'].size()[0]"}}
    verdict = guards_hold(_MESSAGE.format(guard=guard), sources, {"B": (4, 64)})
    assert (verdict is not None) == bool(holds)
    if verdict is not None:
        assert verdict[0] == {"B"}



@pytest.mark.parametrize("guard", [
    "L['x'].size()[0] + ((-1)*round(L['x'].size()[0] / 2)) >= 0",
    "math.trunc(0.5*torch.sym_float(L['x'].size()[0])) >= 2",
    "math.ceil(torch.sym_float(L['x'].size()[0]) / 3) <= L['x'].size()[0]",
])
def test_guards_on_python_arithmetic_of_sizes_are_evaluated(guard: str) -> None:
    """How torch prints a guard on round(), int(), max() or math.ceil() of a size."""
    verdict = guards_hold(_MESSAGE.format(guard=guard), {"B": {"L['x'].size()[0]"}},
                          {"B": (4, 64)})
    assert verdict is not None and verdict[0] == {"B"}


class _EqualAtSixteen(torch.nn.Module):
    # A branch on one size that computes the same there: torch guards B != 16, which
    # fails at 16 only. torch.onnx (both exporters) writes a right file; pt2onnx refused.
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 16:
            return x * 2
        return x + x


class _OtherAtSixteen(torch.nn.Module):
    # The same branch computing something else at 16: both torch.onnx exporters write a
    # file that is silently wrong at 16.
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 16:
            return x * 2
        return x + 1


def test_a_guard_failing_at_one_size_is_a_hole_the_file_is_run_at() -> None:
    prog = pt2onnx.export(_EqualAtSixteen(), (torch.randn(5, 3),),
                          dynamic_shapes=({0: Dim("B", max=64)},))
    assert [str(d) for d in prog.model.graph.inputs[0].shape] == ["B", "3"]
    # (torch 2.12 defers the guard to a run-time assert, evaluated the same way)
    assert any("but 16" in w for w in prog.report.warnings), prog.report.warnings
    for b in (1, 5, 16, 17, 64):
        x = torch.randn(b, 3)
        assert prog.verify(x).ok, b


def test_a_hole_where_the_model_differs_is_refused() -> None:
    with pytest.raises(pt2onnx.CaptureError, match="computes something else at B=16"):
        pt2onnx.export(_OtherAtSixteen(), (torch.randn(5, 3),),
                       dynamic_shapes=({0: Dim("B", max=64)},))
    # Declared without 16, there is no hole: the file is general over that range.
    prog = pt2onnx.export(_OtherAtSixteen(), (torch.randn(5, 3),),
                          dynamic_shapes=({0: Dim("B", max=15)},))
    for b in (1, 5, 15):
        assert prog.verify(torch.randn(b, 3)).ok, b


class _TieThenRound(torch.nn.Module):
    # torch.export first ties C to B (the broadcast), then, with the tie applied, cannot
    # prove B - round(B / 3) >= 0 (fuzz seed 3805, programs 43 and 529): refused before.
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = x + y
        n = s.size(0)
        return s.narrow(0, round(n / 3), n - round(n / 3))


def test_a_guard_left_after_torch_s_own_fixes_is_evaluated_too() -> None:
    # On torch 2.12, whose guards pt2onnx defers to graph asserts, the assert of
    # round(B / 3) failed to trace (TraceError) and this was a typed refusal there; such
    # a capture is now repeated with the guard left to torch's check, as on 2.13.
    prog = pt2onnx.export(_TieThenRound(), (torch.randn(6, 3), torch.randn(6, 3)),
                          dynamic_shapes=({0: Dim("B", max=64)}, {0: Dim("C", max=64)}))
    assert any("B stays dynamic" in w for w in prog.report.warnings), prog.report.warnings
    for b, c in ((6, 6), (1, 1), (7, 7), (1, 5), (5, 1), (64, 64)):
        assert prog.verify(torch.randn(b, 3), torch.randn(c, 3)).ok, (b, c)


class _EmptyBranch(torch.nn.Module):
    # Fuzz seed 7411, program 203, reduced: torch.export cannot prove
    # max(0, B - 2)**2 == 0 (cummax's branch on an empty tensor, from an example of 1),
    # which fails at every B from 3. The graph is right there too, and both torch.onnx
    # exporters wrote a file right at 1, 8 and 64; pt2onnx bounded B to at most 2.
    def forward(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        v = x[3:, 1:-1].flatten()
        outer = v[:, None] * v[None, :]
        cum = torch.cummax(outer, 1).values
        cum.masked_fill_(m, 0)
        return cum * 2


class _GroupsOfThree(torch.nn.Module):
    # Program 393, reduced: the rows in whole groups of three, captured from B = 1 (no
    # group); torch.export cannot prove the guard on B // 3 that holds only up to 2.
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = x.narrow(2, 0, x.shape[-2] // 3 * 3)
        return v.reshape(*v.shape[:2], v.shape[-2] // 3, 3, *v.shape[3:]) * 2


class _Diagonal(torch.nn.Module):
    # Program 2692, reduced: min(3, B - 1) == 3 fails at B = 2 and 3; at 2 the diagonal
    # has one element and broadcasts, at 3 eager itself fails. pt2onnx bounded B to
    # [4, 64]; TorchScript's file is right at 2.
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return y + torch.diagonal(x, -1, 1, 0)


class _OtherPastTwo(torch.nn.Module):
    # The same unproved guard deciding a Python branch: the graph is wrong from 3 on,
    # so B is bounded to at most 2, as before.
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = max(0, x.shape[0] - 2)
        return x * 2 if n * n == 0 else x * 3


_GUARD_RUNS = {
    "empty-tensor branch": (_EmptyBranch(), lambda b: (
        torch.randint(-5, 5, (4, b), dtype=torch.int32), torch.tensor([True])), 1, 1),
    "whole groups of three": (_GroupsOfThree(), lambda b: (torch.randn(1, 5, b, 5),), 2, 1),
    "diagonal": (_Diagonal(), lambda b: (torch.randn(3, b), torch.randn(3)), 1, 6),
}


@pytest.mark.parametrize("case", list(_GUARD_RUNS))
def test_a_guard_failing_over_a_run_of_sizes_is_run_at_its_edges(case: str) -> None:
    """A guard torch.export cannot prove that fails over one run of sizes at an end of
    the range bounded the range there. The file is run at the run's edges and middle
    instead, and keeps the declared range where it matches eager there."""
    model, make, axis, example = _GUARD_RUNS[case]
    spec = tuple({axis: Dim("B", min=1, max=64)} if i == 0 else None
                 for i in range(len(make(1))))
    prog = pt2onnx.export(model, make(example), dynamic_shapes=spec)

    def runs(b: int) -> bool:
        try:
            model(*make(b))
        except RuntimeError:
            return False
        return True

    # No size eager runs at is cut off (torch 2.14 captures the diagonal by residue
    # class from 2, where eager fails at 1 anyway).
    for note in prog.report.dynamic_refinements:
        low = re.match(r"B bounded to \[(\d+), 64\]", note)
        assert low is not None, prog.report.dynamic_refinements
        assert not any(runs(b) for b in range(1, int(low.group(1)))), note
    # (torch 2.14 and later capture the diagonal one residue class of B at a time, each
    # class general: no guard run is needed there)
    assert any("keeps its declared range" in w or "one capture per class" in w
               for w in prog.report.warnings), prog.report.warnings
    checked = 0
    for b in (1, 2, 3, 4, 5, 7, 33, 63, 64):
        inputs = make(b)
        try:
            model(*[t.clone() for t in inputs])
        except RuntimeError:
            continue  # the model's own precondition (the diagonal at 3)
        assert prog.verify(*inputs).ok, b
        checked += 1
    assert checked >= 7


def test_a_file_wrong_where_the_guard_fails_is_bounded_as_before() -> None:
    from pt2onnx import _compat

    spec = ({0: Dim("B", min=1, max=64)},)
    if _compat.DEFERRED_GUARDS:
        # torch 2.12 defers the guard to a run-time assert: the second-size run finds
        # the file wrong there, a typed refusal, as before this change.
        with pytest.raises(pt2onnx.CaptureError, match="fixed by the model"):
            pt2onnx.export(_OtherPastTwo(), (torch.randn(1, 3),), dynamic_shapes=spec)
        return
    prog = pt2onnx.export(_OtherPastTwo(), (torch.randn(1, 3),), dynamic_shapes=spec)
    assert any(r.startswith("B bounded to at most 2")
               for r in prog.report.dynamic_refinements), prog.report.dynamic_refinements
    for b in (1, 2):
        assert prog.verify(torch.randn(b, 3)).ok, b
