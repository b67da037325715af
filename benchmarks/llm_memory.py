"""export-llm's memory: weights streamed from the checkpoint against from_pretrained.

Writes a random Llama checkpoint (float32 safetensors, by save_pretrained; about 0.75 B
parameters, 3 GB, by default), then exports it with ``pt2onnx.export_llm`` at each
precision twice, each in a fresh process: with the model built on the meta device and
its weights streamed (the default) and with ``PT2ONNX_LLM_META=0`` (``from_pretrained``,
as before). Prints, for each, the peak resident set (``VmHWM``: it counts the
checkpoint pages a memory map holds), the peak of anonymous memory (sampled every
5 ms: what the process itself allocated) and the export time, with the ratio of the
streamed path to the old one.

Then the "larger than RAM" check: each path exports again in float16 with its data
segment limited (``RLIMIT_DATA``, which counts private writable memory, anonymous
maps included, not read-only file maps) to what it had after its imports plus half
the checkpoint's size; the streamed export must finish, the old one can't (it maps
the checkpoint privately, and converts every weight). The data segment also counts
address space never touched: building the model on the meta device leaves a few
hundred MB to 1 GB of heap that the parameters' empty CPU tensors passed through.

    python benchmarks/llm_memory.py [--layers 14] [--precisions fp32,fp16,int4] [--keep]

A benchmark, not a test: nothing is downloaded, the files are deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

GiB = 2**30


def _config(layers: int) -> Any:
    import transformers

    return transformers.LlamaConfig(
        vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=layers,
        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=2048,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)


def write_checkpoint(folder: Path, layers: int) -> tuple[int, int]:
    """save_pretrained of a random float32 Llama; (parameters, bytes on disk)."""
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(_config(layers)).eval()
    count = sum(p.numel() for p in model.parameters())
    model.save_pretrained(folder)
    del model
    size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    return count, size


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


class _PeakAnon:
    """Samples RssAnon every 5 ms in a thread."""

    def __init__(self) -> None:
        self.peak = _status("RssAnon")
        self.data = _status("VmData")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _status("RssAnon"))
            self.data = max(self.data, _status("VmData"))
            time.sleep(0.005)

    def __enter__(self) -> _PeakAnon:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def worker(ckpt: Path, out: Path, precision: str, data_budget: int) -> dict[str, Any]:
    import resource

    import transformers  # noqa: F401  (imported before the limit and the baseline)

    import pt2onnx

    before = {"rss": _status("VmRSS"), "anon": _status("RssAnon"), "data": _status("VmData")}
    if data_budget:
        limit = before["data"] + data_budget
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    start = time.perf_counter()
    try:
        with _PeakAnon() as anon:
            result = pt2onnx.export_llm(ckpt, out, precision=precision)
    except BaseException as exc:  # MemoryError, RuntimeError from torch's allocator
        text = str(exc).strip().splitlines()
        return {"ok": False, "error": f"{type(exc).__name__}: {text[0][:160] if text else ''}",
                "seconds": time.perf_counter() - start}
    seconds = time.perf_counter() - start
    data = out / "model.onnx.data"
    return {"ok": True, "seconds": seconds, "before": before, "peak_anon": anon.peak,
            "peak_data": anon.data,
            # VmHWM, not ru_maxrss: that one keeps the parent's RSS at the fork.
            "maxrss": _status("VmHWM"),
            "streamed": not any("from_pretrained" in w for w in result.warnings),
            "warnings": result.warnings,
            "written": data.stat().st_size if data.exists() else 0}


def _growth(r: dict[str, Any]) -> int:
    return int(r["peak_anon"] - r["before"]["anon"])


def _run(ckpt: Path, out: Path, precision: str, meta: bool, data_budget: int = 0,
         ) -> dict[str, Any]:
    env = dict(os.environ, PT2ONNX_LLM_META="1" if meta else "0")
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", str(ckpt), str(out), precision,
         str(data_budget)], capture_output=True, text=True, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"ok": False, "error": f"exit {proc.returncode}: {tail[:160]}"}
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=14)
    parser.add_argument("--precisions", default="fp32,fp16,int4")
    parser.add_argument("--keep", action="store_true", help="keep the files (default: delete)")
    parser.add_argument("--worker", nargs=4, metavar=("CKPT", "OUT", "PRECISION", "BUDGET"))
    parser.add_argument("--write", metavar="CKPT")
    args = parser.parse_args()
    if args.write:
        print(json.dumps(write_checkpoint(Path(args.write), args.layers)))
        return 0
    if args.worker:
        ckpt, out, precision, budget = args.worker
        print(json.dumps(worker(Path(ckpt), Path(out), precision, int(budget))))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="pt2onnx-llm-memory-"))
    try:
        ckpt = tmp / "ckpt"
        start = time.perf_counter()
        # In a process of its own: a worker forked from a parent that held the model
        # would start with its pages.
        made = subprocess.run([sys.executable, __file__, "--layers", str(args.layers),
                               "--write", str(ckpt)], capture_output=True, text=True)
        if made.returncode:
            print(made.stderr[-3000:])
            return 1
        params, size = json.loads(made.stdout.strip().splitlines()[-1])
        print(f"checkpoint: Llama, {args.layers} layers, {params / 1e9:.2f} B parameters, "
              f"{size / GiB:.2f} GiB float32 safetensors (written in "
              f"{time.perf_counter() - start:.0f}s)", flush=True)
        print("\nRSS: VmHWM (checkpoint pages a map holds count); anonymous: sampled "
              "RssAnon, as after the imports -> peak (growth)")
        print("\n| precision | path | peak RSS | anonymous | data segment growth | export "
              "| data written |")
        print("|---|---|---|---|---|---|---|")
        rows: dict[tuple[str, bool], dict[str, Any]] = {}
        for precision in args.precisions.split(","):
            for meta in (False, True):
                r = _run(ckpt, tmp / "out", precision, meta)
                rows[precision, meta] = r
                name = "streamed (meta)" if meta else "from_pretrained"
                if not r["ok"]:
                    print(f"| {precision} | {name} | failed: {r['error']} | | | | |", flush=True)
                    continue
                if meta and not r["streamed"]:
                    name += " [fell back]"
                print(f"| {precision} | {name} | {r['maxrss'] / GiB:.2f} GiB "
                      f"({r['maxrss'] / size:.0%}) | {r['before']['anon'] / GiB:.2f} -> "
                      f"{r['peak_anon'] / GiB:.2f} GiB (+{_growth(r) / GiB:.2f}) | "
                      f"+{(r['peak_data'] - r['before']['data']) / GiB:.2f} GiB | "
                      f"{r['seconds']:.1f} s | {r['written'] / GiB:.2f} GiB |", flush=True)
        print("\nstreamed / from_pretrained (one run each):")
        for precision in args.precisions.split(","):
            old, new = rows[precision, False], rows[precision, True]
            if old["ok"] and new["ok"]:
                print(f"  {precision}: peak RSS {new['maxrss'] / old['maxrss']:.2f}x, growth "
                      f"of anonymous memory {_growth(new) / max(_growth(old), 1):.2f}x, time "
                      f"{new['seconds'] / old['seconds']:.2f}x")
        budget = size // 2
        print(f"\nfp16 with the data segment limited to its size after imports + "
              f"{budget / GiB:.2f} GiB (half the checkpoint):")
        for meta in (True, False):
            r = _run(ckpt, tmp / "out", "fp16", meta, budget)
            name = "streamed (meta)" if meta else "from_pretrained"
            if r["ok"]:
                print(f"  {name}: exported in {r['seconds']:.1f} s, peak RSS "
                      f"{r['maxrss'] / GiB:.2f} GiB, anonymous memory grew "
                      f"{_growth(r) / GiB:.2f} GiB")
            else:
                print(f"  {name}: failed ({r['error']})")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
