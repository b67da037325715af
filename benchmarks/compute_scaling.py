"""Export time against the example's compute: pt2onnx beside torch.onnx (dynamo).

A static export records one run of the model (capture/_record.py). Its matrix products,
convolutions and attention now give only their output's shape on inputs derived from
the model's inputs, so the export should cost about the same whatever the example's
batch or resolution, where the model's own forward grows with it. Per case, the best
of ``--repeat`` runs (2) of each, in one process, after a warm-up export of every path:

- ``eager``: the model's forward on the example (the compute a full recording pays);
- ``pt2onnx``: the default export;
- ``recording that computes``: ``PT2ONNX_CAPTURE=eager`` (every op computed, as before);
- ``torch.export path``: ``PT2ONNX_CAPTURE=export``;
- ``dynamo``: ``torch.onnx.export(..., dynamo=True)``;
- ``TorchScript``: ``torch.onnx.export(..., dynamo=False)`` (it traces the model, so it
  pays one forward too).

    python benchmarks/compute_scaling.py [--vit] [--vit-model NAME] [--sizes 224 448 896]

The ViT cases need timm (the model tier's venv has it; ``pretrained=False``). Prints a
table of seconds and the ratios pt2onnx / dynamo, pt2onnx / TorchScript and pt2onnx /
torch.export path. A
benchmark, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

import pt2onnx


class LinearStack(torch.nn.Module):
    """Six Linear(2048, 2048): the issue's case (16384 x 2048 takes seconds in eager)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(6)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


@contextlib.contextmanager
def _capture(mode: str) -> Iterator[None]:
    old = os.environ.get("PT2ONNX_CAPTURE")
    os.environ["PT2ONNX_CAPTURE"] = mode
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PT2ONNX_CAPTURE", None)
        else:
            os.environ["PT2ONNX_CAPTURE"] = old


def _seconds(fn: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _paths(model: torch.nn.Module, args: tuple[Any, ...]) -> dict[str, Callable[[], Any]]:
    def export(mode: str) -> Callable[[], Any]:
        def run() -> Any:
            # A file, as users write one (a model past 2 GB has no in-memory proto).
            with _capture(mode), tempfile.TemporaryDirectory() as tmp:
                return pt2onnx.export(model, args, Path(tmp) / "model.onnx")
        return run

    def dynamo() -> Any:
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                tempfile.TemporaryDirectory() as tmp:
            return torch.onnx.export(model, args, str(Path(tmp) / "model.onnx"), dynamo=True,
                                     report=False, verbose=False)

    def torchscript() -> Any:
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                tempfile.TemporaryDirectory() as tmp:
            return torch.onnx.export(model, args, str(Path(tmp) / "model.onnx"), dynamo=False)

    def eager() -> Any:
        with torch.no_grad():
            return model(*args)

    return {"eager": eager, "pt2onnx": export(""), "recording that computes": export("eager"),
            "torch.export path": export("export"), "dynamo": dynamo, "TorchScript": torchscript}


def _warm_up() -> None:
    small = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    for run in _paths(small, (torch.randn(2, 8),)).values():
        run()


def _cases(args: argparse.Namespace) -> Iterator[tuple[str, torch.nn.Module, tuple[Any, ...]]]:
    stack = LinearStack().eval()
    for rows in args.rows:
        yield f"Linear stack, {rows} x 2048", stack, (torch.randn(rows, 2048),)
    if args.vit:
        import timm

        for size in args.sizes:
            model = timm.create_model(args.vit_model, pretrained=False, img_size=size).eval()
            yield f"{args.vit_model} at {size}", model, (torch.randn(1, 3, size, size),)
            del model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="*", type=int, default=[1024, 4096, 16384])
    parser.add_argument("--vit", action="store_true")
    parser.add_argument("--vit-model", default="vit_base_patch16_224")
    parser.add_argument("--sizes", nargs="*", type=int, default=[224, 448, 896])
    parser.add_argument("--skip", nargs="*", default=[], help="paths to leave out")
    parser.add_argument("--repeat", type=int, default=2, help="runs per cell (the best)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    _warm_up()
    names = [n for n in ("eager", "pt2onnx", "recording that computes", "torch.export path",
                         "dynamo", "TorchScript") if n not in args.skip]
    print("| case | " + " | ".join(f"{n} (s)" for n in names)
          + " | pt2onnx / dynamo | pt2onnx / TorchScript | pt2onnx / torch.export path |")
    print("|---" * (len(names) + 4) + "|")
    for label, model, example in _cases(args):
        paths = _paths(model, example)
        # Best of --repeat: a 100 MB file's write can take 0.03 s or 0.15 s on a shared
        # disk, whichever exporter writes first.
        times = {n: min(_seconds(paths[n]) for _ in range(args.repeat)) for n in names}
        ratio = (f"{times['pt2onnx'] / times['dynamo']:.2f}" if "dynamo" in times else "-")
        vs_ts = (f"{times['pt2onnx'] / times['TorchScript']:.2f}" if "TorchScript" in times
                 else "-")
        vs_export = (f"{times['pt2onnx'] / times['torch.export path']:.2f}"
                     if "torch.export path" in times else "-")
        print(f"| {label} | " + " | ".join(f"{times[n]:.2f}" for n in names)
              + f" | {ratio} | {vs_ts} | {vs_export} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
