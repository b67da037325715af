"""export-llm's stamping: the decoder layers captured once per kind, copied per layer.

A stamped export must be the graph a capture of every layer gives: each case exports
the same random model with and without stamping and compares their outputs in
onnxruntime on a left-padded batch with a non-empty past (and with the eager model
where stamping must give up). The families: Llama, Qwen2, Mixtral (per-expert sizes
computed once in layer 0 and read by the others), GPT-2, Gemma2 (sliding and global
layers alternate: a period of 2) and two that must fall back to the full capture:
GPT-2 scaling attention by 1 / (layer index + 1) (a per-layer ``scaling`` attribute)
and Qwen2 whose first layers are full-attention and the rest sliding (no period).
Layers alike in their modules but captured differently are refused by the node-by-node
check (a tampered capture here).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pt2onnx
from pt2onnx.llm import _stamp

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from test_export_llm import _vary  # noqa: E402

T = dict(vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)
S = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64,
         max_position_embeddings=128)
CONFIGS = {
    "llama": lambda n: transformers.LlamaConfig(num_hidden_layers=n, num_key_value_heads=2,
                                                **S, **T),
    "qwen2": lambda n: transformers.Qwen2Config(num_hidden_layers=n, num_key_value_heads=2,
                                                **S, **T),
    "gemma2": lambda n: transformers.Gemma2Config(num_hidden_layers=n, num_key_value_heads=2,
                                                  head_dim=8, sliding_window=8, **S, **T),
    "mixtral": lambda n: transformers.MixtralConfig(
        num_hidden_layers=n, num_key_value_heads=2, num_local_experts=4,
        num_experts_per_tok=2, **S, **T),
    "gpt2": lambda n: transformers.GPT2Config(n_embd=32, n_layer=n, n_head=4, n_positions=128,
                                              **T),
    # Must fall back: the math depends on the layer index (seen in the captured graphs).
    "gpt2_scaled_by_layer": lambda n: transformers.GPT2Config(
        n_embd=32, n_layer=n, n_head=4, n_positions=128, scale_attn_by_inverse_layer_idx=True,
        **T),
    # Must fall back: layers 0-1 full attention, 2.. sliding (no repeating pattern).
    "qwen2_window_layers": lambda n: transformers.Qwen2Config(
        num_hidden_layers=n, num_key_value_heads=2, use_sliding_window=True, sliding_window=4,
        max_window_layers=2, **S, **T),
}


def _model(name, layers, seed=0):
    torch.manual_seed(seed)
    return _vary(transformers.AutoModelForCausalLM.from_config(CONFIGS[name](layers)).eval())


def _feeds(session, seed=0, batch=2, past=7, seq=5):
    rng = np.random.default_rng(seed)
    names = {i.name for i in session.get_inputs()}
    mask = np.ones((batch, past + seq), np.int64)
    if batch > 1:
        mask[1, :3] = 0  # left padding
    feeds = {"input_ids": rng.integers(3, 128, (batch, seq)), "attention_mask": mask}
    if "position_ids" in names:
        feeds["position_ids"] = np.maximum(mask.cumsum(-1) - 1, 0)[:, past:]
    for i in session.get_inputs():
        if i.name.startswith("past_key_values."):
            shape = [batch if d == "batch_size" else past if d == "past_sequence_length" else d
                     for d in i.shape]
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _run(path, feeds=None):
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = feeds or _feeds(session)
    return [o.name for o in session.get_outputs()], session.run(None, feeds), feeds


# -- the plan (fast: no capture) ------------------------------------------------

@pytest.mark.parametrize(("name", "layers", "period", "captured"), [
    ("llama", 5, 1, 2), ("mixtral", 3, 1, 2), ("gemma2", 6, 2, 4), ("gemma2", 7, 2, 5)])
def test_plan_finds_the_layer_period(name, layers, period, captured):
    with torch.device("meta"):
        model = _model(name, layers)
    plan = _stamp.plan(model, model.config)
    assert plan is not None
    assert (plan.period, plan.captured, plan.num_layers) == (period, captured, layers)
    assert plan.list_path == "model.layers"


@pytest.mark.parametrize(("name", "layers"), [("llama", 2), ("gemma2", 4), ("gemma2", 3)])
def test_no_plan_when_a_full_capture_is_no_bigger(name, layers):
    with torch.device("meta"):
        model = _model(name, layers)
    assert _stamp.plan(model, model.config) is None


def test_layers_without_a_repeating_pattern_are_not_stamped():
    with torch.device("meta"):
        model = _model("qwen2_window_layers", 6)
    with pytest.raises(_stamp.Unstampable, match="layer 2 differs from layer 1 in "
                                                  "config.layer_types"):
        _stamp.plan(model, model.config)


def test_hooks_and_foreign_cache_slots_are_not_stamped():
    with torch.device("meta"):
        model = _model("llama", 4)
    handle = model.model.layers[3].mlp.register_forward_hook(lambda *args: None)
    with pytest.raises(_stamp.Unstampable, match="layer 3 \\(mlp\\) has forward hooks"):
        _stamp.plan(model, model.config)
    handle.remove()
    model.model.layers[3].self_attn.layer_idx = 1  # would read layer 1's past
    with pytest.raises(_stamp.Unstampable, match="layer_idx = 1"):
        _stamp.plan(model, model.config)


def test_the_cut_model_is_restored():
    with torch.device("meta"):
        model = _model("gemma2", 7)
    plan = _stamp.plan(model, model.config)
    assert plan is not None
    layers, types = model.model.layers, list(model.config.layer_types)
    with _stamp.reduced(model, model.config, plan):
        assert len(model.model.layers) == 5 and model.config.num_hidden_layers == 5
        assert model.config.layer_types == types[:5]
    assert model.model.layers is layers and model.config.num_hidden_layers == 7
    assert model.config.layer_types == types


# -- stamped against captured (onnxruntime) ----------------------------------------

@pytest.mark.models
@pytest.mark.parametrize(("name", "layers"), [
    ("llama", 4), ("qwen2", 4), ("mixtral", 4), ("gpt2", 4), ("gemma2", 7)])
def test_stamped_export_equals_the_full_capture(name, layers, tmp_path, monkeypatch):
    model = _model(name, layers)
    # The plain attention: the feeds are a left-padded batch of two over a past, which
    # the fused GroupQueryAttention does not take (test_llm_fused.py stamps that one).
    stamped = pt2onnx.export_llm(model, tmp_path / "stamped", fused_ops=False)
    assert stamped.captured_layers < layers, stamped.warnings
    assert not [w for w in stamped.warnings if "stamp" in w]
    monkeypatch.setenv(_stamp.ENV, "0")  # the switch: every layer captured
    full = pt2onnx.export_llm(model, tmp_path / "full", fused_ops=False)
    assert full.captured_layers == layers
    names, got, feeds = _run(stamped.model_path)
    full_names, want, _ = _run(full.model_path, feeds)
    assert names == full_names == ["logits"] + [f"present.{i}.{kv}" for i in range(layers)
                                                for kv in ("key", "value")]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    # And both are the eager model.
    ids = torch.from_numpy(feeds["input_ids"])
    mask = torch.from_numpy(feeds["attention_mask"])
    real = feeds["attention_mask"][:, -ids.shape[1]:].astype(bool)
    cache = transformers.DynamicCache()
    for i in range(layers):
        cache.update(torch.from_numpy(feeds[f"past_key_values.{i}.key"]),
                     torch.from_numpy(feeds[f"past_key_values.{i}.value"]), i)
    extra = {"position_ids": torch.from_numpy(feeds["position_ids"])} if (
        "position_ids" in feeds) else {}
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True,
                    **extra).logits.numpy()
    np.testing.assert_allclose(got[0][real], ref[real], rtol=1e-4, atol=1e-4)


@pytest.mark.models
@pytest.mark.parametrize(("name", "why"), [
    ("gpt2_scaled_by_layer", "differs from layer"),
    ("qwen2_window_layers", "not one repeating pattern")])
def test_layers_that_differ_fall_back_to_the_full_capture(name, why, tmp_path):
    model = _model(name, 5)
    result = pt2onnx.export_llm(model, tmp_path / "onnx", fused_ops=False)  # padded feeds
    assert result.captured_layers == 5
    notes = [w for w in result.warnings if "not stamped" in w]
    assert len(notes) == 1 and why in notes[0], result.warnings
    _, got, feeds = _run(result.model_path)
    ids = torch.from_numpy(feeds["input_ids"])
    cache = transformers.DynamicCache()
    for i in range(5):
        cache.update(torch.from_numpy(feeds[f"past_key_values.{i}.key"]),
                     torch.from_numpy(feeds[f"past_key_values.{i}.value"]), i)
    extra = {"position_ids": torch.from_numpy(feeds["position_ids"])} if (
        "position_ids" in feeds) else {}
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=torch.from_numpy(feeds["attention_mask"]),
                    past_key_values=cache, use_cache=True, **extra).logits.numpy()
    real = feeds["attention_mask"][:, -ids.shape[1]:].astype(bool)
    np.testing.assert_allclose(got[0][real], ref[real], rtol=1e-4, atol=1e-4)


@pytest.mark.models
@pytest.mark.parametrize(("name", "layers"), [("llama", 4), ("gemma2", 7)])
def test_stamped_folder_generates_transformers_greedy_tokens_in_genai(name, layers, tmp_path):
    og = pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai is not installed "
                             "(the llm extra; make test-llm runs these)")
    model = _model(name, layers, seed=3)
    model.save_pretrained(tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    assert result.captured_layers < layers
    prompt, new = [1, 5, 9, 20, 33, 7], 32
    gm = og.Model(str(tmp_path / "onnx"))
    params = og.GeneratorParams(gm)
    params.set_search_options(max_length=len(prompt) + new, min_length=len(prompt) + new)
    gen = og.Generator(gm, params)
    gen.append_tokens(np.array([prompt], dtype=np.int32))
    while not gen.is_done():
        gen.generate_next_token()
    ids = torch.tensor([prompt])
    with torch.no_grad():
        ref = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=new, min_new_tokens=new)
    assert [int(t) for t in gen.get_sequence(0)] == ref[0].tolist()


@pytest.mark.models
def test_node_check_refuses_a_layer_captured_differently():
    """The template layer is compared node by node with the layer a period before it:
    one attribute changed in layer 1's capture, and the stamp refuses; restored, it
    stamps all four layers."""
    import onnx_ir as ir

    from pt2onnx.llm import _export

    model = _model("llama", 4)
    plan = _stamp.plan(model, model.config)
    assert plan is not None and plan.captured == 2
    with _stamp.reduced(model, model.config, plan):
        _, prog = _export._capture_cut(model, model.config, "llama", plan, torch.float32,
                                       None, [])
    node = next(n for n in prog.model.graph if n.op_type == "Transpose"
                and n.metadata_props.get("pt2onnx.module", "").startswith(
                    "model.model.layers.1."))
    perm = node.attributes["perm"]
    node.attributes["perm"] = ir.AttrInt64s("perm", list(reversed(perm.as_ints())))
    state = dict(model.named_parameters())
    weight = lambda name: state[name.removeprefix("model.")]  # noqa: E731
    with pytest.raises(_stamp.Unstampable, match="other attributes than layer 0"):
        _stamp.stamp(prog.model, plan, "model.model.layers", weight)
    node.attributes["perm"] = perm
    _stamp.stamp(prog.model, plan, "model.model.layers", weight)
    outputs = [v.name for v in prog.model.graph.outputs]
    assert outputs == ["logits"] + [f"present.{i}.{kv}" for i in range(4)
                                    for kv in ("key", "value")]
