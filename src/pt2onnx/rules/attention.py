"""Scaled dot-product attention."""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx._builder import RuleContext, torch_dtype
from pt2onnx._registry import translation
from pt2onnx.rules._common import aten, rank


def _dim(x: ir.Value, i: int) -> Any:
    assert x.shape is not None
    return x.shape[i]


@translation(aten.scaled_dot_product_attention.default)
def sdpa(g: RuleContext, q: ir.Value, k: ir.Value, v: ir.Value, attn_mask: ir.Value | None = None,
         dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
         *, enable_gqa: bool = False) -> ir.Value:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor"""
    dtype = q.dtype
    assert dtype is not None
    r = rank(q)
    head_dim = _dim(q, -1)
    if scale is None:
        if not isinstance(head_dim, int):
            raise NotImplementedError("sdpa with a symbolic head size and no scale")
        scale = 1.0 / math.sqrt(head_dim)
    if enable_gqa and r == 4:
        k, v = _repeat_kv(g, k, _dim(q, 1)), _repeat_kv(g, v, _dim(q, 1))
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
            bias = g.op.Where(attn_mask, g.const(0.0, dtype), g.const(-math.inf, dtype))
        else:
            bias = g.cast(attn_mask, dtype)
        scores = g.op.Add(scores, bias)
    return g.op.MatMul(g.op.Softmax(scores, axis=-1), v)


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
    return g.op.Reshape(expanded, g.const([0, q_heads, -1, 0] if not isinstance(s, int) else
                                          [0, q_heads, s, 0]))
