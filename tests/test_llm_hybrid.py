"""export-llm for Qwen3.5 (issue 40): linear-attention layers whose cache holds a
convolution state and a recurrent state beside the full-attention layers' key/values.

A tiny random-weight Qwen3.5 text model (built from ``Qwen3_5TextConfig``: 2 key heads,
4 value heads, layers linear / full / linear; nothing is downloaded) is written with
save_pretrained and exported; then
- the states are in onnxruntime-genai's builder layout (``past.{i}.conv`` /
  ``past.{i}.recurrent`` and the presents, named in genai_config.json, type
  ``qwen3_5_text``);
- a step equals eager transformers (its own chunked and recurrent forms, not the scan
  the graph holds) over random states and a past: batch 1 and 2, one token, several,
  more than one 64-token chunk, and an empty past;
- onnxruntime-genai's own loop generates transformers' greedy tokens, batch 1 and 2 (a
  left-padded prompt too), from a ``Qwen3_5ForConditionalGeneration`` checkpoint (its text decoder), and for
  Qwen3.5-MoE.

The genai cases need onnxruntime-genai (the ``llm`` extra; ``make test-llm``).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

import pt2onnx

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
if not hasattr(transformers, "Qwen3_5TextConfig"):
    pytest.skip("this transformers has no Qwen3.5", allow_module_level=True)

from test_export_llm import (  # noqa: E402
    NEW_TOKENS,
    PROMPT,
    T,
    _genai,
    _genai_tokens,
    _reference,
    _vary,
)

KINDS = ["linear_attention", "full_attention", "linear_attention"]
TEXT = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, linear_key_head_dim=8, linear_value_head_dim=8,
            linear_num_key_heads=2, linear_num_value_heads=4, layer_types=KINDS,
            max_position_embeddings=128, **T)
CONV_DIM = 2 * 2 * 8 + 4 * 8  # q and k (2 heads x 8) and v (4 heads x 8)


def _text_checkpoint(path, seed=0):
    torch.manual_seed(seed)
    model = _vary(transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig(**TEXT)))
    model.eval().save_pretrained(path)
    return model


def _eager_step(model, layout, feeds, names):
    """The wrapper run eagerly with the model's own gated-delta-rule forms (the chunked
    one for several tokens, the recurrent one for one), not the graph's scan."""
    from pt2onnx.llm import _delta, _hybrid

    wrapper = _hybrid.wrap(model, layout)
    saved = _delta.replaced
    _delta.replaced = lambda _model: contextlib.nullcontext()
    try:
        with torch.no_grad():
            return wrapper(*(torch.from_numpy(np.asarray(feeds[k])) for k in names[:3]),
                           [torch.from_numpy(feeds[k]) for k in names[3:]])
    finally:
        _delta.replaced = saved


def test_the_scan_equals_transformers_chunked_and_recurrent_forms():
    """The one recurrence the graph holds computes what both of transformers' forms do
    (grouped value heads, q/k l2-normalised, a starting state), over more than one
    64-token chunk and over one token."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as qwen

    from pt2onnx.llm import _delta

    gen = torch.Generator().manual_seed(0)
    for seq in (1, 5, 70):
        q, k = (torch.randn(2, seq, 2, 8, generator=gen) for _ in range(2))
        v = torch.randn(2, seq, 4, 8, generator=gen)
        g, beta = -torch.rand(2, seq, 4, generator=gen), torch.rand(2, seq, 4, generator=gen)
        state = torch.randn(2, 4, 8, 8, generator=gen)
        args = dict(g=g, beta=beta, initial_state=state, output_final_state=True,
                    use_qk_l2norm_in_kernel=True)
        got = _delta.gated_delta_rule(q, k, v, **args)
        forms = [qwen.torch_chunk_gated_delta_rule] + \
            ([qwen.torch_recurrent_gated_delta_rule] if seq < 8 else [])
        for form in forms:
            for a, b in zip(got, form(q, k, v, **args)):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.models
def test_qwen3_5_states_in_genais_layout_step_equals_eager_and_tokens_equal(tmp_path):
    _genai()
    import onnx
    import onnxruntime as ort

    model = _text_checkpoint(tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    cfg = result.genai_config["model"]
    assert cfg["type"] == "qwen3_5_text" and cfg["decoder"]["num_hidden_layers"] == 3
    # Notes on the export only: not torch's deprecation notices met while capturing.
    assert not [w for w in result.warnings if "deprecated" in w], result.warnings
    assert cfg["decoder"]["inputs"]["past_conv_names"] == "past.%d.conv"
    assert cfg["decoder"]["inputs"]["past_recurrent_names"] == "past.%d.recurrent"
    assert cfg["decoder"]["outputs"]["present_conv_names"] == "present.%d.conv"
    assert cfg["decoder"]["outputs"]["present_recurrent_names"] == "present.%d.recurrent"
    proto = onnx.load(str(result.model_path), load_external_data=False)
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in [*proto.graph.input, *proto.graph.output]}
    assert dims["past.0.conv"] == dims["present.2.conv"] == ["batch_size", CONV_DIM, 3]
    assert dims["past.2.recurrent"] == dims["present.0.recurrent"] == ["batch_size", 4, 8, 8]
    assert dims["past_key_values.1.key"] == ["batch_size", 2, "past_sequence_length", 8]
    assert "Scan" in {n.op_type for n in proto.graph.node}  # one graph for every length
    session = ort.InferenceSession(str(result.model_path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    assert names == ["input_ids", "attention_mask", "position_ids", "past.0.conv",
                     "past.0.recurrent", "past_key_values.1.key", "past_key_values.1.value",
                     "past.2.conv", "past.2.recurrent"]
    rng = np.random.default_rng(0)
    for batch, past, seq in ((1, 4, 3), (2, 5, 1), (1, 0, 6), (2, 0, 1), (1, 3, 70)):
        feeds = {"input_ids": rng.integers(3, 128, (batch, seq)),
                 "attention_mask": np.ones((batch, past + seq), np.int64),
                 "position_ids": np.arange(past, past + seq)[None].repeat(batch, 0)}
        for inp in session.get_inputs()[3:]:
            shape = [batch if d == "batch_size" else past if isinstance(d, str) else d
                     for d in inp.shape]
            feeds[inp.name] = (rng.standard_normal(shape) * 0.3).astype(np.float32)
        got = session.run(None, feeds)
        want = _eager_step(model, result.layout, feeds, names)
        assert len(got) == len(want) == 7
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), atol=1e-4, rtol=1e-4)
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])
    prompts = [PROMPT, [1, 40, 41, 42, 43, 44]]
    assert _genai_tokens(tmp_path / "onnx", prompts) == _reference(model, prompts)
    # A shorter prompt left-padded with the pad token (0): genai masks it, and the
    # linear-attention layers zero the padded positions' inputs as transformers' do.
    padded = [PROMPT, [0, 0, 0, 1, 40, 41]]
    ids = torch.tensor(padded)
    with torch.no_grad():
        want = model.generate(ids, attention_mask=(ids != 0).long(), do_sample=False,
                              max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS)
    assert _genai_tokens(tmp_path / "onnx", padded) == want.tolist()


@pytest.mark.models
def test_qwen3_5_conditional_generation_checkpoint_exports_its_text_decoder(tmp_path):
    """genai's builder names Qwen3_5ForConditionalGeneration; transformers loads the
    checkpoint's text decoder as Qwen3_5ForCausalLM, and genai's tokens on a text prompt
    equal the whole model's (the vision tower is not exported)."""
    _genai()
    torch.manual_seed(1)
    config = transformers.Qwen3_5Config(
        text_config=TEXT, vision_config=dict(depth=1, hidden_size=16, intermediate_size=32,
                                             num_heads=2, out_hidden_size=32))
    model = _vary(transformers.Qwen3_5ForConditionalGeneration(config)).eval()
    model.save_pretrained(tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    assert result.genai_config["model"]["type"] == "qwen3_5_text"
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


@pytest.mark.models
def test_qwen3_5_moe_generates_transformers_greedy_tokens_in_genai(tmp_path):
    """Qwen3.5-MoE: the same states beside 4 experts (top-2) and a shared expert; genai
    type qwen3_5_moe_text, as the builder's."""
    _genai()
    torch.manual_seed(2)
    text = {k: v for k, v in TEXT.items() if k != "intermediate_size"}
    config = transformers.Qwen3_5MoeTextConfig(
        moe_intermediate_size=16, shared_expert_intermediate_size=16, num_experts=4,
        num_experts_per_tok=2, **text)
    model = _vary(transformers.Qwen3_5MoeForCausalLM(config)).eval()
    model.save_pretrained(tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    assert result.genai_config["model"]["type"] == "qwen3_5_moe_text"
    assert result.genai_config["model"]["decoder"]["inputs"]["past_recurrent_names"] \
        == "past.%d.recurrent"
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])
