"""Decoders whose cache holds a convolution state beside the attention key/values (LFM2).

onnxruntime-genai runs them with the layout its model builder writes: the attention
layers ``i`` take ``past_key_values.{i}.key/.value`` and return ``present.{i}.key/.value``
as any decoder's, and the convolution layers ``j`` take ``past.{j}.conv`` and return
``present.{j}.conv``, ``[batch_size, channels, L - 1]``: the last ``L - 1`` inputs of the
layer's depthwise convolution of width ``L`` (zeros before the first token).
``genai_config.json`` names them (``past_conv_names``, ``present_conv_names``) and gives
the per-layer kinds (``layer_types``) and the state's length (``conv_cache_size``).

The wrapper puts the states into the transformers cache the model builds from its
config, with each convolution layer set to record its past, which makes the model
concatenate the state and the new inputs and convolve them (the same path for one new
token as for many, and no in-place update), and returns the last ``L - 1`` columns.

Qwen3.5's linear-attention layers ``j`` (gated delta rule) hold two states, as genai's
builder writes them: ``past.{j}.conv`` / ``present.{j}.conv`` ``[batch_size, conv_dim,
L - 1]`` (the depthwise convolution over the packed q/k/v projection, ``conv_dim = 2 *
key heads * key head size + value heads * value head size``) and ``past.{j}.recurrent``
/ ``present.{j}.recurrent`` ``[batch_size, value heads, key head size, value head
size]``; ``genai_config.json`` names them (``past_recurrent_names``,
``present_recurrent_names`` beside the conv names) and genai finds the layers from the
names. The recurrence runs as one scan over the tokens (see ``_delta``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from pt2onnx.llm import _conv, _delta, _families
from pt2onnx.llm._families import Layout

CONV = "conv"
LINEAR = "linear_attention"
# The states each kind of layer holds, in the order the graph takes them.
STATES = {CONV: ("conv",), LINEAR: ("conv", "recurrent")}


def is_hybrid(model_type: str) -> bool:
    return model_type in _families.HYBRID_KINDS


def layout(model: torch.nn.Module, config: Any, model_type: str) -> Layout:
    """The layout read from the config (the states all have the config's sizes)."""
    import inspect

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    kinds = tuple(str(k) for k in text.layer_types)
    heads = int(text.num_attention_heads)
    hidden = int(text.hidden_size)
    if LINEAR in kinds:
        key, value = int(text.linear_key_head_dim), int(text.linear_value_head_dim)
        k_heads, v_heads = int(text.linear_num_key_heads), int(text.linear_num_value_heads)
        channels, width = 2 * k_heads * key + v_heads * value, int(text.linear_conv_kernel_dim)
        recurrent: tuple[int, ...] = (v_heads, key, value)
    else:
        channels, width, recurrent = hidden, int(text.conv_L_cache), ()
    return Layout(
        model_type=model_type, genai_type=_families.GENAI_TYPES.get(model_type, model_type),
        num_layers=len(kinds), num_kv_heads=int(text.num_key_value_heads),
        head_size=int(getattr(text, "head_dim", None) or hidden // heads),
        num_attention_heads=heads, hidden_size=hidden, vocab_size=int(text.vocab_size),
        context_length=_families.context_length(text),
        uses_position_ids="position_ids" in inspect.signature(model.forward).parameters,
        known=True, layer_kinds=kinds, conv_channels=channels, conv_cache=width - 1,
        recurrent_shape=recurrent)


def state_names(layout: Layout, past: bool) -> list[str]:
    """The state inputs (``past``) or outputs, in layer order."""
    names: list[str] = []
    for i, kind in enumerate(layout.layer_kinds):
        if kind in STATES:
            names += [f"past.{i}.{s}" if past else f"present.{i}.{s}" for s in STATES[kind]]
        else:
            stem = f"past_key_values.{i}" if past else f"present.{i}"
            names += [f"{stem}.key", f"{stem}.value"]
    return names


def state_dims(layout: Layout, batch: Any, past: Any) -> list[dict[int, Any]]:
    dims: list[dict[int, Any]] = []
    for kind in layout.layer_kinds:
        dims += [{0: batch}] * len(STATES[kind]) if kind in STATES \
            else [{0: batch, 2: past}] * 2
    return dims


def state_example(layout: Layout, dtype: torch.dtype, past: int) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for kind in layout.layer_kinds:
        if kind in STATES:
            out.append(torch.randn(1, layout.conv_channels, layout.conv_cache, dtype=dtype))
            if kind == LINEAR:
                out.append(torch.randn(1, *layout.recurrent_shape, dtype=dtype) * 0.1)
        else:
            out += [torch.randn(1, layout.num_kv_heads, past, layout.head_size, dtype=dtype)
                    for _ in range(2)]
    return out


def genai_fields(layout: Layout, inputs: dict[str, Any], outputs: dict[str, Any],
                 decoder: dict[str, Any]) -> None:
    """The builder's genai_config.json entries for the states: LFM2's convolution
    states with the per-layer kinds and the state's length; Qwen3.5's convolution and
    recurrent states by their names only (genai finds the layers from them)."""
    inputs["past_conv_names"] = "past.%d.conv"
    outputs["present_conv_names"] = "present.%d.conv"
    if LINEAR in layout.layer_kinds:
        inputs["past_recurrent_names"] = "past.%d.recurrent"
        outputs["present_recurrent_names"] = "present.%d.recurrent"
        return
    decoder["layer_types"] = list(layout.layer_kinds)
    decoder["conv_cache_size"] = layout.conv_cache


class HybridDecoderWithCache(torch.nn.Module):
    """``(input_ids, attention_mask, [position_ids], states...)`` -> ``(logits,
    states...)``, the states in layer order (see ``state_names``)."""

    def __init__(self, model: torch.nn.Module, layout: Layout) -> None:
        super().__init__()
        self.model = model
        self.kinds = layout.layer_kinds
        self.conv_cache = layout.conv_cache

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                position_ids: torch.Tensor, past: list[torch.Tensor],
                ) -> tuple[torch.Tensor, ...]:
        return self.step(input_ids, attention_mask, past, position_ids=position_ids)

    def step(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             past: list[torch.Tensor], **extra: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cache = new_cache(self.model, self.kinds, self.conv_cache, list(past))
        with replaced(self.model):
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             **{_families.cache_keyword(self.model): cache}, use_cache=True,
                             **extra)
        return (out.logits, *states(cache, self.kinds, self.conv_cache,
                                    lambda i, layer: (layer.keys, layer.values)))


@contextlib.contextmanager
def replaced(model: torch.nn.Module) -> Iterator[None]:
    """The model's functions export-llm swaps while a hybrid wrapper runs: the gated
    delta rule as one loop (``_delta``), LFM2's convolution without padding (``_conv``)."""
    with _delta.replaced(model), _conv.valid_convolution(model):
        yield


def new_cache(model: torch.nn.Module, kinds: tuple[str, ...], conv_cache: int,
              states: list[torch.Tensor]) -> Any:
    """The cache the model builds from its config, holding the given states."""
    from transformers import DynamicCache

    config: Any = getattr(model, "config", None)
    cache = DynamicCache(config=config)
    it = iter(states)
    for i, kind in enumerate(kinds):
        layer: Any = cache.layers[i]
        if kind in STATES:
            state = next(it)
            # Recording its past, the layer concatenates the state and the new inputs
            # (for one token too) and keeps the whole; the width is the kernel's.
            layer.record_past = True
            layer.dtype, layer.device = state.dtype, state.device
            layer.conv_states[0] = state
            layer.conv_kernel_size[0] = conv_cache + 1
            layer.is_conv_states_initialized[0] = True
            layer.has_previous_state[0] = True
            if kind == LINEAR:
                # The layer copies the new state into this tensor: a copy of the
                # input, which stays unchanged.
                layer.recurrent_states[0] = next(it).clone()
                layer.is_recurrent_states_initialized[0] = True
        else:
            cache.update(next(it), next(it), i)
    return cache


def states(cache: Any, kinds: tuple[str, ...], conv_cache: int,
           key_values: Any) -> list[torch.Tensor]:
    """The states after a forward, in layer order; ``key_values(i, layer)`` gives an
    attention layer's present keys and values."""
    result: list[torch.Tensor] = []
    for i, kind in enumerate(kinds):
        layer: Any = cache.layers[i]
        if kind in STATES:
            result.append(layer.conv_states[0][..., -conv_cache:])
            if kind == LINEAR:
                result.append(layer.recurrent_states[0])
        else:
            result += list(key_values(i, layer))
    return result


class HybridDecoderWithCacheNoPositions(HybridDecoderWithCache):
    """For a forward that takes no position_ids."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,  # type: ignore[override]
                past: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return self.step(input_ids, attention_mask, past)


def wrap(model: torch.nn.Module, layout: Layout) -> HybridDecoderWithCache:
    cls = HybridDecoderWithCache if layout.uses_position_ids \
        else HybridDecoderWithCacheNoPositions
    return cls(model, layout)
