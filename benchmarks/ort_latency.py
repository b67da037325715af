"""onnxruntime latency of pt2onnx's files against torch.onnx's two exporters, in one run.

Each model is exported three times in this process: by pt2onnx, by
``torch.onnx.export(dynamo=True)`` and by ``torch.onnx.export(dynamo=False)``
(TorchScript). Each file then runs in onnxruntime's CPU provider with one intra-op
thread and the default graph optimizations, the sessions in interleaved rounds
(A, B, C, A, B, C, ...), so a change of load on the machine reaches them alike. It
prints the median latency of each file and the ratios pt2onnx / dynamo and
pt2onnx / TorchScript, and an A/A row: the same pt2onnx file loaded as a second
session and timed in the same rounds, whose ratio to the first shows the spread
that the other ratios should be read against.

    python benchmarks/ort_latency.py                       # bert, distilbert, vit_b_16, resnet50
    python benchmarks/ort_latency.py --onnxruntime --models bert vit_b_16 whisper_encoder gpt2
        # optimize="onnxruntime" beside onnxruntime's transformer optimizer on torch.onnx's
    python benchmarks/ort_latency.py --models bert --rounds 100 --keep /tmp/new
    python benchmarks/ort_latency.py --models bert --files /tmp/old/bert.pt2onnx.onnx \
        /tmp/new/bert.pt2onnx.onnx     # two builds' files of one model, with an A/A row

The models are built from configs (transformers) or with ``weights=None``
(torchvision): nothing is downloaded. BERT and DistilBERT run batch 1, sequence 128,
with an attention mask whose last 32 tokens are padding.

This is a benchmark, not a test: nothing here passes or fails on time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

SEQ, PAD = 128, 32


class _Encoder:
    """Builds a transformers encoder that takes (input_ids, attention_mask) positionally
    and returns the last hidden state, so all three exporters see one signature."""

    def __init__(self, config_name: str, model_name: str) -> None:
        self.config_name, self.model_name = config_name, model_name

    def __call__(self) -> tuple[Any, tuple[Any, ...]]:
        import torch
        import transformers

        config = getattr(transformers, self.config_name)()
        inner = getattr(transformers, self.model_name)(config).eval()

        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
                return self.inner(input_ids=input_ids,
                                  attention_mask=attention_mask).last_hidden_state

        ids = torch.randint(1000, 2000, (1, SEQ))
        mask = torch.ones(1, SEQ, dtype=torch.int64)
        mask[:, SEQ - PAD:] = 0
        return Wrapped().eval(), (ids, mask)


def _vision(name: str) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    def make() -> tuple[Any, tuple[Any, ...]]:
        import torch
        import torchvision

        model = torchvision.models.get_model(name, weights=None).eval()
        return model, (torch.randn(1, 3, 224, 224),)
    return make


def _whisper_encoder() -> tuple[Any, tuple[Any, ...]]:
    """Whisper's encoder at whisper-base's shape (6 layers of 512), 30 s of features."""
    import torch
    import transformers

    config = transformers.WhisperConfig(d_model=512, encoder_layers=6, decoder_layers=6,
                                        encoder_attention_heads=8, decoder_attention_heads=8,
                                        encoder_ffn_dim=2048, decoder_ffn_dim=2048)
    encoder = transformers.WhisperModel(config).eval().get_encoder()

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = encoder

        def forward(self, input_features: torch.Tensor) -> Any:
            return self.inner(input_features).last_hidden_state

    return Wrapped().eval(), (torch.randn(1, config.num_mel_bins, 3000),)


def _gpt2() -> tuple[Any, tuple[Any, ...]]:
    """GPT-2 small (12 layers of 768), a prefill of SEQ tokens without a padding mask:
    transformers calls sdpa with is_causal=True (optimize="onnxruntime": unidirectional)."""
    import torch
    import transformers

    inner = transformers.GPT2Model(transformers.GPT2Config()).eval()

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor) -> Any:
            return self.inner(input_ids=input_ids, use_cache=False).last_hidden_state

    return Wrapped().eval(), (torch.randint(1000, 2000, (1, SEQ)),)


MODELS: dict[str, Callable[[], tuple[Any, tuple[Any, ...]]]] = {
    "bert": _Encoder("BertConfig", "BertModel"),
    "distilbert": _Encoder("DistilBertConfig", "DistilBertModel"),
    "vit_b_16": _vision("vit_b_16"),
    "resnet50": _vision("resnet50"),
    "whisper_encoder": _whisper_encoder,
    "gpt2": _gpt2,
}
EXPORTERS = ("pt2onnx", "dynamo", "torchscript")
# --onnxruntime: pt2onnx's optimize="onnxruntime" file, and onnxruntime's own
# transformer optimizer (onnxruntime.transformers.optimizer) run on torch.onnx's files.
ORT_EXPORTERS = ("pt2onnx ort", "dynamo + ort optimizer", "torchscript + ort optimizer")
# The optimizer's model_type for each (its fusions are chosen by it).
ORT_TYPES = {"bert": ("bert", 12, 768), "distilbert": ("bert", 12, 768),
             "vit_b_16": ("vit", 12, 768), "resnet50": ("bert", 0, 0),
             "whisper_encoder": ("bert", 8, 512), "gpt2": ("gpt2", 12, 768)}


def _export(exporter: str, model: Any, args: tuple[Any, ...], path: Path,
            name: str = "") -> None:
    import torch

    if exporter == "pt2onnx":
        import pt2onnx

        pt2onnx.export(model, args, path)
    elif exporter == "pt2onnx ort":
        import pt2onnx

        pt2onnx.export(model, args, path, optimize="onnxruntime")
    elif exporter.endswith("+ ort optimizer"):
        from onnxruntime.transformers.optimizer import optimize_model

        plain = path.with_suffix(".plain.onnx")
        base = exporter.split(" ")[0]
        torch.onnx.export(model, args, str(plain), dynamo=base == "dynamo")
        kind, heads, hidden = ORT_TYPES.get(name, ("bert", 0, 0))
        optimize_model(str(plain), model_type=kind, num_heads=heads, hidden_size=hidden,
                       opt_level=0).save_model_to_file(str(path))
    else:
        torch.onnx.export(model, args, str(path), dynamo=exporter == "dynamo")


def _session(path: Path) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _feeds(sess: Any, arrays: list[Any]) -> dict[str, Any]:
    """The example's arrays by position; an exporter may have dropped an unused input."""
    names = [i.name for i in sess.get_inputs()]
    if len(names) == len(arrays):
        return dict(zip(names, arrays))
    raise RuntimeError(f"{len(names)} inputs, expected {len(arrays)}: {names}")


def _interleaved(sessions: dict[str, tuple[Any, dict[str, Any]]], rounds: int,
                 warmup: int) -> dict[str, float]:
    """Median seconds per session, the sessions taking turns in every round."""
    for sess, feeds in sessions.values():
        for _ in range(warmup):
            sess.run(None, feeds)
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(rounds):
        for name, (sess, feeds) in sessions.items():
            start = time.perf_counter()
            sess.run(None, feeds)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def _one(name: str, tmp: Path, rounds: int, warmup: int,
         exporters: tuple[str, ...] = EXPORTERS) -> dict[str, Any]:
    import onnx
    import torch

    torch.manual_seed(0)
    model, args = MODELS[name]()
    arrays = [a.numpy() for a in args]
    result: dict[str, Any] = {"errors": {}, "nodes": {}}
    sessions: dict[str, tuple[Any, dict[str, Any]]] = {}
    for exporter in exporters:
        path = tmp / f"{name}.{exporter.replace(' ', '_')}.onnx"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _export(exporter, model, args, path, name)
            sess = _session(path)
            sessions[exporter] = (sess, _feeds(sess, arrays))
        except Exception as exc:
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            result["errors"][exporter] = last[:160]
            continue
        result["nodes"][exporter] = len(onnx.load(str(path), load_external_data=False).graph.node)
        if exporter == "pt2onnx":  # the A/A control: the same file, a second session
            again = _session(path)
            sessions["pt2onnx (A/A)"] = (again, _feeds(again, arrays))
    result["median_s"] = _interleaved(sessions, rounds, warmup)
    return result


def _files(name: str, paths: list[Path], rounds: int, warmup: int) -> None:
    """Times given files of one model (say, before and after a change to pt2onnx)
    against the first, with the first loaded twice as the A/A control."""
    import torch

    torch.manual_seed(0)
    _model, args = MODELS[name]()
    arrays = [a.numpy() for a in args]
    sessions = {}
    for label, path in [(str(p), p) for p in paths] + [(f"{paths[0]} (A/A)", paths[0])]:
        sess = _session(path)
        sessions[label] = (sess, _feeds(sess, arrays))
    medians = _interleaved(sessions, rounds, warmup)
    first = medians[str(paths[0])]
    print(f"\n{name}: medians of {rounds} interleaved rounds, 1 intra-op thread")
    print("| file | ms | ratio to the first |")
    print("|---|---|---|")
    for label, m in medians.items():
        print(f"| {label} | {m * 1e3:.2f} | {m / first:.3f} |")


def _ratio(medians: dict[str, float], a: str, b: str) -> str:
    return f"{medians[a] / medians[b]:.3f}" if a in medians and b in medians else "-"


def _ort_table(results: dict[str, dict[str, Any]], rounds: int) -> None:
    print(f"\nwith onnxruntime's fused ops: onnxruntime CPU, 1 intra-op thread, medians of "
          f"{rounds} interleaved rounds (ms)")
    print("| model | pt2onnx | pt2onnx ort | dynamo | TorchScript | dynamo + ort optimizer "
          "| TorchScript + ort optimizer | ort / dynamo | ort / TorchScript "
          "| ort / best optimized | A/A |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        m = r["median_s"]
        cols = ("pt2onnx", "pt2onnx ort", "dynamo", "torchscript", "dynamo + ort optimizer",
                "torchscript + ort optimizer")
        cells = [f"{m[e] * 1e3:.2f}" if e in m else "failed" for e in cols]
        optimized = [m[e] for e in cols[4:] if e in m]
        best = f"{m['pt2onnx ort'] / min(optimized):.3f}" if optimized and "pt2onnx ort" in m \
            else "-"
        cells += [_ratio(m, "pt2onnx ort", "dynamo"), _ratio(m, "pt2onnx ort", "torchscript"),
                  best, _ratio(m, "pt2onnx", "pt2onnx (A/A)")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for name, r in results.items():
        nodes = ", ".join(f"{e} {n}" for e, n in r["nodes"].items())
        print(f"{name} nodes: {nodes}"
              + "".join(f"; {e} failed: {msg}" for e, msg in r["errors"].items()))


def _table(results: dict[str, dict[str, Any]], rounds: int) -> None:
    print(f"\nonnxruntime CPU, 1 intra-op thread, medians of {rounds} interleaved rounds (ms)")
    print("| model | pt2onnx | dynamo | TorchScript | pt2onnx / dynamo "
          "| pt2onnx / TorchScript | A/A (pt2onnx / pt2onnx) |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        m = r["median_s"]
        cells = [f"{m[e] * 1e3:.2f}" if e in m else "failed" for e in EXPORTERS]
        cells += [_ratio(m, "pt2onnx", "dynamo"), _ratio(m, "pt2onnx", "torchscript"),
                  _ratio(m, "pt2onnx", "pt2onnx (A/A)")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for name, r in results.items():
        nodes = ", ".join(f"{e} {n}" for e, n in r["nodes"].items())
        print(f"{name} nodes: {nodes}"
              + "".join(f"; {e} failed: {msg}" for e, msg in r["errors"].items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["bert", "distilbert", "vit_b_16", "resnet50"],
                        choices=list(MODELS))
    parser.add_argument("--rounds", type=int, default=50, help="timed runs of each session")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="write the files here (default: a temp dir)")
    parser.add_argument("--onnxruntime", action="store_true",
                        help="also pt2onnx's optimize='onnxruntime' file and onnxruntime's "
                             "transformer optimizer on torch.onnx's files")
    parser.add_argument("--files", nargs="+", type=Path,
                        help="time these files of the one model in --models instead")
    args = parser.parse_args()
    if args.files:
        _files(args.models[0], args.files, args.rounds, args.warmup)
        return 0
    results: dict[str, dict[str, Any]] = {}
    for name in args.models:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            out = args.keep or Path(tmp)
            out.mkdir(parents=True, exist_ok=True)
            exporters = EXPORTERS + ORT_EXPORTERS if args.onnxruntime else EXPORTERS
            results[name] = _one(name, out, args.rounds, args.warmup, exporters)
            print(f"{name}: done in {time.perf_counter() - start:.0f} s", file=sys.stderr,
                  flush=True)
    if args.onnxruntime:
        _ort_table(results, args.rounds)
    else:
        _table(results, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
