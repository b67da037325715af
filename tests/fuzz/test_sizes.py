"""Generator version 2: Python arithmetic on sizes and caches keyed by shape
(pt2onnx.testing.fuzz.ops_sizes), appended to the programs version 1 draws."""

from __future__ import annotations

import warnings

import pytest
import torch

from pt2onnx.testing.fuzz import check, generate, ops_sizes, program_seed
from pt2onnx.testing.fuzz.generator import Builder, Rejected
from pt2onnx.testing.fuzz.oracle import make_inputs
from pt2onnx.testing.fuzz.program import Program, Stmt, load


def _new(p: Program) -> list[Stmt]:
    """The statements version 2 appended."""
    return [s for s in p.stmts if s.label.startswith(("size.", "cache."))]


def _draws(n: int, cache: bool) -> tuple[list[str], list[str], list[str]]:
    """n draws of one kind on a builder with two dynamic inputs: codes, labels and the
    ``__init__`` lines of the caches."""
    codes, labels, state = [], [], []
    for seed in range(n // 40 + 1):
        g = Builder(seed=seed, dynamic=True)
        x = g.leaf(((1, 0), (0, 3), (0, 4)), torch.float32, kind="x")
        y = g.leaf(((0, 2), (1, 0)), torch.float32, kind="x")
        g.add(f"v0 = {x.name} * 2", "mul", (), out="v0", leaves=[x])
        g.add(f"v1 = {y.name} + 1", "add", (), out="v1", leaves=[y])
        used = {x.name, y.name}
        for _ in range(40):
            try:
                var = (ops_sizes.cache_stmt(g, used, state) if cache
                       else ops_sizes.size_stmt(g, used))
            except Rejected:
                continue
            if var is not None:
                codes.append(g.stmts[-1].code)
                labels.append(g.stmts[-1].label)
    return codes, labels, state


def test_size_arithmetic_of_every_kind_is_drawn() -> None:
    codes, labels, _ = _draws(400, cache=False)
    text = "\n".join(codes)
    for op in ["math.ceil(", "math.floor(", "int(", "round(", " // ", " % ", " / ", "min(",
               "max(", ".size(", ".shape[", "len("]:
        assert op in text, op
    for use in ["slice", "narrow", "split", "reshape", "factory", "scale", "repeat", "mask"]:
        assert f"size.{use}" in labels, use
    for form in [":math.", "F.pad(", ".view(", ".reshape(", "torch.zeros(", "torch.arange(",
                 ".narrow(", "torch.split(", ".repeat(", ".repeat_interleave("]:
        assert form in text, form
    # Sizes combine with other sizes, not only constants.
    assert any(c.count(".size(") + c.count(".shape[") + c.count("len(") >= 2
               and ("min(" in c or "max(" in c) for c in codes)


def test_caches_keyed_by_shape_of_every_kind_are_drawn() -> None:
    codes, labels, state = _draws(120, cache=True)
    kinds = {label.split(".")[1] for label in labels}
    whats = {label.split(".")[2] for label in labels}
    assert kinds == {"shape", "buffer", "grow"} and whats == {"line", "rotary", "grid"}
    assert any("register_buffer(" in line and "persistent=False" in line for line in state)
    assert any(c.startswith("if self.k") and "_shape != " in c for c in codes)
    assert any("_len < " in c and "[:" in c for c in codes)


def test_version_1_is_the_program_version_2_grows() -> None:
    """Version 2 appends statements to some programs and changes nothing before them:
    version 1 draws the programs of the earlier campaigns."""
    grown = 0
    for i in range(16):
        old, new = (generate(program_seed(3701, i), version=v) for v in (1, 2))
        added = _new(new)
        if not added and not new.state:
            assert new.source() == old.source()
            continue
        grown += 1
        kept = [s for s in new.stmts if s not in added]
        assert [s.code.split(" = ", 1)[1] if s.label == "broadcast_c" else s.code
                for s in kept] == [s.code.split(" = ", 1)[1] if s.label == "broadcast_c"
                                   else s.code for s in old.stmts]
        assert old.leaves == new.leaves[:len(old.leaves)]
        assert set(old.outputs) <= set(new.outputs)
        assert "WARMUP" not in old.source() and "math" not in old.source()
    assert grown >= 3
    with pytest.raises(ValueError):
        generate(1, version=3)


@pytest.mark.parametrize("index", [10, 13, 14, 24])
def test_grown_programs_run_in_eager_whatever_the_cache_holds(index: int) -> None:
    """Eager runs a grown program at every size of its range; a cache keyed by shape
    gives what a fresh module gives, whatever size the module ran at before."""
    p = generate(program_seed(3701, index))
    assert _new(p)
    ns = load(p.source())
    sizes = [*range(max(p.b_min, 1), 13), 64] if p.b else [5]
    torch.manual_seed(0)
    warm = ns["Program"]()
    if p.warmup is not None:
        warm(*make_inputs(ns, p.warmup))
    for b in [*sizes, *reversed(sizes)]:
        args = make_inputs(ns, b)
        try:
            fresh = ns["Program"]()(*args)
        except Exception:
            assert b < 4 and p.b_min == 1  # drawn over [4, 64]; eager may refuse below
            continue
        for a, f in zip(warm(*args), fresh, strict=True):
            torch.testing.assert_close(a, f, equal_nan=True)


# Grown programs that pt2onnx exports today and that match eager at every size the
# oracle runs: size arithmetic (10: narrow then reshape, a split by a computed size;
# 16: a scale by a size, a slice by one) and a cache refilled by shape (24, static,
# warmed up at its example).
@pytest.mark.parametrize("index", [10, 16, 24])
def test_grown_programs_export_and_match(index: int) -> None:
    warnings.filterwarnings("ignore")
    p = generate(program_seed(3701, index))
    assert _new(p)
    outcome = check(p)
    assert outcome.cls == "ok", outcome.detail
