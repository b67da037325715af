"""pt2onnx against torch.onnx (dynamo=True) on the same OpInfo samples, float32.

Usage: python benchmarks/opinfo_compare.py [--samples N] [--ops a,b,...] [--opset N]

Both exporters get the same wrapper module per sample (tests/rules/opinfo_harness.py)
and both models run in onnxruntime. An op passes when every tested sample matches
eager PyTorch within the default tolerance. torch.onnx needs the onnxscript package.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "rules"))

import opinfo_harness as harness
import opinfo_table

import pt2onnx


def _run_pt2onnx(module: torch.nn.Module, tensors: tuple[Any, ...], opset: int) -> list[Any]:
    return pt2onnx.export(module, tensors, opset=opset).run(*tensors)


def _run_torch_onnx(module: torch.nn.Module, tensors: tuple[Any, ...], opset: int) -> list[Any]:
    import onnxruntime as ort

    prog = torch.onnx.export(module, tensors, dynamo=True, opset_version=opset, verbose=False)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(prog.model_proto.SerializeToString(), opts,
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    feeds = {n: t.numpy() for n, t in zip(names, tensors, strict=False)}
    return list(session.run(None, feeds))


EXPORTERS = {"pt2onnx": _run_pt2onnx, "torch.onnx": _run_torch_onnx}


def check_op(name: str, runner: Any, n_samples: int, opset: int) -> tuple[bool, str]:
    info = harness.op_db_by_name()[name]
    shape_only = any(c.shape_only for c in opinfo_table.CASES if c.name == name)
    for index, sample in enumerate(harness.samples(info, torch.float32, n_samples)):
        module, tensors = harness.wrap_sample(info.op, sample)
        try:
            expected = harness.eager(module, tensors)
            actual = runner(module, tensors, opset)
        except Exception as exc:  # one failing sample fails the op; keep going
            return False, f"sample {index}: {type(exc).__name__}: {str(exc)[:120]}"
        outcome = harness.compare_outputs(expected, actual, shape_only=shape_only)
        if not outcome.ok:
            return False, f"sample {index}: {outcome.message}"
    return True, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3, help="samples per op (default 3)")
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: the test table)")
    parser.add_argument("--opset", type=int, default=pt2onnx.DEFAULT_OPSET)
    parser.add_argument("--verbose", action="store_true", help="print each op's result")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    names = args.ops.split(",") if args.ops else sorted({c.name for c in opinfo_table.CASES
                                                         if f32_tested(c)})
    passed = {k: 0 for k in EXPORTERS}
    seconds = {k: 0.0 for k in EXPORTERS}
    for name in names:
        row = []
        for exporter, runner in EXPORTERS.items():
            start = time.perf_counter()
            ok, why = check_op(name, runner, args.samples, args.opset)
            seconds[exporter] += time.perf_counter() - start
            passed[exporter] += ok
            row.append(f"{exporter}={'pass' if ok else 'FAIL ' + why}")
        if args.verbose:
            print(f"{name}: " + "; ".join(row), flush=True)
    print(f"\n{len(names)} ops, up to {args.samples} float32 samples each, opset {args.opset}")
    for exporter in EXPORTERS:
        print(f"  {exporter:10s} passes {passed[exporter]:4d} ops  ({seconds[exporter]:.0f} s)")
    return 0


def f32_tested(case: Any) -> bool:
    return torch.float32 in case.dtypes and not case.shape_only


if __name__ == "__main__":
    raise SystemExit(main())
