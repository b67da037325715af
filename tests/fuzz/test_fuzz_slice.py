"""A seeded slice of the differential fuzzer (pt2onnx.testing.fuzz): a fixed number of
programs, never a time budget, so the slice is the same on every run.

Every program must export and match eager PyTorch, or be refused with a typed error
that names the op; a checker failure, an onnxruntime failure or a mismatch fails."""

from __future__ import annotations

import warnings

import pytest

from pt2onnx.testing.fuzz import check, generate, program_seed

SEED = 2026
PROGRAMS = 40
CHUNK = 10


@pytest.mark.parametrize("first", range(0, PROGRAMS, CHUNK))
def test_fuzz_slice(first: int) -> None:
    warnings.filterwarnings("ignore")
    failures = []
    for i in range(first, first + CHUNK):
        program = generate(program_seed(SEED, i))
        outcome = check(program)
        bad = outcome.cls in ("checker", "runtime", "mismatch") or (
            outcome.cls == "export_error" and not outcome.typed)
        if bad:
            failures.append(
                f"program {i} (reproduce: python -m pt2onnx.testing.fuzz --seed {SEED} "
                f"--start {i} --count 1 --show): {outcome.cls}: {outcome.detail}")
    assert not failures, "\n".join(failures)


def test_generator_is_deterministic() -> None:
    a, b = generate(program_seed(SEED, 3)), generate(program_seed(SEED, 3))
    assert a.source() == b.source()
    assert 1 <= len(a.stmts) <= 30
