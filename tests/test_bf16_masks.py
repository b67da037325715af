"""Attention masks in bfloat16 and float16 (issue 39): the files load in onnxruntime's
CPU provider and match eager.

bfloat16 attention computes in float32 (as torch's CPU kernel accumulates); the rule
then zeroed fully masked rows comparing float32 scores with a bfloat16 constant, a
``LessOrEqual`` onnxruntime refused to load ("Type parameter (T) ... bound to different
types"), so every transformers model with an attention mask failed in bfloat16.
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import pt2onnx

# bfloat16 keeps 8 bits of mantissa (a relative step of 2**-8), float16 11: the file
# and eager round at different points, so they may differ by a few steps.
TOL = {torch.bfloat16: (2e-2, 2e-2), torch.float16: (4e-3, 4e-3)}
DTYPES = [torch.bfloat16, torch.float16]


class Attend(torch.nn.Module):
    """sdpa in ``dtype`` with float32 at the boundary (onnxruntime's Python API takes no
    bfloat16 arrays); ``additive`` turns the bool mask into a float one."""

    def __init__(self, dtype: torch.dtype, additive: bool = False) -> None:
        super().__init__()
        self.dtype, self.additive = dtype, additive

    def forward(self, q, k, v, keep):
        q, k, v = (t.to(self.dtype) for t in (q, k, v))
        mask = keep
        if self.additive:
            mask = torch.zeros(keep.shape, dtype=self.dtype).masked_fill(~keep, float("-inf"))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out.float()


def _inputs(batch: int, seq: int, padding: bool) -> tuple[torch.Tensor, ...]:
    q, k, v = (torch.randn(batch, 2, seq, 8) for _ in range(3))
    if padding:  # [B, 1, 1, S]: the last key of the last sample hidden
        keep = torch.ones(batch, 1, 1, seq, dtype=torch.bool)
        keep[-1, ..., -1] = False
    else:  # [B, 1, S, S]: the first query row of the first sample sees no key at all
        keep = torch.rand(batch, 1, seq, seq) > 0.3
        keep[0, 0, 0, :] = False
    return q, k, v, keep


def _check(model: torch.nn.Module, padding: bool, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    b, s = Dim("b"), Dim("s")
    qkv = {0: b, 2: s}
    mask = {0: b, 3: s} if padding else {0: b, 2: s, 3: s}
    prog = pt2onnx.export(model, _inputs(2, 5, padding), dynamic_shapes=(qkv, qkv, qkv, mask))
    atol, rtol = TOL[dtype]
    for batch, seq in ((2, 5), (1, 1), (3, 7)):
        args = _inputs(batch, seq, padding)
        got = torch.from_numpy(prog.run(*args)[0])
        torch.testing.assert_close(got, model(*args), atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("padding", [True, False], ids=["padding", "square"])
def test_sdpa_with_a_bool_mask(dtype, padding):
    _check(Attend(dtype), padding, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("padding", [True, False], ids=["padding", "square"])
def test_sdpa_with_an_additive_mask(dtype, padding):
    _check(Attend(dtype, additive=True), padding, dtype)


transformers = pytest.importorskip("transformers", reason="transformers is not installed")
TINY = dict(vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _bert():
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=64, **TINY)
    return transformers.BertModel(cfg, add_pooling_layer=False), {}


def _llama():
    cfg = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=64,
                                   max_position_embeddings=64, **TINY)
    return transformers.LlamaModel(cfg), {"use_cache": False}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("factory", [_bert, _llama], ids=["bert", "llama"])
def test_transformers_with_a_padding_mask(factory, dtype):
    """The whole model in ``dtype`` (weights and compute), a left-padded batch."""
    torch.manual_seed(0)
    model, extra = factory()
    model = model.to(dtype).eval()
    ids = torch.randint(3, 128, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.int64)
    mask[1, :2] = 0
    prog = pt2onnx.export(model, (), kwargs={"input_ids": ids, "attention_mask": mask, **extra})
    atol, rtol = TOL[dtype]
    result = prog.verify(input_ids=ids, attention_mask=mask, **extra, atol=atol, rtol=rtol)
    assert result.ok, str(result)
