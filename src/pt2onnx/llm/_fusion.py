"""The fused decoder wrappers and their check: which wrapper export-llm captures when
onnxruntime's GroupQueryAttention is asked for, key/value-only decoders
(``_attention``) and the hybrids whose cache holds states beside the key/values
(``_hybrid``) alike."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from pt2onnx.llm import _attention, _hybrid, _wrapper
from pt2onnx.llm._families import Layout


def wrap(model: torch.nn.Module, layout: Layout, dtype: torch.dtype,
         rotary: bool = True, rotary_op: bool = True) -> _attention.FusedDecoderWithCache:
    """The fused wrapper; ``rotary_op``: a rotation the attention op can't take over
    is captured as ``pt2onnx::rotary`` (RotaryEmbedding), not as the model's ops."""
    tables = _attention.rotary_tables(model, layout, dtype) if rotary else None
    if layout.layer_kinds:
        return _fused_hybrid(model, layout, tables, rotary_op)
    cls = _attention.FusedDecoderWithCache if layout.uses_position_ids \
        else _attention.FusedDecoderWithCacheNoPositions
    return cls(model, layout.num_layers, tables, rotary_op)


@dataclasses.dataclass
class Checked:
    """What ``check`` found: ``reason`` None when the fused wrapper computes what the
    plain one does, otherwise why not; ``no_positions``: it does so without
    position_ids, which every layer's rotary inside the op leaves unread (the
    positions then come from the mask's lengths, as in the builder's graph);
    ``rotary_op``: a rotation left outside the op is ``pt2onnx::rotary``."""

    reason: str | None
    no_positions: bool = False
    rotary_op: bool = True


def check(model: torch.nn.Module, layout: Layout, dtype: torch.dtype) -> Checked:
    """Whether the fused wrapper computes what the plain one does on the capture's
    example: a first step with an empty past and then a step over a past."""
    try:
        _attention.setup()
    except Exception as exc:  # transformers without AttentionInterface
        return Checked(f"transformers has no attention interface to register with ({exc})")
    plain = _wrapper.wrap(model, layout)
    examples = [_wrapper.example(layout, dtype, seq=3, past=past) for past in (0, 5)]
    with torch.no_grad():
        wants = [plain(*args) for args in examples]
    if layout.uses_position_ids:
        # First without position_ids (two forwards fewer where that is the answer).
        bare = wrap(model, dataclasses.replace(layout, uses_position_ids=False), dtype)
        if bare.has_tables and _attention.agrees(
                bare, [a[:2] + a[3:] for a in examples], wants, dtype) is None \
                and bare.rotary_inside:
            return Checked(None, no_positions=True)
    reason = _attention.agrees(wrap(model, layout, dtype), examples, wants, dtype)
    if reason is None:
        return Checked(None)
    # The model's rotation may not be the table's at position_ids (then its own ops).
    plain_rotary = wrap(model, layout, dtype, rotary_op=False)
    if _attention.agrees(plain_rotary, examples, wants, dtype) is None:
        return Checked(None, rotary_op=False)
    return Checked(reason)


class FusedHybridDecoderWithCache(_attention.FusedDecoderWithCache):
    """As HybridDecoderWithCache, with each attention layer one GroupQueryAttention
    (its rotary inside where the tables fit, as for a key/value-only decoder)."""

    def __init__(self, model: torch.nn.Module, layout: Layout,
                 tables: _attention.Tables | None, rotary_op: bool = True) -> None:
        super().__init__(model, layout.num_layers, tables, rotary_op)
        self.kinds = layout.layer_kinds
        self.conv_cache = layout.conv_cache

    def _new_cache(self, past: list[torch.Tensor]) -> Any:
        return _hybrid.new_cache(self.model, self.kinds, self.conv_cache, list(past))

    def _attention_layers(self, cache: Any) -> list[Any]:
        return [cache.layers[i] for i, kind in enumerate(self.kinds)
                if kind not in _hybrid.STATES]

    def _context(self) -> Any:
        return _hybrid.replaced(self.model)

    def _states(self, cache: Any) -> list[torch.Tensor]:
        return _hybrid.states(cache, self.kinds, self.conv_cache, _attention.present)


class FusedHybridDecoderWithCacheNoPositions(FusedHybridDecoderWithCache):
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,  # type: ignore[override]
                past: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return self.step(input_ids, attention_mask, past)


def _fused_hybrid(model: torch.nn.Module, layout: Layout, tables: _attention.Tables | None,
                  rotary_op: bool) -> FusedHybridDecoderWithCache:
    cls = FusedHybridDecoderWithCache if layout.uses_position_ids \
        else FusedHybridDecoderWithCacheNoPositions
    return cls(model, layout, tables, rotary_op)
