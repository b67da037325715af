"""export-llm: a checkpoint folder -> a folder onnxruntime-genai generates with.

Each family: a tiny random checkpoint written by save_pretrained (nothing is
downloaded), exported with ``export_llm``, then onnxruntime-genai's own generation
loop, fed token ids (no tokenizer): its 32 greedy tokens must equal transformers'
``generate(do_sample=False)``. Both loops are held to exactly 32 new tokens
(genai's min_length, transformers' min_new_tokens), so an end token can't stop one
of them early.

The genai cases need onnxruntime-genai (the ``llm`` extra; ``make test-llm``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import pt2onnx
from pt2onnx import InvalidInputError
from pt2onnx.cli import main

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

NEW_TOKENS = 32
PROMPT = [1, 5, 9, 20, 33, 7]
T = dict(vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)
# Three layers: the families whose layers are all alike are captured with two and
# stamped to three (see tests/test_llm_stamp.py), so genai runs a stamped graph here.
LAYERS = 3
SMALL = dict(hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=128)

# Tiny configs; the sliding-window families get a window (8) shorter than the 38
# positions generated, so the window is exercised; Gemma2 soft-caps as it does by default.
FAMILIES = {
    "llama": lambda: transformers.LlamaConfig(num_key_value_heads=2, **SMALL, **T),
    "mistral": lambda: transformers.MistralConfig(num_key_value_heads=2, sliding_window=8,
                                                  **SMALL, **T),
    "qwen2": lambda: transformers.Qwen2Config(num_key_value_heads=2, **SMALL, **T),
    "qwen3": lambda: transformers.Qwen3Config(num_key_value_heads=2, head_dim=8, **SMALL, **T),
    "phi": lambda: transformers.PhiConfig(partial_rotary_factor=0.5, **SMALL, **T),
    "phi3": lambda: transformers.Phi3Config(num_key_value_heads=2,
                                            original_max_position_embeddings=128, **SMALL, **T),
    "gemma": lambda: transformers.GemmaConfig(num_key_value_heads=1, head_dim=8, **SMALL, **T),
    "gemma2": lambda: transformers.Gemma2Config(num_key_value_heads=2, head_dim=8,
                                                sliding_window=8, **SMALL, **T),
    # Gemma 3: sliding and full layers, each kind with its own rope base (issue 40).
    "gemma3_text": lambda: transformers.Gemma3TextConfig(
        num_key_value_heads=2, head_dim=8, sliding_window=8,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"], **SMALL, **T),
    "gpt2": lambda: transformers.GPT2Config(n_embd=32, n_layer=LAYERS, n_head=4, n_positions=128,
                                            **T),
    "gpt_neox": lambda: transformers.GPTNeoXConfig(**SMALL, **T),
    "opt": lambda: transformers.OPTConfig(hidden_size=32, num_hidden_layers=LAYERS,
                                          num_attention_heads=4, ffn_dim=64,
                                          max_position_embeddings=128, word_embed_proj_dim=32,
                                          **T),
    "bloom": lambda: transformers.BloomConfig(hidden_size=32, n_layer=LAYERS, n_head=4, **T),
    "falcon": lambda: transformers.FalconConfig(hidden_size=32, num_hidden_layers=LAYERS,
                                                num_attention_heads=4,
                                                max_position_embeddings=128, **T),
    "gptj": lambda: transformers.GPTJConfig(n_embd=32, n_layer=LAYERS, n_head=4, rotary_dim=4,
                                            n_positions=128, **T),
    # Mixture-of-experts families (issue 18): 4 experts, top-2, routed per token.
    "mixtral": lambda: transformers.MixtralConfig(num_key_value_heads=2, num_local_experts=4,
                                                  num_experts_per_tok=2, **SMALL, **T),
    "qwen3_moe": lambda: transformers.Qwen3MoeConfig(
        num_key_value_heads=2, head_dim=8, moe_intermediate_size=16, num_experts=4,
        num_experts_per_tok=2, norm_topk_prob=True, **SMALL, **T),
    "olmoe": lambda: transformers.OlmoeConfig(num_key_value_heads=2, num_experts=4,
                                              num_experts_per_tok=2, **SMALL, **T),
    "gpt_oss": lambda: transformers.GptOssConfig(
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, head_dim=8,
        sliding_window=8, **dict(SMALL, max_position_embeddings=4096), **T),
    "granitemoe": lambda: transformers.GraniteMoeConfig(
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, **SMALL, **T),
    # More families onnxruntime-genai's builder writes (issue 40), exported as `decoder`.
    "ernie4_5": lambda: transformers.Ernie4_5Config(num_key_value_heads=2, head_dim=8, **SMALL,
                                                    **T),
    "granite": lambda: transformers.GraniteConfig(
        num_key_value_heads=2, embedding_multiplier=2.0, residual_multiplier=0.5,
        attention_multiplier=0.2, logits_scaling=4.0, **SMALL, **T),
    # Granite 4.0 with attention layers only (its Mamba layers are refused).
    "granitemoehybrid": lambda: transformers.GraniteMoeHybridConfig(
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, mamba_n_heads=4,
        layer_types=["attention"] * LAYERS, **SMALL, **T),
    "hunyuan_v1_dense": lambda: transformers.HunYuanDenseV1Config(num_key_value_heads=2,
                                                                  head_dim=8, **SMALL, **T),
    "nemotron": lambda: transformers.NemotronConfig(num_key_value_heads=2, head_dim=8,
                                                    partial_rotary_factor=0.5, **SMALL, **T),
    "olmo": lambda: transformers.OlmoConfig(num_key_value_heads=2, **SMALL, **T),
    "phimoe": lambda: transformers.PhimoeConfig(num_key_value_heads=2, num_local_experts=4,
                                                num_experts_per_tok=2, **SMALL, **T),
    # LFM2: convolution layers (their state beside the key/values) and attention layers.
    # Weights drawn wider than the default so that the greedy tokens vary.
    "lfm2": lambda: transformers.Lfm2Config(
        num_key_value_heads=2, initializer_range=0.3,
        layer_types=["conv", "full_attention", "conv"], **SMALL, **T),
    # Every second layer without rotary.
    "smollm3": lambda: transformers.SmolLM3Config(num_key_value_heads=2,
                                                  no_rope_layer_interval=2, **SMALL, **T),
}


def _genai():
    return pytest.importorskip(
        "onnxruntime_genai",
        reason="onnxruntime-genai is not installed (the llm extra; make test-llm runs these)")


def _vary(model):
    """Noise on the parameters transformers initialises to one constant (biases to 0,
    norm weights to 1): a translation that dropped a bias or a norm's scale would
    otherwise give the same tokens."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if not p.is_meta and p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.add_((torch.randn(p.shape, generator=g) * 0.1).to(p.dtype))
    return model


def _checkpoint(name, path, seed=0):
    torch.manual_seed(seed)
    model = _vary(transformers.AutoModelForCausalLM.from_config(FAMILIES[name]()).eval())
    model.save_pretrained(path)
    return model


def _genai_tokens(out_dir, prompts):
    og = _genai()
    model = og.Model(str(out_dir))
    params = og.GeneratorParams(model)
    total = len(prompts[0]) + NEW_TOKENS
    params.set_search_options(max_length=total, min_length=total, batch_size=len(prompts))
    gen = og.Generator(model, params)
    gen.append_tokens(np.array(prompts, dtype=np.int32))
    while not gen.is_done():
        gen.generate_next_token()
    return [[int(t) for t in gen.get_sequence(i)] for i in range(len(prompts))]


def _reference(model, prompts):
    ids = torch.tensor(prompts)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS)
    return out.tolist()


@pytest.mark.models
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_generates_transformers_greedy_tokens_in_genai(name, tmp_path):
    _genai()
    model = _checkpoint(name, tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    assert (tmp_path / "onnx" / "model.onnx").is_file()
    cfg = json.loads((tmp_path / "onnx" / "genai_config.json").read_text())
    assert cfg["model"]["type"] == result.layout.genai_type
    got = _genai_tokens(tmp_path / "onnx", [PROMPT])
    assert len(got[0]) == len(PROMPT) + NEW_TOKENS
    assert got == _reference(model, [PROMPT])


@pytest.mark.models
def test_gemma3_sliding_and_global_layers_each_rotate_with_their_own_rope_base(tmp_path):
    """Gemma 3 (issue 40; a TypeError before): sliding layers rotate with the local rope
    base, full layers with the global one (here linearly scaled, as Gemma 3 4B's), in
    genai's layout: type gemma3_text, one GroupQueryAttention per layer with the rotary
    inside (head size 16) reading its kind's cos/sin tables and window, no position_ids.
    Six layers captured as four and stamped; genai's greedy tokens equal transformers'."""
    _genai()
    import onnx

    kinds = ["sliding_attention", "full_attention"] * 3
    rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}
    cfg = transformers.Gemma3TextConfig(
        num_key_value_heads=2, head_dim=16, sliding_window=8, layer_types=kinds,
        rope_parameters=rope, **dict(SMALL, num_hidden_layers=len(kinds)), **T)
    torch.manual_seed(0)
    model = _vary(transformers.AutoModelForCausalLM.from_config(cfg).eval())
    model.save_pretrained(tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    assert result.captured_layers < len(kinds), result.warnings
    assert not [w for w in result.warnings if "from_pretrained" in w]  # streamed
    assert result.genai_config["model"]["type"] == "gemma3_text"
    proto = onnx.load(str(result.model_path), load_external_data=False)
    assert "position_ids" not in {v.name for v in proto.graph.input}
    gqa = [n for n in proto.graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqa) == len(kinds)
    tables = {}
    for node, kind in zip(gqa, kinds):
        attrs = {a.name: a.i for a in node.attribute if a.type == onnx.AttributeProto.INT}
        assert attrs["do_rotary"] == 1
        assert attrs.get("local_window_size", -1) == (8 if kind == "sliding_attention" else -1)
        tables.setdefault(kind, set()).add(tuple(node.input[7:9]))
    assert all(len(t) == 1 for t in tables.values()) and len(set.union(*tables.values())) == 2
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


@pytest.mark.models
def test_lfm2_convolution_states_in_genais_layout(tmp_path):
    """LFM2 (issue 40; refused before): the convolution layers' states are
    ``past.{i}.conv`` / ``present.{i}.conv`` ``[batch, hidden, L - 1]`` beside the
    attention layers' key/values, as onnxruntime-genai's builder lays them out, named
    in genai_config.json; a step over random states and a past equals eager in
    onnxruntime, and genai's greedy tokens equal transformers'."""
    _genai()
    import onnxruntime as ort

    from pt2onnx.llm import _hybrid

    model = _checkpoint("lfm2", tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    decoder = result.genai_config["model"]["decoder"]
    assert result.genai_config["model"]["type"] == "lfm2"
    assert decoder["layer_types"] == ["conv", "full_attention", "conv"]
    assert decoder["conv_cache_size"] == 2
    assert decoder["inputs"]["past_conv_names"] == "past.%d.conv"
    assert decoder["outputs"]["present_conv_names"] == "present.%d.conv"
    # The convolutions as onnxruntime's CausalConvWithState (state in, state out), the
    # attention layer as GroupQueryAttention, as the builder writes them.
    import onnx

    ops = [n.op_type for n in onnx.load(str(result.model_path), load_external_data=False)
           .graph.node]
    assert ops.count("CausalConvWithState") == 2 and "Conv" not in ops
    assert ops.count("GroupQueryAttention") == 1
    session = ort.InferenceSession(str(result.model_path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    assert names == ["input_ids", "attention_mask", "position_ids", "past.0.conv",
                     "past_key_values.1.key", "past_key_values.1.value", "past.2.conv"]
    rng = np.random.default_rng(0)
    for batch, past, seq in ((1, 4, 3), (2, 5, 1), (1, 0, 6)):
        ids = rng.integers(3, 128, (batch, seq))
        conv = [rng.standard_normal((batch, 32, 2)).astype(np.float32) for _ in range(2)]
        kv = [rng.standard_normal((batch, 2, past, 8)).astype(np.float32) for _ in range(2)]
        feeds = {"input_ids": ids, "attention_mask": np.ones((batch, past + seq), np.int64),
                 "position_ids": np.arange(past, past + seq)[None].repeat(batch, 0),
                 "past.0.conv": conv[0], "past_key_values.1.key": kv[0],
                 "past_key_values.1.value": kv[1], "past.2.conv": conv[1]}
        got = session.run(None, feeds)
        wrapper = _hybrid.wrap(model, result.layout)
        with torch.no_grad():
            want = wrapper(*(torch.from_numpy(np.asarray(feeds[k])) for k in names[:3]),
                           [torch.from_numpy(feeds[k]) for k in names[3:]])
        assert len(got) == len(want) == 5
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), atol=1e-4, rtol=1e-4)
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


def test_lfm2_unpadded_convolution_keeps_the_steps_outputs():
    """What export-llm's hybrid wrappers swap LFM2's causal_conv1d_fn for (the
    convolution of the state and the new inputs without padding): the last S outputs,
    all the layer keeps, equal transformers' for one and several new inputs, with and
    without a bias; outside the wrappers the function is the model's again."""
    from transformers.models.lfm2 import modeling_lfm2

    from pt2onnx.llm import _conv

    module = transformers.Lfm2ForCausalLM(FAMILIES["lfm2"]())
    original = modeling_lfm2.causal_conv1d_fn
    g = torch.Generator().manual_seed(0)
    for seq, bias in ((1, None), (4, torch.randn(8, generator=g))):
        full = torch.randn(2, 8, 2 + seq, generator=g)  # the state (K - 1 = 2) and seq new
        weight = torch.randn(8, 3, generator=g)
        want = original(full, weight, bias)[:, :, -seq:]
        with _conv.valid_convolution(module):
            got = modeling_lfm2.causal_conv1d_fn(full, weight, bias)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert modeling_lfm2.causal_conv1d_fn is original


@pytest.mark.models
def test_llama_batch_of_two_prompts(tmp_path):
    """Batch 2 through genai: the graph's batch dim is general (exported from batch 1)."""
    _genai()
    model = _checkpoint("llama", tmp_path / "ckpt", seed=1)
    pt2onnx.export_llm(model, tmp_path / "onnx")
    prompts = [PROMPT, [1, 40, 41, 42, 43, 44]]
    assert _genai_tokens(tmp_path / "onnx", prompts) == _reference(model, prompts)


@pytest.mark.models
@pytest.mark.parametrize("name", ["llama", "gemma2"])
def test_one_token_prompt(name, tmp_path):
    """The first step at sequence_length = total_sequence_length = 1 (the capture's
    example had 3 and 8): the graph is general in both."""
    _genai()
    model = _checkpoint(name, tmp_path / "ckpt", seed=2)
    pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    assert _genai_tokens(tmp_path / "onnx", [[1]]) == _reference(model, [[1]])


@pytest.mark.models
def test_graph_io_contract_and_empty_past(tmp_path):
    """Names and dims genai expects; a first step with past_sequence_length 0 runs in
    onnxruntime and matches eager."""
    import onnx
    import onnxruntime as ort

    model = _checkpoint("qwen2", tmp_path / "ckpt")
    # The plain attention: a left-padded batch, which the fused GroupQueryAttention
    # reads as lengths (see docs/llm.md; test_llm_fused.py tests that graph).
    pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", fused_ops=False)
    path = tmp_path / "onnx" / "model.onnx"
    proto = onnx.load(str(path), load_external_data=False)
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in [*proto.graph.input, *proto.graph.output]}
    assert dims["input_ids"] == ["batch_size", "sequence_length"]
    assert dims["attention_mask"] == ["batch_size", "total_sequence_length"]
    assert dims["position_ids"] == ["batch_size", "sequence_length"]
    assert dims["past_key_values.2.value"] == ["batch_size", 2, "past_sequence_length", 8]
    assert dims["logits"] == ["batch_size", "sequence_length", 128]
    assert dims["present.0.key"] == ["batch_size", 2, "total_sequence_length", 8]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids = torch.tensor([PROMPT, PROMPT[::-1]])
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # left padding
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
             "position_ids": pos.numpy()}
    for i in range(LAYERS):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = np.zeros((2, 2, 0, 8), np.float32)
    logits, *present = session.run(None, feeds)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    real = mask.bool().numpy()  # padded rows' logits are unspecified
    np.testing.assert_allclose(logits[real], ref.logits.numpy()[real], atol=1e-4, rtol=1e-4)
    assert present[0].shape == (2, 2, len(PROMPT), 8)


@pytest.mark.models
def test_int4_matches_eager_with_the_dequantized_weights(tmp_path):
    """int4 is exact: genai's tokens equal transformers running the same dequantized
    Linear weights, and the first step's logits agree to float32 rounding."""
    _genai()
    cfg = transformers.LlamaConfig(num_key_value_heads=2, hidden_size=64,
                                   num_hidden_layers=LAYERS, num_attention_heads=4,
                                   intermediate_size=96,
                                   max_position_embeddings=128, **T)
    torch.manual_seed(0)
    model = _vary(transformers.LlamaForCausalLM(cfg).eval())
    result = pt2onnx.export_llm(model, tmp_path / "onnx", precision="int4")
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    # Per layer: q/k/v joined (GroupQueryAttention reads them packed), o, gate, up,
    # down; then the LM head.
    assert result.captured_layers < LAYERS  # stamped: the third layer's weights too
    assert len(result.quantized) == 5 * LAYERS + 1
    with torch.no_grad():
        for m in linears.values():
            m.weight.copy_(pt2onnx.llm.quantize_rtn(m.weight)[2])
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])
    import onnx
    import onnxruntime as ort

    proto = onnx.load(str(result.model_path), load_external_data=False)
    assert sum(n.op_type == "MatMulNBits" for n in proto.graph.node) == 5 * LAYERS + 1
    assert not [n for n in proto.graph.node if n.op_type == "Split"]
    weights = {i.name for i in proto.graph.initializer}
    assert not [n for n in proto.graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    session = ort.InferenceSession(str(result.model_path), providers=["CPUExecutionProvider"])
    ids = torch.tensor([PROMPT])
    feeds = {"input_ids": ids.numpy(), "attention_mask": np.ones_like(ids.numpy()),
             "position_ids": np.arange(len(PROMPT))[None]}
    # The fused attention rotates inside GroupQueryAttention: no position_ids input.
    names = {i.name for i in session.get_inputs()}
    feeds = {k: v for k, v in feeds.items() if k in names or k.startswith("past")}
    for i in range(LAYERS):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, 2, 0, 16), np.float32)
    with torch.no_grad():
        ref = model(input_ids=ids).logits.numpy()
    np.testing.assert_allclose(session.run(None, feeds)[0], ref, atol=1e-4, rtol=1e-4)


def test_quantize_rtn_round_trips_the_int4_grid():
    """Each block's largest-magnitude weight is exactly -8 steps (the positive one on
    a tie); the others round to
    the nearest of -8..7 steps (within half a step, or one step at the clamped +8
    end); padding to whole blocks dequantizes to 0."""
    torch.manual_seed(0)
    w = torch.randn(5, 70)
    packed, scales, deq = pt2onnx.llm.quantize_rtn(w)
    assert packed.shape == (5, 3, 16) and scales.shape == (5, 3)
    scale = torch.from_numpy(scales).repeat_interleave(32, dim=1)
    err = (deq - w).abs() / scale[:, :70].abs()
    assert (err <= 1 + 1e-5).all() and (err <= 0.5 + 1e-5).float().mean() > 0.9
    low = torch.from_numpy(packed & 0xF).int()
    high = torch.from_numpy(packed >> 4).int()
    q = torch.stack([low, high], -1).reshape(5, 96) - 8
    assert torch.equal(q[:, :70].float() * scale[:, :70], deq)
    assert ((q == -8).reshape(5, 3, 32).any(-1)).all()  # each block's largest weight
    assert (q[:, 70:] == 0).all()


@pytest.mark.models
def test_fp16_runs_in_onnxruntime_close_to_eager_half(tmp_path):
    import onnxruntime as ort

    model = _checkpoint("llama", tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", precision="fp16")
    session = ort.InferenceSession(str(result.model_path), providers=["CPUExecutionProvider"])
    ids = torch.tensor([PROMPT])
    feeds = {"input_ids": ids.numpy(), "attention_mask": np.ones_like(ids.numpy()),
             "position_ids": np.arange(len(PROMPT))[None]}
    # The fused attention rotates inside GroupQueryAttention: no position_ids input.
    names = {i.name for i in session.get_inputs()}
    feeds = {k: v for k, v in feeds.items() if k in names or k.startswith("past")}
    for i in range(LAYERS):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, 2, 0, 8), np.float16)
    logits = session.run(None, feeds)[0]
    assert logits.dtype == np.float16
    with torch.no_grad():
        ref = model.float()(input_ids=ids).logits.numpy()
    np.testing.assert_allclose(logits.astype(np.float32), ref, atol=2e-2, rtol=2e-2)
    try:
        _genai()
    except pytest.skip.Exception:
        return
    # genai runs the float16 folder on the CPU too; on this checkpoint its greedy tokens
    # are float32 transformers' (no near-tie flips in 32 steps).
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


def _bf16_feeds(session, ids):
    feeds = {"input_ids": ids.numpy(), "attention_mask": np.ones_like(ids.numpy()),
             "position_ids": np.arange(ids.shape[1])[None]}
    names = {i.name for i in session.get_inputs()}
    feeds = {k: v for k, v in feeds.items() if k in names}
    for i in range(LAYERS):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, 2, 0, 8), np.float32)
    return feeds


@pytest.mark.models
@pytest.mark.parametrize("spelling", ["bf16", "bfloat16"])
def test_bf16_loads_in_onnxruntime_cpu_and_matches_eager_bf16(tmp_path, spelling):
    """bfloat16 (issue 39): the folder loads in onnxruntime's CPU provider (which has no
    bfloat16 GroupQueryAttention: the model's own attention is written, and the ops
    without a bfloat16 kernel compute in float32), its logits match transformers in
    bfloat16, and genai's greedy tokens are transformers' in bfloat16."""
    import onnx
    import onnxruntime as ort

    from pt2onnx.verify import TOLERANCES

    model = _checkpoint("llama", tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", precision=spelling)
    assert result.precision == "bf16"
    assert any("no bfloat16 kernel" in w for w in result.warnings)
    # The layers are stamped from one capture, as in float32: the casts onnxruntime's
    # CPU types need keep their layer's place (module metadata).
    assert not any("not stamped" in w for w in result.warnings), result.warnings
    graph = onnx.load(str(result.model_path), load_external_data=False).graph
    bf16 = onnx.TensorProto.BFLOAT16
    assert graph.output[0].type.tensor_type.elem_type == bf16  # logits
    assert all(t.data_type == bf16 for t in graph.initializer if "layers.0.mlp" in t.name)
    # onnxruntime's Python API takes no bfloat16 arrays: the file runs behind float32
    # casts at its boundary (as OnnxProgram.run does), inside it as written.
    from pt2onnx._program import _float32_boundary

    proto = onnx.load(str(result.model_path))
    session = ort.InferenceSession(_float32_boundary(proto).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    half = model.to(torch.bfloat16)
    for prompt in ([PROMPT], [PROMPT[:1]]):
        ids = torch.tensor(prompt)
        logits = session.run(None, _bf16_feeds(session, ids))[0]
        with torch.no_grad():
            ref = half(input_ids=ids).logits.float().numpy()
        atol, rtol = TOLERANCES["bfloat16"]
        assert np.abs(logits - ref).max() <= atol + rtol * np.abs(ref).max()
    try:
        _genai()
    except pytest.skip.Exception:
        return
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(half, [PROMPT])


@pytest.mark.models
def test_bf16_from_a_module_leaves_the_module_in_float32(tmp_path):
    torch.manual_seed(0)
    model = _vary(transformers.AutoModelForCausalLM.from_config(FAMILIES["llama"]()).eval())
    pt2onnx.export_llm(model, tmp_path / "onnx", precision="bf16")
    assert {p.dtype for p in model.parameters()} == {torch.float32}


@pytest.mark.models
def test_cli_export_llm_copies_the_tokenizer_files(tmp_path, capsys):
    _checkpoint("gpt2", tmp_path / "ckpt")
    (tmp_path / "ckpt" / "tokenizer.json").write_text('{"version": "1.0"}')
    (tmp_path / "ckpt" / "merges.txt").write_text("#version: 0.2\n")
    assert main(["export-llm", str(tmp_path / "ckpt"), "-o", str(tmp_path / "out"), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "type 'decoder'" in printed and "tokenizer.json" in printed
    assert (tmp_path / "out" / "tokenizer.json").read_text() == '{"version": "1.0"}'
    assert (tmp_path / "out" / "merges.txt").is_file()


def test_cli_export_llm_needs_a_checkpoint_folder(tmp_path, capsys):
    assert main(["export-llm", str(tmp_path), "-o", str(tmp_path / "out")]) == 2
    assert "no config.json" in capsys.readouterr().err


def test_encoder_decoder_is_refused_with_the_reason(tmp_path):
    cfg = transformers.T5Config(d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4)
    cfg.save_pretrained(tmp_path)
    with pytest.raises(InvalidInputError, match="encoder-decoder"):
        pt2onnx.export_llm(tmp_path, tmp_path / "out")


def test_recurrent_family_is_refused_with_the_reason(tmp_path):
    cfg = transformers.MambaConfig(hidden_size=16, num_hidden_layers=1, vocab_size=64)
    cfg.save_pretrained(tmp_path)
    with pytest.raises(InvalidInputError, match="SSM state"):
        pt2onnx.export_llm(tmp_path, tmp_path / "out")


def test_hybrid_cache_is_refused_naming_the_architecture_and_its_state_layers(tmp_path):
    """GraniteMoeHybrid with Mamba layers: its cache raised an untyped ValueError
    (``get_seq_length can only be called on Attention layers``) from inside the model."""
    if not hasattr(transformers, "GraniteMoeHybridConfig"):
        pytest.skip("this transformers has no GraniteMoeHybrid")
    cfg = transformers.GraniteMoeHybridConfig(
        num_key_value_heads=2, mamba_n_heads=4, mamba_d_state=16, mamba_chunk_size=16,
        num_local_experts=4, num_experts_per_tok=2, layer_types=["mamba"] * LAYERS,
        **SMALL, **T)
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path)
    with pytest.raises(InvalidInputError, match=r"GraniteMoeHybridForCausalLM.*'(mamba|linear_attention)' at "
                                                r"layers 0, 1, 2"):
        pt2onnx.export_llm(tmp_path, tmp_path / "out")


def test_an_untyped_error_of_the_model_is_a_typed_refusal_naming_the_architecture(tmp_path):
    """Whatever the model's own code raises while export-llm runs or captures it comes
    out typed, naming the architecture, with the original as its cause."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(FAMILIES["llama"]()).eval()

    def broken(hidden_states):
        raise ValueError("this cache kind is not handled here")

    model.model.norm.forward = broken
    with pytest.raises(InvalidInputError, match=r"LlamaForCausalLM \(llama\): ValueError: "
                                                r"this cache kind") as info:
        pt2onnx.export_llm(model, tmp_path / "out")
    assert isinstance(info.value.__cause__, ValueError)


def test_unknown_precision_is_refused(tmp_path):
    with pytest.raises(InvalidInputError, match="fp32, fp16, bf16, int4"):
        pt2onnx.export_llm(tmp_path, tmp_path / "out", precision="int8")


@pytest.mark.parametrize("opset", [17, 21, 23])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_row_with_every_key_masked_is_zero_as_in_torch(opset, kind):
    """A left-padded batch gives padding queries that see no key; torch's sdpa returns 0
    there, and so must the export (NaN would reach the next layer's keys/values)."""
    import torch.nn.functional as F

    class Sdpa(torch.nn.Module):
        def forward(self, q, k, v, m):
            return F.scaled_dot_product_attention(q, k, v, m)

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 5, 8) for _ in range(3))
    keep = torch.rand(2, 1, 5, 5) > 0.4
    keep[0, 0, 1] = False
    mask = keep if kind == "bool" else torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))
    prog = pt2onnx.export(Sdpa(), (q, k, v, mask), opset=opset)
    (out,) = prog.run(q, k, v, mask)
    assert not np.isnan(out).any() and (out[0, :, 1] == 0).all()
    assert prog.verify(q, k, v, mask).ok


@pytest.mark.models
def test_docs_flow_text_in_text_out_with_the_copied_tokenizer(tmp_path):
    """docs/llm.md's loop: genai's tokenizer reads the copied tokenizer files (a tiny
    byte-level BPE trained here) and the generated ids decode back to the prompt."""
    og = _genai()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["the capital of france is paris", "the cat sat on the mat"] * 20,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    fast.save_pretrained(tmp_path / "ckpt")
    cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                  vocab_size=len(fast), bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "ckpt")
    pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    model = og.Model(str(tmp_path / "onnx"))
    tokenizer = og.Tokenizer(model)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=16)
    generator = og.Generator(model, params)
    prompt = tokenizer.encode("the capital of france is")
    assert list(prompt) == fast.encode("the capital of france is")
    generator.append_tokens(prompt)
    while not generator.is_done():
        generator.generate_next_token()
    text = tokenizer.decode(generator.get_sequence(0))
    assert text.startswith("the capital of france is")
