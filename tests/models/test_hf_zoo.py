"""Hugging Face architectures from tiny configs (random weights): export, check, compare.

One row per architecture: the config and model class names, the config's tiny
sizes, and the kind of inputs it takes. Decoder-only models run twice, with
``use_cache=False`` and ``use_cache=True`` (the KV cache then comes back as
outputs, flattened from transformers' cache object).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from conftest import export_and_verify, export_dynamic_and_verify

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

pytestmark = pytest.mark.models

VOCAB = 128
TOKENS = dict(vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2)
# The sizes most text models share.
TEXT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64, **TOKENS)
DECODER = dict(TEXT, num_key_value_heads=2)
IMAGE = dict(image_size=32, num_channels=3)


@dataclass(frozen=True)
class Case:
    """One architecture: ``transformers.<config>(**config_kwargs)`` fed to ``<model>``."""

    name: str
    config: str
    model: str
    config_kwargs: dict[str, Any] = field(default_factory=dict)
    inputs: str = "text"  # text | decoder | seq2seq | whisper | image | audio
    xfail: str | None = None
    xfail_cache: str | None = None
    xfail_dynamic: str | None = None


ENCODERS = [
    Case("bert", "BertConfig", "BertModel", TEXT),
    Case("roberta", "RobertaConfig", "RobertaModel", dict(TEXT, pad_token_id=1)),
    Case("distilbert", "DistilBertConfig", "DistilBertModel",
         dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64, **TOKENS)),
    Case("albert", "AlbertConfig", "AlbertModel", dict(TEXT, embedding_size=16)),
    Case("electra", "ElectraConfig", "ElectraModel", dict(TEXT, embedding_size=16)),
    Case("deberta", "DebertaConfig", "DebertaModel",
         dict(TEXT, relative_attention=True, pos_att_type=["c2p", "p2c"],
              max_relative_positions=16)),
    Case("deberta_v2", "DebertaV2Config", "DebertaV2Model",
         dict(TEXT, relative_attention=True, pos_att_type=["c2p", "p2c"], position_buckets=8,
              max_relative_positions=16)),
]

DECODERS = [
    Case("gpt2", "GPT2Config", "GPT2LMHeadModel",
         dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, **TOKENS), "decoder"),
    Case("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", dict(TEXT, rotary_pct=0.5), "decoder"),
    Case("opt", "OPTConfig", "OPTForCausalLM",
         dict(TEXT, ffn_dim=64, word_embed_proj_dim=32), "decoder"),
    Case("bloom", "BloomConfig", "BloomForCausalLM",
         dict(hidden_size=32, n_layer=2, n_head=4, **TOKENS), "decoder"),
    Case("llama", "LlamaConfig", "LlamaForCausalLM", DECODER, "decoder"),
    Case("mistral", "MistralConfig", "MistralForCausalLM", dict(DECODER, sliding_window=8),
         "decoder"),
    Case("qwen2", "Qwen2Config", "Qwen2ForCausalLM", DECODER, "decoder"),
    Case("qwen3", "Qwen3Config", "Qwen3ForCausalLM", dict(DECODER, head_dim=8), "decoder"),
    Case("phi", "PhiConfig", "PhiForCausalLM", dict(TEXT, partial_rotary_factor=0.5), "decoder"),
    Case("phi3", "Phi3Config", "Phi3ForCausalLM", DECODER, "decoder"),
    Case("gemma", "GemmaConfig", "GemmaForCausalLM", dict(DECODER, head_dim=8), "decoder"),
    Case("gemma2", "Gemma2Config", "Gemma2ForCausalLM",
         dict(DECODER, head_dim=8, sliding_window=8), "decoder"),
    Case("falcon", "FalconConfig", "FalconForCausalLM",
         dict(TEXT, new_decoder_architecture=True, num_kv_heads=2), "decoder"),
    Case("gptj", "GPTJConfig", "GPTJForCausalLM",
         dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, rotary_dim=4, **TOKENS), "decoder"),
]

SEQ2SEQ = [
    Case("t5", "T5Config", "T5ForConditionalGeneration",
         dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0,
              relative_attention_num_buckets=8, **TOKENS), "seq2seq"),
    Case("bart", "BartConfig", "BartForConditionalGeneration",
         dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
              decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
              max_position_embeddings=64, decoder_start_token_id=2, **TOKENS), "seq2seq"),
    Case("whisper", "WhisperConfig", "WhisperForConditionalGeneration",
         dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
              decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
              num_mel_bins=16, max_source_positions=16, max_target_positions=32,
              decoder_start_token_id=3, **TOKENS), "whisper"),
]

VISION = [
    Case("vit", "ViTConfig", "ViTModel", dict(TEXT, patch_size=8, **IMAGE), "image"),
    Case("swin", "SwinConfig", "SwinModel",
         dict(patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4,
              **IMAGE), "image"),
    Case("convnext", "ConvNextConfig", "ConvNextModel",
         dict(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, **IMAGE), "image"),
    Case("segformer", "SegformerConfig", "SegformerForSemanticSegmentation",
         dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
              num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2],
              mlp_ratios=[2, 2], decoder_hidden_size=32, num_labels=3), "image"),
    Case("mobilevit", "MobileViTConfig", "MobileViTModel",
         dict(image_size=64, patch_size=2, hidden_sizes=[16, 16, 16],
              neck_hidden_sizes=[8, 8, 16, 16, 16, 16, 32], num_attention_heads=2,
              mlp_ratio=2.0), "image"),
    Case("wav2vec2", "Wav2Vec2Config", "Wav2Vec2Model",
         dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
              num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, vocab_size=32),
         "audio"),
]

CASES = ENCODERS + DECODERS + SEQ2SEQ + VISION


def build(case: Case) -> torch.nn.Module:
    config = getattr(transformers, case.config)(**case.config_kwargs)
    return getattr(transformers, case.model)(config).eval()


def _text(batch: int = 2, length: int = 10) -> dict[str, torch.Tensor]:
    ids = torch.randint(3, VOCAB, (batch, length))
    mask = torch.ones(batch, length, dtype=torch.int64)
    mask[-1, 7:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def make_inputs(case: Case, model: torch.nn.Module, batch: int = 2) -> dict[str, Any]:
    if case.inputs == "text":
        return _text(batch)
    if case.inputs == "decoder":
        return {**_text(batch), "use_cache": False}
    if case.inputs == "seq2seq":
        return {**_text(batch), "decoder_input_ids": torch.randint(3, VOCAB, (batch, 6)),
                "use_cache": False}
    if case.inputs == "whisper":
        cfg = model.config
        features = torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions)
        return {"input_features": features, "decoder_input_ids": torch.randint(3, VOCAB, (1, 6)),
                "use_cache": False}
    if case.inputs == "image":
        size = getattr(model.config, "image_size", 32)
        return {"pixel_values": torch.randn(1, 3, size, size)}
    if case.inputs == "audio":
        return {"input_values": torch.randn(1, 400)}
    raise AssertionError(case.inputs)


# Dynamic axes per kind of input: batch everywhere, and the sequence for text.
TEXT_AXES = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
DYNAMIC_AXES: dict[str, dict[str, Any]] = {
    "text": TEXT_AXES,
    "decoder": TEXT_AXES,
    "seq2seq": {**TEXT_AXES, "decoder_input_ids": {0: "batch", 1: "target"}},
    "whisper": {"input_features": {0: "batch"}, "decoder_input_ids": {0: "batch", 1: "target"}},
    "image": {"pixel_values": {0: "batch"}},
    "audio": {"input_values": {0: "batch", 1: "samples"}},
}


def _params(cases: list[Case], cache: bool = False, dynamic: bool = False) -> list[Any]:
    params = []
    for case in cases:
        reason = case.xfail_cache if cache else case.xfail
        reason = case.xfail_dynamic if dynamic else reason
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        params.append(pytest.param(case, id=case.name, marks=marks))
    return params


@pytest.mark.parametrize("case", _params(CASES))
def test_hf_zoo(case: Case, tmp_path) -> None:
    model = build(case)
    kwargs = make_inputs(case, model)
    export_and_verify(model, (), tmp_path, kwargs=kwargs, name=case.name)


@pytest.mark.parametrize("case", _params(DECODERS, cache=True))
def test_hf_zoo_use_cache(case: Case, tmp_path) -> None:
    """With use_cache=True the outputs are logits plus every layer's keys and values."""
    model = build(case)
    kwargs = {**make_inputs(case, model), "use_cache": True}
    prog = export_and_verify(model, (), tmp_path, kwargs=kwargs, name=case.name)
    names = [v.name for v in prog.model.graph.outputs]
    layers = model.config.num_hidden_layers
    assert names[0] == "logits" and len(names) == 1 + 2 * layers
    assert names[1] == "past_key_values_key_0" and names[-1] == f"past_key_values_value_{layers - 1}"


@pytest.mark.parametrize("case", _params(CASES, dynamic=True))
def test_hf_zoo_dynamic(case: Case, tmp_path) -> None:
    """A batch-1 example with dynamic batch (and sequence): one export runs at other sizes."""
    model = build(case)
    kwargs = make_inputs(case, model, batch=1)
    export_dynamic_and_verify(model, (), tmp_path, DYNAMIC_AXES[case.inputs], kwargs=kwargs,
                              name=case.name)


HALF = [c for c in CASES if c.name in ("bert", "llama", "whisper")]


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in HALF])
def test_hf_zoo_half_precision(case: Case, precision: str, tmp_path) -> None:
    """precision= (issue 39): a BERT encoder, Llama with its cache and Whisper written in
    float16 / bfloat16 load in onnxruntime's CPU provider and match the model run in that
    precision (verify's tolerance for the dtype); the model passed in stays float32."""
    model = build(case)
    kwargs = make_inputs(case, model)
    if case.inputs == "decoder":
        kwargs = {**kwargs, "use_cache": True}
    export_and_verify(model, (), tmp_path, kwargs=kwargs, name=f"{case.name}_{precision}",
                      precision=precision)
    assert next(model.parameters()).dtype == torch.float32
