"""Python containers torch.export must see through: dict subclasses (model outputs
such as ``class Output(OrderedDict)``) and transformers' KV caches, registered as
pytree nodes."""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

import torch
import torch.utils._pytree as pytree


def register_mappings(tree: Any) -> bool:
    """Registers each dict subclass in ``tree`` that pytree does not know as a node
    flattened like a dict (named by its keys); whether any was new."""

    found: list[type] = []

    def walk(value: Any) -> None:
        cls = type(value)
        if isinstance(value, dict) and cls not in pytree.SUPPORTED_NODES and cls not in found:
            found.append(cls)
        if isinstance(value, (list, tuple, dict)):
            for v in (value.values() if isinstance(value, dict) else value):
                walk(v)

    walk(tree)
    for cls in found:
        _register_node(cls, _flatten_mapping, partial(_unflatten_mapping, cls))
    return bool(found)


def _flatten_mapping(d: Any) -> tuple[list[tuple[Any, Any]], list[Any]]:

    return [(pytree.MappingKey(k), v) for k, v in d.items()], list(d.keys())


def _unflatten_mapping(cls: type, values: Any, keys: list[Any]) -> Any:
    items = dict(zip(keys, values, strict=True))
    try:
        return cls(items)
    except Exception:  # a constructor that takes no mapping: the plain dict is as good
        return items


def register_output_containers() -> None:
    """Pytree nodes for the output containers of libraries the model uses.

    transformers' ``ModelOutput`` classes register themselves, but its cache
    objects do not, so a model called with ``use_cache=True`` could not be
    captured. Only a library that is already imported is looked at, and a
    class that is already registered (by the user or the library) is left alone.
    """
    cache_utils = sys.modules.get("transformers.cache_utils")
    if cache_utils is None:
        return
    dynamic = getattr(cache_utils, "DynamicCache", None)
    if dynamic is not None:
        _register_node(dynamic, _flatten_dynamic_cache, partial(_unflatten_dynamic_cache, dynamic))
    enc_dec = getattr(cache_utils, "EncoderDecoderCache", None)
    if enc_dec is not None:
        _register_node(enc_dec, _flatten_encoder_decoder_cache,
                       partial(_unflatten_encoder_decoder_cache, enc_dec))


def _register_node(cls: type, flatten_with_keys: Any, unflatten: Any) -> None:

    if cls in pytree.SUPPORTED_NODES:
        return

    def flatten(obj: Any) -> tuple[list[Any], Any]:
        entries, context = flatten_with_keys(obj)
        return [v for _, v in entries], context

    pytree.register_pytree_node(
        cls, flatten, unflatten, flatten_with_keys_fn=flatten_with_keys,
        serialized_type_name=f"{cls.__module__}.{cls.__name__}",
    )


def _cache_tensors(cache: Any) -> tuple[list[Any], list[Any]]:
    layers = getattr(cache, "layers", None)
    if layers is None:  # transformers < 4.56 keeps two lists
        return list(cache.key_cache), list(cache.value_cache)
    filled = [layer for layer in layers if getattr(layer, "keys", None) is not None]
    return [layer.keys for layer in filled], [layer.values for layer in filled]


def _flatten_dynamic_cache(cache: Any) -> tuple[list[tuple[Any, Any]], int]:

    keys, values = _cache_tensors(cache)
    entries: list[tuple[Any, Any]] = [
        (pytree.MappingKey(f"key_{i}"), k) for i, k in enumerate(keys)
    ]
    entries += [(pytree.MappingKey(f"value_{i}"), v) for i, v in enumerate(values)]
    return entries, len(keys)


def _unflatten_dynamic_cache(cls: type, leaves: Any, n: int) -> Any:
    leaves = list(leaves)
    if not all(isinstance(x, torch.Tensor) for x in leaves):
        # A spec unflattened with placeholder leaves (to read output paths):
        # a dict with the same keys keeps the same paths.
        names = [f"key_{i}" for i in range(n)] + [f"value_{i}" for i in range(n)]
        return dict(zip(names, leaves, strict=True))
    cache = cls()
    layers = getattr(cache, "layers", None)
    layer_cls = getattr(sys.modules.get("transformers.cache_utils"), "DynamicLayer", None)
    if layers is None or layer_cls is None:
        for i in range(n):
            cache.update(leaves[i], leaves[n + i], i)
        return cache
    # Fill the layers directly: DynamicCache.update would first create an empty
    # tensor with torch.tensor([]), which torch.export lifts to a constant again
    # each time the program is retraced (run_decompositions then fails with
    # "Constant tensor lifted_tensor_N is not in the constants dictionary").
    for i in range(n):
        layer = layer_cls()
        layer.dtype, layer.device = leaves[i].dtype, leaves[i].device
        layer.keys, layer.values = leaves[i], leaves[n + i]
        layer.is_initialized = True
        layers.append(layer)
    return cache


def _flatten_encoder_decoder_cache(cache: Any) -> tuple[list[tuple[Any, Any]], None]:

    return [
        (pytree.GetAttrKey("self_attention_cache"), cache.self_attention_cache),
        (pytree.GetAttrKey("cross_attention_cache"), cache.cross_attention_cache),
    ], None


def _unflatten_encoder_decoder_cache(cls: type, children: Any, context: None) -> Any:
    self_cache, cross_cache = children
    if isinstance(self_cache, dict):
        return {"self_attention_cache": self_cache, "cross_attention_cache": cross_cache}
    return cls(self_cache, cross_cache)
