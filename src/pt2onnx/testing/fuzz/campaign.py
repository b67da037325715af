"""Long campaigns: programs checked in child processes, several at once.

A child process runs a range of programs and prints one JSON record per program and
exporter. onnxruntime can crash the process on a model it should reject (a segfault
in a kernel); the parent then records that program as a ``runtime`` failure named
``crashed``, and goes on with the next program in a new child. ``--jobs J`` runs J
children at once on disjoint ranges of the same campaign, so the counts do not depend
on J.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any

from pt2onnx.testing.fuzz.generator import VERSION
from pt2onnx.testing.fuzz.oracle import CLASSES

START_MARK = "start"


@dataclass
class Tally:
    """Counts per class for one exporter, over the programs it ran."""

    programs: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    untyped: int = 0
    # narrowed only where eager itself fails (oracle.MODEL_RANGE): counted among the
    # export errors, and apart
    model_range: int = 0

    def add(self, rec: dict[str, Any]) -> None:
        from pt2onnx.testing.fuzz.oracle import MODEL_RANGE

        self.programs += 1
        self.counts[rec["cls"]] += 1
        if rec["cls"] == "export_error" and not rec.get("typed", True):
            self.untyped += 1
        if rec["cls"] == "export_error" and MODEL_RANGE in rec.get("detail", ""):
            self.model_range += 1

    def as_dict(self) -> dict[str, Any]:
        return {"programs": self.programs, **{c: self.counts[c] for c in CLASSES},
                "export_error_untyped": self.untyped,
                "export_error_model_range": self.model_range}


def exporters_for(index: int, exporters: list[str], compare_every: int) -> list[str]:
    """The first exporter runs every program; the others every ``compare_every``-th."""
    return [e for k, e in enumerate(exporters)
            if k == 0 or compare_every <= 1 or index % compare_every == 0]


def run_records(seed: int, start: int, count: int, exporters: list[str],
                compare_every: int, out: IO[str], version: int = VERSION) -> None:
    """The child's side: one JSON line before (``start``) and after each check."""
    import warnings

    from pt2onnx.testing.fuzz import check, generate, program_seed

    warnings.filterwarnings("ignore")
    for i in range(start, start + count):
        program = generate(program_seed(seed, i), version=version)
        for exporter in exporters_for(i, exporters, compare_every):
            out.write(json.dumps({"i": i, "exporter": exporter, "cls": START_MARK}) + "\n")
            out.flush()
            o = check(program, exporter)
            out.write(json.dumps({"i": i, "exporter": exporter, "cls": o.cls,
                                  "typed": o.typed, "detail": o.detail,
                                  "ops": sorted(o.ops), "seconds": round(o.seconds, 3)})
                      + "\n")
            out.flush()


@dataclass
class _Child:
    proc: subprocess.Popen[str]
    start: int
    end: int  # exclusive
    log: Any
    path: str


def _spawn(seed: int, start: int, end: int, exporters: list[str], compare_every: int,
           workdir: str, version: int = VERSION) -> _Child:
    path = os.path.join(workdir, f"records-{seed}-{start}.jsonl")
    log = open(path, "w")  # closed when the child ends
    cmd = [sys.executable, "-m", "pt2onnx.testing.fuzz", "--records", "--seed", str(seed),
           "--start", str(start), "--count", str(end - start),
           "--exporter", ",".join(exporters), "--compare-every", str(compare_every),
           "--generator", str(version)]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.DEVNULL, text=True, env=env)
    return _Child(proc, start, end, log, path)


def _signal_name(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def run_campaign(seed: int, start: int, count: int, exporters: list[str], *,
                 jobs: int, compare_every: int, chunk: int, workdir: str,
                 report: Any, progress: int = 0, version: int = VERSION) -> dict[str, Any]:
    """Runs programs ``start .. start+count`` of campaign ``seed`` in child processes.

    ``report(rec)`` is called with every finished record (in no set order).
    Returns the summary (see ``summary``)."""
    os.makedirs(workdir, exist_ok=True)
    began = time.perf_counter()
    pending = [(a, min(a + chunk, start + count)) for a in range(start, start + count, chunk)]
    pending.reverse()
    running: list[_Child] = []
    tallies = {e: Tally() for e in exporters}
    # The first exporter's classes on the programs the others also ran.
    paired: dict[str, Tally] = {e: Tally() for e in exporters[1:]}
    ops: set[str] = set()
    crashes: list[dict[str, Any]] = []
    done = 0
    next_progress = progress

    def take(rec: dict[str, Any]) -> None:
        nonlocal done
        tallies[rec["exporter"]].add(rec)
        ops.update(rec.get("ops", ()))
        if rec["exporter"] == exporters[0]:
            done += 1
            for other in paired:
                if other in exporters_for(rec["i"], exporters, compare_every):
                    paired[other].add(rec)
        report(rec)

    while pending or running:
        while pending and len(running) < jobs:
            a, b = pending.pop()
            running.append(_spawn(seed, a, b, exporters, compare_every, workdir, version))
        time.sleep(0.2)
        for child in list(running):
            rc = child.proc.poll()
            if rc is None:
                continue
            running.remove(child)
            child.log.close()
            last_start: dict[str, Any] | None = None
            with open(child.path) as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:  # a line cut by the crash
                        continue
                    if rec["cls"] == START_MARK:
                        last_start = rec
                        continue
                    last_start = None
                    take(rec)
            os.unlink(child.path)
            if rc == 0 and last_start is None:
                continue
            if last_start is None:  # died between programs: redo the rest
                raise RuntimeError(f"fuzz child for programs {child.start}..{child.end} "
                                   f"exited with {_signal_name(rc)} outside a check")
            i = int(last_start["i"])
            rec = {"i": i, "exporter": last_start["exporter"], "cls": "runtime",
                   "typed": True, "ops": [],
                   "detail": f"crashed: the process died with {_signal_name(rc)} "
                             "(onnxruntime or the exporter); rerun the program alone"}
            crashes.append(rec)
            take(rec)
            # The crashed program's remaining exporters, then the rest of the range.
            rest = exporters_for(i, exporters, compare_every)
            after = rest[rest.index(last_start["exporter"]) + 1:]
            if after:
                for e in after:
                    take({"i": i, "exporter": e, "cls": "runtime", "typed": True, "ops": [],
                          "detail": "not run: the process crashed on another exporter"})
            if i + 1 < child.end:
                pending.append((i + 1, child.end))
        if progress and done >= next_progress and (pending or running):
            next_progress += progress
            print("progress " + json.dumps(summary(seed, start, done, exporters, tallies,
                                                   paired, ops, began)), flush=True)
    out = summary(seed, start, count, exporters, tallies, paired, ops, began)
    return {**out, "generator": version}


def summary(seed: int, start: int, programs: int, exporters: list[str],
            tallies: dict[str, Tally], paired: dict[str, Tally], ops: set[str],
            began: float) -> dict[str, Any]:
    main = tallies[exporters[0]]
    out: dict[str, Any] = {
        "programs": programs, "seed": seed, "start": start, "exporter": exporters[0],
        "ops_covered": len(ops), **{c: main.counts[c] for c in CLASSES},
        "export_error_untyped": main.untyped, "export_error_model_range": main.model_range,
        "seconds": round(time.perf_counter() - began, 2)}
    for other in exporters[1:]:
        out[other] = tallies[other].as_dict()
        out[f"{exporters[0]}_on_{other}_programs"] = paired[other].as_dict()
    return out
