"""Whisper for onnxruntime-genai: an audio encoder and a decoder with two caches.

onnxruntime-genai (0.18) runs its ``whisper`` type from two files, laid out as its model
builder writes them:

- ``encoder.onnx``: ``audio_features`` ``[batch_size, num_mel_bins, 3000]`` (log-mel
  frames) -> ``hidden_states`` ``[batch_size, 1500, d_model]`` and, for each decoder
  layer ``i``, ``present_key_cross_{i}`` / ``present_value_cross_{i}``
  ``[batch_size, heads, 1500, head_size]``: that layer's cross-attention keys and
  values, projected once from the encoder's output;
- ``decoder.onnx``: ``input_ids``, ``past_key_self_{i}`` / ``past_value_self_{i}``
  ``[batch_size, heads, past_sequence_length, head_size]`` and ``past_key_cross_{i}`` /
  ``past_value_cross_{i}`` (the encoder's) -> ``logits`` and ``present_key_self_{i}`` /
  ``present_value_self_{i}`` (past plus the new positions; the first step has an empty
  past). No attention mask: genai's CPU loop feeds none.

genai's loop fixes the audio at 3000 frames (its ``num_frames``), so the encoder's
``max_source_positions`` must be 1500. The decoder wrapper puts the past tensors into a
transformers ``EncoderDecoderCache`` whose cross-attention layers are marked filled, so
the model's own cross-attention reads them instead of projecting encoder states.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from pt2onnx.errors import InvalidInputError
from pt2onnx.llm import _families, _genai
from pt2onnx.llm._families import Layout

MODEL_TYPE = "whisper"
GENERATION_CLASS = "WhisperForConditionalGeneration"
ENCODER_FILE, DECODER_FILE = "encoder.onnx", "decoder.onnx"
# genai 0.18's WhisperState: the audio is always 3000 frames (30 s at a 10 ms hop).
NUM_FRAMES = 3000
# The precisions tested with genai's whisper loop (fp16: the features are fed in float16;
# int4: the Linear weights of both files as MatMulNBits, activations in float32).
PRECISIONS = ("fp32", "fp16", "int4")
BATCH, SEQ, PAST, TOTAL = ("batch_size", "sequence_length", "past_sequence_length",
                           "total_sequence_length")


def model_type_of(model_or_dir: Any) -> str:
    """The model_type of a loaded model or of a checkpoint folder's config.json."""
    config = getattr(model_or_dir, "config", None)
    if config is not None:
        return str(getattr(config, "model_type", "") or "")
    try:
        raw = json.loads((Path(model_or_dir) / "config.json").read_text())
    except (OSError, ValueError, TypeError):
        return ""
    return str(raw.get("model_type", "") or "") if isinstance(raw, dict) else ""


def is_whisper(model_or_dir: Any) -> bool:
    return model_type_of(model_or_dir) == MODEL_TYPE


def load(folder: Path, dtype: torch.dtype) -> torch.nn.Module:
    """The checkpoint as a WhisperForConditionalGeneration; another Whisper head (audio
    classification, the decoder alone) is refused: loading it as one would leave the
    missing weights random."""
    from transformers import AutoConfig, WhisperForConditionalGeneration

    config = AutoConfig.from_pretrained(folder)
    arch = _families.architecture(config)
    if arch not in (GENERATION_CLASS, MODEL_TYPE):
        raise InvalidInputError(
            f"{_families.label(config)}: export-llm exports Whisper checkpoints of "
            f"{GENERATION_CLASS} (encoder, decoder and proj_out) for genai's whisper loop; "
            f"this one's config.json names {arch}. Next step: export it with "
            "pt2onnx.export.")
    try:
        model = WhisperForConditionalGeneration.from_pretrained(folder, dtype=dtype)
    except TypeError:  # transformers < 4.56 names it torch_dtype
        model = WhisperForConditionalGeneration.from_pretrained(folder, torch_dtype=dtype)
    return model.eval()


def check(model: Any, precision: str) -> None:
    """Refuses what genai's whisper loop can't run, naming what is missing."""
    config = model.config
    name = _families.label(config, model)
    if not hasattr(model, "proj_out") or not hasattr(getattr(model, "model", None), "encoder"):
        raise InvalidInputError(
            f"export-llm exports Whisper as WhisperForConditionalGeneration (encoder, decoder "
            f"and proj_out); got {name}, a {type(model).__name__}. Next step: pass the "
            "checkpoint folder or a WhisperForConditionalGeneration.")
    frames = 2 * int(config.max_source_positions)
    if frames != NUM_FRAMES:
        raise InvalidInputError(
            f"{name} can't be exported for onnxruntime-genai: its encoder takes "
            f"{frames} mel frames (max_source_positions {config.max_source_positions}), and "
            f"genai's whisper loop (0.18) feeds exactly {NUM_FRAMES} (it checks the audio "
            f"features' length and sizes the cross-attention caches at {NUM_FRAMES // 2}). "
            "Next step: export the encoder and the decoder with pt2onnx.export and drive "
            "them yourself.")
    if precision not in PRECISIONS:
        raise InvalidInputError(
            f"{name}: export-llm writes Whisper in {', '.join(PRECISIONS[:-1])} or "
            f"{PRECISIONS[-1]} only; "
            f"{precision} is not tested with genai's whisper loop. Next step: pass "
            "precision='fp32', 'fp16' or 'int4'.")


def layout(config: Any) -> Layout:
    """The decoder's layout (genai_config.json's ``decoder`` section)."""
    heads = int(config.decoder_attention_heads)
    hidden = int(config.d_model)
    return Layout(
        model_type=MODEL_TYPE, genai_type=MODEL_TYPE, num_layers=int(config.decoder_layers),
        num_kv_heads=heads, head_size=hidden // heads, num_attention_heads=heads,
        hidden_size=hidden, vocab_size=int(config.vocab_size),
        context_length=int(config.max_target_positions), uses_position_ids=False, known=True)


class WhisperEncoderForGenai(torch.nn.Module):
    """``audio_features`` -> ``(hidden_states, present_{key,value}_cross_{i}...)``."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, audio_features: torch.Tensor) -> tuple[torch.Tensor, ...]:
        hidden = self.model.model.encoder(audio_features).last_hidden_state
        batch = hidden.shape[0]
        outputs = [hidden]
        for layer in self.model.model.decoder.layers:
            attn = layer.encoder_attn
            # What the model's cross-attention computes from the encoder states before
            # it caches them: [batch, frames / 2, d_model] -> [batch, heads, frames / 2, hs].
            shape = (batch, -1, attn.num_heads, attn.head_dim)
            outputs.append(attn.k_proj(hidden).view(shape).transpose(1, 2).contiguous())
            outputs.append(attn.v_proj(hidden).view(shape).transpose(1, 2).contiguous())
        return tuple(outputs)


class WhisperDecoderForGenai(torch.nn.Module):
    """``(input_ids, [past self key/values...], [past cross key/values...])`` ->
    ``(logits, present self key/values...)``, each list layer by layer, key first."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model
        self.num_layers = len(model.model.decoder.layers)

    def forward(self, input_ids: torch.Tensor, past_self: list[torch.Tensor],
                past_cross: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache, EncoderDecoderCache

        own, cross = DynamicCache(), DynamicCache()
        for i in range(self.num_layers):
            own.update(past_self[2 * i], past_self[2 * i + 1], i)
            cross.update(past_cross[2 * i], past_cross[2 * i + 1], i)
        cache = EncoderDecoderCache(own, cross)
        for i in range(self.num_layers):
            cache.is_updated[i] = True  # the cross layers read the cache, not the states
        decoder = self.model.model.decoder
        # The layers run their cross-attention only when given encoder states; marked
        # filled, they read the cached keys and values and never look at these.
        unused = past_cross[0].new_zeros(input_ids.shape[0], 0, self.model.config.d_model)
        out = decoder(input_ids=input_ids, encoder_hidden_states=unused,
                      **{_families.cache_keyword(decoder): cache}, use_cache=True)
        result: list[torch.Tensor] = [self.model.proj_out(out.last_hidden_state)]
        layers: list[Any] = list(cache.self_attention_cache.layers)
        for layer in layers:
            result += [layer.keys, layer.values]
        return tuple(result)


def encoder_names(num_layers: int) -> tuple[list[str], list[str]]:
    return ["audio_features"], ["hidden_states"] + cross_names("present", num_layers)


def decoder_names(num_layers: int) -> tuple[list[str], list[str]]:
    own = [f"past_{kv}_self_{i}" for i in range(num_layers) for kv in ("key", "value")]
    presents = [f"present_{kv}_self_{i}" for i in range(num_layers) for kv in ("key", "value")]
    return ["input_ids", *own, *cross_names("past", num_layers)], ["logits", *presents]


def cross_names(stem: str, num_layers: int) -> list[str]:
    return [f"{stem}_{kv}_cross_{i}" for i in range(num_layers) for kv in ("key", "value")]


def encoder_example(config: Any, dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.randn(1, int(config.num_mel_bins), NUM_FRAMES, dtype=dtype),)


def decoder_example(layout: Layout, dtype: torch.dtype, seq: int = 3,
                    past: int = 4, batch: int = 2) -> tuple[Any, ...]:
    """An example with a non-empty past; the capture makes every dim general. Batch 2:
    from batch 1 the capture would first grow every input to a larger batch (the
    cross-attention caches are 1,500 positions long: about 200 MB at whisper-tiny's
    size); batch 1 is run in the tests."""
    ids = torch.randint(3, max(4, min(layout.vocab_size, 1000)), (batch, seq),
                        dtype=torch.int64)
    shape = (batch, layout.num_kv_heads, past, layout.head_size)
    own = [torch.randn(shape, dtype=dtype) for _ in range(2 * layout.num_layers)]
    cross_shape = (batch, layout.num_kv_heads, NUM_FRAMES // 2, layout.head_size)
    cross = [torch.randn(cross_shape, dtype=dtype) for _ in range(2 * layout.num_layers)]
    return ids, own, cross


def encoder_dims() -> tuple[Any, ...]:
    from torch.export import Dim

    return ({0: Dim(BATCH)},)


def decoder_dims(layout: Layout) -> tuple[Any, ...]:
    from torch.export import Dim

    batch, seq, past = Dim(BATCH), Dim(SEQ), Dim(PAST)
    n = 2 * layout.num_layers
    return {0: batch, 1: seq}, [{0: batch, 2: past}] * n, [{0: batch}] * n


def config_dict(layout: Layout, config: Any, generation: Any) -> dict[str, Any]:
    """genai_config.json for genai's ``whisper`` type: the decoder's section names the
    self and cross caches, the encoder's section its input and outputs."""
    cfg = _genai.config_dict(layout, config, generation, DECODER_FILE, ["input_ids"])
    model = cfg["model"]
    decoder = model["decoder"]
    decoder["inputs"] = {
        "input_ids": "input_ids",
        "past_key_names": "past_key_self_%d", "past_value_names": "past_value_self_%d",
        "cross_past_key_names": "past_key_cross_%d",
        "cross_past_value_names": "past_value_cross_%d",
    }
    decoder["outputs"] = {"logits": "logits", "present_key_names": "present_key_self_%d",
                          "present_value_names": "present_value_self_%d"}
    heads = int(config.encoder_attention_heads)
    model["encoder"] = {
        "session_options": dict(decoder["session_options"]),
        "filename": ENCODER_FILE,
        "head_size": int(config.d_model) // heads,
        "hidden_size": int(config.d_model),
        "inputs": {"audio_features": "audio_features"},
        "outputs": {"encoder_hidden_states": "hidden_states",
                    "cross_present_key_names": "present_key_cross_%d",
                    "cross_present_value_names": "present_value_cross_%d"},
        "num_attention_heads": heads,
        "num_hidden_layers": int(config.encoder_layers),
        "num_key_value_heads": heads,
    }
    return cfg


def audio_processor_dict(config: Any) -> dict[str, Any]:
    """audio_processor_config.json: how genai's audio processor turns audio into the
    encoder's log-mel features (Whisper's: 400-point FFT, 160-sample hop, 30 s chunks)."""
    return {"feature_extraction": {"sequence": [
        {"operation": {"name": "audio_decoder", "type": "AudioDecoder"}},
        {"operation": {"name": "STFT", "type": "STFTNorm",
                       "attrs": {"n_fft": 400, "frame_length": 400, "hop_length": 160}}},
        {"operation": {"name": "log_mel_spectrogram", "type": "LogMelSpectrum",
                       "attrs": {"chunk_size": 30, "hop_length": 160, "n_fft": 400,
                                 "n_mel": int(config.num_mel_bins)}}},
    ]}}
