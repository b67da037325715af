"""export-llm's fused ops: GroupQueryAttention, SimplifiedLayerNormalization.

- ``pt2onnx::gqa``'s eager implementation (what the capture checks the model against)
  equals onnxruntime's GroupQueryAttention: grouped heads, past and no past, one and
  several new tokens, a sliding window, soft-capping, rotary inside the op (fast).
- Each family whose attention goes through transformers' AttentionInterface exports
  with one GroupQueryAttention per layer, and onnxruntime-genai's greedy tokens equal
  transformers' ``generate`` (the family table and helpers of test_export_llm.py).
- Families it can't express exactly (ALiBi, their own attention code, sink logits)
  fall back to the model's own ops with a note, and still generate exactly.
- The switch (``fused_ops=False`` / ``--no-fused-ops``) writes standard ops only.
- Stamped and fully captured fused graphs agree; int4 composes.

The genai cases need onnxruntime-genai (``make test-llm``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import pt2onnx

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from test_export_llm import (  # noqa: E402
    FAMILIES,
    LAYERS,
    PROMPT,
    SMALL,
    T,
    _checkpoint,
    _genai,
    _genai_tokens,
    _reference,
    _vary,
)


def _uses_attention_interface(family: str) -> bool:
    """Whether the installed transformers runs this family's attention through its
    AttentionInterface (GPT-J does from 5.24), which export-llm detects and fuses."""
    import importlib
    import inspect

    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    return "ALL_ATTENTION_FUNCTIONS" in inspect.getsource(module)


FUSED = ["ernie4_5", "gemma", "gemma2", "gemma3_text", "gpt2", "gpt_neox", "granite", "granitemoe",
         "granitemoehybrid", "hunyuan_v1_dense", "lfm2", "llama", "mistral", "mixtral",
         "nemotron", "olmo", "olmoe", "opt", "phi", "phi3", "phimoe", "qwen2", "qwen3",
         "qwen3_moe", "smollm3"]
# LFM2: one attention layer between two convolution layers (their states beside it).
ATTENTION_LAYERS = {"lfm2": 1}
# BLOOM, GPT-J before transformers 5.24: their own attention code (no AttentionInterface);
# Falcon adds ALiBi to a mask transformers no longer builds; GPT-OSS has sink logits.
FALLBACK = {"bloom": "AttentionInterface", "falcon": "Error", "gpt_oss": "sink"}
if _uses_attention_interface("gptj"):
    FUSED.append("gptj")
else:
    FALLBACK["gptj"] = "AttentionInterface"
# Head size 16: onnxruntime rotates inside the op (its rotary kernel needs multiples
# of 16; the family table's heads are 8 wide and keep the model's rotary ops).
ROTARY = {
    "llama16": lambda: transformers.LlamaConfig(num_key_value_heads=2, head_dim=16, **SMALL,
                                                **T),
    "gemma2_16": lambda: transformers.Gemma2Config(num_key_value_heads=2, head_dim=16,
                                                   sliding_window=8, **SMALL, **T),
    # q/k/v with biases: joined with their biases, then read packed.
    "qwen2_16": lambda: transformers.Qwen2Config(num_key_value_heads=2, **dict(
        SMALL, hidden_size=64), **T),
    # A partial rotary (the first 16 of 32 dims): Phi rotates a slice of each head and
    # joins the rest back, Nemotron does it inside apply_rotary_pos_emb.
    "phi_32": lambda: transformers.PhiConfig(partial_rotary_factor=0.5, **dict(
        SMALL, hidden_size=128), **T),
    "nemotron_32": lambda: transformers.NemotronConfig(
        num_key_value_heads=2, head_dim=32, partial_rotary_factor=0.5,
        **dict(SMALL, hidden_size=128), **T),
    # ERNIE 4.5 turns each pair of dims (interleaved): rotary_interleaved=1.
    "ernie4_5_16": lambda: transformers.Ernie4_5Config(num_key_value_heads=2, head_dim=16,
                                                       **SMALL, **T),
}
# The op's rotary_interleaved for each: only ERNIE 4.5's pairs.
INTERLEAVED = {"ernie4_5_16"}



def _ops(path):
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    return proto, [(n.domain, n.op_type) for n in proto.graph.node]


def _gqa_nodes(proto):
    return [n for n in proto.graph.node if n.op_type == "GroupQueryAttention"]


# -- the op against onnxruntime (fast) ------------------------------------------

class _Gqa(torch.nn.Module):
    # It calls pt2onnx::gqa in eager before anything has exported; the op is defined where
    # its rule is, and the built-in rules load on first use.
    def __init__(self, heads, kv_heads, scale, window, softcap, tables=None,
                 interleaved=False):
        from pt2onnx.rules import gqa

        gqa.define_ops()
        super().__init__()
        self.args = (heads, kv_heads, scale, window, softcap)
        self.tables = tables
        self.interleaved = interleaved

    def forward(self, q, k, v, past_k, past_v, mask):
        extra = self.tables or ()
        return torch.ops.pt2onnx.gqa(q, k, v, past_k, past_v, mask, *self.args, *extra,
                                     interleaved=self.interleaved)


@pytest.mark.parametrize(("heads", "kv_heads", "head", "window", "softcap", "seq", "past",
                          "rotary"), [
    (4, 2, 8, 0, 0.0, 1, 7, False),
    (4, 4, 8, 0, 0.0, 5, 0, False),
    (6, 2, 8, 3, 0.0, 1, 9, False),
    (6, 2, 8, 3, 0.0, 6, 0, False),
    (4, 1, 8, 0, 5.0, 1, 6, False),
    (4, 2, 16, 4, 2.0, 7, 0, True),
    (4, 2, 16, 0, 0.0, 2, 5, True),
    # The first 16 of 32 dims rotated (Phi's, Nemotron's partial rotary), and each pair
    # turned by one angle (ERNIE 4.5's interleaved rotary), alone and together.
    (4, 2, 32, 0, 0.0, 3, 4, "partial"),
    (4, 2, 16, 0, 0.0, 3, 4, "interleaved"),
    (4, 2, 32, 0, 0.0, 1, 6, "partial interleaved"),
])
def test_gqa_op_equals_onnxruntime(heads, kv_heads, head, window, softcap, seq, past, rotary,
                                   tmp_path):
    import onnxruntime as ort

    torch.manual_seed(0)
    tables = None
    if rotary:
        rot = head // 2 if "partial" in str(rotary) else head
        angles = torch.arange(64)[:, None].float() * torch.rand(rot // 2)
        tables = (angles.cos(), angles.sin())
    module = _Gqa(heads, kv_heads, 0.3, window, softcap, tables,
                  interleaved="interleaved" in str(rotary))
    args = (torch.randn(1, heads, seq, head), torch.randn(1, kv_heads, seq, head),
            torch.randn(1, kv_heads, seq, head), torch.randn(1, kv_heads, past, head),
            torch.randn(1, kv_heads, past, head), torch.ones(1, past + seq, dtype=torch.int64))
    want = module(*args)
    names = ["q", "k", "v", "past_k", "past_v", "mask"]
    prog = pt2onnx.export(module, args, None, input_names=names)
    prog.save(tmp_path / "gqa.onnx")
    _, ops = _ops(tmp_path / "gqa.onnx")
    assert ("com.microsoft", "GroupQueryAttention") in ops
    session = ort.InferenceSession(str(tmp_path / "gqa.onnx"),
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, {n: a.numpy() for n, a in zip(names, args)})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


class _Rotary(torch.nn.Module):
    def __init__(self, tables, interleaved):
        from pt2onnx.rules import rotary

        rotary.define_ops()
        super().__init__()
        self.register_buffer("cos", tables[0])
        self.register_buffer("sin", tables[1])
        self.interleaved = interleaved

    def forward(self, x, position_ids):
        return torch.ops.pt2onnx.rotary(x, position_ids, self.cos, self.sin,
                                        interleaved=self.interleaved)


@pytest.mark.parametrize(("batch", "heads", "seq", "head", "rot", "interleaved", "dtype"), [
    (1, 4, 1, 8, 8, False, torch.float32),      # a head size GroupQueryAttention can't turn
    (2, 2, 5, 64, 64, False, torch.float32),
    (2, 3, 4, 32, 16, False, torch.float32),    # partial: the first 16 of 32 dims
    (1, 2, 3, 16, 16, True, torch.float32),     # each pair by one angle
    (2, 2, 3, 24, 8, True, torch.float32),      # partial and interleaved
    (1, 2, 6, 64, 64, False, torch.float16),
])
def test_rotary_op_equals_onnxruntime(batch, heads, seq, head, rot, interleaved, dtype,
                                      tmp_path):
    """pt2onnx::rotary (export-llm's rotation where GroupQueryAttention can't take it)
    against onnxruntime's RotaryEmbedding, at positions that differ per batch row and
    are not consecutive (the table row is position_ids', not the token's index)."""
    import onnxruntime as ort

    torch.manual_seed(0)
    angles = torch.arange(64)[:, None].float() * torch.rand(rot // 2)
    module = _Rotary((angles.cos().to(dtype), angles.sin().to(dtype)), interleaved)
    x = torch.randn(batch, heads, seq, head).to(dtype)
    positions = torch.randint(0, 64, (batch, seq))
    want = module(x, positions)
    if dtype == torch.float32:  # the op is the model's turn: x * cos + rotate_half(x) * sin
        from pt2onnx.rules.gqa import rotate

        table = (module.cos[positions][:, None], module.sin[positions][:, None])
        torch.testing.assert_close(want, rotate(x, *table, interleaved))
    prog = pt2onnx.export(module, (x, positions), None, input_names=["x", "position_ids"],
                          dynamic_shapes={"x": {0: "b", 2: "s"}, "position_ids": {0: "b", 1: "s"}})
    prog.save(tmp_path / "rotary.onnx")
    _, ops = _ops(tmp_path / "rotary.onnx")
    assert ops == [("com.microsoft", "RotaryEmbedding")]
    session = ort.InferenceSession(str(tmp_path / "rotary.onnx"),
                                   providers=["CPUExecutionProvider"])
    tol = 1e-5 if dtype == torch.float32 else 2e-3
    for b, s in ((batch, seq), (1, 1), (3, 2)):  # the dynamic dims at 1 and beyond
        x = torch.randn(b, heads, s, head).to(dtype)
        positions = torch.randint(0, 64, (b, s))
        got = session.run(None, {"x": x.numpy(), "position_ids": positions.numpy()})[0]
        np.testing.assert_allclose(got.astype(np.float32),
                                   module(x, positions).float().numpy(), rtol=tol, atol=tol)


# -- families through onnxruntime-genai -----------------------------------------

@pytest.mark.models
@pytest.mark.parametrize("name", FUSED)
def test_fused_family_generates_transformers_greedy_tokens(name, tmp_path):
    _genai()
    model = _checkpoint(name, tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    assert not [w for w in result.warnings if "not fused" in w], result.warnings
    proto, _ = _ops(result.model_path)
    assert len(_gqa_nodes(proto)) == ATTENTION_LAYERS.get(name, LAYERS)
    # The value goes in as projected, not split into heads and merged again
    # (passes/unsplit_heads.py; gpt2 packs q, k and v into the first input, and
    # gpt_neox splits one packed projection into heads, which no merge undoes).
    producers = {out: n for n in proto.graph.node for out in n.output}
    for node in _gqa_nodes(proto) if name != "gpt_neox" else []:
        if node.input[2]:
            assert producers[node.input[2]].op_type != "Reshape", node.input[2]
    # Nothing else reads the past (no cache Concat): genai can share the buffers.
    cfg = json.loads((tmp_path / "onnx" / "genai_config.json").read_text())
    assert cfg["search"]["past_present_share_buffer"] is True
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


def _exported(config, tmp_path):
    """(model, its export-llm result) for a tiny random checkpoint of ``config``."""
    torch.manual_seed(0)
    model = _vary(transformers.AutoModelForCausalLM.from_config(config).eval())
    model.save_pretrained(tmp_path / "ckpt")
    return model, pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")


@pytest.mark.models
@pytest.mark.parametrize("name", sorted(ROTARY))
def test_rotary_inside_the_op_generates_transformers_greedy_tokens(name, tmp_path):
    _genai()
    model, result = _exported(ROTARY[name](), tmp_path)
    proto, ops = _ops(result.model_path)
    nodes = _gqa_nodes(proto)
    assert len(nodes) == LAYERS
    for node in nodes:
        attrs = {a.name: a for a in node.attribute}
        assert attrs["do_rotary"].i == 1
        assert attrs["rotary_interleaved"].i == (name in INTERLEAVED)
        assert node.input[1] == node.input[2] == ""  # packed q/k/v
    assert ("", "Cos") not in ops  # the model's rotary ops are gone
    assert ("", "Neg") not in ops
    assert "position_ids" not in {i.name for i in proto.graph.input}  # as the builder's
    cfg = json.loads((tmp_path / "onnx" / "genai_config.json").read_text())
    assert "position_ids" not in cfg["model"]["decoder"]["inputs"]
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


# The rotation outside the op, as RotaryEmbedding: HunYuan normalises the rotated query
# and key (the op would rotate the normalised ones); heads 8 wide GroupQueryAttention
# can't rotate.
OUTSIDE = {
    "hunyuan_16": lambda: transformers.HunYuanDenseV1Config(num_key_value_heads=2, head_dim=16,
                                                            **SMALL, **T),
    "llama_8": lambda: transformers.LlamaConfig(num_key_value_heads=2, head_dim=8, **SMALL, **T),
    "nemotron_8": lambda: transformers.NemotronConfig(
        num_key_value_heads=2, head_dim=8, partial_rotary_factor=0.5, **SMALL, **T),
}


@pytest.mark.models
@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_rotary_outside_the_op_generates_transformers_greedy_tokens(name, tmp_path):
    _genai()
    model, result = _exported(OUTSIDE[name](), tmp_path)
    proto, ops = _ops(result.model_path)
    nodes = _gqa_nodes(proto)
    assert len(nodes) == LAYERS
    for node in nodes:
        assert {a.name: a.i for a in node.attribute}.get("do_rotary", 0) == 0
    turns = [n for n in proto.graph.node if n.op_type == "RotaryEmbedding"]
    assert len(turns) == 2 * LAYERS  # the query's and the key's in each layer
    assert all(n.input[1] == "position_ids" for n in turns)
    # On the projections' [B, S, N * D] (llm/_heads.py): no Transpose left, as the builder's.
    assert ("", "Transpose") not in ops
    assert ("", "Neg") not in ops and ("", "Cos") not in ops  # the model's rotary ops are gone
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


@pytest.mark.models
def test_rotation_that_is_not_the_table_keeps_the_model_ops(tmp_path, monkeypatch):
    """A model whose apply_rotary_pos_emb is not the table's turn at position_ids (here
    it also scales the key): the eager check finds pt2onnx::rotary differs, and the
    capture keeps the model's rotary ops, the attention still fused."""
    _genai()
    from transformers.models.llama import modeling_llama

    original = modeling_llama.apply_rotary_pos_emb

    def scaled(q, k, cos, sin, unsqueeze_dim=1):
        q, k = original(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
        return q, k * 1.5

    monkeypatch.setattr(modeling_llama, "apply_rotary_pos_emb", scaled)
    model, result = _exported(OUTSIDE["llama_8"](), tmp_path)
    assert not [w for w in result.warnings if "not fused" in w], result.warnings
    proto, ops = _ops(result.model_path)
    assert len(_gqa_nodes(proto)) == LAYERS
    assert ("com.microsoft", "RotaryEmbedding") not in ops
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


@pytest.mark.models
@pytest.mark.parametrize("name", sorted(FALLBACK))
def test_family_the_op_cannot_express_falls_back_with_a_note(name, tmp_path):
    _genai()
    model = _checkpoint(name, tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    notes = [w for w in result.warnings if "not fused" in w]
    assert len(notes) == 1 and FALLBACK[name] in notes[0], result.warnings
    proto, _ = _ops(result.model_path)
    assert not _gqa_nodes(proto)
    cfg = json.loads((tmp_path / "onnx" / "genai_config.json").read_text())
    assert cfg["search"]["past_present_share_buffer"] is False
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


@pytest.mark.models
@pytest.mark.parametrize("name", ["llama", "gemma2"])
def test_no_fused_ops_writes_standard_ops_only(name, tmp_path):
    _genai()
    model = _checkpoint(name, tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", fused_ops=False)
    _, ops = _ops(result.model_path)
    assert {d for d, _ in ops} == {""}
    assert ("", "SimplifiedLayerNormalization") not in ops
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


@pytest.mark.models
def test_cli_no_fused_ops(tmp_path, capsys):
    from pt2onnx.cli import main

    _checkpoint("qwen2", tmp_path / "ckpt")
    assert main(["export-llm", str(tmp_path / "ckpt"), "-o", str(tmp_path / "a"), "-q"]) == 0
    assert main(["export-llm", str(tmp_path / "ckpt"), "-o", str(tmp_path / "b"), "-q",
                 "--no-fused-ops"]) == 0
    _, fused = _ops(tmp_path / "a" / "model.onnx")
    _, plain = _ops(tmp_path / "b" / "model.onnx")
    assert ("com.microsoft", "GroupQueryAttention") in fused
    assert ("com.microsoft", "SkipSimplifiedLayerNormalization") in fused
    assert {d for d, _ in plain} == {""}


@pytest.mark.models
def test_fused_stamped_graph_equals_the_full_capture_and_eager(tmp_path, monkeypatch):
    """Stamping copies the fused layer (its GroupQueryAttention, its rotary tables
    shared by all layers): the same graph as capturing every layer, and eager's
    logits and cache, here over a past (batch 1: onnxruntime's op takes several new
    tokens over a past for one sequence only)."""
    import onnxruntime as ort

    from pt2onnx.llm import _stamp

    torch.manual_seed(1)
    cfg = ROTARY["llama16"]()
    cfg.num_hidden_layers = 4
    model = _vary(transformers.AutoModelForCausalLM.from_config(cfg).eval())
    stamped = pt2onnx.export_llm(model, tmp_path / "stamped")
    assert stamped.captured_layers < 4
    monkeypatch.setenv(_stamp.ENV, "0")
    full = pt2onnx.export_llm(model, tmp_path / "full")
    assert full.captured_layers == 4
    rng = np.random.default_rng(0)
    past, seq = 7, 5
    feeds = {"input_ids": rng.integers(3, 128, (1, seq)),
             "attention_mask": np.ones((1, past + seq), np.int64),
             "position_ids": np.arange(past, past + seq)[None]}
    pasts = [rng.standard_normal((1, 2, past, 16)).astype(np.float32) for _ in range(8)]
    for i in range(4):
        feeds[f"past_key_values.{i}.key"] = pasts[2 * i]
        feeds[f"past_key_values.{i}.value"] = pasts[2 * i + 1]
    assert not stamped.layout.uses_position_ids  # rotary inside: positions from the mask
    positions = feeds.pop("position_ids")
    outs = [ort.InferenceSession(str(r.model_path), providers=["CPUExecutionProvider"])
            .run(None, feeds) for r in (stamped, full)]
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    cache = transformers.DynamicCache()
    for i in range(4):
        cache.update(torch.from_numpy(pasts[2 * i]), torch.from_numpy(pasts[2 * i + 1]), i)
    with torch.no_grad():
        ref = model(input_ids=torch.from_numpy(feeds["input_ids"]),
                    attention_mask=torch.from_numpy(feeds["attention_mask"]),
                    position_ids=torch.from_numpy(positions),
                    past_key_values=cache, use_cache=True)
    np.testing.assert_allclose(outs[0][0], ref.logits.numpy(), rtol=1e-4, atol=1e-4)
    for i, layer in enumerate(ref.past_key_values.layers):
        np.testing.assert_allclose(outs[0][1 + 2 * i], layer.keys.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(outs[0][2 + 2 * i], layer.values.numpy(), rtol=1e-4,
                                   atol=1e-4)


@pytest.mark.models
def test_int4_with_fused_ops_matches_eager_with_the_dequantized_weights(tmp_path):
    _genai()
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(num_key_value_heads=2, hidden_size=64, head_dim=16,
                                   num_hidden_layers=LAYERS, num_attention_heads=4,
                                   intermediate_size=96, max_position_embeddings=128, **T)
    model = _vary(transformers.LlamaForCausalLM(cfg).eval())
    result = pt2onnx.export_llm(model, tmp_path / "onnx", precision="int4")
    proto, ops = _ops(result.model_path)
    assert len(_gqa_nodes(proto)) == LAYERS
    # Per layer: q/k/v joined and read packed, o, gate, up, down; then the LM head.
    assert ops.count(("com.microsoft", "MatMulNBits")) == 5 * LAYERS + 1
    assert ("", "Split") not in ops
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.copy_(pt2onnx.llm.quantize_rtn(m.weight)[2])
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


def test_families_are_listed_once():
    assert not set(FUSED) & set(FALLBACK)
    assert set(FUSED) | set(FALLBACK) == set(FAMILIES)


@pytest.mark.models
@pytest.mark.parametrize("name", sorted(ROTARY))
def test_fp16_with_rotary_inside_the_op_matches_eager(name, tmp_path):
    """fp16 with the rotary inside GroupQueryAttention (head size 16, its rotary tables
    in half): onnxruntime's CPU kernels run it, the first step over an empty past and a
    step over a past agree with eager half to float16 rounding, and genai's greedy
    tokens are transformers' (float32, no near-tie flips on this checkpoint)."""
    import onnxruntime as ort

    torch.manual_seed(0)
    model = _vary(transformers.AutoModelForCausalLM.from_config(ROTARY[name]()).eval())
    model.save_pretrained(tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", precision="fp16")
    proto, _ = _ops(result.model_path)
    gqa = _gqa_nodes(proto)
    assert len(gqa) == LAYERS
    assert all(a.i == 1 for n in gqa for a in n.attribute if a.name == "do_rotary")
    session = ort.InferenceSession(str(result.model_path), providers=["CPUExecutionProvider"])
    half = model.half()
    rng = np.random.default_rng(0)
    cfg = model.config
    kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    for past, seq in ((0, len(PROMPT)), (6, 1)):
        ids = rng.integers(3, 128, (1, seq))
        pasts = [rng.standard_normal((1, kv_heads, past, head)).astype(np.float16)
                 for _ in range(2 * LAYERS)]
        feeds = {"input_ids": ids, "attention_mask": np.ones((1, past + seq), np.int64)}
        cache = transformers.DynamicCache()
        for i in range(LAYERS):
            feeds[f"past_key_values.{i}.key"] = pasts[2 * i]
            feeds[f"past_key_values.{i}.value"] = pasts[2 * i + 1]
            cache.update(torch.from_numpy(pasts[2 * i]), torch.from_numpy(pasts[2 * i + 1]), i)
        got = session.run(None, feeds)
        assert got[0].dtype == np.float16
        with torch.no_grad():
            ref = half(input_ids=torch.from_numpy(ids),
                       position_ids=torch.arange(past, past + seq)[None],
                       past_key_values=cache if past else None, use_cache=True)
        np.testing.assert_allclose(got[0].astype(np.float32), ref.logits.float().numpy(),
                                   atol=2e-2, rtol=2e-2)
        for i, layer in enumerate(ref.past_key_values.layers):
            np.testing.assert_allclose(got[1 + 2 * i].astype(np.float32),
                                       layer.keys.float().numpy(), atol=2e-2, rtol=2e-2)
    try:
        _genai()
    except pytest.skip.Exception:
        return
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model.float(), [PROMPT])
