"""``python -m pt2onnx.testing.fuzz --seed S --count N [--json]``."""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import Counter

from pt2onnx.testing.fuzz import CLASSES, check, generate, program_seed
from pt2onnx.testing.fuzz.campaign import exporters_for
from pt2onnx.testing.fuzz.generator import VERSION
from pt2onnx.testing.fuzz.oracle import EXPORTERS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pt2onnx.testing.fuzz",
                                 description="Differential fuzzing against eager PyTorch.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--start", type=int, default=0, help="index of the first program")
    ap.add_argument("--json", action="store_true", help="last line: one JSON object")
    ap.add_argument("--exporter", default="pt2onnx",
                    help="pt2onnx, torch.onnx (its dynamo exporter), torchscript "
                         "(torch.onnx's dynamo=False), comma separated")
    ap.add_argument("--save-corpus", metavar="DIR",
                    help="minimize each checker/runtime/mismatch failure, write it here")
    ap.add_argument("--show", action="store_true", help="print each program's source")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--progress", type=int, default=0, metavar="K",
                    help="also print the running summary every K programs")
    ap.add_argument("--jobs", type=int, default=0, metavar="J",
                    help="check programs in J child processes at once; a program that "
                         "crashes its process counts as a runtime failure (default 0: "
                         "in this process)")
    ap.add_argument("--compare-every", type=int, default=1, metavar="K",
                    help="with several exporters, run the others on every K-th program "
                         "only (the first runs all); the summary also gives the first "
                         "exporter's counts on those programs")
    ap.add_argument("--chunk", type=int, default=50, help="programs per child process")
    ap.add_argument("--log", metavar="FILE",
                    help="with --jobs: append every failure's record to FILE (JSON lines)")
    ap.add_argument("--generator", type=int, default=VERSION, choices=(1, 2), metavar="V",
                    help=f"generator version (default {VERSION}): 1 draws the programs of "
                         "the campaigns up to seed 2613; 2 also appends Python arithmetic "
                         "on sizes and caches keyed by shape to some of them")
    ap.add_argument("--records", action="store_true", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    exporters = [e.strip() for e in ns.exporter.split(",")]
    for e in exporters:
        if e not in EXPORTERS:
            ap.error(f"unknown exporter {e!r}; choose from {', '.join(EXPORTERS)}")
    if ns.records:  # a campaign's child process
        from pt2onnx.testing.fuzz.campaign import run_records

        run_records(ns.seed, ns.start, ns.count, exporters, ns.compare_every, sys.stdout,
                    ns.generator)
        return 0
    if ns.jobs > 0:
        return _campaign(ns, exporters)
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    counts: dict[str, Counter[str]] = {e: Counter() for e in exporters}
    untyped: Counter[str] = Counter()
    ops: set[str] = set()
    for i in range(ns.start, ns.start + ns.count):
        program = generate(program_seed(ns.seed, i), version=ns.generator)
        if ns.show:
            print(program.source())
        for exporter in exporters_for(i, exporters, ns.compare_every):
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


def _campaign(ns: argparse.Namespace, exporters: list[str]) -> int:
    import tempfile

    from pt2onnx.testing.fuzz.campaign import run_campaign

    failures: list[dict[str, object]] = []

    def report(rec: dict[str, object]) -> None:
        if rec["cls"] == "ok":
            return
        failures.append(rec)
        if ns.log:
            with open(ns.log, "a") as f:
                f.write(json.dumps({"seed": ns.seed, **rec}) + "\n")
        if not ns.quiet:
            flag = "" if rec["cls"] != "export_error" or rec.get("typed") else " (untyped)"
            first = str(rec.get("detail") or "").splitlines()[:1]
            print(f"[{rec['exporter']}] seed {ns.seed} index {rec['i']} (program seed "
                  f"{program_seed(ns.seed, int(str(rec['i'])))}): {rec['cls']}{flag}: "
                  f"{(first[0] if first else '')[:200]}", flush=True)

    with tempfile.TemporaryDirectory(prefix="pt2onnx-fuzz-") as workdir:
        summary = run_campaign(ns.seed, ns.start, ns.count, exporters, jobs=ns.jobs,
                               compare_every=ns.compare_every, chunk=ns.chunk,
                               workdir=workdir, report=report, progress=ns.progress,
                               version=ns.generator)
    if ns.save_corpus:
        from pt2onnx.testing.fuzz.minimize import minimize, save

        for rec in sorted(failures, key=lambda r: (str(r["exporter"]), int(str(r["i"])))):
            detail = str(rec.get("detail") or "")
            if rec["cls"] not in ("checker", "runtime", "mismatch") or \
                    detail.startswith(("crashed", "not run")):
                continue  # a crash is reproduced by its seed, not minimized in-process
            program = generate(program_seed(ns.seed, int(str(rec["i"]))),
                               version=ns.generator)
            exporter = str(rec["exporter"])
            small = minimize(program, exporter, str(rec["cls"]))
            path = save(small, check(small, exporter), exporter, ns.save_corpus)
            print(f"  minimized to {len(small.stmts)} statements: {path}", flush=True)
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
        "generator": ns.generator,
        "ops_covered": len(ops), **{c: counts[main_exporter][c] for c in CLASSES},
        "export_error_untyped": untyped[main_exporter],
        "seconds": round(time.perf_counter() - start, 2)}
    for other in exporters[1:]:
        summary[other] = {**{c: counts[other][c] for c in CLASSES},
                          "export_error_untyped": untyped[other]}
    return summary


if __name__ == "__main__":
    sys.exit(main())
