"""pt2onnx vs torch.onnx.export(dynamo=True), side by side in one run.

``--baselines torch.onnx,torchscript`` adds the TorchScript exporter
(``torch.onnx.export(dynamo=False)``) as a second baseline, with its own ratio rows.

Each export runs in a fresh process, alternating between the two exporters,
on models built from configs with random weights. For each model it prints
export wall time (the export call; the exporter's import is timed apart, as
"import": ``import pt2onnx`` against ``import torch.onnx``), pt2onnx's per-stage
times, peak RSS above the model's
own memory, ONNX node count, file size and onnxruntime latency (1 thread,
median), and the ratio pt2onnx / torch.onnx for each. Latency is measured after
both exports, in one fresh process holding both files, with the runs of the two
models interleaved, so a change of load on the machine affects both alike.

    python benchmarks/compare_export.py                 # all models
    python benchmarks/compare_export.py --models gpt2 bert --repeat 2
    python benchmarks/compare_export.py --models yolo11n unet --baselines torch.onnx,torchscript

yolo11n (ultralytics, from ``yolo11n.yaml``) needs torchvision, so run it in the model
tier's venv (``make bench-vision``); unet is a diffusers ``UNet2DConditionModel`` from a
small config. Both build with random weights; nothing is downloaded.

This is a benchmark, not a test: nothing here passes or fails on time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


# -- models (random weights, built from configs) ---------------------------------


def _llama_1b() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    import transformers

    cfg = transformers.LlamaConfig(
        vocab_size=32000, hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, intermediate_size=8192, max_position_embeddings=2048,
        pad_token_id=0,
    )
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(1, 32000, (1, 32))
    return model, (), {"input_ids": ids, "use_cache": False}


def _gpt2() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    import transformers

    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    return model, (), {"input_ids": torch.randint(0, 50257, (1, 64)), "use_cache": False}


def _bert() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    import transformers

    model = transformers.BertModel(transformers.BertConfig()).eval()
    ids = torch.randint(0, 30522, (1, 128))
    return model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _vit() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    import transformers

    model = transformers.ViTModel(transformers.ViTConfig()).eval()  # ViT-B/16, 224x224
    return model, (), {"pixel_values": torch.randn(1, 3, 224, 224)}


def _resnet50() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    import transformers

    cfg = transformers.ResNetConfig(layer_type="bottleneck", depths=[3, 4, 6, 3],
                                    hidden_sizes=[256, 512, 1024, 2048])
    model = transformers.ResNetForImageClassification(cfg).eval()
    return model, (), {"pixel_values": torch.randn(1, 3, 224, 224)}


def _whisper() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    import transformers

    cfg = transformers.WhisperConfig(
        d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
        decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
    )  # whisper-base sizes
    model = transformers.WhisperForConditionalGeneration(cfg).eval()
    return model, (), {"input_features": torch.randn(1, 80, 3000),
                       "decoder_input_ids": torch.tensor([[50258, 50259, 50359, 50363]]),
                       "use_cache": False}


def _yolo11n() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    from ultralytics import YOLO  # type: ignore[import-not-found]

    return YOLO("yolo11n.yaml").model.eval(), (torch.randn(1, 3, 640, 640),), {}


def _unet() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import diffusers  # type: ignore[import-not-found]
    import torch

    model = diffusers.UNet2DConditionModel(
        sample_size=32, in_channels=4, out_channels=4, layers_per_block=2,
        block_out_channels=(128, 256, 512),
        down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=512, attention_head_dim=8,
    ).eval()
    return model, (torch.randn(1, 4, 32, 32), torch.tensor([10])), {
        "encoder_hidden_states": torch.randn(1, 77, 512), "return_dict": False}


MODELS = {
    "llama-1b": _llama_1b,
    "gpt2": _gpt2,
    "bert-base": _bert,
    "vit-b16": _vit,
    "resnet50": _resnet50,
    "whisper-base": _whisper,
    "yolo11n": _yolo11n,
    "unet": _unet,
}
# The models `make bench` runs by default; the others need the model tier's venv.
DEFAULT_MODELS = ["llama-1b", "gpt2", "bert-base", "vit-b16", "resnet50", "whisper-base"]
EXPORTERS = ("pt2onnx", "torch.onnx", "torchscript")


# -- the worker (one export in a fresh process) --------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _PeakRss:
    """Samples RSS every 5 ms in a thread; .peak is the highest value seen."""

    def __init__(self) -> None:
        self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss())
            time.sleep(0.005)

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _latency(path: Path, feeds: dict[str, Any], runs: int) -> float:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = {k: v for k, v in zip(names, feeds.values())}
    for _ in range(2):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def worker(exporter: str, model_name: str, out_dir: Path, latency_runs: int) -> dict[str, Any]:
    import warnings

    import onnx
    import torch

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    model, args, kwargs = MODELS[model_name]()
    path = out_dir / f"{model_name}.{exporter}.onnx"
    result: dict[str, Any] = {"exporter": exporter, "model": model_name}
    # The exporter's own import is timed apart from the export call: a fresh process pays
    # both, a second export in the same process only the call.
    start = time.perf_counter()
    if exporter == "pt2onnx":
        import pt2onnx
    else:
        import torch.onnx
    result["import_s"] = time.perf_counter() - start
    baseline = _rss()
    start = time.perf_counter()
    with _PeakRss() as peak:
        if exporter == "pt2onnx":
            prog = pt2onnx.export(model, args, path, kwargs=kwargs)
            result["stages"] = {k: round(v, 3) for k, v in prog.report.timings.items()}
        elif exporter == "torch.onnx":
            torch.onnx.export(model, args, str(path), kwargs=kwargs, dynamo=True,
                              external_data=True)
        else:  # the TorchScript exporter: kwargs only as a trailing dict of the args
            call_args = args + (kwargs,) if kwargs else args
            torch.onnx.export(model, call_args, str(path), dynamo=False, opset_version=17)
    result["export_s"] = time.perf_counter() - start
    result["peak_rss_mb"] = (peak.peak - baseline) / 2**20
    proto = onnx.load(str(path), load_external_data=False)
    result["nodes"] = len(proto.graph.node)
    result["file_mb"] = sum(p.stat().st_size for p in out_dir.glob(f"{path.name}*")) / 2**20
    del proto
    flat = [t for t in list(args) + list(kwargs.values()) if isinstance(t, torch.Tensor)]
    import numpy as np

    np.savez(out_dir / f"{model_name}.feeds.npz", **{f"in{i}": t.numpy() for i, t in enumerate(flat)})
    return result


def latency_ab(model_name: str, out_dir: Path, runs: int) -> dict[str, float]:
    """ORT latency of every exported file, measured in one process with the runs
    interleaved (A, B, A, B, ...), so load changes on the machine hit all alike."""
    import numpy as np
    import onnxruntime as ort

    data = np.load(out_dir / f"{model_name}.feeds.npz")
    sessions = {}
    for exporter in EXPORTERS:
        if not (out_dir / f"{model_name}.{exporter}.onnx").exists():
            continue
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        sess = ort.InferenceSession(str(out_dir / f"{model_name}.{exporter}.onnx"), opts,
                                    providers=["CPUExecutionProvider"])
        feeds = dict(zip([i.name for i in sess.get_inputs()], (data[k] for k in data.files)))
        sessions[exporter] = (sess, feeds)
    for sess, feeds in sessions.values():  # warm-up: first touches of the weights
        for _ in range(2):
            sess.run(None, feeds)
    times: dict[str, list[float]] = {e: [] for e in sessions}
    for _ in range(runs):
        for exporter, (sess, feeds) in sessions.items():
            start = time.perf_counter()
            sess.run(None, feeds)
            times[exporter].append(time.perf_counter() - start)
    return {e: statistics.median(t) * 1000 for e, t in times.items()}


# -- the driver ---------------------------------------------------------------------


def _spawn(exporter: str, model: str, out_dir: Path, runs: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", exporter, "--models", model,
           "--out", str(out_dir), "--latency-runs", str(runs)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"exporter": exporter, "model": model, "error": " | ".join(tail)[:300]}
    return json.loads(lines[-1])


def _spawn_latency(model: str, out_dir: Path, runs: int) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--latency-ab", "--models", model, "--out", str(out_dir),
           "--latency-runs", str(runs)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if proc.returncode == 0 and lines else {}


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def _byte_compile_pt2onnx() -> None:
    """Writes pt2onnx's .pyc files, as installing a wheel does (torch's come with its
    install), so that no worker compiles pt2onnx's sources on import. Under
    PYTHONDONTWRITEBYTECODE (or from a fresh checkout) every fresh process would
    otherwise pay that compile, which a user's installed pt2onnx never does."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("pt2onnx")
    if spec is not None and spec.origin is not None:
        compileall.compile_dir(str(Path(spec.origin).parent), quiet=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=DEFAULT_MODELS, choices=list(MODELS))
    parser.add_argument("--baselines", default="torch.onnx",
                        help="comma-separated, from: torch.onnx, torchscript")
    parser.add_argument("--repeat", type=int, default=1, help="export runs per exporter")
    parser.add_argument("--latency-runs", type=int, default=15)
    parser.add_argument("--worker", choices=list(EXPORTERS))
    parser.add_argument("--latency-ab", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out")
    args = parser.parse_args()

    if args.worker:
        out = worker(args.worker, args.models[0], Path(args.out), args.latency_runs)
        print(json.dumps(out))
        return 0
    if args.latency_ab:
        print(json.dumps(latency_ab(args.models[0], Path(args.out), args.latency_runs)))
        return 0

    baselines = [b for b in args.baselines.split(",") if b]
    unknown = set(baselines) - set(EXPORTERS[1:])
    if unknown:
        parser.error(f"unknown baseline(s) {sorted(unknown)}; choose from {EXPORTERS[1:]}")
    _byte_compile_pt2onnx()
    out_dir = Path(tempfile.mkdtemp(prefix="pt2onnx-bench-"))
    rows = []
    try:
        for model in args.models:
            runs: dict[str, list[dict[str, Any]]] = {e: [] for e in ["pt2onnx", *baselines]}
            for _ in range(args.repeat):
                pair = {e: _spawn(e, model, out_dir, args.latency_runs)
                        for e in [*baselines, "pt2onnx"]}
                latency = _spawn_latency(model, out_dir, args.latency_runs)
                for exporter, r in pair.items():
                    if exporter in latency and "error" not in r:
                        r["latency_ms"] = latency[exporter]
                    if "import_s" in r and "export_s" in r:  # a fresh process pays both
                        r["fresh_s"] = r["import_s"] + r["export_s"]
                    runs[exporter].append(r)
                    print(json.dumps(r), flush=True)
                for p in out_dir.glob(f"{model}.*"):
                    p.unlink()
            rows.append((model, runs))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    for baseline in baselines:
        _print_table(rows, baseline)
    return 0


def _best(runs: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in runs if key in r]
    return min(vals) if vals else None


def _print_table(rows: list[tuple[str, dict[str, list[dict[str, Any]]]]],
                 baseline: str) -> None:
    print(f"\npt2onnx against {baseline}:")
    keys = [("export_s", "export time"), ("import_s", "import"),
            ("fresh_s", "import + export (a fresh process)"),
            ("peak_rss_mb", "peak RSS above model"),
            ("nodes", "nodes"), ("file_mb", "file size"), ("latency_ms", "ORT latency")]
    print("\n| model | " + " | ".join(label for _, label in keys) + " |")
    print("|---|" + "---|" * len(keys))
    lat_ratios = []
    for model, runs in rows:
        cells = []
        for key, _ in keys:
            ours, theirs = _best(runs["pt2onnx"], key), _best(runs[baseline], key)
            if ours is None or theirs is None:
                err = next((r.get("error") for r in runs["pt2onnx"] + runs[baseline]
                            if "error" in r), "")
                cells.append(f"fail ({err[:40]})" if ours is None or theirs is None else "")
                continue
            cells.append(f"{_ratio(ours, theirs)} ({ours:.4g} / {theirs:.4g})")
            if key == "latency_ms":
                lat_ratios.append(ours / theirs)
        print(f"| {model} | " + " | ".join(cells) + " |")
    if lat_ratios:
        geo = math.exp(sum(math.log(r) for r in lat_ratios) / len(lat_ratios))
        print(f"\nORT latency ratio, geometric mean over {len(lat_ratios)} models: {geo:.2f}")
    print(f"Cells: ratio pt2onnx / {baseline} (pt2onnx value / {baseline} value); "
          "seconds, MB, nodes, ms.")
    for model, runs in rows:
        for r in runs["pt2onnx"]:
            if "stages" in r:
                print(f"pt2onnx stages, {model}: {r['stages']}")


if __name__ == "__main__":
    raise SystemExit(main())
