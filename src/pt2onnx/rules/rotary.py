"""pt2onnx::rotary (a rotary position embedding) -> com.microsoft RotaryEmbedding.

export-llm's fused decoders (see ``pt2onnx/llm/_attention.py``) rotate the query and
key inside GroupQueryAttention where they can. Where the rotation must stay outside it
(HunYuan normalises the rotated query and key, and the attention reads the normalised
ones; onnxruntime's GroupQueryAttention rotates only head sizes in multiples of 16),
the model's ``apply_rotary_pos_emb`` is captured as this op, one per query and key:

- ``x`` ``[B, N, S, D]``, ``position_ids`` ``[B, S]``, ``cos_cache``/``sin_cache``
  ``[positions, R / 2]`` (``R <= D``): the first ``R`` dims of ``x[b, :, s]`` turned
  by the angles of row ``position_ids[b, s]``, the rest kept; the halves' layout
  (transformers' usual ``x * cos + rotate_half(x) * sin``) or, with ``interleaved``,
  each pair ``(x[2i], x[2i + 1])`` (GPT-J's, ERNIE 4.5's). ``rules/gqa.rotate`` is the
  same turn.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.frontends import define_custom_op
from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules.gqa import MS_DOMAIN, rotate

_SCHEMA = ("rotary(Tensor x, Tensor position_ids, Tensor cos_cache, Tensor sin_cache, "
           "bool interleaved=False) -> Tensor")


def reference(x: torch.Tensor, position_ids: torch.Tensor, cos_cache: torch.Tensor,
              sin_cache: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """``x`` ``[B, N, S, D]`` rotated at ``position_ids`` ``[B, S]``."""
    cos, sin = cos_cache[position_ids][:, None], sin_cache[position_ids][:, None]
    return rotate(x, cos, sin, interleaved)


def _fake(x: torch.Tensor, position_ids: torch.Tensor, cos_cache: torch.Tensor,
          sin_cache: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    return torch.empty_like(x)


def define_ops() -> None:
    """Defines ``pt2onnx::rotary`` once per process."""
    define_custom_op(_SCHEMA, reference, _fake)


define_ops()  # the op the rule below is keyed by


@translation(torch.ops.pt2onnx.rotary.default)
def rotary(g: RuleContext, x: ir.Value, position_ids: ir.Value, cos_cache: ir.Value,
           sin_cache: ir.Value, interleaved: bool = False) -> ir.Value:
    """pt2onnx::rotary(Tensor x, Tensor position_ids, Tensor cos_cache, Tensor sin_cache, bool interleaved=False) -> Tensor"""
    attrs: dict[str, Any] = {"interleaved": int(bool(interleaved))}
    heads = x.shape[1] if x.shape is not None and x.shape.rank() == 4 else None
    half = cos_cache.shape[1] if cos_cache.shape is not None else None
    size = x.shape[3] if heads is not None and x.shape is not None else None
    if not isinstance(half, int) or not isinstance(size, int) or not isinstance(heads, int):
        raise NotImplementedError("pt2onnx::rotary needs a static head count, head size "
                                  "and rotary table width")
    if 2 * half != size:  # a partial rotary: the first 2 * half dims turned
        attrs.update(rotary_embedding_dim=2 * half, num_heads=heads)
    out = g.op.RotaryEmbedding(x, g.cast(position_ids, ir.DataType.INT64), cos_cache,
                               sin_cache, _domain=MS_DOMAIN, **attrs)
    out.dtype, out.shape = x.dtype, x.shape
    return out
