"""export-llm against onnxruntime-genai's model builder, on the same random checkpoint.

For each model (a ~100M-parameter Llama and a Qwen2 of the same shape, random
weights, saved with save_pretrained beside a small word-level tokenizer the
builder insists on), each precision (fp32, int4) and each exporter:

- export time: the whole command in a fresh process (``python -m pt2onnx
  export-llm`` / ``python -m onnxruntime_genai.models.builder``), imports included;
  with ``--export-repeats N`` the best of N interleaved runs of each (the machine's
  load moves single runs); ``--no-stamp`` times export-llm capturing every decoder
  layer (``PT2ONNX_LLM_STAMP=0``) instead of stamping them from one capture;
- size: model.onnx plus its external data;
- ms per token: onnxruntime-genai's own loop, greedy, a 32-token prompt then 64 new
  tokens; decode time is the median per-token time of the generate_next_token calls
  after the first (which processes the prompt). Each repeat is a fresh process that
  loads both folders (in alternating order) and decodes twice with each, keeping the
  faster: one process's figures move together by up to 14% with where its weights
  landed (the same two folders gave 0.998x and 1.13x in two processes), so the
  reported figures and ratio are the medians over processes.

Both folders generate from the same prompt; the script prints whether their tokens
agree (int4 differs between exporters only by the quantizer's rounding choices).

    python benchmarks/llm_compare.py [--models llama,qwen2] [--precisions fp32,int4]
        [--repeats 5] [--export-repeats 1] [--no-stamp] [--size full|medium|small]

``--models all`` runs every family both exporters write (``FAMILIES``); a family
that one of them fails on gets a row saying which and why, and the run goes on. Each
export's peak resident memory is its process's own (``wait4``), imports included.

Needs onnxruntime-genai (the ``llm`` extra). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROMPT_LEN, NEW_TOKENS = 32, 64


# Each family both exporters write (docs/llm.md, "Against onnxruntime-genai's model
# builder"): its model_type and what it needs beyond the shared size. Layer patterns are
# given for 12 layers and cut to the size's count; a head_dim is the size's own. Gemma 2's
# window (64) is under the 96 positions generated: the builder's folder refuses a window
# over genai's max_length ("KV cache capacity (96) must be at least local_window_size").
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {}, "mistral": {"sliding_window": 4096}, "qwen2": {}, "qwen3": {"head_dim": 64},
    "phi": {"partial_rotary_factor": 0.5}, "phi3": {"original_max_position_embeddings": 2048},
    "gemma": {"head_dim": 64}, "gemma2": {"head_dim": 64, "sliding_window": 64},
    "gemma3_text": {"head_dim": 64, "sliding_window": 512,
                    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 2},
    "granite": {"embedding_multiplier": 2.0, "residual_multiplier": 0.5,
                "attention_multiplier": 0.2, "logits_scaling": 4.0},
    "nemotron": {"head_dim": 64, "partial_rotary_factor": 0.5},
    "olmo": {}, "smollm3": {"no_rope_layer_interval": 4}, "ernie4_5": {"head_dim": 64},
    "hunyuan_v1_dense": {"head_dim": 64},
    "lfm2": {"layer_types": ["conv", "conv", "full_attention"] * 4},
    # The builder takes Qwen3.5 as Qwen3_5ForConditionalGeneration (a one-block vision
    # tower beside the text decoder here); both write its text decoder.
    "qwen3_5": {"head_dim": 64, "linear_key_head_dim": 64, "linear_value_head_dim": 64,
                "linear_num_key_heads": 4, "linear_num_value_heads": 8,
                "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 3},
}


def _config(name: str, size_name: str) -> Any:
    import transformers

    size = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                num_key_value_heads=4, intermediate_size=2048, vocab_size=32000,
                max_position_embeddings=2048, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if size_name == "medium":  # ~26M parameters: every family in one sitting
        size.update(hidden_size=512, num_hidden_layers=6, num_attention_heads=8,
                    num_key_value_heads=2, intermediate_size=1536, vocab_size=8192)
    elif size_name == "small":
        size.update(hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                    num_key_value_heads=2, intermediate_size=512, vocab_size=4096)
    if name not in FAMILIES:
        raise SystemExit(f"unknown model {name!r}; one of {', '.join(FAMILIES)}")
    extra = dict(FAMILIES[name])
    if "layer_types" in extra:
        extra["layer_types"] = extra["layer_types"][:size["num_hidden_layers"]]
    if "head_dim" in extra:
        extra["head_dim"] = size["hidden_size"] // size["num_attention_heads"]
    if name == "lfm2":  # LFM2 names its MLP width its own way
        extra["block_ff_dim"] = size["intermediate_size"]
    if name == "qwen3_5":
        ids = {k: size.pop(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
        return transformers.Qwen3_5Config(
            text_config=dict(size, **extra, **ids), tie_word_embeddings=False,
            vision_config=dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2,
                               out_hidden_size=size["hidden_size"]), **ids)
    return transformers.AutoConfig.for_model(name, tie_word_embeddings=False, **size, **extra)


def _checkpoint(name: str, folder: Path, size_name: str) -> int:
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    cfg = _config(name, size_name)
    if name == "qwen3_5":
        model = transformers.Qwen3_5ForConditionalGeneration(cfg).eval()
    else:
        model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    # transformers initialises biases to 0 and norm weights to 1, and the builder leaves
    # out a bias that is all zeros; a trained checkpoint's are not, so these get noise.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    model.save_pretrained(folder)
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    vocab_size = cfg.get_text_config().vocab_size
    vocab.update({f"w{i}": i for i in range(4, vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        unk_token="<unk>")
    fast.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(seconds, peak resident MB) of one command in a fresh process (its own rusage, from
    wait4: the whole process, imports and the model's weights included)."""
    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            out.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.read()[-4000:]}")
    return seconds, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.name.startswith("model.onnx")
               or p.suffix in (".onnx", ".data"))


def _decode(og: Any, model: Any, prompt: list[int]) -> tuple[float, float, list[int]]:
    """(prompt ms, median decode ms per token, the tokens)."""
    import numpy as np

    params = og.GeneratorParams(model)
    total = len(prompt) + NEW_TOKENS
    params.set_search_options(max_length=total, min_length=total)
    gen = og.Generator(model, params)
    start = time.perf_counter()
    gen.append_tokens(np.array([prompt], dtype=np.int32))
    first = time.perf_counter() - start
    steps = []
    while not gen.is_done():
        t = time.perf_counter()
        gen.generate_next_token()
        steps.append(time.perf_counter() - t)
    tokens = [int(x) for x in gen.get_sequence(0)]
    return 1e3 * first, 1e3 * statistics.median(steps[1:]), tokens


def _decode_process(folders: list[str], prompt: list[int]) -> None:
    """One repeat, in this (fresh) process: prints {folder: [prompt ms, ms/token, tokens]}."""
    import onnxruntime_genai as og

    models = {f: og.Model(f) for f in folders}
    runs: dict[str, list[tuple[float, float, list[int]]]] = {f: [] for f in folders}
    for _ in range(2):
        for f, m in models.items():
            runs[f].append(_decode(og, m, prompt))
    print(json.dumps({f: [min(r[0] for r in v), min(r[1] for r in v), v[-1][2]]
                      for f, v in runs.items()}))


def _decode_repeats(folders: dict[str, Path], prompt: list[int], repeats: int,
                    env: dict[str, str]) -> dict[str, list[tuple[float, float, list[int]]]]:
    out: dict[str, list[tuple[float, float, list[int]]]] = {k: [] for k in folders}
    for r in range(repeats):
        order = list(folders) if r % 2 == 0 else list(reversed(folders))
        cmd = [sys.executable, __file__, "--decode-process",
               json.dumps([str(folders[k]) for k in order]), "--prompt", json.dumps(prompt)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"decode process failed:\n{proc.stderr[-4000:]}")
        best = json.loads(proc.stdout.strip().splitlines()[-1])
        for k in folders:
            first, per_token, tokens = best[str(folders[k])]
            out[k].append((first, per_token, tokens))
    return out


def main() -> int:
    if "--decode-process" in sys.argv:
        i = sys.argv.index("--decode-process")
        _decode_process(json.loads(sys.argv[i + 1]),
                        json.loads(sys.argv[sys.argv.index("--prompt") + 1]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="llama,qwen2",
                        help=f"comma-separated, or 'all': {','.join(FAMILIES)}")
    parser.add_argument("--precisions", default="fp32,int4")
    parser.add_argument("--repeats", type=int, default=5,
                        help="decode in this many fresh processes (the medians are kept)")
    parser.add_argument("--export-repeats", type=int, default=1,
                        help="time each export this many times (interleaved), keep the best")
    parser.add_argument("--no-stamp", action="store_true",
                        help="export-llm captures every layer (PT2ONNX_LLM_STAMP=0)")
    parser.add_argument("--size", choices=("full", "medium", "small"), default="full",
                        help="full: ~125M parameters (hidden 768, 12 layers); medium: ~26M "
                        "(512, 6); small: ~4M (256, 4), for a quick check")
    parser.add_argument("--small", action="store_const", const="small", dest="size",
                        help="the same as --size small")
    parser.add_argument("--keep", help="keep the folders under this path")
    parser.add_argument("--int4-level", type=int, default=4,
                        help="export-llm's MatMulNBits accuracy_level (the builder's CPU "
                        "default is 4)")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    if args.no_stamp:
        env["PT2ONNX_LLM_STAMP"] = "0"
    work = Path(args.keep or tempfile.mkdtemp(prefix="llm-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        names = list(FAMILIES) if args.models == "all" else args.models.split(",")
        for name in names:
            ckpt = work / f"{name}-hf"
            params = _checkpoint(name, ckpt, args.size)
            prompt = [1] + [4 + (7 * i) % 1000 for i in range(PROMPT_LEN - 1)]
            for precision in args.precisions.split(","):
                outs = {"pt2onnx": work / f"{name}-{precision}-pt2onnx",
                        "builder": work / f"{name}-{precision}-builder"}
                commands = {
                    "pt2onnx": [sys.executable, "-m", "pt2onnx", "export-llm", str(ckpt), "-o",
                                str(outs["pt2onnx"]), "--precision", precision, "-q"],
                    "builder": [sys.executable, "-m", "onnxruntime_genai.models.builder",
                                "-i", str(ckpt), "-o", str(outs["builder"]), "-p", precision,
                                "-e", "cpu"],
                }
                if precision == "int4":
                    # The builder's CPU default is accuracy_level 4 (int8 activations);
                    # export-llm's is 0 (exact). Compared at the builder's level here.
                    commands["pt2onnx"] += ["--int4-accuracy-level", str(args.int4_level)]
                times: dict[str, list[float]] = {k: [] for k in commands}
                rss: dict[str, list[float]] = {k: [] for k in commands}
                try:
                    for _ in range(max(1, args.export_repeats)):  # interleaved
                        for k, cmd in commands.items():
                            shutil.rmtree(outs[k], ignore_errors=True)
                            try:
                                seconds, peak = _run(cmd, env)
                            except RuntimeError as exc:
                                raise RuntimeError(f"{k}: {exc}") from None
                            times[k].append(seconds)
                            rss[k].append(peak)
                    export_s = {k: min(v) for k, v in times.items()}
                    try:
                        runs = _decode_repeats(outs, prompt, args.repeats, env)
                    except RuntimeError as exc:  # name the folder genai fails on
                        bad = []
                        for k in outs:
                            try:
                                _decode_repeats({k: outs[k]}, prompt, 1, env)
                            except RuntimeError:
                                bad.append(k)
                        exports = "; ".join(
                            f"{k} export {export_s[k]:.1f} s, {min(rss[k]):.0f} MB"
                            for k in outs)
                        raise RuntimeError(f"{' and '.join(bad) or 'a'} folder fails in "
                                           f"genai ({exports}): "
                                           f"{str(exc).strip().splitlines()[-1]}") from None
                except RuntimeError as exc:  # one exporter failed: say which, go on
                    failed = {"model": name, "precision": precision,
                              "failed": str(exc).split(": ")[0],
                              "error": str(exc).strip().splitlines()[-1][:300]}
                    rows.append(failed)
                    print(json.dumps(failed), flush=True)
                    continue
                prefill = {k: [r[0] for r in v] for k, v in runs.items()}
                decode = {k: [r[1] for r in v] for k, v in runs.items()}
                tokens = {k: v[-1][2] for k, v in runs.items()}
                per_process = [p / b for p, b in zip(decode["pt2onnx"], decode["builder"])]
                row = {"model": name, "params_M": round(params / 1e6, 1),
                       "precision": precision, "same_tokens": tokens["pt2onnx"] == tokens["builder"]}
                for k in outs:
                    row[k] = {"export_s": round(export_s[k], 1),
                              "export_peak_MB": round(min(rss[k])),
                              "size_MB": round(_size(outs[k]) / 1e6, 1),
                              "prompt_ms": round(statistics.median(prefill[k]), 2),
                              "ms_per_token": round(statistics.median(decode[k]), 3)}
                row["ratios"] = {
                    key: round(row["pt2onnx"][key] / row["builder"][key], 3)
                    for key in ("export_s", "export_peak_MB", "size_MB", "prompt_ms")}
                # The median of each process's own ratio: both folders share its draw.
                row["ratios"]["ms_per_token"] = round(statistics.median(per_process), 3)
                row["ms_per_token_ratio_range"] = [round(min(per_process), 3),
                                                   round(max(per_process), 3)]
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nmedians over {args.repeats} decode processes; ratio: the median of each "
          "process's own ratio (its range in brackets)")
    print("| model | precision | export s (pt2onnx/builder) | export peak RSS MB (ratio) "
          "| file MB | prompt ms | decode ms/token | ratio ms/token | same tokens |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "failed" in r:
            print(f"| {r['model']} | {r['precision']} | {r['failed']} failed: {r['error']} "
                  "| | | | | | |")
            continue
        p, b = r["pt2onnx"], r["builder"]
        print(f"| {r['model']} {r['params_M']}M | {r['precision']} | {p['export_s']} / "
              f"{b['export_s']} ({r['ratios']['export_s']}x) | {p['export_peak_MB']} / "
              f"{b['export_peak_MB']} ({r['ratios']['export_peak_MB']}x) | {p['size_MB']} / "
              f"{b['size_MB']} | {p['prompt_ms']} / "
              f"{b['prompt_ms']} | {p['ms_per_token']} / {b['ms_per_token']} | "
              f"{r['ratios']['ms_per_token']} [{r['ms_per_token_ratio_range'][0]}-"
              f"{r['ms_per_token_ratio_range'][1]}] | {r['same_tokens']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
