"""pt2onnx against torch.onnx (dynamo=True) on the same OpInfo samples, float32.

Usage: python benchmarks/opinfo_compare.py [--samples N] [--ops a,b,... | --all]
           [--exporters pt2onnx,torch.onnx] [--opset N] [--json PATH]

Both exporters get the same wrapper module per sample (tests/rules/opinfo_harness.py)
and both models run in onnxruntime. An op passes when every tested sample matches
eager PyTorch within the default tolerance. torch.onnx needs the onnxscript package.

``--all`` takes every op_db entry that supports float32 on CPU (677 on torch 2.13) as
the denominator; ``--json`` writes each entry's result and failure reason per exporter.
``--dtypes float32,float16`` adds a float16 column: the same entries, limited to those
whose OpInfo lists float16 on CPU, compared at the table's float16 tolerance (1e-2).
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


_TORCHLIB_CACHE: dict[Any, Any] = {}


def _reuse_torchlib_registry() -> None:
    """torch.onnx rebuilds its registry of ~540 torchlib functions (their signatures
    included) on every export: about 5 s here, which would make the whole table take
    hours. Build it once per opset and hand the same registry to every export. This
    changes the time only, never which ops pass: nothing in this benchmark registers
    custom translations, so each export would build an identical registry."""
    from torch.onnx._internal.exporter import _registration

    cls = _registration.ONNXRegistry
    if getattr(cls, "_pt2onnx_bench_cached", False):
        return
    build = cls.from_torchlib.__func__  # type: ignore[attr-defined]

    def cached(klass: Any, opset_version: Any = None, **kw: Any) -> Any:
        key = (opset_version, tuple(sorted(kw.items())))
        if key not in _TORCHLIB_CACHE:
            args = {} if opset_version is None else {"opset_version": opset_version}
            _TORCHLIB_CACHE[key] = build(klass, **args, **kw)
        return _TORCHLIB_CACHE[key]

    cls.from_torchlib = classmethod(cached)  # type: ignore[method-assign,assignment]
    cls._pt2onnx_bench_cached = True  # type: ignore[attr-defined]


def _run_torch_onnx(module: torch.nn.Module, tensors: tuple[Any, ...], opset: int) -> list[Any]:
    _reuse_torchlib_registry()
    prog = torch.onnx.export(module, tensors, dynamo=True, opset_version=opset, verbose=False)
    return harness.run_onnx(prog.model_proto, tensors)


EXPORTERS = {"pt2onnx": _run_pt2onnx, "torch.onnx": _run_torch_onnx}


class _Timeout(BaseException):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout("ran past the per-op time limit")


DTYPES = {"float32": torch.float32, "float16": torch.float16}


def check_op(name: str, runner: Any, n_samples: int, opset: int,
             limit_s: int = 0, dtype: torch.dtype = torch.float32) -> tuple[bool, str]:
    info = harness.op_db_by_name()[name]
    case = next((c for c in opinfo_table.CASES if c.name == name), None)
    shape_only = bool(case and case.shape_only)
    if case is not None:
        tol = case.tolerance(dtype)
    else:
        tol = (1e-2, 1e-2) if dtype == torch.float16 else (harness.DEFAULT_ATOL,
                                                           harness.DEFAULT_RTOL)
    if limit_s and hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(limit_s)
    try:
        return _check_samples(info, runner, n_samples, opset, shape_only, dtype, tol)
    except (Exception, _Timeout) as exc:  # sample generation failed, or time ran out
        return False, f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        if limit_s and hasattr(signal, "SIGALRM"):
            signal.alarm(0)


def _check_samples(info: Any, runner: Any, n_samples: int, opset: int, shape_only: bool,
                   dtype: torch.dtype = torch.float32,
                   tol: tuple[float, float] = (harness.DEFAULT_ATOL, harness.DEFAULT_RTOL),
                   ) -> tuple[bool, str]:
    for index, sample in enumerate(harness.samples(info, dtype, n_samples)):
        module, tensors = harness.wrap_sample(info.op, sample)
        try:
            expected = harness.eager(module, tensors)
            actual = runner(module, tensors, opset)
        except Exception as exc:  # one failing sample fails the op; keep going
            return False, f"sample {index}: {type(exc).__name__}: {str(exc)[:200]}"
        outcome = harness.compare_outputs(expected, actual, atol=tol[0], rtol=tol[1],
                                          shape_only=shape_only)
        if not outcome.ok:
            return False, f"sample {index}: {outcome.message}"
    return True, ""


def _init_worker() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


def _entry(task: tuple[str, list[tuple[str, str]], int, int, int],
           ) -> tuple[str, dict[tuple[str, str], tuple[bool, str, float]]]:
    """Every column of one entry (run in a worker process with --jobs)."""
    name, columns, n_samples, opset, limit = task
    out = {}
    for exporter, dname in columns:
        start = time.perf_counter()
        ok, why = check_op(name, EXPORTERS[exporter], n_samples, opset, limit, DTYPES[dname])
        out[(exporter, dname)] = (ok, why, time.perf_counter() - start)
    return name, out


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
    parser.add_argument("--jobs", type=int, default=1,
                        help="worker processes (entries are spread over them)")
    parser.add_argument("--dtypes", default="float32",
                        help="comma-separated columns, from: " + ", ".join(DTYPES))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    exporters = {k: EXPORTERS[k] for k in args.exporters.split(",")}
    dtypes = {k: DTYPES[k] for k in args.dtypes.split(",")}
    names = _names(args)
    db = harness.op_db_by_name()
    # One column per (exporter, dtype); float32 keeps the bare exporter name.
    columns = [(e, d) for d in dtypes for e in exporters]
    key = {c: c[0] if c[1] == "float32" else f"{c[0]}/{c[1]}" for c in columns}
    entries = {d: [n for n in names if d == "float32"
                   or dtypes[d] in db[n].supported_dtypes("cpu")] for d in dtypes}
    passed = {key[c]: 0 for c in columns}
    seconds = {key[c]: 0.0 for c in columns}
    results: dict[str, dict[str, str]] = {}
    tasks = [(name, [(e, d) for e, d in columns if name in entries[d]], args.samples,
              args.opset, args.limit) for name in names]
    if args.jobs > 1:
        import multiprocessing

        pool = multiprocessing.get_context("spawn").Pool(args.jobs, _init_worker)
        done = pool.imap(_entry, tasks)
    else:
        _init_worker()
        done = map(_entry, tasks)
    for name, outcomes in done:
        row = []
        for (exporter, dname), (ok, why, spent) in outcomes.items():
            k = key[(exporter, dname)]
            seconds[k] += spent
            passed[k] += ok
            results.setdefault(name, {})[k] = "pass" if ok else why
            row.append(f"{k}={'pass' if ok else 'FAIL ' + why}")
        if args.verbose:
            print(f"{name}: " + "; ".join(row), flush=True)
    if args.jobs > 1:
        pool.close()
        pool.join()
    for dname in dtypes:
        total = len(entries[dname])
        print(f"\n{total} ops, up to {args.samples} {dname} samples each, opset {args.opset}")
        for exporter in exporters:
            k = key[(exporter, dname)]
            share = 100.0 * passed[k] / max(total, 1)
            print(f"  {exporter:10s} passes {passed[k]:4d} of {total} ops "
                  f"({share:.1f}%, {seconds[k]:.0f} s)")
    if args.json:
        summary = {"torch": torch.__version__, "pt2onnx": pt2onnx.__version__,
                   "opset": args.opset, "samples": args.samples, "ops": len(names),
                   "ops_per_dtype": {d: len(v) for d, v in entries.items()},
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
