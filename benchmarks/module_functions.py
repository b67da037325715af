"""File size and load time of ``export_modules_as_functions`` against the flat export
(issue 41): a TransformerEncoder of N identical layers, exported flat, with the layer
type as functions, and with every module type (True). Load time is onnx.load plus an
onnxruntime CPU session, the median of ``--repeat`` loads; the outputs are compared with
eager at batch 1 and 3.

    PYTHONPATH=src python benchmarks/module_functions.py [--layers 6] [--d-model 64]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

import pt2onnx


def _load_seconds(path: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        ort.InferenceSession(onnx.load(str(path)).SerializeToString(),
                             providers=["CPUExecutionProvider"])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    d = args.d_model
    layer = torch.nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, args.layers, enable_nested_tensor=False).eval()
    x = torch.randn(2, 7, d)
    variants = {"flat": False, "layer type": {torch.nn.TransformerEncoderLayer}, "True": True}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, choice in variants.items():
            path = Path(tmp) / f"{label.replace(' ', '_')}.onnx"
            pt2onnx.export(model, (x,), path, input_names=["x"], external_data=False,
                           dynamic_axes={"x": {0: "batch"}},
                           export_modules_as_functions=choice)
            proto = onnx.load(str(path))
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            worst = 0.0
            for batch in (1, 3):
                xb = torch.randn(batch, 7, d)
                with torch.no_grad():
                    want = model(xb).numpy()
                worst = max(worst, float(np.abs(session.run(None, {"x": xb.numpy()})[0]
                                                - want).max()))
            graph_bytes = sum(n.ByteSize() for n in proto.graph.node) + sum(
                f.ByteSize() for f in proto.functions)
            rows.append((label, path.stat().st_size, graph_bytes, len(proto.graph.node),
                         len(proto.functions), _load_seconds(path, args.repeat), worst))
    base = rows[0]
    print(f"TransformerEncoder: {args.layers} layers, d_model {d}; "
          f"onnxruntime {ort.__version__}, torch {torch.__version__}")
    print("| export | file bytes | ratio | node+function bytes | ratio | main nodes | "
          "functions | load s | ratio | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, size, graph, nodes, fns, load, worst in rows:
        print(f"| {label} | {size} | {size / base[1]:.3f} | {graph} | {graph / base[2]:.3f} | "
              f"{nodes} | {fns} | {load:.4f} | {load / base[5]:.2f} | {worst:.1e} |")


if __name__ == "__main__":
    main()
