"""Qwen2.5-VL's image pipeline: export-llm's three files, and the vision encoder against
torch.onnx.export(dynamo=True), on one random checkpoint.

The checkpoint: a Qwen2.5-VL of reduced width (vision tower 8 blocks of 320, two of them
full attention; text decoder 4 layers of 512), random weights, a byte-level tokenizer,
images of 448 x 448 (1,024 patches, 256 image tokens). onnxruntime-genai's model builder
writes no vision model, so there is no builder row.

- export: ``pt2onnx export-llm --image-size 448x448`` in a fresh process, imports
  included: wall seconds and peak RSS (``wait4``), best of ``--repeats``;
- the vision encoder alone, in this process: pt2onnx.export and
  torch.onnx.export (dynamo=True and False) of the same wrapper (the grid's rotary positions,
  windows and segments precomputed by transformers' vision_utils, as export-llm does;
  a failure is printed as such), seconds and the largest difference from eager
  through onnxruntime;
- decode ms per token in onnxruntime-genai's loop, the image pipeline's decoder (the
  model's rotary on three position rows, then GroupQueryAttention) against the text
  folder export-llm writes without ``--image-size`` (every rotary inside the op), on
  a prompt of the same length (an image prompt, a text prompt): the median per-token
  time of the steps after the first, the faster of two runs, median over
  ``--repeats`` processes.

    python benchmarks/vlm_image.py [--repeats 3]

Needs onnxruntime-genai (the ``llm`` extra). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZE = 448
NEW = 64


def _checkpoint(folder: Path) -> None:
    sys.path.insert(0, str(HERE.parent / "tests"))
    import torch
    import transformers

    from test_llm_vlm import IDS, MROPE, _byte_tokenizer

    mrope = dict(MROPE, mrope_section=[8, 12, 12])  # head 64: 32 frequencies

    torch.manual_seed(0)
    ids = dict(vocab_size=264, pad_token_id=IDS["<|endoftext|>"], bos_token_id=None,
               eos_token_id=IDS["<|im_end|>"])
    text = dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                num_key_value_heads=2, head_dim=64, intermediate_size=1408,
                max_position_embeddings=2048, rope_parameters=mrope, **ids)
    vision = dict(depth=8, hidden_size=320, intermediate_size=1280, num_heads=4,
                  out_hidden_size=512, window_size=112, fullatt_block_indexes=[3, 7])
    config = transformers.Qwen2_5_VLConfig(
        text_config=text, vision_config=vision, image_token_id=IDS["<|image_pad|>"],
        video_token_id=IDS["<|video_pad|>"], vision_start_token_id=IDS["<|vision_start|>"],
        vision_end_token_id=IDS["<|vision_end|>"], **ids)
    transformers.Qwen2_5_VLForConditionalGeneration(config).eval().save_pretrained(folder)
    _byte_tokenizer(folder)


def _export(folder: Path, out: Path, image: bool) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of the export-llm command in a fresh process."""
    cmd = [sys.executable, "-m", "pt2onnx", "export-llm", str(folder), "-o", str(out), "-q"]
    if image:
        cmd += ["--image-size", f"{SIZE}x{SIZE}"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"export failed: {' '.join(cmd)}")
    return seconds, usage.ru_maxrss / 1024


def _vision_side_by_side(folder: Path, tmp: Path) -> None:
    import numpy as np
    import onnxruntime as ort
    import torch
    import transformers

    import pt2onnx
    from pt2onnx.llm import vision_wrapper

    model = transformers.Qwen2_5_VLForConditionalGeneration.from_pretrained(folder).eval()
    wrapper, args = vision_wrapper(model, SIZE)
    with torch.no_grad():
        want = wrapper(*args).numpy()
    feeds = {"pixel_values": args[0].numpy(), "image_grid_thw": args[1].numpy()}
    rows = []
    for name in ("pt2onnx", "dynamo", "torchscript"):
        path = tmp / f"vision_{name}.onnx"
        start = time.perf_counter()
        try:
            if name == "pt2onnx":
                pt2onnx.export(wrapper, args, input_names=list(feeds),
                               output_names=["image_features"]).save(path)
            else:
                torch.onnx.export(wrapper, args, str(path), dynamo=name == "dynamo",
                                  input_names=list(feeds), output_names=["image_features"])
        except Exception as exc:
            text = str(exc).strip().splitlines()
            rows.append((name, None, f"failed: {type(exc).__name__}: "
                               f"{text[0][:150] if text else ''}"))
            continue
        seconds = time.perf_counter() - start
        session = ort.InferenceSession(str(path))
        names = {i.name for i in session.get_inputs()}
        got = session.run(None, {k: v for k, v in feeds.items() if k in names})[0]
        rows.append((name, seconds, f"max |onnxruntime - eager| {np.abs(got - want).max():.2e}"))
    print("\nvision encoder alone (1,024 patches):")
    for name, seconds, what in rows:
        print(f"  {name:12s} {'' if seconds is None else f'{seconds:6.2f} s':8s} {what}")
    for name, seconds, _ in rows[1:]:
        if seconds is not None and rows[0][1] is not None:
            print(f"  pt2onnx / {name}: {rows[0][1] / seconds:.2f}x")

DECODE = r"""
import sys, time, statistics, numpy as np, onnxruntime_genai as og
sys.path.insert(0, sys.argv[3])
from test_llm_vlm import _png
from pathlib import Path
image_dir, text_dir, tests, png = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
def run(folder, image):
    model = og.Model(folder)
    proc = model.create_multimodal_processor() if image else None
    best = None
    for _ in range(2):
        params = og.GeneratorParams(model)
        if image:
            inputs = proc("<|vision_start|><|image_pad|><|vision_end|>describe it",
                          images=og.Images.open(str(png)))
            length = inputs["input_ids"].as_numpy().shape[-1]
        else:
            length = 268
        params.set_search_options(max_length=length + NEW_TOKENS, min_length=length + NEW_TOKENS)
        gen = og.Generator(model, params)
        if image:
            gen.set_inputs(inputs)
        else:
            gen.append_tokens(np.arange(length, dtype=np.int32)[None] % 250 + 3)
        steps = []
        while not gen.is_done():
            t = time.perf_counter(); gen.generate_next_token(); steps.append(time.perf_counter() - t)
        ms = statistics.median(steps[1:]) * 1000
        best = ms if best is None else min(best, ms)
    return best, length
a = run(image_dir, True); b = run(text_dir, False)
print(a[0], b[0], a[1], b[1])
""".replace("NEW_TOKENS", str(NEW))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import numpy as np

    sys.path.insert(0, str(HERE.parent / "tests"))
    from test_llm_vlm import _png

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        _checkpoint(tmp / "ckpt")
        exports = [_export(tmp / "ckpt", tmp / "image", True) for _ in range(args.repeats)]
        _export(tmp / "ckpt", tmp / "text", False)
        best = min(exports)
        print(f"export-llm --image-size {SIZE}x{SIZE}: {best[0]:.1f} s, peak RSS "
              f"{min(e[1] for e in exports):.0f} MB (best of {args.repeats}, fresh processes)")
        _vision_side_by_side(tmp / "ckpt", tmp)
        _png(tmp / "image.png", np.random.default_rng(0).integers(0, 256, (SIZE, SIZE, 3)))
        ratios, images, texts = [], [], []
        for _ in range(args.repeats):
            out = subprocess.run([sys.executable, "-c", DECODE, str(tmp / "image"),
                                  str(tmp / "text"), str(HERE.parent / "tests"),
                                  str(tmp / "image.png")],
                                 capture_output=True, text=True, check=True).stdout.split()
            image_ms, text_ms, image_len, text_len = map(float, out)
            images.append(image_ms)
            texts.append(text_ms)
            ratios.append(image_ms / text_ms)
        print(f"\ndecode ms/token, {NEW} new tokens after a {int(image_len)}-token prompt "
              f"(image) / {int(text_len)}-token prompt (text), median of {args.repeats} "
              "processes:")
        print(f"  image pipeline decoder {statistics.median(images):.2f}, text decoder "
              f"{statistics.median(texts):.2f}: {statistics.median(ratios):.3f}x "
              f"[{min(ratios):.3f}-{max(ratios):.3f}]")


if __name__ == "__main__":
    main()
