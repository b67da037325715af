"""Export time of models whose ops need decomposing: pt2onnx vs the TorchScript exporter.

Both exporters run in this one process, interleaved, ``--repeat`` times each
(after one warm-up export each); the best wall time of each is compared and
pt2onnx's stage times are printed. Run it with another pt2onnx on PYTHONPATH
to compare versions (a checkout before per-node decomposition, say).

    python benchmarks/decompose_fallback.py                 # toy C2f net
    python benchmarks/decompose_fallback.py --model yolo11n # needs ultralytics

YOLO11n is built from ``yolo11n.yaml`` (random weights, nothing downloaded).
This is a benchmark, not a test: nothing here passes or fails on time.
"""

from __future__ import annotations

import argparse
import copy
import io
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn


class _C2f(nn.Module):
    """The split-then-concat block of YOLOv8/11: conv, chunk in two, bottlenecks, cat."""

    def __init__(self, c: int, n: int = 2) -> None:
        super().__init__()
        self.cv1 = nn.Conv2d(c, 2 * c, 1)
        self.m = nn.ModuleList(nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.SiLU())
                               for _ in range(n))
        self.cv2 = nn.Conv2d((2 + n) * c, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


def _toy() -> tuple[nn.Module, tuple[Any, ...]]:
    layers: list[nn.Module] = [nn.Conv2d(3, 32, 3, stride=2, padding=1)]
    layers += [_C2f(32) for _ in range(12)]
    return nn.Sequential(*layers).eval(), (torch.randn(1, 3, 320, 320),)


def _yolo11n() -> tuple[nn.Module, tuple[Any, ...]]:
    from ultralytics import YOLO  # type: ignore[import-not-found]

    return YOLO("yolo11n.yaml").model.eval(), (torch.randn(1, 3, 640, 640),)


MODELS = {"toy-c2f": _toy, "yolo11n": _yolo11n}


def _pt2onnx(model: nn.Module, args: tuple[Any, ...], path: Path) -> dict[str, float]:
    import pt2onnx

    start = time.perf_counter()
    prog = pt2onnx.export(model, args, path)
    wall = time.perf_counter() - start
    return {"wall": wall, **prog.report.timings, "decomposition": prog.report.decomposition}


def _torchscript(model: nn.Module, args: tuple[Any, ...], path: Path) -> dict[str, float]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), dynamo=False, opset_version=17)
    return {"wall": time.perf_counter() - start}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=list(MODELS), default="toy-c2f")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    try:
        model, args = MODELS[opts.model]()
    except ImportError as exc:
        print(f"skipped {opts.model}: {exc} (pip install ultralytics)")
        return 0
    import pt2onnx

    print(f"{opts.model}; pt2onnx from {Path(pt2onnx.__file__).parent}; torch {torch.__version__}")
    runs: dict[str, list[dict[str, Any]]] = {"pt2onnx": [], "torchscript": []}
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        for i in range(opts.repeat + 1):
            for name, fn in (("pt2onnx", _pt2onnx), ("torchscript", _torchscript)):
                quiet = io.StringIO()
                saved, sys.stdout = sys.stdout, quiet
                # A fresh copy each time: YOLO's Detect head caches anchors from the
                # last forward, and torch.export leaves fake tensors there.
                fresh = copy.deepcopy(model)
                try:
                    result = fn(fresh, args, Path(tmp) / f"{name}.onnx")
                finally:
                    sys.stdout = saved
                if i:  # the first round warms both up
                    runs[name].append(result)
    best = {k: min(runs[k], key=lambda r: r["wall"]) for k in runs}
    for name, r in best.items():
        stages = ", ".join(f"{k} {v:.2f}s" for k, v in r.items()
                           if k not in ("wall", "decomposition"))
        print(f"{name:12s} best of {opts.repeat}: {r['wall']:.2f}s" + (f" ({stages})" if stages else ""))
    print(f"decomposition: {best['pt2onnx']['decomposition']}")
    print(f"ratio pt2onnx / torchscript: {best['pt2onnx']['wall'] / best['torchscript']['wall']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
