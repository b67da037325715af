"""What the export's type check (passes/type_check.py, issue 39) costs on a large model.

Builds Llama 3.2 1B's shape on the meta device (no weights in memory; the graph is the
real one), exports it with pt2onnx (the check runs inside the export), then times the
check alone on the exported graph, best of ``--repeat`` runs, and prints it against
the export's own time.

    PYTHONPATH=src python benchmarks/type_check_cost.py [--dtype bfloat16] [--repeat 5]

This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import time
import warnings


def _model(dtype_name: str) -> object:
    import torch
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True,
        max_position_embeddings=8192, pad_token_id=0)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    return model.to(getattr(torch, dtype_name)).eval()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--repeat", type=int, default=5)
    ns = parser.parse_args()
    import torch

    import pt2onnx
    from pt2onnx.passes import type_check

    model = _model(ns.dtype)
    ids = torch.randint(3, 1000, (1, 32))
    mask = torch.ones(1, 32, dtype=torch.int64)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(model, (), kwargs={"input_ids": ids, "attention_mask": mask,
                                                 "use_cache": False})
    export_s = time.perf_counter() - start
    nodes = sum(1 for _ in prog.model.graph)
    runs = []
    for _ in range(ns.repeat):
        t = time.perf_counter()
        found = type_check.violations(prog.model)
        runs.append(time.perf_counter() - t)
    best = min(runs)
    print(f"Llama 3.2 1B shape, {ns.dtype}, 1x32 tokens with a mask: {nodes} nodes")
    print(f"export (meta weights, no file): {export_s:.2f} s; stages: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in prog.report.timings.items()))
    print(f"type check: best {best * 1e3:.1f} ms of {ns.repeat} "
          f"(median {sorted(runs)[len(runs) // 2] * 1e3:.1f} ms), "
          f"{best / export_s:.2%} of the export, {len(found)} violation(s)")


if __name__ == "__main__":
    main()
