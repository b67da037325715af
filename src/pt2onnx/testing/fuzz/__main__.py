"""``python -m pt2onnx.testing.fuzz --seed S --count N [--json]``."""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import Counter

from pt2onnx.testing.fuzz import CLASSES, check, generate, program_seed
from pt2onnx.testing.fuzz.oracle import EXPORTERS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pt2onnx.testing.fuzz",
                                 description="Differential fuzzing against eager PyTorch.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--start", type=int, default=0, help="index of the first program")
    ap.add_argument("--json", action="store_true", help="last line: one JSON object")
    ap.add_argument("--exporter", default="pt2onnx",
                    help="pt2onnx, torch.onnx, or both (comma separated)")
    ap.add_argument("--save-corpus", metavar="DIR",
                    help="minimize each checker/runtime/mismatch failure, write it here")
    ap.add_argument("--show", action="store_true", help="print each program's source")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--progress", type=int, default=0, metavar="K",
                    help="also print the running summary every K programs")
    ns = ap.parse_args(argv)
    exporters = [e.strip() for e in ns.exporter.split(",")]
    for e in exporters:
        if e not in EXPORTERS:
            ap.error(f"unknown exporter {e!r}; choose from {', '.join(EXPORTERS)}")
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    counts: dict[str, Counter[str]] = {e: Counter() for e in exporters}
    untyped: Counter[str] = Counter()
    ops: set[str] = set()
    for i in range(ns.start, ns.start + ns.count):
        program = generate(program_seed(ns.seed, i))
        if ns.show:
            print(program.source())
        for exporter in exporters:
            outcome = check(program, exporter)
            ops |= outcome.ops
            counts[exporter][outcome.cls] += 1
            if outcome.cls == "export_error" and not outcome.typed:
                untyped[exporter] += 1
            if outcome.failed and not ns.quiet:
                flag = "" if outcome.cls != "export_error" or outcome.typed else " (untyped)"
                first = outcome.detail.splitlines()[0] if outcome.detail else ""
                print(f"[{exporter}] seed {ns.seed} index {i} (program seed {program.seed}): "
                      f"{outcome.cls}{flag}: {first[:200]}", flush=True)
            if ns.save_corpus and outcome.cls in ("checker", "runtime", "mismatch"):
                from pt2onnx.testing.fuzz.minimize import minimize, save

                small = minimize(program, exporter, outcome.cls)
                path = save(small, check(small, exporter), exporter, ns.save_corpus)
                print(f"  minimized to {len(small.stmts)} statements: {path}", flush=True)
        done = i - ns.start + 1
        if ns.progress and done % ns.progress == 0 and done < ns.count:
            print("progress " + json.dumps(_summary(ns, done, exporters, counts, untyped, ops,
                                                    start)), flush=True)
    summary = _summary(ns, ns.count, exporters, counts, untyped, ops, start)
    if ns.json:
        print(json.dumps(summary))
    else:
        print(", ".join(f"{k}={v}" for k, v in summary.items()))
    return 0


def _summary(ns: argparse.Namespace, programs: int, exporters: list[str],
             counts: dict[str, Counter[str]], untyped: Counter[str], ops: set[str],
             start: float) -> dict[str, object]:
    main_exporter = exporters[0]
    summary: dict[str, object] = {
        "programs": programs, "seed": ns.seed, "start": ns.start, "exporter": main_exporter,
        "ops_covered": len(ops), **{c: counts[main_exporter][c] for c in CLASSES},
        "export_error_untyped": untyped[main_exporter],
        "seconds": round(time.perf_counter() - start, 2)}
    for other in exporters[1:]:
        summary[other] = {**{c: counts[other][c] for c in CLASSES},
                          "export_error_untyped": untyped[other]}
    return summary


if __name__ == "__main__":
    sys.exit(main())
