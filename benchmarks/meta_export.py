"""Export a Llama-shaped model with >= 8 GiB of float32 weights from the meta device.

The weights are written once, tensor by tensor, to a safetensors file with
random values; then a fresh process builds the model on the meta device,
exports it with pt2onnx and streams the weights into the external-data file.
Prints the peak RSS of that process against the size of the weights, then
deletes every file it wrote.

    python benchmarks/meta_export.py [--layers 30] [--keep]

This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _config(layers: int) -> Any:
    import transformers

    return transformers.LlamaConfig(
        vocab_size=32000, hidden_size=2560, num_hidden_layers=layers, num_attention_heads=20,
        num_key_value_heads=4, intermediate_size=6912, max_position_embeddings=2048,
        pad_token_id=0,
    )


def _meta_model(layers: int) -> Any:
    import transformers

    from pt2onnx.llm import params_on_meta

    with params_on_meta():
        return transformers.LlamaForCausalLM(_config(layers)).eval()


def write_weights(path: Path, layers: int) -> int:
    import torch

    from pt2onnx.save import write_safetensors

    state = _meta_model(layers).state_dict()
    gen = torch.Generator().manual_seed(0)

    def fill(name: str, t: Any) -> Any:
        return torch.randn(t.shape, generator=gen, dtype=t.dtype) * 0.02

    write_safetensors(path, state, fill)
    return sum(t.numel() * t.element_size() for t in state.values())


def worker(weights: Path, out: Path, layers: int) -> dict[str, Any]:
    import torch
    from compare_export import _PeakRss, _rss

    import pt2onnx

    model = _meta_model(layers)
    ids = torch.randint(1, 32000, (1, 32))
    base = _rss()
    start = time.perf_counter()
    with _PeakRss() as peak:
        prog = pt2onnx.export(model, (), out, kwargs={"input_ids": ids, "use_cache": False},
                              weights=weights)
    return {"seconds": time.perf_counter() - start, "peak_rss": peak.peak,
            "rss_before": base, "stages": prog.report.timings,
            "data_bytes": out.with_name(out.name + ".data").stat().st_size}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--keep", action="store_true", help="keep the files (default: delete)")
    parser.add_argument("--worker", nargs=2, metavar=("WEIGHTS", "OUT"))
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(Path(args.worker[0]), Path(args.worker[1]), args.layers)))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="pt2onnx-meta-"))
    try:
        weights = tmp / "model.safetensors"
        start = time.perf_counter()
        size = write_weights(weights, args.layers)
        print(f"wrote {size / 2**30:.2f} GiB of float32 weights in "
              f"{time.perf_counter() - start:.1f}s", flush=True)
        proc = subprocess.run(
            [sys.executable, __file__, "--layers", str(args.layers), "--worker", str(weights),
             str(tmp / "model.onnx")], capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode or not lines:
            print(proc.stderr[-3000:])
            return 1
        r = json.loads(lines[-1])
        print(f"export + streamed save: {r['seconds']:.1f}s, stages "
              f"{ {k: round(v, 2) for k, v in r['stages'].items()} }")
        print(f"external data written: {r['data_bytes'] / 2**30:.2f} GiB")
        print(f"peak RSS of the exporting process: {r['peak_rss'] / 2**30:.2f} GiB = "
              f"{r['peak_rss'] / size:.1%} of the weights "
              f"(before export: {r['rss_before'] / 2**30:.2f} GiB)")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
