"""Export time per layer of a synthetic stack at 125, 250, 500 and 1000 layers.

Every stage of pt2onnx should be linear in graph size, so the time per layer
should stay flat as the stack deepens. Prints one row per depth with the
per-layer time of each stage, and the ratio of the deepest to the shallowest.

    python benchmarks/scaling.py [--depths 125 250 500 1000] [--torch-onnx]

With --torch-onnx it also times torch.onnx.export(dynamo=True) (slow).
This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch import nn

import pt2onnx


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.nn.functional.gelu(self.fc(self.norm(x))) * 0.5


class Stack(nn.Module):
    def __init__(self, depth: int, dim: int = 32) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Block(dim) for _ in range(depth)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", nargs="*", type=int, default=[125, 250, 500, 1000])
    parser.add_argument("--torch-onnx", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    x = torch.randn(2, 8, 32)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # Warm up imports and torch's caches so the first depth is not penalised.
        pt2onnx.export(Stack(8).eval(), (x,), Path(tmp) / "warmup.onnx")
        for depth in args.depths:
            model = Stack(depth).eval()
            start = time.perf_counter()
            prog = pt2onnx.export(model, (x,), Path(tmp) / f"stack{depth}.onnx")
            total = time.perf_counter() - start
            row = {"depth": depth, "total": total, **prog.report.timings}
            if args.torch_onnx:
                start = time.perf_counter()
                torch.onnx.export(model, (x,), str(Path(tmp) / f"t{depth}.onnx"), dynamo=True)
                row["torch.onnx"] = time.perf_counter() - start
            rows.append(row)
            per = {k: f"{v / depth * 1000:.2f}" for k, v in row.items() if k != "depth"}
            print(f"depth {depth}: ms per layer {per}", flush=True)
    first, last = rows[0], rows[-1]
    print("\n| depth | " + " | ".join(k for k in first if k != "depth") + " |  (ms per layer)")
    print("|---|" + "---|" * (len(first) - 1))
    for row in rows:
        cells = [f"{row[k] / row['depth'] * 1000:.2f}" for k in first if k != "depth"]
        print(f"| {row['depth']} | " + " | ".join(cells) + " |")
    ratio = (last["total"] / last["depth"]) / (first["total"] / first["depth"])
    print(f"\ntime per layer at {last['depth']} / at {first['depth']}: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
