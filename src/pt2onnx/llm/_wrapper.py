"""The module export-llm captures: flat tensors in, logits and the grown cache out."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from pt2onnx.errors import InvalidInputError
from pt2onnx.llm import _families
from pt2onnx.llm._families import Layout, cache_keyword

BATCH, SEQ, PAST, TOTAL = ("batch_size", "sequence_length", "past_sequence_length",
                           "total_sequence_length")


class DecoderWithCache(torch.nn.Module):
    """``(input_ids, attention_mask, position_ids, [past_key_values.{i}.key/.value...])``
    -> ``(logits, present.{i}.key/.value...)``.

    The past tensors are put back into a transformers ``DynamicCache`` with plain
    (non-sliding) layers: genai keeps every position, and a sliding-window family's
    mask still hides the positions outside its window, so the result is exact.
    """

    def __init__(self, model: torch.nn.Module, num_layers: int) -> None:
        super().__init__()
        self.model = model
        self.num_layers = num_layers

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                position_ids: torch.Tensor, past: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return self.step(input_ids, attention_mask, past, position_ids=position_ids)

    def step(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             past: list[torch.Tensor], **extra: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        cache = DynamicCache()
        for i in range(self.num_layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         **{cache_keyword(self.model): cache}, use_cache=True, **extra)
        presents: list[torch.Tensor] = []
        for layer in _cache_layers(output_cache(out)):
            presents += [layer.keys, layer.values]
        return (out.logits, *presents)


class DecoderWithCacheNoPositions(DecoderWithCache):
    """For families whose forward takes no position_ids (BLOOM's ALiBi)."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,  # type: ignore[override]
                past: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return self.step(input_ids, attention_mask, past)


def wrap(model: torch.nn.Module, layout: Layout) -> Any:
    if layout.layer_kinds:
        from pt2onnx.llm import _hybrid

        return _hybrid.wrap(model, layout)
    cls = DecoderWithCache if layout.uses_position_ids else DecoderWithCacheNoPositions
    return cls(model, layout.num_layers)


def output_cache(out: Any) -> Any:
    """The cache a forward returned, whichever field holds it (``cache`` from 5.24 on)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _cache_layers(cache: Any) -> list[Any]:
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise InvalidInputError(
            f"the model returned a {type(cache).__name__} as its cache, not a transformers "
            "Cache with per-layer keys and values, so export-llm can't name its tensors. "
            "Next step: upgrade transformers (>= 4.56 returns a DynamicCache for every "
            "decoder family), or export the model with pt2onnx.export.")
    return list(layers)


def probe(model: torch.nn.Module, config: Any, model_type: str) -> Layout:
    """Runs the model once on two tokens to read the cache's layout."""
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    uses_position_ids = "position_ids" in inspect.signature(model.forward).parameters
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    # On the meta device (export-llm streaming the weights) the ids are meta too, and
    # the mask is left out: the mask code would read its values (all ones here).
    on_meta = any(p.is_meta for p in model.parameters())
    ids = torch.tensor([[1, 2]], dtype=torch.int64, device="meta" if on_meta else None)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=None if on_meta else torch.ones_like(ids),
                    use_cache=True)
    layers = _cache_layers(output_cache(out))
    for i, layer in enumerate(layers):
        # Exactly these: linear-attention and indexed layers subclass DynamicLayer too.
        if type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer) or layer.keys is None:
            raise InvalidInputError(
                f"{model_type}: cache layer {i} is a {type(layer).__name__}, not a key/value "
                "layer; onnxruntime-genai's decoder loop feeds only past_key_values.{i}.key/"
                ".value. Next step: export the model's forward with pt2onnx.export.")
    shapes = {(tuple(x.shape[1:2]), x.shape[3]) for layer in layers
              for x in (layer.keys, layer.values)}
    if len(shapes) != 1 or layers[0].keys.dim() != 4:
        raise InvalidInputError(
            f"{model_type}: its cache tensors differ in shape between layers or between keys "
            f"and values ({sorted(shapes)}), and genai_config.json has one head count and "
            "one head size for all. Next step: export the model with pt2onnx.export.")
    _, kv_heads, _, head_size = layers[0].keys.shape
    heads = _families.text_attr(text, "num_attention_heads", "n_head", "num_heads",
                                default=kv_heads)
    hidden = _families.text_attr(text, "hidden_size", "n_embd", "d_model",
                                 default=int(heads) * head_size)
    return Layout(
        model_type=model_type, genai_type=_families.GENAI_TYPES.get(model_type, "decoder"),
        num_layers=len(layers), num_kv_heads=int(kv_heads), head_size=int(head_size),
        num_attention_heads=int(heads), hidden_size=int(hidden),
        vocab_size=int(out.logits.shape[-1]), context_length=_families.context_length(text),
        uses_position_ids=uses_position_ids, known=model_type in _families.GENAI_TYPES)


def layout_from_config(model: torch.nn.Module, config: Any, model_type: str,
                       num_layers: int) -> Layout | None:
    """The layout the probe would find, read from the config of a family whose config
    states its key/value heads and head size plainly; None for the others. The caller
    checks it against the captured graph (a wrong guess fails there, or shows)."""
    if model_type not in _families.GENAI_TYPES or model_type == "falcon":
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = _families.text_attr(text, "num_attention_heads", "n_head", "num_heads")
    hidden = _families.text_attr(text, "hidden_size", "n_embd", "d_model")
    vocab = _families.text_attr(text, "vocab_size")
    if not all(isinstance(x, int) for x in (heads, hidden, vocab)):
        return None
    kv_heads = _families.text_attr(text, "num_key_value_heads", default=heads)
    head_size = _families.text_attr(text, "head_dim", default=hidden // heads)
    if not isinstance(kv_heads, int) or not isinstance(head_size, int):
        return None
    return Layout(
        model_type=model_type, genai_type=_families.GENAI_TYPES[model_type],
        num_layers=num_layers, num_kv_heads=kv_heads, head_size=head_size,
        num_attention_heads=heads, hidden_size=hidden, vocab_size=vocab,
        context_length=_families.context_length(text),
        uses_position_ids="position_ids" in inspect.signature(model.forward).parameters,
        known=True)


def names(layout: Layout) -> tuple[list[str], list[str]]:
    """The genai input and output names, in the wrapper's order."""
    inputs = ["input_ids", "attention_mask"] + (["position_ids"] if layout.uses_position_ids
                                                else [])
    if layout.layer_kinds:
        from pt2onnx.llm import _hybrid

        return inputs + _hybrid.state_names(layout, True), \
            ["logits"] + _hybrid.state_names(layout, False)
    inputs += [f"past_key_values.{i}.{kv}" for i in range(layout.num_layers)
               for kv in ("key", "value")]
    outputs = ["logits"] + [f"present.{i}.{kv}" for i in range(layout.num_layers)
                            for kv in ("key", "value")]
    return inputs, outputs


def dynamic_shapes(layout: Layout) -> tuple[Any, ...]:
    """torch.export dims in the wrapper's argument order.

    The total length is a dim of its own (genai gives the mask at past + sequence
    length; torch.export can't write a sum of two dims). transformers' mask code
    guards it to at least 4 when the capture's example is general (sequence and
    past >= 2); stating that bound up front saves a second capture. It is only the
    capture's range: the ONNX graph computes the same for any total length.
    """
    from torch.export import Dim

    batch, seq, past = Dim(BATCH), Dim(SEQ), Dim(PAST)
    total = Dim(TOTAL, min=4)
    spec: list[Any] = [{0: batch, 1: seq}, {0: batch, 1: total}]
    if layout.uses_position_ids:
        spec.append({0: batch, 1: seq})
    if layout.layer_kinds:
        from pt2onnx.llm import _hybrid

        spec.append(_hybrid.state_dims(layout, batch, past))
    else:
        spec.append([{0: batch, 2: past}] * (2 * layout.num_layers))
    return tuple(spec)


def example(layout: Layout, dtype: torch.dtype, seq: int = 3, past: int = 5) -> tuple[Any, ...]:
    """A batch-1 example with a non-empty past; the capture makes every dim general."""
    ids = torch.randint(3, max(4, min(layout.vocab_size, 1000)), (1, seq), dtype=torch.int64)
    mask = torch.ones(1, past + seq, dtype=torch.int64)
    args: list[Any] = [ids, mask]
    if layout.uses_position_ids:
        args.append(torch.arange(past, past + seq, dtype=torch.int64)[None])
    if layout.layer_kinds:
        from pt2onnx.llm import _hybrid

        args.append(_hybrid.state_example(layout, dtype, past))
        return tuple(args)
    args.append([torch.randn(1, layout.num_kv_heads, past, layout.head_size, dtype=dtype)
                 for _ in range(2 * layout.num_layers)])
    return tuple(args)
