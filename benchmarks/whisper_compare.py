"""Whisper: export-llm against onnxruntime-genai's model builder, on one random checkpoint.

The checkpoint has whisper-tiny's shape (d_model 384, 4 + 4 layers, 6 heads, 80 mel
bins, 1,500 encoder positions), random weights, and a tokenizer holding the prompt's
special tokens; nothing is downloaded. For each precision (fp32, int4) and exporter:

- export: the whole command in a fresh process (``python -m pt2onnx export-llm`` /
  ``python -m onnxruntime_genai.models.builder``), imports included: seconds and peak
  RSS (``wait4``);
- decode: onnxruntime-genai's whisper loop from the same random log-mel features and a
  3-token prompt, 64 new tokens: the median per-token time of the steps after the
  first (genai runs the encoder when the inputs are set, before any step). Each repeat is a fresh
  process loading both folders (alternating order), keeping each one's faster of two
  runs; the figures are medians over processes, the ratio the median of each
  process's own ratio.

    python benchmarks/whisper_compare.py [--precisions fp32,int4] [--repeats 5]

Needs onnxruntime-genai (the ``llm`` extra). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from llm_compare import _run, _size  # noqa: E402

NEW = 64
PROMPT = [3, 5, 6]

DECODE = r"""
import json, statistics, sys, time
import numpy as np, onnxruntime_genai as og
folders, prompt, new = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
feats = np.random.default_rng(0).standard_normal((1, 80, 3000)).astype(np.float32)
out = {}
for folder in folders:
    model = og.Model(folder)
    best = None
    for _ in range(2):
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(prompt) + new, min_length=len(prompt) + new)
        gen = og.Generator(model, params)
        inputs = og.NamedTensors()
        inputs["audio_features"] = feats
        inputs["input_ids"] = np.array([prompt], dtype=np.int32)
        gen.set_inputs(inputs)
        steps = []
        while not gen.is_done():
            t = time.perf_counter(); gen.generate_next_token(); steps.append(time.perf_counter() - t)
        run = (steps[0] * 1000, statistics.median(steps[1:]) * 1000,
               [int(x) for x in gen.get_sequence(0)])
        best = run if best is None or run[1] < best[1] else best
    out[folder] = best
print(json.dumps(out))
"""


def _checkpoint(folder: Path) -> int:
    sys.path.insert(0, str(HERE.parent / "tests"))
    import torch
    import transformers

    from test_llm_whisper import _config, _tiny_tokenizer, _vary

    torch.manual_seed(0)
    config = _config(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
                     decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536,
                     num_mel_bins=80, vocab_size=2048, max_target_positions=448)
    model = _vary(transformers.WhisperForConditionalGeneration(config).eval())
    model.save_pretrained(folder)
    _tiny_tokenizer(folder)
    transformers.WhisperFeatureExtractor(feature_size=80).save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precisions", default="fp32,int4")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import os

    env = dict(os.environ)
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        params = _checkpoint(tmp / "ckpt")
        for precision in args.precisions.split(","):
            outs = {k: tmp / f"{k}-{precision}" for k in ("pt2onnx", "builder")}
            commands = {
                "pt2onnx": [sys.executable, "-m", "pt2onnx", "export-llm", str(tmp / "ckpt"),
                            "-o", str(outs["pt2onnx"]), "--precision", precision, "-q"],
                "builder": [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i",
                            str(tmp / "ckpt"), "-o", str(outs["builder"]), "-p", precision,
                            "-e", "cpu"],
            }
            if precision == "int4":  # the builder's CPU default: int8 activations
                commands["pt2onnx"] += ["--int4-accuracy-level", "4"]
            exports = {k: _run(cmd, env) for k, cmd in commands.items()}
            decodes: dict[str, list[float]] = {k: [] for k in outs}
            ratios, same = [], True
            for i in range(args.repeats):
                order = list(outs) if i % 2 == 0 else list(reversed(outs))
                got = json.loads(subprocess.run(
                    [sys.executable, "-c", DECODE, json.dumps([str(outs[k]) for k in order]),
                     json.dumps(PROMPT), str(NEW)], capture_output=True, text=True,
                    check=True, env=env).stdout.strip().splitlines()[-1])
                for k in outs:
                    decodes[k].append(got[str(outs[k])][1])
                ratios.append(got[str(outs["pt2onnx"])][1] / got[str(outs["builder"])][1])
                same = same and got[str(outs["pt2onnx"])][2] == got[str(outs["builder"])][2]
            med = {k: statistics.median(v) for k, v in decodes.items()}
            rows.append(
                f"| whisper {params / 1e6:.1f}M | {precision} | "
                f"{exports['pt2onnx'][0]:.1f} / {exports['builder'][0]:.1f} "
                f"({exports['pt2onnx'][0] / exports['builder'][0]:.3f}x) | "
                f"{exports['pt2onnx'][1]:.0f} / {exports['builder'][1]:.0f} "
                f"({exports['pt2onnx'][1] / exports['builder'][1]:.3f}x) | "
                f"{_size(outs['pt2onnx']) / 2**20:.1f} / {_size(outs['builder']) / 2**20:.1f} | "
                f"{med['pt2onnx']:.3f} / {med['builder']:.3f} | "
                f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}] | "
                f"{same} |")
    print(f"\nmedians over {args.repeats} decode processes; ratio: the median of each "
          "process's own ratio (its range in brackets); files: encoder + decoder")
    print("| model | precision | export s (pt2onnx/builder) | export peak RSS MB (ratio) | "
          "files MB | decode ms/token | ratio ms/token | same tokens |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
