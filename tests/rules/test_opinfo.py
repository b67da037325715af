"""OpInfo-driven op tests: each sample of each op in opinfo_table.CASES, exported and run.

Tiers:
- fast (``make test``): the first ``FAST_SAMPLES`` samples of each (op, dtype), at opset
  17 (the lowest) and at ``pt2onnx.DEFAULT_OPSET``.
- slow (``make test-opinfo``, ``-m slow``): the remaining samples, up to ``MAX_SAMPLES``
  per (op, dtype), at the same two opsets.

Expected failures are entries in the table with a reason; they run as strict xfails, so a
case that starts passing fails the suite until its entry is removed.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import pt2onnx
import opinfo_harness as harness
from opinfo_table import CASES, OpCase

FAST_SAMPLES = 1
MAX_SAMPLES = 25
OPSETS = (17, pt2onnx.DEFAULT_OPSET)


def _params() -> list:
    params = []
    db = harness.op_db_by_name()
    for case in CASES:
        info = db[case.name]
        for dtype in case.dtypes:
            n = sum(1 for _ in harness.samples(info, dtype, MAX_SAMPLES))
            for index in range(n):
                for opset in case.opsets or OPSETS:
                    marks = list(case.marks(dtype, opset, index))
                    if index >= FAST_SAMPLES:
                        marks.append(pytest.mark.slow)
                    dname = str(dtype).removeprefix("torch.")
                    params.append(pytest.param(
                        case, dtype, opset, index, marks=marks,
                        id=f"{case.name}-{dname}-opset{opset}-s{index}",
                    ))
    return params


@pytest.mark.parametrize(("case", "dtype", "opset", "index"), _params())
def test_opinfo(case: OpCase, dtype: torch.dtype, opset: int, index: int) -> None:
    info = harness.op_db_by_name()[case.name]
    sample = list(harness.samples(info, dtype, index + 1))[index]
    module, tensors = harness.wrap_sample(info.op, sample)
    expected = harness.eager(module, tensors)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(module, tensors, opset=opset)
    actual = prog.run(*tensors)
    atol, rtol = case.tolerance(dtype)
    outcome = harness.compare_outputs(expected, actual, atol, rtol, shape_only=case.shape_only)
    assert outcome.ok, f"{case.name} sample {index} ({sample.summary()}): {outcome.message}"
