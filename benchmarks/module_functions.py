"""File size and load time of ``export_modules_as_functions`` against the flat export
(issue 41): a TransformerEncoder of N identical layers, exported flat, with the layer
type as functions, and with every module type (True). Load time: onnx.load of the file
(protobuf parsing), and an onnxruntime CPU session made from the bytes (which inlines
the functions), each the median of ``--repeat`` rounds that load the variants in turn;
the outputs are compared with eager at batch 1 and 3.

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


def _load_seconds(paths: list[Path], repeat: int) -> list[tuple[float, float]]:
    """(onnx.load, onnxruntime session) seconds per path, in rounds over the paths."""
    parse: list[list[float]] = [[] for _ in paths]
    session: list[list[float]] = [[] for _ in paths]
    for _ in range(repeat):
        for i, path in enumerate(paths):
            start = time.perf_counter()
            data = onnx.load(str(path)).SerializeToString()
            parse[i].append(time.perf_counter() - start)
            start = time.perf_counter()
            ort.InferenceSession(data, providers=["CPUExecutionProvider"])
            session[i].append(time.perf_counter() - start)
    return [(statistics.median(p), statistics.median(s)) for p, s in zip(parse, session)]


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
    paths = []
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
            paths.append(path)
            rows.append((label, path.stat().st_size, graph_bytes, len(proto.graph.node),
                         len(proto.functions), worst))
        loads = _load_seconds(paths, args.repeat)
    base = rows[0]
    print(f"TransformerEncoder: {args.layers} layers, d_model {d}; "
          f"onnxruntime {ort.__version__}, torch {torch.__version__}")
    print("| export | file bytes | ratio | node+function bytes | ratio | main nodes | "
          "functions | onnx.load s | ratio | ort session s | ratio | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (label, size, graph, nodes, fns, worst), (parse, session) in zip(rows, loads):
        print(f"| {label} | {size} | {size / base[1]:.3f} | {graph} | {graph / base[2]:.3f} | "
              f"{nodes} | {fns} | {parse:.4f} | {parse / loads[0][0]:.2f} | {session:.4f} | "
              f"{session / loads[0][1]:.2f} | {worst:.1e} |")


if __name__ == "__main__":
    main()
