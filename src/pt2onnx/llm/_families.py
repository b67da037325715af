"""The decoder families export-llm knows, and what it needs to know about a checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from pt2onnx.errors import InvalidInputError

# Vision-language checkpoints (transformers model_type) export-llm writes the text
# decoder of (its embedding, layers and LM head, for a text prompt), and the type
# onnxruntime-genai's builder gives that decoder when it writes the embedding into it
# (issue 40). The vision tower is not exported.
VLM_TEXT = {
    "qwen2_5_vl": "qwen2_5_vl_text",
    "qwen3_vl": "qwen3_vl_text",
    "gemma3": "gemma3_vl_text",
    "mistral3": "mistral3_text",
    "lfm2_vl": "lfm2_vl_text",  # LFM2's convolution states beside the key/values
}

# transformers model_type -> the "type" onnxruntime-genai is given. genai runs every
# type in its LLM list through the same decoder-only model; "decoder" is its generic
# name. "gpt2" is not used for GPT-2: genai maps it to its legacy GPT model, which
# expects a single fused past tensor per layer, not past_key_values.{i}.key/.value.
GENAI_TYPES = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "phi": "phi",
    "phi3": "phi3",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gemma3_text": "gemma3_text",
    "gpt2": "decoder",
    "gpt_neox": "decoder",
    "opt": "decoder",
    "bloom": "decoder",
    "falcon": "decoder",
    "gptj": "decoder",
    "lfm2": "lfm2",  # convolution states beside the key/values (see _hybrid)
    # Qwen3.5's text decoder: convolution and recurrent states (see _hybrid, _delta); a
    # Qwen3_5ForConditionalGeneration checkpoint ("qwen3_5") loads as its text decoder.
    "qwen3_5_text": "qwen3_5_text",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe_text": "qwen3_5_moe_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
    # Families onnxruntime-genai's model builder also writes (issue 40), tested here as
    # the generic decoder.
    "ernie4_5": "decoder",
    "granite": "decoder",
    "granitemoehybrid": "decoder",  # with attention layers only (Mamba layers: refused)
    "hunyuan_v1_dense": "decoder",
    "nemotron": "decoder",
    "olmo": "decoder",
    "phimoe": "decoder",
    "smollm3": "decoder",
    **VLM_TEXT,
}

# Families that can't be exported for genai's decoder loop, and why.
UNSUPPORTED = {
    "mamba": "its state is a recurrent SSM state, not a key/value cache",
    "mamba2": "its state is a recurrent SSM state, not a key/value cache",
    "rwkv": "its state is a recurrent state, not a key/value cache",
    "recurrent_gemma": "its state mixes recurrent and windowed attention caches",
    "jamba": "its cache mixes Mamba states with attention key/values",
    "zamba": "its cache mixes Mamba states with attention key/values",
    "zamba2": "its cache mixes Mamba states with attention key/values",
    "falcon_h1": "its cache mixes Mamba states with attention key/values",
    "qwen3_next": "its cache holds linear-attention states beside attention key/values",
}


@dataclass(frozen=True)
class Layout:
    """What the probe run found: the cache shapes and the model's sizes."""

    model_type: str
    genai_type: str
    num_layers: int
    num_kv_heads: int
    head_size: int
    num_attention_heads: int
    hidden_size: int
    vocab_size: int
    context_length: int
    uses_position_ids: bool
    known: bool
    # Hybrid families (LFM2, Qwen3.5): each layer's kind ("conv", "linear_attention" or
    # "full_attention"), the convolution state's channels and length, and the linear
    # attention's recurrent state's shape past the batch (value heads, key and value head
    # sizes); empty for a key/value-only decoder.
    layer_kinds: tuple[str, ...] = ()
    conv_channels: int = 0
    conv_cache: int = 0
    recurrent_shape: tuple[int, ...] = ()


# Hybrid families export-llm lays out as onnxruntime-genai's builder does: model_type ->
# the state-holding layer kinds it writes (see _hybrid).
HYBRID_KINDS = {**dict.fromkeys(("lfm2", "lfm2_vl"), frozenset({"conv"})),
                **dict.fromkeys(("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"),
                                frozenset({"linear_attention"}))}

# Words in a config's per-layer kinds (``layer_types``) that name a layer whose cache
# state is not keys and values: LFM2's "conv", Granite 4.0's "mamba", Qwen3-Next's and
# Qwen3.5's "linear_attention".
_STATE_LAYER_WORDS = ("mamba", "linear", "conv", "recurrent", "rwkv", "ssm", "delta")


def architecture(config: Any, model: Any = None) -> str:
    """The class name a checkpoint's config.json names (``Gemma3ForCausalLM``), else the
    loaded model's, else the model_type."""
    names = getattr(config, "architectures", None)
    if isinstance(names, (list, tuple)) and names and isinstance(names[0], str):
        return names[0]
    if model is not None:
        return type(model).__name__
    return str(getattr(config, "model_type", "") or "this model")


def named(model_or_dir: Any) -> str:
    """``Gemma3ForCausalLM (gemma3_text)``: the architecture and model_type of a loaded
    model or of a checkpoint folder's config.json, for messages."""
    config = getattr(model_or_dir, "config", None)
    if config is None:
        import json
        from pathlib import Path

        try:
            raw = json.loads((Path(model_or_dir) / "config.json").read_text())
        except (OSError, ValueError, TypeError):
            raw = {}
        config = SimpleNamespace(**raw) if isinstance(raw, dict) else SimpleNamespace()
        model_or_dir = None
    return label(config, model_or_dir)


def label(config: Any, model: Any = None) -> str:
    """``Gemma3ForCausalLM (gemma3_text)``, or the one name where that is all there is."""
    model_type = str(getattr(config, "model_type", "") or "")
    arch = architecture(config, model)
    return f"{arch} ({model_type})" if model_type and model_type != arch else arch


def state_layers(config: Any) -> dict[str, list[int]]:
    """The layers whose cache holds a state other than keys and values, by kind, as the
    config's per-layer kinds name them (empty for a plain decoder)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    kinds = getattr(text, "layer_types", None)
    if not isinstance(kinds, (list, tuple)):
        return {}
    found: dict[str, list[int]] = {}
    for i, kind in enumerate(kinds):
        if isinstance(kind, str) and any(w in kind.lower() for w in _STATE_LAYER_WORDS):
            found.setdefault(kind, []).append(i)
    return found


def check_family(config: Any) -> str:
    """The model_type, or a clear error for a model export-llm can't make a decoder of."""
    model_type = str(getattr(config, "model_type", "") or "")
    if getattr(config, "is_encoder_decoder", False):
        raise InvalidInputError(
            f"{model_type or 'this model'} is an encoder-decoder model; export-llm exports "
            "decoder-only models for onnxruntime-genai's decoder loop, and Whisper for its "
            "whisper loop, no other encoder-decoder. Next step: export the encoder and the "
            "decoder with pt2onnx.export (see docs/dynamic.md).")
    if model_type in UNSUPPORTED:
        raise InvalidInputError(
            f"{model_type} can't be exported by export-llm: {UNSUPPORTED[model_type]}, and "
            "onnxruntime-genai's decoder loop feeds only past_key_values.{i}.key/.value. "
            "Next step: export its forward with pt2onnx.export and drive the state yourself.")
    states = state_layers(config)
    allowed = HYBRID_KINDS.get(model_type)
    if allowed is not None:
        states = {kind: idx for kind, idx in states.items() if kind not in allowed}
    if states:
        kinds = "; ".join(f"{kind!r} at layer{'s' if len(idx) > 1 else ''} "
                          f"{', '.join(map(str, idx))}" for kind, idx in states.items())
        raise InvalidInputError(
            f"{label(config)} can't be exported by export-llm: its "
            f"config's layer_types name layers whose cache holds a state other than "
            f"attention keys and values ({kinds}), and export-llm writes only "
            "past_key_values.{i}.key/.value. Next step: export its forward with "
            "pt2onnx.export and drive the state yourself.")
    return model_type


def auto_class(config: Any) -> Any:
    """The transformers auto class a checkpoint of this config loads with: the
    image-text-to-text one for the vision-language families (transformers has no
    causal-LM class for most of them), the causal-LM one for the others."""
    import transformers

    model_type = str(getattr(config, "model_type", "") or "")
    if model_type in VLM_TEXT:
        return transformers.AutoModelForImageTextToText
    if getattr(config, "vision_config", None) is not None and not _has_causal_lm(model_type):
        raise InvalidInputError(
            f"{label(config)} is a vision-language model whose text decoder export-llm does "
            f"not write: transformers has no causal-LM class for {model_type}, and "
            f"export-llm writes the text decoder of {', '.join(VLM_TEXT)} checkpoints only "
            "(under the types onnxruntime-genai's model builder gives them). Next step: save "
            "its language model with its LM head as a checkpoint of the text family's "
            "*ForCausalLM class (LLaVA's: LlamaForCausalLM) and export that, or export its "
            "forward with pt2onnx.export.")
    return transformers.AutoModelForCausalLM


def _has_causal_lm(model_type: str) -> bool:
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:  # another transformers: from_config says
        return True
    return model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES


def text_attr(config: Any, *names: str, default: Any = None) -> Any:
    """The first of ``names`` the (text) config sets."""
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default


def context_length(config: Any) -> int:
    value = text_attr(config, "max_position_embeddings", "n_positions", "max_sequence_length",
                      "seq_length", "n_ctx")
    # Families without learned positions (BLOOM's ALiBi) set no limit; genai needs one.
    return int(value) if value else 2048


def cache_keyword(model: Any) -> str:
    """The keyword forward declares for the cache: ``cache`` from transformers 5.24 on
    (``past_key_values`` still works there, through a deprecation wrapper that warns and
    goes at 5.40), ``past_key_values`` before."""
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "past_key_values" if "past_key_values" in params or "cache" not in params \
        else "cache"
