"""The generator draws programs whose declared dynamic dim the model leaves free."""

from __future__ import annotations

import torch

from pt2onnx.testing.fuzz.generator import Builder
from pt2onnx.testing.fuzz.program import B_MAX, B_MIN, Program


def _builder() -> Builder:
    b = Builder(seed=1, dynamic=True)
    assert b.b is not None
    return b


def test_a_statement_that_fixes_the_dynamic_dim_is_not_kept() -> None:
    b = _builder()
    x = b.leaf(((1, 0), (0, 3)), torch.float32, kind="x")
    i = b.leaf(((0, 1), (0, 3)), torch.int64, kind="x", data="index", bound=(0, 1))
    # take_along_dim broadcasts the index's dim 0 (1) against x's (B) only where they
    # differ: torch guards B == the example, so torch.export would fix B.
    code = f"v = torch.take_along_dim({x.name}, {i.name}, 1)"
    blind = _builder()
    blind.symbolic = None  # the concrete sizes alone accept it
    assert blind.add(code, "take_along_dim", (), out="v", leaves=[x, i]) is not None
    assert b.add(code, "take_along_dim", (), out="v", leaves=[x, i]) is None
    # The refusal left nothing behind: an ordinary statement on a fresh input is kept
    # and B is still free.
    y = b.leaf(((1, 0), (0, 2)), torch.float32, kind="x")
    assert b.add(f"w = {y.name} * 2", "mul", (), out="w", leaves=[y]) is not None
    assert b.symbolic is not None
    assert b.symbolic.symbol not in b.symbolic.shape_env.replacements


def test_a_guard_that_holds_over_the_whole_range_is_kept() -> None:
    b = _builder()
    x = b.leaf(((1, 0), (0, 4)), torch.float32, kind="x")
    # A view that splits B: size-obliviously no guard; the concrete sizes all allow it.
    assert b.add(f"v = {x.name}.reshape(2, -1)", "reshape", (), out="v",
                 leaves=[x]) is not None
    s = b.symbolic
    assert s is not None
    assert s._holds(s.symbol >= B_MIN) and not s._holds(s.symbol < B_MAX)


def test_dynamic_programs_of_a_seed_do_not_fix_their_dim() -> None:
    # Seed 100, program 10 fixed B through take_along_dim before the symbolic check.
    from pt2onnx.testing.fuzz import check, generate, program_seed

    outcome = check(generate(program_seed(100, 10)))
    assert "can only take one size" not in outcome.detail, outcome.detail
    assert outcome.cls == "ok", outcome.detail


def test_layers_are_drawn_with_the_dynamic_dim_and_checked_at_one() -> None:
    """Embedding bags, recurrent submodules and the outer broadcast are drawn, some of
    them on B, and their programs pass the oracle at the example, at 1 and at B's
    second size."""
    from pt2onnx.testing.fuzz import ops_layers
    from pt2onnx.testing.fuzz.oracle import check

    for draw, label, module in [(ops_layers.embedding_bag, "embedding_bag", False),
                                (ops_layers.rnn, "rnn", True),
                                (ops_layers.outer, "outer", False)]:
        b = _builder()
        x = b.leaf(((1, 0), (0, 3)), torch.float32, kind="x")
        assert b.add(f"v0 = {x.name} * 2", "mul", (), out="v0", leaves=[x]) is not None
        kept = None
        for _ in range(40):
            try:
                draw(b)
            except Exception:
                continue
            kept = next((s for s in b.stmts if s.label.startswith(label)), None)
            if kept is not None:
                break
        assert kept is not None, label
        assert any(leaf.ctor for leaf in b.leaves) == module
        program = Program(b.seed, b.leaves, b.stmts, b._outputs(), b.b, b_min=1)
        source = program.source()
        assert any(f"torch.nn.{k}(" in source for k in ("LSTM", "GRU", "RNN")) == module
        outcome = check(program)
        assert outcome.cls == "ok", (label, outcome.detail, source)


def test_some_programs_broadcast_against_a_second_dynamic_dim() -> None:
    """A quarter of the dynamic programs get an input whose dim is a second symbol C
    (declared [1, 64]) broadcast against an input's B; the oracle runs C = 1 and C = B
    at every size of B, the example's C first; the program itself is unchanged before
    the appended statement."""
    from pt2onnx.testing.fuzz import generate, program_seed
    from pt2onnx.testing.fuzz.oracle import make_inputs, run_points
    from pt2onnx.testing.fuzz.program import C_DIM, load

    seen = 0
    for i in range(40):
        p = generate(program_seed(2613, i))
        if p.c is None:
            continue
        seen += 1
        assert p.b is not None and p.c in (1, "b")
        y = p.leaves[-1]
        assert C_DIM in y.shape and p.stmts[-1].uses[-1] == y.name
        ns = load(p.source())
        assert 'torch.export.Dim("C", min=1' in p.source()
        points = run_points(ns, list(p.b))
        b0 = p.b[0]
        assert points[0] == (b0, 1 if p.c == 1 else b0)
        assert {c for b, c in points if b == b0} == {1, b0}
        for b, c in points:  # eager runs at every point (checked when drawn)
            args = make_inputs(ns, b, c)
            axis = y.shape.index(C_DIM)
            assert args[-1].shape[axis] == c
            ns["Program"]()(*args)
    assert seen >= 3
