"""The tools people run after exporting, on pt2onnx's files and torch.onnx's, side by side.

For each model (random weights) and exporter (pt2onnx, ``torch.onnx.export(dynamo=True)``),
it runs onnxruntime's symbolic shape inference and transformer optimizer, onnxslim,
onnxconverter-common's float16 conversion and onnxruntime's dynamic and static
quantization, then runs each tool's output in onnxruntime against eager PyTorch, and
prints one markdown table (docs/compatibility.md). Nothing here is timed.

    python benchmarks/downstream_tools.py                 # resnet18 bert llama
    python benchmarks/downstream_tools.py --models bert

resnet18 needs torchvision (the model tier's venv: ``make bench-downstream``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import torch

import pt2onnx
from pt2onnx.testing.downstream import TOOLS, run_tools

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "models"))


def main() -> None:
    import pytest  # the model builders skip through pytest when a library is missing
    from test_downstream_tools import MODELS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    opts = parser.parse_args()
    warnings.filterwarnings("ignore")
    print("| model | tool | pt2onnx | torch.onnx |")
    print("|---|---|---|---|")
    for name in opts.models:
        try:
            model, inputs, axes, optimizer = MODELS[name]()
        except pytest.skip.Exception as e:
            print(f"| {name} | (all) | skipped: {e} | |")
            continue
        args = tuple(inputs.values())
        feeds = {k: v.numpy() for k, v in inputs.items()}
        with torch.no_grad():
            out = model(*args)
        expected = [(out if isinstance(out, torch.Tensor) else out[0]).numpy()]
        rows: dict[str, dict[str, str]] = {t: {} for t in TOOLS}
        with tempfile.TemporaryDirectory() as tmp:
            for exporter in ("pt2onnx", "torch.onnx"):
                path = Path(tmp) / f"{name}_{exporter}.onnx"
                try:
                    if exporter == "pt2onnx":
                        pt2onnx.export(model, args, path, input_names=list(inputs),
                                       dynamic_axes=axes)
                    else:
                        torch.onnx.export(model, args, str(path), input_names=list(inputs),
                                          dynamic_axes=axes, dynamo=True)
                except Exception as e:
                    for t in TOOLS:
                        rows[t][exporter] = f"export failed: {type(e).__name__}"
                    continue
                for tool, result in run_tools(path, feeds, expected, optimizer).items():
                    cell = result.cell()
                    if result.max_error is not None:
                        cell += f", err {result.max_error:.2g}"
                    rows[tool][exporter] = cell.replace("|", "/").replace("\n", " ")
        for tool in TOOLS:
            print(f"| {name} | {tool} | {rows[tool].get('pt2onnx', '')} | "
                  f"{rows[tool].get('torch.onnx', '')} |", flush=True)


if __name__ == "__main__":
    main()
