"""Scaled dot-product attention."""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, dtype_of, onnx_dtype, torch_dtype, translation
from pt2onnx.rules._common import aten, present, rank

# The key of a translated sdpa output's meta that passes/ort_attention.py reads: a dict
# of the call's q, k, v, mask (or None) and scale, for a non-causal attention without
# dropout.
SDPA_META = "pt2onnx.sdpa"


def _dim(x: ir.Value, i: int) -> Any:
    assert x.shape is not None
    return x.shape[i]


@translation(aten.scaled_dot_product_attention.default)
def sdpa(g: RuleContext, q: ir.Value, k: ir.Value, v: ir.Value, attn_mask: ir.Value | None = None,
         dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
         *, enable_gqa: bool = False) -> ir.Value:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor"""
    if q.dtype == ir.DataType.BFLOAT16:
        # torch's CPU kernels accumulate bfloat16 attention in float32; so does the file
        # (op by op in bfloat16 it was 13x further from a float64 reference than eager).
        f32 = ir.DataType.FLOAT
        mask = attn_mask if attn_mask is None or attn_mask.dtype == ir.DataType.BOOL else (
            g.cast(attn_mask, f32))
        wq, wk, wv = (g.cast(t, f32) for t in (q, k, v))
        wq.shape, wk.shape, wv.shape = q.shape, k.shape, v.shape
        out = sdpa(g, wq, wk, wv, mask, dropout_p, is_causal, scale, enable_gqa=enable_gqa)
        return g.cast(out, ir.DataType.BFLOAT16)
    scores = _scores(g, q, k, attn_mask, is_causal, scale, enable_gqa)
    out = g.op.MatMul(g.op.Softmax(scores, axis=-1), _gqa_v(g, q, v, enable_gqa))
    if attn_mask is not None:
        out = _zero_masked_rows(g, _hidden_rows(g, scores, attn_mask, is_causal, q), out, q)
    if not dropout_p and not enable_gqa:
        _note(out, q, k, v, attn_mask, scale, is_causal)
    return out


def _same_dim(a: Any, b: Any) -> bool:
    """Equal at every size: the same int, or the same named dim (not an unknown one)."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return getattr(a, "value", None) is not None and a.value == getattr(b, "value", None)


def _note(out: ir.Value, q: ir.Value, k: ir.Value, v: ir.Value, attn_mask: ir.Value | None,
          scale: float | None, is_causal: bool) -> None:
    """What passes/ort_attention.py reads to write onnxruntime's MultiHeadAttention
    instead (optimize="onnxruntime"), for a call without dropout or grouped heads; the
    masked-row Where stays. A causal call only without a mask and where the queries are
    the keys' length at every size (one dim, or equal ints): the op's ``unidirectional``
    is sdpa's top-left causal mask there, and neither top-left nor bottom-right where
    they differ (onnxruntime 1.31, CPU)."""
    head = _dim(q, -1)
    if is_causal and (attn_mask is not None or rank(q) != 4 or rank(k) != 4
                      or not _same_dim(_dim(q, 2), _dim(k, 2))):
        return
    if scale is not None or isinstance(head, int):
        out.meta[SDPA_META] = {"q": q, "k": k, "v": v, "mask": attn_mask, "scale": float(
            scale if scale is not None else 1.0 / math.sqrt(head)), "causal": is_causal}


@translation(present("_scaled_dot_product_flash_attention_for_cpu.default"))
def sdpa_flash_cpu(g: RuleContext, q: ir.Value, k: ir.Value, v: ir.Value,
                   dropout_p: float = 0.0, is_causal: bool = False, *,
                   attn_mask: ir.Value | None = None,
                   scale: float | None = None) -> tuple[ir.Value, ir.Value]:
    """_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, float dropout_p=0.0, bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) -> (Tensor output, Tensor logsumexp)"""
    scores = _scores(g, q, k, attn_mask, is_causal, scale, False)
    out = g.op.MatMul(g.op.Softmax(scores, axis=-1), v)
    if attn_mask is not None:
        out = _zero_masked_rows(g, _hidden_rows(g, scores, attn_mask, is_causal, q), out, q)
    if not dropout_p:
        # sdpa reaches the graph as this op where torch decomposed it first: in
        # torch.export's programs, and inside nn.MultiheadAttention's forward
        # (F.multi_head_attention_forward calls sdpa below the recording's function mode).
        _note(out, q, k, v, attn_mask, scale, is_causal)
    lse_dtype = onnx_dtype(g.meta[1].dtype)
    lse = g.op.ReduceLogSumExp(g.cast(scores, lse_dtype), g.const([-1]), keepdims=0)
    return out, lse


def _zero_masked_rows(g: RuleContext, hidden: ir.Value, out: ir.Value, q: ir.Value) -> ir.Value:
    """torch's sdpa returns 0 for a query whose mask hides every key (softmax over all
    -inf would be NaN). A left-padded batch has such rows, and a NaN there reaches the
    next layer's keys and values, where even a zero attention weight keeps it."""
    # The scores' dtype is q's, which is not the node's output dtype where bfloat16
    # attention is computed in float32 (g.dtype would be bfloat16 there).
    dtype = dtype_of(q)
    return g.op.Where(hidden, g.const(0.0, dtype), out)


def _hidden_rows(g: RuleContext, scores: ir.Value, attn_mask: ir.Value, is_causal: bool,
                 q: ir.Value) -> ir.Value:
    """The rows whose every key is hidden, shaped [..., Lq, 1] to broadcast against the
    output. Read from the mask alone where that is the same answer: the mask is shared
    by every layer of a model (usually [B, 1, Lq, Lk]), so the optimizer's CSE computes
    it once instead of once per layer over the [B, H, Lq, Lk] scores.

    A bool mask hides a row iff no key in it is True. A float mask hides it iff every
    entry is -inf: that is when eager returns 0. Eager does not zero a row of the dtype's
    lowest value (transformers' convention): float32 and bfloat16 give the mean of the
    values (every score rounds to the same number), float16 the unmasked attention (its
    kernel adds the mask in float32, a mere shift). Both tests pick eager's rows for
    finite scores whose sum with a finite mask entry does not overflow. With is_causal
    as well (torch before 2.14 accepts both) the causal part is not in the mask, and
    the scores decide, as before."""
    if is_causal:
        return _row_max_is_lowest(g, scores, dtype_of(q))
    if attn_mask.dtype == ir.DataType.BOOL:
        return g.op.Not(_row_max(g, attn_mask, g.op.Cast(attn_mask, to=ir.DataType.INT32)))
    mask = g.cast(attn_mask, dtype_of(q))  # the scores' own Cast: CSE shares it
    return g.op.LessOrEqual(_row_max(g, mask, mask), g.const(-math.inf, dtype_of(q)))


def _row_max_is_lowest(g: RuleContext, scores: ir.Value, dtype: ir.DataType) -> ir.Value:
    return g.op.LessOrEqual(_row_max(g, scores, scores),  # -inf or the lowest
                            g.const(_lowest(dtype), dtype))


def _row_max(g: RuleContext, x: ir.Value, order: ir.Value) -> ir.Value:
    """x's entry at the first maximum of ``order`` over the last axis, keeping the axis.

    ArgMax + GatherElements, not ReduceMax: onnxruntime's symbolic shape inference
    (which its transformer optimizer needs to fuse SkipLayerNorm) cannot infer a
    ReduceMax whose axes are an input (opset 18+), and stops there."""
    return g.op.GatherElements(x, g.op.ArgMax(order, axis=-1, keepdims=1), axis=-1)


def _gqa_v(g: RuleContext, q: ir.Value, v: ir.Value, enable_gqa: bool) -> ir.Value:
    return _repeat_kv(g, v, _dim(q, 1)) if enable_gqa and rank(q) == 4 else v


def _scores(g: RuleContext, q: ir.Value, k: ir.Value, attn_mask: ir.Value | None,
            is_causal: bool, scale: float | None, enable_gqa: bool) -> ir.Value:
    """scale * q @ k^T plus the causal and explicit masks (the softmax's input)."""
    dtype = q.dtype
    assert dtype is not None
    r = rank(q)
    head_dim = _dim(q, -1)
    if scale is None:
        if not isinstance(head_dim, int):
            raise NotImplementedError("sdpa with a symbolic head size and no scale")
        scale = 1.0 / math.sqrt(head_dim)
    if enable_gqa and r == 4:
        k = _repeat_kv(g, k, _dim(q, 1))
    rk = rank(k)  # k may have more batch dimensions than q; MatMul broadcasts them
    perm = [*list(range(rk - 2)), rk - 1, rk - 2]
    kt = g.op.Transpose(k, perm=perm)
    if dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16):
        # Scaling q and k by sqrt(scale) each keeps the product in range for half types.
        s = g.const(math.sqrt(scale), dtype)
        scores = g.op.MatMul(g.op.Mul(q, s), g.op.Mul(kt, s))
    else:
        scores = g.op.MatMul(g.op.Mul(q, g.const(scale, dtype)), kt)
    if is_causal:
        scores = g.op.Add(scores, _causal_bias(g, q, k, dtype))
    if attn_mask is not None:
        if attn_mask.dtype == ir.DataType.BOOL:
            # Hidden keys get the dtype's lowest value, not -inf: the same softmax (exp of
            # it is 0 beside any real score), and no infinity in the activations, which
            # onnxruntime's static quantizer would calibrate to an infinite scale.
            scores = g.op.Where(attn_mask, scores, g.const(_lowest(dtype), dtype))
        else:
            scores = g.op.Add(scores, g.cast(attn_mask, dtype))
    return scores


def _lowest(dtype: ir.DataType) -> float:
    return float(torch.finfo(torch_dtype(dtype)).min)


def _causal_bias(g: RuleContext, q: ir.Value, k: ir.Value, dtype: ir.DataType) -> ir.Value:
    lq, lk = _dim(q, -2), _dim(k, -2)
    if isinstance(lq, int) and isinstance(lk, int):
        mask = torch.ones(lq, lk, dtype=torch.bool).tril()
        bias = torch.zeros(lq, lk, dtype=torch_dtype(dtype)).masked_fill(~mask, -math.inf)
        return g.const(bias)
    shape = g.op.Concat(
        g.op.Slice(g.op.Shape(q), g.const([-2]), g.const([-1])),
        g.op.Slice(g.op.Shape(k), g.const([-2]), g.const([-1])), axis=0,
    )
    ones = g.op.ConstantOfShape(shape, value=ir.tensor([1.0], dtype=dtype))
    lower = g.op.Trilu(ones, upper=0)
    return g.op.Where(g.op.Cast(lower, to=ir.DataType.BOOL), g.const(0.0, dtype),
                      g.const(-math.inf, dtype))


def _repeat_kv(g: RuleContext, x: ir.Value, q_heads: Any) -> ir.Value:
    kv_heads = _dim(x, 1)
    if kv_heads == q_heads:
        return x
    n_rep = q_heads // kv_heads
    _b, _, s, _d = x.shape  # type: ignore[misc]
    expanded = g.op.Expand(g.op.Unsqueeze(x, g.const([2])),
                           g.const([1, 1, n_rep, 1, 1]))
    # [B, Hkv, n_rep, S, D] -> [B, H, S, D]; a 0 in Reshape copies the input's dim at that
    # index, which for dims 2 and 3 of the rank-5 tensor would be n_rep and S.
    if isinstance(s, int) and isinstance(_d, int):
        shape = g.const([0, q_heads, s, _d])
    else:
        x_shape = g.op.Shape(x)
        shape = g.op.Concat(g.op.Slice(x_shape, g.const([0]), g.const([1])), g.const([q_heads]),
                            g.op.Slice(x_shape, g.const([2]), g.const([4])), axis=0)
    out = g.op.Reshape(expanded, shape)
    out.dtype, out.shape = x.dtype, ir.Shape([_b, q_heads, s, _d])  # sdpa reads the rank
    return out


# The fused ONNX Attention op (opset 23). Measured against the decomposition above with
# onnxruntime 1.31, CPU, one thread, float32, medians of 300 interleaved runs, B=1, H=12,
# D=64 (fused/decomposed): S=128: 0.99-1.00 (no mask, causal, bool or float mask),
# 0.96 (GQA 12/4); S=512: 0.99 (no mask), 0.85 (causal), 0.86 (bool mask), 0.87 (float
# mask), 0.83 (GQA). Whole models at 1x128 tokens (GPT-2 small, a ~100M Llama) are
# within noise (0.99-1.01; an A/A control of two identical sessions: 1.01). Outputs
# agree with the decomposition to the last bit in all these cases. Never slower, so it
# is used wherever it fits (in float32); details in docs/architecture.md, "Fused attention".
# float32 only: onnxruntime 1.31's CPU Attention in float16 was 10x further from a float64
# reference than the decomposition (max abs 0.04-0.06 vs 0.003-0.01 on torch's OpInfo
# samples), with softmax_precision=FLOAT too; bfloat16 and float64 were not timed.
_FUSED_DTYPES = (ir.DataType.FLOAT,)


@translation(aten.scaled_dot_product_attention.default, since=23)
def sdpa23(g: RuleContext, q: ir.Value, k: ir.Value, v: ir.Value, attn_mask: ir.Value | None = None,
           dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
           *, enable_gqa: bool = False) -> ir.Value:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor"""
    if not _fits_attention(q, k, v, attn_mask, dropout_p):
        return sdpa(g, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa=enable_gqa)
    # ONNX Attention: a bool mask is True = attend, a float mask is added to the scores
    # (both as in torch); is_causal is j <= i + past length, with no past_key that is
    # torch's upper-left tril, also for S_q != S_kv; kv heads may divide the q heads;
    # the default scale is 1/sqrt(head size), as in torch.
    inputs = (q, k, v) if attn_mask is None else (q, k, v, attn_mask)
    return g.op.Attention(*inputs, is_causal=bool(is_causal),
                          scale=float(scale) if scale is not None else None)


def _fits_attention(q: ir.Value, k: ir.Value, v: ir.Value, attn_mask: ir.Value | None,
                    dropout_p: float) -> bool:
    """Whether ONNX Attention computes exactly this sdpa call, in shapes onnxruntime accepts."""
    if dropout_p != 0.0 or q.dtype not in _FUSED_DTYPES or not q.dtype == k.dtype == v.dtype:
        return False
    shapes = [x.shape for x in (q, k, v)]
    if any(s is None or len(s) != 4 for s in shapes):
        return False
    (bq, hq, sq, dq), (bk, hk, sk, dk), (bv, hv, sv, _dv) = shapes  # type: ignore[misc]
    if not (_same(bq, bk, bv) and _same(hk, hv) and _same(sk, sv) and _same(dq, dk)):
        return False  # torch broadcasts batch dimensions; Attention does not
    if not (isinstance(hq, int) and isinstance(hk, int) and hk > 0 and hq % hk == 0):
        return False
    if attn_mask is not None:
        m = attn_mask.shape
        if attn_mask.dtype not in (ir.DataType.BOOL, q.dtype) or m is None or not 2 <= len(m) <= 4:
            return False
        # onnxruntime 1.31 rejects a mask whose last two dims are not (S_q, S_kv),
        # e.g. a [B, 1, 1, S_kv] padding mask, although ONNX allows broadcasting.
        if not (_same(m[-2], sq) and _same(m[-1], sk)):
            return False
        if len(m) == 4 and not (m[0] in (1, bq) and m[1] in (1, hq)):
            return False
        if len(m) == 3 and m[0] not in (1, hq):
            return False
    return True


def _same(*dims: Any) -> bool:
    """Whether the dims are known to be equal: equal ints or the same named symbol."""
    first = dims[0]
    if not isinstance(first, int) and getattr(first, "value", None) is None:
        return False
    return all(d == first for d in dims[1:])
