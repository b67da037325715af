"""export-llm's models of several files: Whisper's encoder and decoder, and Qwen2.5-VL's
image pipeline (a vision encoder, an embedding and a decoder on inputs_embeds)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

from pt2onnx.frontends import converted_copy
from pt2onnx.llm import _attention, _genai, _quant, _vision, _whisper
from pt2onnx.llm._files import (
    LLMExport,
    capture_module,
    fused_rewrites,
    name_total_dims,
    unique_node_names,
)

MODEL_FILE = "model.onnx"
WHISPER_TESTS = ("Whisper's wrappers at batch 1, one token and an empty past, run against "
                 "eager in tests/test_llm_whisper.py")
VLM_TESTS = ("Qwen2.5-VL's decoder and embedding at batch 1, one token, an empty past and "
             "no image features, run through genai in tests/test_llm_vlm.py")


def export_whisper(model_or_dir: Any, out: Path, dtype: torch.dtype, precision: str,
                    opset: int | None, tokenizer: Any, fused: bool, int4: tuple[int, int],
                    start: float) -> LLMExport:
    """Whisper's encoder.onnx and decoder.onnx, in genai's whisper layout (see _whisper)."""
    notes: list[str] = []
    if fused:
        notes.append("whisper: the attention was not fused (export-llm fuses decoder-only "
                     "attention into GroupQueryAttention); the model's own ops were exported.")
    if isinstance(model_or_dir, torch.nn.Module):
        model, folder = converted_copy(model_or_dir, dtype).eval(), None
    else:
        folder = Path(model_or_dir)
        model = _whisper.load(folder, dtype)
    _whisper.check(model, precision)
    config, layout = model.config, _whisper.layout(model.config)
    out.mkdir(parents=True, exist_ok=True)
    enc_in, enc_out = _whisper.encoder_names(layout.num_layers)
    encoder = capture_module(_whisper.WhisperEncoderForGenai(model),
                              _whisper.encoder_example(config, dtype), enc_in, enc_out,
                              _whisper.encoder_dims(), dtype, opset, notes, WHISPER_TESTS)
    dec_in, dec_out = _whisper.decoder_names(layout.num_layers)
    decoder = capture_module(_whisper.WhisperDecoderForGenai(model),
                              _whisper.decoder_example(layout, dtype), dec_in, dec_out,
                              _whisper.decoder_dims(layout), dtype, opset, notes, WHISPER_TESTS)
    name_total_dims(decoder.model, "present_")
    quantized: list[str] = []
    paths = [_save(prog, out / name, int4 if precision == "int4" else None, quantized)
             for prog, name in ((encoder, _whisper.ENCODER_FILE),
                                (decoder, _whisper.DECODER_FILE))]
    cfg = _whisper.config_dict(layout, config, getattr(model, "generation_config", None))
    _genai.write_config(out, cfg)
    (out / "audio_processor_config.json").write_text(
        json.dumps(_whisper.audio_processor_dict(config), indent=4) + "\n")
    copied = _genai.copy_tokenizer(tokenizer if tokenizer is not None else folder, out)
    return LLMExport(out, paths[1], cfg, layout, precision, decoder, copied, quantized, notes,
                     time.perf_counter() - start, layout.num_layers, paths[0], encoder,
                     files={p.name: p for p in paths})


def export_vlm(model_or_dir: Any, out: Path, dtype: torch.dtype, precision: str,
               opset: int | None, tokenizer: Any, fused: bool, int4: tuple[int, int],
               image_size: tuple[int, int], fuse_projections: bool,
               start: float) -> LLMExport:
    """Qwen2.5-VL's vision.onnx, embedding.onnx and model.onnx, with genai_config.json
    of type qwen2_5_vl and processor_config.json (see _vision)."""
    notes: list[str] = []
    model: Any
    if isinstance(model_or_dir, torch.nn.Module):
        config = model_or_dir.config
        grid = _vision.check(config, image_size, precision)
        model, folder = converted_copy(model_or_dir, dtype).eval(), None
    else:
        folder = Path(model_or_dir)
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(folder)
        grid = _vision.check(config, image_size, precision)
        model = _vision.load(folder, dtype)
    config, layout = model.config, _vision.layout(model.config)
    out.mkdir(parents=True, exist_ok=True)
    pixels = _vision.pixel_example(config, grid)
    vision = capture_module(_vision.VisionForGenai(model.model.visual, grid),
                            (pixels, torch.tensor([grid])), ["pixel_values", "image_grid_thw"],
                            ["image_features"], None, dtype, opset, notes, VLM_TESTS)
    _vision.guard_grid(vision.model, grid, image_size)
    embedding = capture_module(_vision.EmbeddingForGenai(model, int(config.image_token_id)),
                               _vision.embedding_example(config, layout, dtype),
                               ["input_ids", "image_features"], ["inputs_embeds"],
                               _vision.embedding_dims(), dtype, opset, notes, VLM_TESTS)
    wrapper, why = _vision.decoder(model, layout, dtype, fused)
    if why is not None:
        notes.append(f"the decoder's attention was not fused into GroupQueryAttention ({why}); "
                     "the model's own attention ops were exported instead.")
    dec_in, dec_out = _vision.decoder_names(layout.num_layers)
    decoder = capture_module(wrapper, _vision.decoder_example(layout, dtype), dec_in, dec_out,
                             _vision.decoder_dims(layout.num_layers), dtype, opset, notes,
                             VLM_TESTS)
    name_total_dims(decoder.model)
    fused_rewrites(decoder.model, why is None and fused, fused, fuse_projections)
    quantized: list[str] = []
    paths = [_save(vision, out / _vision.VISION_FILE, None, quantized),
             _save(embedding, out / _vision.EMBEDDING_FILE, None, quantized),
             _save(decoder, out / MODEL_FILE, int4 if precision == "int4" else None, quantized)]
    generation = getattr(model, "generation_config", None)
    cfg = _genai.config_dict(layout, config, generation, MODEL_FILE,
                             ["input_ids", "attention_mask", "position_ids"],
                             share_buffer=_attention.shares_buffer(decoder.model))
    cfg = _vision.genai_sections(config, layout, cfg, image_size)
    _genai.write_config(out, cfg)
    (out / _vision.PROCESSOR_FILE).write_text(
        json.dumps(_vision.processor_dict(config, folder, image_size), indent=4) + "\n")
    copied = _genai.copy_tokenizer(tokenizer if tokenizer is not None else folder, out)
    return LLMExport(out, paths[2], cfg, layout, precision, decoder, copied, quantized, notes,
                     time.perf_counter() - start, layout.num_layers,
                     files={p.name: p for p in paths})


def _save(prog: Any, path: Path, int4: tuple[int, int] | None, quantized: list[str]) -> Path:
    """One file (its weights beside it), replacing an earlier export's; int4: its Linear
    weights as MatMulNBits first."""
    if int4 is not None:
        quantized += _quant.quantize_model(prog.model, *int4)
    unique_node_names(prog.model)
    for stale in (path, path.with_name(path.name + ".data")):
        stale.unlink(missing_ok=True)
    return Path(prog.save(path, external_data=True))
