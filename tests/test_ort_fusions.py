"""optimize="onnxruntime": onnxruntime's fused ops where they compute what the standard
graph does (passes/ort_attention.py, ort_skip_norm.py).

Each case exports with and without the option and runs both files in onnxruntime
against eager at several sizes: the dynamic dims at 1, a padded batch row, a row
whose every key is hidden (eager gives 0 there). The fused file must hold the fused
ops where the pattern holds, and keep the standard ones where it does not.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import pt2onnx
from pt2onnx.errors import InvalidInputError

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")


def _ops(prog) -> collections.Counter:
    return collections.Counter(n.op_type for n in prog.model.graph)


def _check(prog, module, cases, names, tol=1e-5):
    session = ort.InferenceSession(prog.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for args in cases:
        with torch.no_grad():
            want = module(*args)
        got = session.run(None, {n: a.numpy() for n, a in zip(names, args)})[0]
        np.testing.assert_allclose(got, want.numpy(), rtol=tol, atol=tol)


class _Sdpa(nn.Module):
    def __init__(self, heads=4, size=8, v_size=8, scale=None):
        super().__init__()
        self.heads, self.size, self.v_size, self.scale = heads, size, v_size, scale

    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)


def _mask(kind, b, s, total):
    if kind == "bool":  # the last batch row sees nothing from its 2nd query on
        m = torch.rand(b, 1, s, total) > 0.3
        m[..., 0] = True
        m[-1, :, 1:] = False
        return m
    if kind == "bool_keys":  # [B, 1, 1, L]: padding, broadcast over the queries
        m = torch.ones(b, 1, 1, total, dtype=torch.bool)
        m[-1, ..., total // 2:] = False
        return m
    m = torch.randn(b, 4 if kind == "float_heads" else 1, s, total)  # T5: a bias per head
    m[-1, :, 1:] = -torch.inf  # every key of these rows hidden
    m[0, 0, 0, -1] = -torch.inf
    return m


@pytest.mark.parametrize("kind", ["bool", "bool_keys", "float", "float_heads"])
@pytest.mark.parametrize("cross", [False, True])
def test_sdpa_with_a_mask_is_multi_head_attention(kind, cross):
    heads, size, v_size = 4, 8, 16 if cross else 8
    module = _Sdpa(heads, size, v_size, scale=0.3 if cross else None)

    def args(b, s):
        total = s + 3 if cross else s
        return (torch.randn(b, heads, s, size), torch.randn(b, heads, total, size),
                torch.randn(b, heads, total, v_size), _mask(kind, b, s, total))

    names = ["q", "k", "v", "mask"]
    dims = {"q": {0: "b", 2: "s"}, "k": {0: "b", 2: "t"}, "v": {0: "b", 2: "t"},
            "mask": {0: "b", 2: "s" if kind != "bool_keys" else None, 3: "t"}}
    dims["mask"] = {k: v for k, v in dims["mask"].items() if v is not None}
    prog = pt2onnx.export(module, args(2, 5), None, input_names=names, dynamic_shapes=dims,
                          optimize="onnxruntime")
    assert _ops(prog)["MultiHeadAttention"] == 1
    assert _ops(prog)["Softmax"] == 0
    _check(prog, module, [args(2, 5), args(1, 1), args(3, 2), args(2, 9)], names)


def test_sdpa_without_a_mask_and_at_size_one():
    module = _Sdpa()
    args = (torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8))

    class NoMask(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v)

    names = ["q", "k", "v"]
    dims = {n: {0: "b", 2: "s"} for n in names}
    prog = pt2onnx.export(NoMask(), args, None, input_names=names, dynamic_shapes=dims,
                          optimize="onnxruntime")
    assert _ops(prog)["MultiHeadAttention"] == 1
    cases = [tuple(torch.randn(b, 4, s, 8) for _ in range(3)) for b, s in ((2, 6), (1, 1), (3, 2))]
    _check(prog, NoMask(), cases, names)
    del module


class _SharedKeys(nn.Module):
    """Keys and values of batch 1 for a batch of queries: sdpa broadcasts them."""

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


class _Causal(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class _Grouped(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


# Causal with more keys than queries: the op's unidirectional is not sdpa's mask there.
@pytest.mark.parametrize(("module", "kv_heads", "kv_batch", "kv_len"),
                         [(_Causal(), 4, 2, 7), (_Grouped(), 2, 2, 5), (_SharedKeys(), 4, 1, 5)])
def test_attention_the_op_does_not_express_keeps_the_standard_ops(module, kv_heads, kv_batch,
                                                                  kv_len):
    args = (torch.randn(2, 4, 5, 8), torch.randn(kv_batch, kv_heads, kv_len, 8),
            torch.randn(kv_batch, kv_heads, kv_len, 8))
    prog = pt2onnx.export(module, args, None, input_names=["q", "k", "v"],
                          optimize="onnxruntime")
    assert _ops(prog)["MultiHeadAttention"] == 0
    assert _ops(prog)["Softmax"] == 1
    _check(prog, module, [args], ["q", "k", "v"])


class _Block(nn.Module):
    """A pre-norm (ViT, Whisper's encoder) or post-norm (BERT) transformer block over
    its own projections and sdpa, with a padding mask."""

    def __init__(self, pre: bool, gelu: str, dim=32, heads=4):
        super().__init__()
        self.pre, self.gelu, self.heads = pre, gelu, heads
        self.qkv = nn.ModuleList(nn.Linear(dim, dim) for _ in range(3))
        self.out = nn.Linear(dim, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def _attend(self, x, mask):
        b, s, d = x.shape
        q, k, v = (p(x).view(b, s, self.heads, -1).transpose(1, 2) for p in self.qkv)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        return self.out(a.transpose(1, 2).reshape(b, s, d))

    def _mlp(self, x):
        return self.down(F.gelu(self.up(x), approximate=self.gelu))

    def forward(self, x, mask):
        mask = mask.bool()
        for _ in range(2):
            if self.pre:
                x = x + self._attend(self.norm1(x), mask)
                x = x + self._mlp(self.norm2(x))
            else:
                x = self.norm1(x + self._attend(x, mask))
                x = self.norm2(x + self._mlp(x))
        return x


def _padded(b, s, pad, batch_first=True):
    """A batch of ``b`` sequences of ``s`` (width 32) and its padding mask, 1 where a
    token is real: the last sequence's final ``pad`` tokens are padding."""
    mask = torch.ones(b, s, dtype=torch.int64)
    if pad:
        mask[-1, s - pad:] = 0
    x = torch.randn(b, s, 32)
    return (x if batch_first else x.transpose(0, 1).contiguous()), mask


@pytest.mark.parametrize(("pre", "gelu"), [(False, "none"), (True, "tanh")])
def test_transformer_blocks_use_the_fused_ops_and_match_eager(pre, gelu):
    torch.manual_seed(0)
    module = _Block(pre, gelu).eval()

    def args(b, s, pad):
        return _padded(b, s, pad)

    names = ["x", "mask"]
    dims = {"x": {0: "b", 1: "s"}, "mask": {0: "b", 1: "s"}}
    plain = pt2onnx.export(module, args(2, 6, 2), None, input_names=names, dynamic_shapes=dims)
    fused = pt2onnx.export(module, args(2, 6, 2), None, input_names=names, dynamic_shapes=dims,
                           optimize="onnxruntime")
    ops = _ops(fused)
    assert ops["MultiHeadAttention"] == 2 and ops["Softmax"] == 0
    assert ops["Gelu"] == 2  # BiasGelu is slower than Gemm (bias inside) + Gelu on CPU
    # Post-norm: both norms of each block read a residual add. Pre-norm: the next
    # residual reads the sum too, and onnxruntime's CPU kernel with the sum as an output
    # is slower than Add + LayerNormalization (ViT-B/16: 17 ms against 3 ms): left.
    assert ops["SkipLayerNormalization"] == (4 if not pre else 0)
    # Post-norm: fewer nodes; pre-norm: the attention alone, its layout nodes as many
    # as the standard ops it replaces.
    assert len(list(fused.model.graph)) <= len(list(plain.model.graph)) - (0 if pre else 4)
    cases = [args(2, 6, 2), args(1, 1, 0), args(3, 4, 4), args(2, 9, 0)]
    _check(fused, module, cases, names, tol=2e-5)
    _check(plain, module, cases, names, tol=2e-5)


class _TorchMha(nn.Module):
    """nn.MultiheadAttention as torchvision's ViT and nn.TransformerEncoderLayer call it:
    its forward reaches sdpa inside F.multi_head_attention_forward, decomposed to
    _scaled_dot_product_flash_attention_for_cpu before the recording sees it."""

    def __init__(self, batch_first, masks):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=batch_first)
        self.batch_first, self.masks = batch_first, masks

    def forward(self, x, padding):
        keys = padding == 0 if self.masks in ("padding", "both") else None
        s = x.shape[1 if self.batch_first else 0]
        causal = (torch.ones(s, s, dtype=torch.bool).triu(1) if self.masks == "both"
                  else None)
        return self.attn(x, x, x, key_padding_mask=keys, attn_mask=causal,
                         need_weights=False)[0]


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("masks", ["none", "padding", "both"])
def test_torch_multihead_attention_is_fused(batch_first, masks):
    torch.manual_seed(0)
    module = _TorchMha(batch_first, masks).eval()

    def args(b, s, pad):
        return _padded(b, s, pad, batch_first)

    names = ["x", "padding"]
    dims = {"x": {0: "b", 1: "s"} if batch_first else {0: "s", 1: "b"},
            "padding": {0: "b", 1: "s"}}
    prog = pt2onnx.export(module, args(2, 6, 2), None, input_names=names, dynamic_shapes=dims,
                          optimize="onnxruntime")
    ops = _ops(prog)
    assert ops["MultiHeadAttention"] == 1 and ops["Softmax"] == 0, ops
    # No row with every key padded: eager's no_grad fast path (_native_multi_head_attention)
    # gives NaN there and its Python path (what every exporter captures) 0.
    cases = [args(2, 6, 2), args(1, 1, 0), args(3, 4, 3), args(2, 9, 0)]
    _check(prog, module, cases, names, tol=2e-5)


@pytest.mark.parametrize("same", [True, False])
def test_causal_attention_is_unidirectional_where_queries_are_the_keys(same):
    # onnxruntime's unidirectional is sdpa's top-left causal mask only where the queries
    # are as many as the keys: one named dim for both, or the standard ops.
    module = _Causal()

    def args(b, s, t=None):
        t = s if t is None else t
        return torch.randn(b, 4, s, 8), torch.randn(b, 4, t, 8), torch.randn(b, 4, t, 8)

    names = ["q", "k", "v"]
    kv = "s" if same else "t"
    dims = {"q": {0: "b", 2: "s"}, "k": {0: "b", 2: kv}, "v": {0: "b", 2: kv}}
    prog = pt2onnx.export(module, args(2, 5), None, input_names=names, dynamic_shapes=dims,
                          optimize="onnxruntime")
    ops = _ops(prog)
    assert ops["MultiHeadAttention"] == (1 if same else 0) and ops["Softmax"] == 1 - same
    if same:
        node = next(n for n in prog.model.graph if n.op_type == "MultiHeadAttention")
        assert node.attributes["unidirectional"].as_int() == 1
    cases = [args(2, 5), args(1, 1), args(3, 9)] + ([] if same else [args(2, 3, 6)])
    _check(prog, module, cases, names)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_transformers_decoders_fuse_their_causal_attention(name):
    # Without a padding mask transformers calls sdpa with is_causal=True.
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    torch.manual_seed(0)
    if name == "llama":
        inner = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
            intermediate_size=128, vocab_size=100))
    else:
        inner = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_embd=64, n_layer=2, n_head=4, vocab_size=100, bos_token_id=0, eos_token_id=1))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner.eval()

        def forward(self, ids):
            return self.inner(input_ids=ids, use_cache=False).logits

    module = Decoder().eval()
    prog = pt2onnx.export(module, (torch.randint(0, 100, (2, 7)),), None, input_names=["ids"],
                          dynamic_shapes={"ids": {0: "b", 1: "s"}}, optimize="onnxruntime")
    ops = _ops(prog)
    assert ops["MultiHeadAttention"] == 2 and ops["Softmax"] == 0
    _check(prog, module, [(torch.randint(0, 100, (b, s)),) for b, s in [(2, 7), (1, 1), (3, 12)]],
           ["ids"])


def test_float16_attention_is_fused_and_close():
    module = _Sdpa()
    args = (torch.randn(2, 4, 5, 8).half(), torch.randn(2, 4, 5, 8).half(),
            torch.randn(2, 4, 5, 8).half(), _mask("bool", 2, 5, 5))
    prog = pt2onnx.export(module, args, None, input_names=["q", "k", "v", "mask"],
                          optimize="onnxruntime")
    assert _ops(prog)["MultiHeadAttention"] == 1
    _check(prog, module, [args], ["q", "k", "v", "mask"], tol=3e-3)


def test_optimize_takes_true_false_or_onnxruntime():
    with pytest.raises(InvalidInputError, match="optimize='tensorrt'.*onnxruntime"):
        pt2onnx.export(nn.ReLU(), (torch.randn(2),), None, optimize="tensorrt")


def test_cli_optimize_onnxruntime(tmp_path, monkeypatch, capsys):
    import onnx

    from pt2onnx.cli import main

    (tmp_path / "attn.py").write_text(
        "import torch\nimport torch.nn.functional as F\n\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, q, k, v):\n"
        "        return F.scaled_dot_product_attention(q, k, v)\n\n"
        "def make():\n    return M()\n")
    monkeypatch.chdir(tmp_path)
    shape = ["--input", "q:1x2x4x8", "--input", "k:1x2x4x8", "--input", "v:1x2x4x8"]
    assert main(["export", "attn.py:make", *shape, "-o", "a.onnx", "-q",
                 "--optimize", "onnxruntime"]) == 0
    assert main(["export", "attn.py:make", *shape, "-o", "b.onnx", "-q"]) == 0
    fused = {n.op_type for n in onnx.load(str(tmp_path / "a.onnx")).graph.node}
    plain = {n.op_type for n in onnx.load(str(tmp_path / "b.onnx")).graph.node}
    assert "MultiHeadAttention" in fused and "MultiHeadAttention" not in plain
    with pytest.raises(SystemExit):
        main(["export", "attn.py:make", *shape, "-o", "c.onnx", "--optimize", "fast"])
    assert "not one of standard, onnxruntime or none" in capsys.readouterr().err


def _hf_encoders():
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, vocab_size=100)
    return {
        "bert": lambda: transformers.BertModel(transformers.BertConfig(**small)),
        "distilbert": lambda: transformers.DistilBertModel(transformers.DistilBertConfig(
            vocab_size=100, dim=64, n_layers=2, n_heads=4, hidden_dim=128)),
        # causal and padding in one 4-D mask (not is_causal): fused with it as the bias
        "clip_text": lambda: transformers.CLIPTextModel(transformers.CLIPTextConfig(
            **small, bos_token_id=0, eos_token_id=1)),
        # its relative position bias, one per head, plus the padding
        "t5_encoder": lambda: transformers.T5EncoderModel(transformers.T5Config(
            vocab_size=100, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)),
    }


@pytest.mark.parametrize("name", ["bert", "distilbert", "clip_text", "t5_encoder"])
def test_transformers_encoders_fuse_their_attention_and_match_eager(name):
    torch.manual_seed(0)
    inner = _hf_encoders()[name]().eval()

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, ids, mask):
            return self.inner(input_ids=ids, attention_mask=mask).last_hidden_state

    def args(b, s, pad):
        mask = torch.ones(b, s, dtype=torch.int64)
        if pad:
            mask[-1, s - pad:] = 0
        return torch.randint(2, 100, (b, s)), mask

    module = Encoder().eval()
    names = ["ids", "mask"]
    prog = pt2onnx.export(module, args(2, 9, 3), None, input_names=names,
                          dynamic_shapes={"ids": {0: "b", 1: "s"}, "mask": {0: "b", 1: "s"}},
                          optimize="onnxruntime")
    assert _ops(prog)["MultiHeadAttention"] == 2
    _check(prog, module, [args(2, 9, 3), args(1, 1, 0), args(3, 5, 5), args(2, 14, 0)], names,
           tol=1e-5)
