"""export-llm for vision-language checkpoints (issue 40): their text decoder.

onnxruntime-genai's model builder writes, for ``Qwen2_5_VLForConditionalGeneration``,
``Qwen3VLForConditionalGeneration``, ``Gemma3ForConditionalGeneration``,
``Mistral3ForConditionalGeneration`` and ``Lfm2VlForConditionalGeneration``, the text
decoder with its embedding and LM head, as types ``qwen2_5_vl_text``,
``qwen3_vl_text``, ``gemma3_vl_text``, ``mistral3_text`` and ``lfm2_vl_text``. Each case here: a tiny random-weight checkpoint of the whole model
(vision tower too; nothing is downloaded) written with save_pretrained, exported, then
onnxruntime-genai's own loop fed a text prompt: its 32 greedy tokens must equal the
whole model's ``generate(do_sample=False)``, and the file holds no vision weight.

The genai cases need onnxruntime-genai (the ``llm`` extra; ``make test-llm``).
"""

from __future__ import annotations

import onnx
import pytest
import torch

import pt2onnx
from pt2onnx import InvalidInputError

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from test_export_llm import PROMPT, T, _genai, _genai_tokens, _reference, _vary  # noqa: E402

# The text decoders: three layers (captured as two and stamped where the layers are
# alike); the weights drawn as wide as makes the greedy tokens vary.
TEXT = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, intermediate_size=64, max_position_embeddings=128, **T)
# Multimodal rotary: the head's 8 frequencies split 2 / 3 / 3 between the time, height
# and width positions (a text prompt gives the three the same positions).
MROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
QWEN_VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2,
                   out_hidden_size=64)
SIGLIP = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
              image_size=28, patch_size=14)

VLMS = {
    "qwen2_5_vl": lambda: transformers.Qwen2_5_VLForConditionalGeneration(
        transformers.Qwen2_5_VLConfig(
            text_config=dict(TEXT, initializer_range=0.2, rope_parameters=MROPE),
            vision_config=QWEN_VISION, **T)),
    # Qwen3-VL: q/k norms, and the sections interleaved.
    "qwen3_vl": lambda: transformers.Qwen3VLForConditionalGeneration(
        transformers.Qwen3VLConfig(
            text_config=dict(TEXT, initializer_range=0.3,
                             rope_parameters=dict(MROPE, mrope_interleaved=True)),
            vision_config=dict(QWEN_VISION, deepstack_visual_indexes=[0]), **T)),
    # Gemma 3: sliding (window 8, < the 38 positions generated) and full layers, each
    # kind with its own rope base.
    "gemma3": lambda: transformers.Gemma3ForConditionalGeneration(
        transformers.Gemma3Config(
            text_config=dict(TEXT, initializer_range=0.05, sliding_window=8,
                             layer_types=["sliding_attention", "full_attention",
                                          "sliding_attention"]),
            vision_config=SIGLIP, mm_tokens_per_image=4, **T)),
    # Mistral 3: a Mistral text decoder beside a Pixtral vision tower.
    "mistral3": lambda: transformers.Mistral3ForConditionalGeneration(
        transformers.Mistral3Config(
            text_config=dict(TEXT, initializer_range=0.2, model_type="mistral"),
            vision_config=dict(SIGLIP, head_dim=8), **T)),
    # LFM2-VL: an LFM2 text decoder (convolution layers, their states in genai's layout)
    # beside a SigLIP2 vision tower.
    "lfm2_vl": lambda: transformers.Lfm2VlForConditionalGeneration(
        transformers.Lfm2VlConfig(
            text_config=dict(TEXT, initializer_range=0.3,
                             layer_types=["conv", "full_attention", "conv"]),
            vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                               num_attention_heads=2),
            projector_hidden_size=32, **T)),
}
GENAI_TYPE = {"qwen2_5_vl": "qwen2_5_vl_text", "qwen3_vl": "qwen3_vl_text",
              "gemma3": "gemma3_vl_text", "mistral3": "mistral3_text",
              "lfm2_vl": "lfm2_vl_text"}


def _checkpoint(name, path, seed=0):
    torch.manual_seed(seed)
    model = _vary(VLMS[name]()).eval()
    model.save_pretrained(path)
    return model


@pytest.mark.models
@pytest.mark.parametrize("name", sorted(VLMS))
def test_vlm_text_decoder_generates_the_whole_models_greedy_tokens_in_genai(name, tmp_path):
    """The text decoder of a vision-language checkpoint (refused before, or exported as
    the generic decoder for Gemma 3), under the type genai's builder gives it; genai's
    greedy tokens on a text prompt equal the whole model's."""
    _genai()
    model = _checkpoint(name, tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    assert result.genai_config["model"]["type"] == GENAI_TYPE[name]
    assert not [w for w in result.warnings if "from_pretrained" in w]  # streamed
    proto = onnx.load(str(result.model_path), load_external_data=False)
    # Every layer's rotary inside GroupQueryAttention (positions from the mask's
    # lengths), as the builder's fused graphs; LFM2-VL keeps the model's attention ops.
    inputs = {i.name for i in proto.graph.input}
    assert ("position_ids" in inputs) == (name == "lfm2_vl")
    weights = [i.name for i in proto.graph.initializer]
    assert not [w for w in weights if "vision" in w or "visual" in w or "projector" in w]
    want = _reference(model, [PROMPT])
    assert len(set(want[0][len(PROMPT):])) > 3  # the tokens vary
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == want


@pytest.mark.models
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "plain"])
def test_qwen2_5_vl_batch_of_two_prompts(fused, tmp_path):
    """Batch 2, through both graphs: fused, every layer's rotary inside
    GroupQueryAttention (its table the model's rotary module run at every position with
    the three sections' positions equal, as for text) and no position_ids, as the
    builder's fused graphs; plain, ``position_ids`` ``[batch_size, sequence_length]``,
    which the model gives all three sections (genai 0.18 feeds each row its text
    positions). genai's tokens equal the whole model's."""
    _genai()
    model = _checkpoint("qwen2_5_vl", tmp_path / "ckpt", seed=1)
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", fused_ops=fused)
    proto = onnx.load(str(result.model_path), load_external_data=False)
    inputs = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in proto.graph.input}
    if fused:
        assert "position_ids" not in inputs
        assert {n.op_type for n in proto.graph.node} >= {"GroupQueryAttention"}
    else:
        assert inputs["position_ids"] == ["batch_size", "sequence_length"]
    prompts = [PROMPT, [1, 40, 41, 42, 43, 44]]
    assert _genai_tokens(tmp_path / "onnx", prompts) == _reference(model, prompts)

def test_vlm_without_a_text_decoder_type_is_refused_naming_it(tmp_path):
    """A vision-language checkpoint whose text decoder export-llm does not write (LLaVA:
    no causal-LM class in transformers, no text type in genai's builder): a typed
    refusal naming the architecture, what is missing and what to do."""
    config = transformers.LlavaConfig(
        text_config=dict(model_type="llama", hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=64, **T),
        vision_config=dict(model_type="clip_vision_model", hidden_size=16,
                           intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                           image_size=28, patch_size=14))
    config.architectures = ["LlavaForConditionalGeneration"]
    config.save_pretrained(tmp_path / "ckpt")
    with pytest.raises(InvalidInputError, match=r"LlavaForConditionalGeneration \(llava\) is "
                       r"a vision-language model .* no causal-LM class for llava"):
        pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
