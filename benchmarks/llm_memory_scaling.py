"""export-llm's peak memory against the checkpoint's size: 1B, 3B and 8B Llama shapes.

Writes a random checkpoint (bfloat16 by default, ``--checkpoint-dtype``) of each Llama 3
shape straight to safetensors shards (the model is never built in memory: an 8B model
is 16 GB in bfloat16), then
exports it with ``pt2onnx.export_llm`` to fp16 and to int4, each in a fresh process,
with the model built on the meta device and each weight read, converted and written
one at a time (the default). Prints the peak resident set (``VmHWM``: it counts the
checkpoint pages a map holds while a weight is read), the growth of anonymous memory
(sampled every 5 ms) and the export time, each peak as a ratio of the checkpoint.

    python benchmarks/llm_memory_scaling.py [--sizes 1b,3b,8b] [--precisions fp16,int4]
        [--checkpoint-dtype bf16|fp16|fp32] [--folder DIR] [--keep]

A benchmark, not a test: nothing is downloaded. The 8B checkpoint needs 16 GB of
disk and its fp16 export 16 GB more (the export is deleted before the next one).
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

sys.path.insert(0, str(Path(__file__).parent))
import llm_memory  # the worker and its memory sampling

GiB = 2**30

# Llama 3.2 1B / 3B and Llama 3.1 8B: the shapes, not the weights.
SHAPES: dict[str, dict[str, Any]] = {
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True),
    "3b": dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
               num_attention_heads=24, num_key_value_heads=8, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False),
}
_SHARD = 4 * GiB
_DTYPES = {"bf16": (2, "bfloat16"), "fp16": (2, "float16"), "fp32": (4, "float32")}


def write_checkpoint(folder: Path, size: str, dtype_name: str = "bf16") -> tuple[int, int]:
    """A random Llama checkpoint of the shape ``size`` in ``dtype_name`` (bf16, fp16 or
    fp32), one tensor at a time; (parameters, bytes on disk)."""
    import torch
    import transformers
    from safetensors import safe_open

    config = transformers.LlamaConfig(
        vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0,
        bos_token_id=128000, eos_token_id=128001, pad_token_id=128001,
        torch_dtype=_DTYPES[dtype_name][1], **SHAPES[size])
    dtype = getattr(torch, _DTYPES[dtype_name][1])
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    if config.tie_word_embeddings:
        shapes.pop("lm_head.weight", None)
    del model
    g = torch.Generator().manual_seed(0)
    shards: list[dict[str, torch.Tensor]] = [{}]
    held = 0
    count = 0
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            t = torch.ones(shape, dtype=dtype)
        else:
            t = (torch.randn(shape, generator=g) * 0.02).to(dtype)
        count += t.numel()
        if held and held + t.numel() * t.element_size() > _SHARD:
            _flush(folder, shards)
            shards.append({})
            held = 0
        shards[-1][name] = t
        held += t.numel() * t.element_size()
    _flush(folder, shards)
    total = len(shards)
    weight_map = {}
    for i in range(total):
        old = folder / f"part-{i}.safetensors"
        new = folder / f"model-{i + 1:05d}-of-{total:05d}.safetensors"
        old.rename(new)
        with safe_open(new, "pt") as f:
            weight_map.update({k: new.name for k in f.keys()})
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": count * dtype.itemsize}, "weight_map": weight_map}))
    return count, sum(f.stat().st_size for f in folder.glob("*.safetensors"))


def _flush(folder: Path, shards: list[dict[str, Any]]) -> None:
    from safetensors.torch import save_file

    i = len(shards) - 1
    save_file(shards[-1], str(folder / f"part-{i}.safetensors"), metadata={"format": "pt"})
    shards[-1] = {}  # the written tensors are dropped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1b,3b,8b")
    parser.add_argument("--precisions", default="fp16,int4")
    parser.add_argument("--folder", help="where the checkpoints go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the checkpoints")
    parser.add_argument("--checkpoint-dtype", default="bf16", choices=list(_DTYPES))
    parser.add_argument("--write", nargs=3, metavar=("SIZE", "CKPT", "DTYPE"))
    args = parser.parse_args()
    if args.write:
        print(json.dumps(write_checkpoint(Path(args.write[1]), args.write[0], args.write[2])))
        return 0
    tmp = Path(args.folder or tempfile.mkdtemp(prefix="pt2onnx-llm-scaling-"))
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"| shape | parameters | checkpoint ({args.checkpoint_dtype}) | precision | peak RSS | peak RSS / "
          "checkpoint | anonymous growth | export | written |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    try:
        for size in args.sizes.split(","):
            ckpt = tmp / f"llama-{size}-{args.checkpoint_dtype}"
            if not (ckpt / "model.safetensors.index.json").exists():
                made = subprocess.run([sys.executable, __file__, "--write", size, str(ckpt),
                                       args.checkpoint_dtype],
                                      capture_output=True, text=True)
                if made.returncode:
                    print(made.stderr[-3000:])
                    return 1
            files = list(ckpt.glob("*.safetensors"))
            nbytes = sum(f.stat().st_size for f in files)
            params = nbytes // _DTYPES[args.checkpoint_dtype][0]
            for precision in args.precisions.split(","):
                start = time.perf_counter()
                r = llm_memory._run(ckpt, tmp / "out", precision, True)
                shutil.rmtree(tmp / "out", ignore_errors=True)
                head = (f"| {size} | {params / 1e9:.2f} B | {nbytes / GiB:.2f} GiB | "
                        f"{precision} |")
                if not r["ok"]:
                    print(f"{head} failed: {r['error']} | | | | |", flush=True)
                    continue
                if not r["streamed"]:
                    head += " [not streamed]"
                print(f"{head} {r['maxrss'] / GiB:.2f} GiB | {r['maxrss'] / nbytes:.1%} | "
                      f"+{llm_memory._growth(r) / GiB:.2f} GiB | {r['seconds']:.0f} s "
                      f"({time.perf_counter() - start:.0f} s with the process) | "
                      f"{r['written'] / GiB:.2f} GiB |", flush=True)
            if not args.keep:
                shutil.rmtree(ckpt, ignore_errors=True)
    finally:
        if not args.keep and not args.folder:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
