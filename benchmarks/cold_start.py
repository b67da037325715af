"""Cold start: import + export in a fresh process, pt2onnx against both torch.onnx exporters.

Each run is a new Python process that imports torch, builds the model (random weights),
then imports the exporter and exports once to a file. It reports three figures, each
timed inside the process:

- ``import``: ``import pt2onnx`` against ``import torch.onnx`` (which torchvision has
  usually imported already, so the baselines pay almost nothing here);
- ``export``: the export call (for pt2onnx it includes loading what ``import pt2onnx``
  deferred: the exporter, onnx_ir and the built-in rules);
- ``cold``: the two together, what a script that imports an exporter and exports once
  pays beyond torch and its model; ``cold cpu`` is its CPU time (all threads), steadier
  than wall time on a shared machine;

plus ``process``, the whole process's wall time seen from outside (Python, torch and the
model included: the same work for every exporter). Exporters run in turn (pt2onnx,
TorchScript, dynamo; the order rotates each round), so a change of load on the machine
touches all of them alike; each ratio is taken within a round, then its minimum, median
and maximum over the rounds are printed.

    python benchmarks/cold_start.py                         # resnet50, 5 rounds
    python benchmarks/cold_start.py --models resnet50 yolo11n --repeat 7
    python benchmarks/cold_start.py --exporters pt2onnx,torchscript

resnet50 needs torchvision, yolo11n ultralytics (``make bench-cold`` runs this in the
model tier's venv). pt2onnx is byte-compiled first, as a wheel install is. This is a
benchmark, not a test: nothing here passes or fails on time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from compare_export import _byte_compile_pt2onnx

EXPORTERS = ("pt2onnx", "torchscript", "dynamo")
FIGURES = ("import", "export", "cold", "cold cpu", "process")


def _build(name: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    if name == "resnet50":
        import torchvision

        return torchvision.models.resnet50(weights=None).eval(), (torch.randn(1, 3, 224, 224),)
    if name == "yolo11n":
        from ultralytics import YOLO  # type: ignore[import-not-found]

        return YOLO("yolo11n.yaml").model.eval(), (torch.randn(1, 3, 640, 640),)
    raise SystemExit(f"unknown model {name!r}")


def _child(exporter: str, model_name: str, path: str) -> None:
    """One fresh process: build the model, import the exporter, export once."""
    import warnings

    warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation warning
    model, args = _build(model_name)
    start, cpu = time.perf_counter(), time.process_time()
    if exporter == "pt2onnx":
        import pt2onnx

        imported = time.perf_counter()
        pt2onnx.export(model, args, path)
    else:
        import torch.onnx

        imported = time.perf_counter()
        torch.onnx.export(model, args, path, dynamo=exporter == "dynamo")
    done, cpu = time.perf_counter(), time.process_time() - cpu
    print(json.dumps({"import": imported - start, "export": done - imported,
                      "cold": done - start, "cold cpu": cpu}))


def _run(exporter: str, model_name: str, out_dir: str) -> dict[str, float]:
    path = os.path.join(out_dir, f"{model_name}-{exporter}.onnx")
    cmd = [sys.executable, __file__, "--child", exporter, model_name, path]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{exporter} on {model_name} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["process"] = wall
    return figures


def _spread(values: list[float], fmt: str) -> str:
    return " / ".join(format(v, fmt) for v in
                      (min(values), statistics.median(values), max(values)))


def _table(model_name: str, exporters: list[str], runs: dict[str, list[dict[str, float]]]) -> None:
    print(f"\n{model_name}: {len(runs[exporters[0]])} fresh processes each; "
          "min / median / max, seconds")
    print("| figure | " + " | ".join(exporters) + " |")
    print("|---|" + "---|" * len(exporters))
    for figure in FIGURES:
        cells = [_spread([r[figure] for r in runs[e]], ".3f") for e in exporters]
        print(f"| {figure} | " + " | ".join(cells) + " |")
    if "pt2onnx" not in exporters:
        return
    for base in (e for e in exporters if e != "pt2onnx"):
        print(f"\npt2onnx / {base}, ratio within each round (min / median / max):")
        for figure in ("cold", "cold cpu", "export", "process"):
            ratios = [p[figure] / b[figure] for p, b in zip(runs["pt2onnx"], runs[base])]
            print(f"  {figure:8s} {_spread(ratios, '.2f')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["resnet50"],
                        choices=["resnet50", "yolo11n"])
    parser.add_argument("--exporters", default=",".join(EXPORTERS),
                        help="comma-separated, from: " + ", ".join(EXPORTERS))
    parser.add_argument("--repeat", type=int, default=5, help="rounds (fresh processes each)")
    parser.add_argument("--child", nargs=3, metavar=("EXPORTER", "MODEL", "PATH"),
                        help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        _child(*opts.child)
        return 0
    exporters = [e.strip() for e in opts.exporters.split(",") if e.strip()]
    unknown = sorted(set(exporters) - set(EXPORTERS))
    if unknown:
        parser.error(f"unknown exporters {unknown}; choose from {', '.join(EXPORTERS)}")
    _byte_compile_pt2onnx()
    import torch

    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    with tempfile.TemporaryDirectory() as out_dir:
        for model_name in opts.models:
            runs: dict[str, list[dict[str, float]]] = {e: [] for e in exporters}
            for e in exporters:  # a warm-up each: the OS's file cache, pyc files
                _run(e, model_name, out_dir)
            for i in range(opts.repeat):
                order = exporters[i % len(exporters):] + exporters[:i % len(exporters)]
                for e in order:
                    runs[e].append(_run(e, model_name, out_dir))
            _table(model_name, exporters, runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
