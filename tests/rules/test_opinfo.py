"""OpInfo-driven op tests: each sample of each op in opinfo_table.CASES, exported and run.

Tiers (each test is one (op, dtype, opset) and a group of samples):
- fast (``make test``): for the ops in ``opinfo_table.FAST`` (about 90, one or more per
  rule family), sample 0 of each dtype at ``pt2onnx.DEFAULT_OPSET``, and also at opset 17
  (the lowest) for float32 cases whose rules differ by opset (``OpCase.opset_sensitive``).
- slow (``make test-opinfo``, ``-m slow``): everything else in the table: sample 0 of the
  other ops, and samples 1..``MAX_SAMPLES``-1, at both opsets (one test per op, dtype and
  opset). Each export costs about 0.5 s (mostly torch's run_decompositions), which is
  why the full sweep is not in the fast tier.

Expected failures are entries in the table with a reason; they run as strict xfails, so a
case that starts passing fails the suite until its entry is removed.
"""

from __future__ import annotations

import warnings

import onnx
import onnx_ir as ir
import opinfo_harness as harness
import pytest
import torch
from opinfo_table import CASES, OpCase

import pt2onnx

MAX_SAMPLES = 25
OPSETS = (17, pt2onnx.DEFAULT_OPSET)


def _params() -> list:
    params = []
    for case in CASES:
        for dtype in case.dtypes:
            dname = str(dtype).removeprefix("torch.")
            for opset in case.opsets or OPSETS:
                for group in ("first", "rest"):
                    marks = list(case.marks(dtype, opset, group))
                    fast = group == "first" and case.fast and (
                        opset == pt2onnx.DEFAULT_OPSET
                        or (dtype == torch.float32 and case.opset_sensitive)
                    )
                    if not fast:
                        marks.append(pytest.mark.slow)
                    params.append(pytest.param(
                        case, dtype, opset, group, marks=marks,
                        id=f"{case.name}-{dname}-opset{opset}-{group}",
                    ))
    return params


@pytest.mark.parametrize(("case", "dtype", "opset", "group"), _params())
def test_opinfo(case: OpCase, dtype: torch.dtype, opset: int, group: str) -> None:
    info = harness.op_db_by_name()[case.name]
    all_samples = list(harness.samples(info, dtype, 1 if group == "first" else MAX_SAMPLES))
    chosen = list(enumerate(all_samples))[:1] if group == "first" else list(
        enumerate(all_samples))[1:]
    failures = []
    for index, sample in chosen:
        module, tensors = harness.wrap_sample(info.op, sample)
        expected = harness.eager(module, tensors)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog = pt2onnx.export(module, tensors, opset=opset)
        # Every file must pass onnx's full check (typed graph and subgraph outputs,
        # shape inference), not only run in onnxruntime.
        onnx.checker.check_model(ir.to_proto(prog.model), full_check=True)
        actual = harness.run_onnx(prog.model_proto, tensors)
        atol, rtol = case.tolerance(dtype)
        outcome = harness.compare_outputs(expected, actual, atol, rtol,
                                          shape_only=case.shape_only)
        if not outcome.ok:
            failures.append(f"sample {index} ({sample.summary()}): {outcome.message}")
    assert not failures, f"{case.name}: " + "\n".join(failures)


def test_multi_head_attention_forward_values_without_dropout() -> None:
    """The table compares multi_head_attention_forward by shape only (its training samples
    draw dropout masks from torch's generator); the samples without dropout compare values."""
    info = harness.op_db_by_name()["nn.functional.multi_head_attention_forward"]
    checked = 0
    for sample in harness.samples(info, torch.float32, 8):
        if sample.kwargs.get("training") and sample.args[9] > 0:
            continue
        module, tensors = harness.wrap_sample(info.op, sample)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog = pt2onnx.export(module, tensors)
        outcome = harness.compare_outputs(harness.eager(module, tensors),
                                          harness.run_onnx(prog.model_proto, tensors))
        assert outcome.ok, outcome.message
        checked += 1
    assert checked >= 2
