"""pt2onnx::gqa (attention over a key/value cache) -> com.microsoft GroupQueryAttention.

export-llm's fused attention (see ``pt2onnx/llm/_attention.py``) captures each
decoder layer's attention as this one op: the query, the new keys and values, the
past cache and the attention mask in; the attention output and the grown cache out.
Its eager implementation states what onnxruntime's ``GroupQueryAttention`` computes:

- the cache grows by the new keys and values (``present = cat(past, new)``);
- each batch row holds ``L = attention_mask.sum()`` tokens (past and new, no gaps):
  query ``i`` of ``S`` sits at position ``L - S + i`` and sees the keys at positions
  ``<= `` its own, and with ``local_window > 0`` only the ``local_window`` latest of
  them (itself included);
- with ``cos_cache``/``sin_cache`` (``[positions, R / 2]``, ``R <= D``), the first
  ``R`` dims of the new queries and keys are first rotated at their positions, the
  rest kept (a partial rotary, as Phi's and Nemotron's): ``x * cos + rotate_half(x) *
  sin`` with the halves' tables repeated (transformers' usual rotary), or with
  ``interleaved`` each pair ``(x[2i], x[2i + 1])`` turned by angle ``i`` (GPT-J's and
  ERNIE 4.5's; the op's ``rotary_interleaved``);
- scores ``q·k * scale``, then ``softcap * tanh(scores / softcap)`` when
  ``softcap > 0``; query head ``h`` reads key/value head ``h // (heads / kv_heads)``.

The attention mask is read as lengths, as onnxruntime-genai's builder reads it: a
left-padded batch row (zeros before its tokens) is not what this op computes.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.frontends import define_custom_op
from pt2onnx.rule_api import RuleContext, translation

MS_DOMAIN = "com.microsoft"

_SCHEMA = ("gqa(Tensor query, Tensor key, Tensor value, Tensor past_key, Tensor past_value, "
           "Tensor attention_mask, int num_heads, int kv_num_heads, float scale, "
           "int local_window, float softcap, Tensor? cos_cache=None, Tensor? sin_cache=None, "
           "bool interleaved=False) -> (Tensor, Tensor, Tensor)")


def reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              past_key: torch.Tensor, past_value: torch.Tensor, attention_mask: torch.Tensor,
              num_heads: int, kv_num_heads: int, scale: float, local_window: int,
              softcap: float, cos_cache: torch.Tensor | None = None,
              sin_cache: torch.Tensor | None = None, interleaved: bool = False,
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """query ``[B, H, S, D]``, key/value ``[B, Hkv, S, D]``, past ``[B, Hkv, P, D]`` ->
    (output ``[B, S, H, D]``, present key, present value ``[B, Hkv, P + S, D]``)."""
    seq = query.shape[2]
    lengths = attention_mask.to(torch.int64).sum(dim=1)
    q_pos = lengths[:, None] - seq + torch.arange(seq)  # [B, S]
    if cos_cache is not None and sin_cache is not None:
        cos, sin = cos_cache[q_pos][:, None], sin_cache[q_pos][:, None]  # [B, 1, S, R / 2]
        query = rotate(query, cos, sin, interleaved)
        key = rotate(key, cos, sin, interleaved)
    present_key = torch.cat([past_key, key], dim=2)
    present_value = torch.cat([past_value, value], dim=2)
    total = present_key.shape[2]
    k_pos = torch.arange(total)
    seen = k_pos[None, None, :] <= q_pos[:, :, None]  # [B, S, T]
    if local_window > 0:
        seen &= k_pos[None, None, :] > q_pos[:, :, None] - local_window
    group = num_heads // kv_num_heads
    k = present_key.repeat_interleave(group, dim=1).float()
    v = present_value.repeat_interleave(group, dim=1).float()
    scores = query.float() @ k.transpose(2, 3) * scale
    if softcap > 0:
        scores = torch.tanh(scores / softcap) * softcap
    scores = scores.masked_fill(~seen[:, None], float("-inf"))
    out = (torch.softmax(scores, dim=-1) @ v).to(query.dtype)
    return out.transpose(1, 2).contiguous(), present_key, present_value


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            interleaved: bool) -> torch.Tensor:
    """``x``'s first ``R = 2 * cos.shape[-1]`` dims rotated, the rest as they are."""
    rot = 2 * cos.shape[-1]
    part, rest = x[..., :rot], x[..., rot:]
    if interleaved:
        even, odd = part[..., 0::2], part[..., 1::2]
        part = torch.stack([even * cos - odd * sin, odd * cos + even * sin],
                           dim=-1).flatten(-2)
    else:
        half = rot // 2
        first, second = part[..., :half], part[..., half:]
        part = torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)
    return torch.cat([part, rest], dim=-1)


def _fake(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
          past_key: torch.Tensor, past_value: torch.Tensor, attention_mask: torch.Tensor,
          num_heads: int, kv_num_heads: int, scale: float, local_window: int,
          softcap: float, cos_cache: torch.Tensor | None = None,
          sin_cache: torch.Tensor | None = None, interleaved: bool = False,
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b, h, s, _ = query.shape
    total = past_key.shape[2] + key.shape[2]
    return (query.new_empty(b, s, h, value.shape[3]),
            past_key.new_empty(b, past_key.shape[1], total, past_key.shape[3]),
            past_value.new_empty(b, past_value.shape[1], total, past_value.shape[3]))


def define_ops() -> None:
    """Defines ``pt2onnx::gqa`` once per process."""
    define_custom_op(_SCHEMA, reference, _fake)


define_ops()  # the op the rule below is keyed by


def _heads_last(g: RuleContext, x: ir.Value) -> ir.Value:
    """``[B, N, S, D]`` -> ``[B, S, N * D]``, GroupQueryAttention's layout. Where ``x``
    is the model's own split of such a value, passes/unsplit_heads.py reads that value
    instead."""
    return g.op.Reshape(g.op.Transpose(x, perm=[0, 2, 1, 3]), g.const([0, 0, -1]))


@translation(torch.ops.pt2onnx.gqa.default)
def gqa(g: RuleContext, query: ir.Value, key: ir.Value, value: ir.Value, past_key: ir.Value,
        past_value: ir.Value, attention_mask: ir.Value, num_heads: int, kv_num_heads: int,
        scale: float, local_window: int, softcap: float, cos_cache: ir.Value | None = None,
        sin_cache: ir.Value | None = None, interleaved: bool = False,
        ) -> tuple[ir.Value, ir.Value, ir.Value]:
    """pt2onnx::gqa(Tensor query, Tensor key, Tensor value, Tensor past_key, Tensor past_value, Tensor attention_mask, int num_heads, int kv_num_heads, float scale, int local_window, float softcap, Tensor? cos_cache=None, Tensor? sin_cache=None, bool interleaved=False) -> (Tensor, Tensor, Tensor)"""
    int32 = ir.DataType.INT32
    if g.opset >= 18:
        count = g.op.ReduceSum(attention_mask, g.const([1]), keepdims=0)
    else:
        count = g.op.ReduceSum(attention_mask, axes=[1], keepdims=0)
    seqlens_k = g.cast(g.op.Sub(count, g.const(1, attention_mask.dtype)), int32)
    total = g.cast(g.op.Squeeze(g.op.Shape(attention_mask, start=1, end=2), g.const([0])), int32)
    attrs: dict[str, Any] = {"num_heads": num_heads, "kv_num_heads": kv_num_heads,
                             "scale": float(scale)}
    if local_window > 0:
        attrs["local_window_size"] = int(local_window)
    if softcap > 0:
        attrs["softcap"] = float(softcap)
    rotary: list[ir.Value | None] = []
    if cos_cache is not None and sin_cache is not None:
        attrs.update(do_rotary=1, rotary_interleaved=int(bool(interleaved)))
        rotary = [cos_cache, sin_cache]
    out, present_key, present_value = g.op.GroupQueryAttention(
        _heads_last(g, query), _heads_last(g, key), _heads_last(g, value), past_key,
        past_value, seqlens_k, total, *rotary, _outputs=3, _domain=MS_DOMAIN, **attrs)
    b, _, s, d = query.shape if query.shape is not None else (None,) * 4
    out.dtype = present_key.dtype = present_value.dtype = query.dtype
    out.shape = ir.Shape([b, s, num_heads * d if isinstance(d, int) else None])
    out = g.op.Reshape(out, g.const([0, 0, num_heads, -1]))
    return out, present_key, present_value
