"""Export time and onnxruntime latency of a mixture-of-experts decoder, per formulation.

Builds a Mixtral-style decoder from a config (random weights; no download), exports it
once per formulation of the experts' grouped product, checks each against eager at two
inputs with different routing, and times onnxruntime on a prefill (batch x seq tokens)
and on a single token (the work of one decode step, without a KV cache):

- sparse: pt2onnx's registered rule for transformers::grouped_mm_fallback: per expert,
  the rows routed to it (a Slice between two offsets) times its weight, Concat.
- dense-rows: the rule ``pt2onnx.rules.moe.grouped_mm_dense`` (custom_translations):
  every routed row times every expert, each row keeps its own expert's result.
- dense: every token through every expert, weighted by the (mostly zero) routing
  weights; no sort, gather or grouped product at all. It is an experts
  implementation registered with transformers (``experts_implementation``), since it
  changes the model's computation, not one op's.

    python benchmarks/moe_compare.py                 # ~1B parameters, 8 experts, top-2
    python benchmarks/moe_compare.py --size small    # a few seconds
    python benchmarks/moe_compare.py --hidden 512 --intermediate 1408 --layers 8

This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

import pt2onnx

SIZES = {
    # hidden, intermediate, layers, heads, kv heads, vocab
    "1b": (1024, 2816, 14, 16, 4, 32000),
    "300m": (768, 1536, 10, 12, 4, 32000),
    "150m": (512, 1408, 8, 8, 4, 32000),
    "small": (128, 256, 2, 4, 2, 1000),
}


def dense_experts_forward(self: Any, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                          top_k_weights: torch.Tensor) -> torch.Tensor:
    """Every token through every expert, weighted by its routing weight (0 if not routed)."""
    tokens = hidden_states.size(0)
    weights = torch.zeros(tokens, self.num_experts, dtype=top_k_weights.dtype,
                          device=hidden_states.device).scatter(1, top_k_index, top_k_weights)
    gate_up = torch.matmul(hidden_states.unsqueeze(0), self.gate_up_proj.transpose(1, 2))
    out = torch.matmul(self._apply_gate(gate_up), self.down_proj.transpose(1, 2))  # [E, T, D]
    return (out * weights.t().unsqueeze(-1).to(out.dtype)).sum(0).to(hidden_states.dtype)


def build(args: argparse.Namespace) -> Any:
    import transformers
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    ALL_EXPERTS_FUNCTIONS.register("pt2onnx_dense", dense_experts_forward)
    hidden, inter, layers, heads, kv, vocab = SIZES[args.size]
    cfg = transformers.MixtralConfig(
        hidden_size=args.hidden or hidden, intermediate_size=args.intermediate or inter,
        num_hidden_layers=args.layers or layers, num_attention_heads=heads,
        num_key_value_heads=kv, vocab_size=vocab, num_local_experts=args.experts,
        num_experts_per_tok=args.top_k, max_position_embeddings=4096, use_cache=False,
        tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = transformers.MixtralForCausalLM(cfg).eval()
    return model


def inputs(batch: int, seq: int, vocab: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(3, vocab, (batch, seq), generator=gen),
            "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}


def time_session(sess: Any, feed: dict[str, np.ndarray], repeat: int) -> float:
    sess.run(None, feed)  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        sess.run(None, feed)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="1b")
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--intermediate", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128, help="prefill length")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads")
    parser.add_argument("--formulations", default="sparse,dense,dense-rows")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    import onnxruntime as ort
    import transformers  # noqa: F401  (registers transformers::grouped_mm_fallback)

    from pt2onnx.rules import moe

    model = build(args)
    cfg = model.config
    params = sum(p.numel() for p in model.parameters())
    print(f"Mixtral-style decoder: {params / 1e9:.3f}B parameters, hidden {cfg.hidden_size}, "
          f"expert intermediate {cfg.intermediate_size}, {cfg.num_hidden_layers} layers, "
          f"{cfg.num_local_experts} experts, top-{cfg.num_experts_per_tok}; torch "
          f"{torch.__version__}, onnxruntime {ort.__version__}, "
          f"{args.threads or 'default'} threads")
    prefill = inputs(args.batch, args.seq, cfg.vocab_size, 1)
    other = inputs(args.batch + 1, max(args.seq // 2, 2), cfg.vocab_size, 2)
    one = inputs(1, 1, cfg.vocab_size, 3)
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    op = torch.ops.transformers.grouped_mm_fallback.default
    plans = {"sparse": ("grouped_mm", None), "dense-rows": ("grouped_mm", moe.grouped_mm_dense),
             "dense": ("pt2onnx_dense", None)}
    rows = []
    # torch.export's first call in a process pays one-time costs: pay them on a tiny model.
    warm = argparse.Namespace(**{**vars(args), "size": "small", "hidden": None,
                                 "intermediate": None, "layers": 1})
    pt2onnx.export(build(warm), (), None, kwargs=inputs(1, 4, 1000, 0), dynamic_axes=axes)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.formulations.split(","):
            impl, rule = plans[name]
            model.set_experts_implementation(impl)
            path = Path(tmp) / f"{name}.onnx"
            start = time.perf_counter()
            prog = pt2onnx.export(model, (), path, kwargs=prefill, dynamic_axes=axes,
                                  external_data=True,
                                  custom_translations={op: rule} if rule else None)
            export_s = time.perf_counter() - start
            errors = []
            for feed in (prefill, other):
                result = prog.verify(**feed)
                errors.append(max(o.max_abs_error for o in result.outputs))
            del prog
            gc.collect()
            opts = ort.SessionOptions()
            if args.threads:
                opts.intra_op_num_threads = args.threads
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            names = [i.name for i in sess.get_inputs()]

            def feed_of(x: dict[str, torch.Tensor], names: list[str] = names) -> dict[str, Any]:
                return {n: x[n].numpy() for n in names}

            pre_ms = time_session(sess, feed_of(prefill), args.repeat)
            one_ms = time_session(sess, feed_of(one), args.repeat * 4)
            del sess
            gc.collect()
            rows.append((name, export_s, pre_ms, one_ms, errors))
            print(f"  {name}: export {export_s:.1f} s, prefill {pre_ms:.1f} ms, "
                  f"one token {one_ms:.2f} ms, max abs err {errors[0]:.2e} / {errors[1]:.2e}",
                  flush=True)
    print()
    print(f"| formulation | export (s) | prefill {args.batch}x{args.seq} (ms) | one token (ms) "
          "| max abs err (example / other routing) |")
    print("|---|---|---|---|---|")
    for name, export_s, pre_ms, one_ms, errors in rows:
        print(f"| {name} | {export_s:.1f} | {pre_ms:.1f} | {one_ms:.2f} "
              f"| {errors[0]:.1e} / {errors[1]:.1e} |")


if __name__ == "__main__":
    main()
