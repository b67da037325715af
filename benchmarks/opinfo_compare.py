"""pt2onnx against torch.onnx (dynamo=True) on the same OpInfo samples, float32.

Usage: python benchmarks/opinfo_compare.py [--samples N] [--ops a,b,... | --all]
           [--exporters pt2onnx,torch.onnx] [--opset N] [--json PATH]

Both exporters get the same wrapper module per sample (tests/rules/opinfo_harness.py)
and both models run in onnxruntime. An op passes when every tested sample matches
eager PyTorch within the default tolerance. torch.onnx needs the onnxscript package.

``--all`` takes every op_db entry that supports float32 on CPU (677 on torch 2.13) as
the denominator; ``--json`` writes each entry's result and failure reason per exporter.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
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
    prog = pt2onnx.export(module, tensors, opset=opset)
    return harness.run_onnx(prog.model_proto, tensors)


def _run_torch_onnx(module: torch.nn.Module, tensors: tuple[Any, ...], opset: int) -> list[Any]:
    prog = torch.onnx.export(module, tensors, dynamo=True, opset_version=opset, verbose=False)
    return harness.run_onnx(prog.model_proto, tensors)


EXPORTERS = {"pt2onnx": _run_pt2onnx, "torch.onnx": _run_torch_onnx}


class _Timeout(BaseException):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout("ran past the per-op time limit")


def check_op(name: str, runner: Any, n_samples: int, opset: int,
             limit_s: int = 0) -> tuple[bool, str]:
    info = harness.op_db_by_name()[name]
    shape_only = any(c.shape_only for c in opinfo_table.CASES if c.name == name)
    if limit_s and hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(limit_s)
    try:
        return _check_samples(info, runner, n_samples, opset, shape_only)
    except (Exception, _Timeout) as exc:  # sample generation failed, or time ran out
        return False, f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        if limit_s and hasattr(signal, "SIGALRM"):
            signal.alarm(0)


def _check_samples(info: Any, runner: Any, n_samples: int, opset: int,
                   shape_only: bool) -> tuple[bool, str]:
    for index, sample in enumerate(harness.samples(info, torch.float32, n_samples)):
        module, tensors = harness.wrap_sample(info.op, sample)
        try:
            expected = harness.eager(module, tensors)
            actual = runner(module, tensors, opset)
        except Exception as exc:  # one failing sample fails the op; keep going
            return False, f"sample {index}: {type(exc).__name__}: {str(exc)[:200]}"
        outcome = harness.compare_outputs(expected, actual, shape_only=shape_only)
        if not outcome.ok:
            return False, f"sample {index}: {outcome.message}"
    return True, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3, help="samples per op (default 3)")
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: the test table)")
    parser.add_argument("--all", action="store_true",
                        help="every op_db entry that supports float32 on CPU")
    parser.add_argument("--exporters", default=",".join(EXPORTERS),
                        help="comma-separated, from: " + ", ".join(EXPORTERS))
    parser.add_argument("--opset", type=int, default=pt2onnx.DEFAULT_OPSET)
    parser.add_argument("--limit", type=int, default=120, help="seconds per op and exporter")
    parser.add_argument("--json", help="write per-entry results and failure reasons here")
    parser.add_argument("--verbose", action="store_true", help="print each op's result")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    exporters = {k: EXPORTERS[k] for k in args.exporters.split(",")}
    names = _names(args)
    passed = {k: 0 for k in exporters}
    seconds = {k: 0.0 for k in exporters}
    results: dict[str, dict[str, str]] = {}
    for name in names:
        row = []
        for exporter, runner in exporters.items():
            start = time.perf_counter()
            ok, why = check_op(name, runner, args.samples, args.opset, args.limit)
            seconds[exporter] += time.perf_counter() - start
            passed[exporter] += ok
            results.setdefault(name, {})[exporter] = "pass" if ok else why
            row.append(f"{exporter}={'pass' if ok else 'FAIL ' + why}")
        if args.verbose:
            print(f"{name}: " + "; ".join(row), flush=True)
    print(f"\n{len(names)} ops, up to {args.samples} float32 samples each, opset {args.opset}")
    for exporter in exporters:
        share = 100.0 * passed[exporter] / max(len(names), 1)
        print(f"  {exporter:10s} passes {passed[exporter]:4d} of {len(names)} ops "
              f"({share:.1f}%, {seconds[exporter]:.0f} s)")
    if args.json:
        summary = {"torch": torch.__version__, "pt2onnx": pt2onnx.__version__,
                   "opset": args.opset, "samples": args.samples, "ops": len(names),
                   "passed": passed, "seconds": seconds, "results": results}
        Path(args.json).write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return 0


def _names(args: Any) -> list[str]:
    if args.ops:
        return args.ops.split(",")
    if args.all:
        return sorted(name for name, info in harness.op_db_by_name().items()
                      if torch.float32 in info.supported_dtypes("cpu"))
    return sorted({c.name for c in opinfo_table.CASES if f32_tested(c)})


def f32_tested(case: Any) -> bool:
    return torch.float32 in case.dtypes and not case.shape_only


if __name__ == "__main__":
    raise SystemExit(main())
