"""Dicts keyed by tensors among a model's inputs: each key is an input of the file too.

torch.export flattens a dict's values and keeps its keys in the input's structure, as
constants: a model that reads a tensor key (``x + list(d.keys())[0]``, PyTorch's
``test_dict``) got the example's key baked in, and a file that ignored the key it was
fed. The TorchScript exporter took each tensor key as an input, before its value. So
does pt2onnx: while capturing, such a dict travels as a list of ``[key, value]`` pairs
and the model's forward, wrapped, rebuilds it first, so the program's inputs are
``key_0, value_0, key_1, value_1, ...``; ``OnnxProgram.run`` flattens the same way
(``flatten_with_keys``).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import torch


def _tensor_keyed(x: Any) -> bool:
    return isinstance(x, dict) and any(isinstance(k, torch.Tensor) for k in x)


def has_tensor_keys(tree: Any) -> bool:
    """Whether a dict keyed by a tensor is anywhere in ``tree`` (lists, tuples, dicts)."""
    if _tensor_keyed(tree):
        return True
    if isinstance(tree, dict):
        return any(has_tensor_keys(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return any(has_tensor_keys(v) for v in tree)
    return False


def as_pairs(tree: Any) -> Any:
    """``tree`` with each tensor-keyed dict as a list of ``[key, value]`` pairs."""
    if _tensor_keyed(tree):
        return [[k, as_pairs(v)] for k, v in tree.items()]
    if isinstance(tree, dict):
        return {k: as_pairs(v) for k, v in tree.items()}
    if isinstance(tree, tuple) and not hasattr(tree, "_fields"):
        return tuple(as_pairs(v) for v in tree)
    if isinstance(tree, list):
        return [as_pairs(v) for v in tree]
    return tree


def spec_as_pairs(spec: Any) -> Any:
    """A ``dynamic_shapes`` spec in the form ``as_pairs`` gives the inputs: a tensor key
    is a static input (None)."""
    if _tensor_keyed(spec):
        return [[None, spec_as_pairs(v)] for v in spec.values()]
    if isinstance(spec, dict):
        return {k: spec_as_pairs(v) for k, v in spec.items()}
    if isinstance(spec, tuple) and not hasattr(spec, "_fields"):
        return tuple(spec_as_pairs(v) for v in spec)
    if isinstance(spec, list):
        return [spec_as_pairs(v) for v in spec]
    return spec


def _from_pairs(tree: Any, template: Any) -> Any:
    """The inverse of ``as_pairs``, led by the original structure ``template``."""
    if _tensor_keyed(template):
        return {k: _from_pairs(v, t) for (k, v), t in zip(tree, template.values(), strict=True)}
    if isinstance(template, dict):
        return {k: _from_pairs(tree[k], t) for k, t in template.items()}
    if isinstance(template, tuple) and not hasattr(template, "_fields"):
        return tuple(_from_pairs(v, t) for v, t in zip(tree, template, strict=True))
    if isinstance(template, list):
        return [_from_pairs(v, t) for v, t in zip(tree, template, strict=True)]
    return tree


def flatten_with_keys(tree: Any) -> Any:
    """``tree`` as the file takes it when its tensor keys are inputs (``as_pairs``)."""
    return as_pairs(tree) if has_tensor_keys(tree) else tree


def keys_as_inputs(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                   ) -> tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]:
    """What to capture so that each tensor key is an input: a shallow copy of ``model``
    (its parameters and buffers, under their own names) whose forward takes the dicts as
    pairs and rebuilds them (with ``model.forward``'s signature, so inputs keep their
    names), and the inputs in that form."""
    template = (args, kwargs)
    original = model.forward
    module = copy.copy(model)

    @functools.wraps(original)
    def forward(*a: Any, **k: Any) -> Any:
        a2, k2 = _from_pairs((a, k), template)
        return original(*a2, **k2)

    module.forward = forward
    new_args, new_kwargs = as_pairs((args, kwargs))
    return module, tuple(new_args), dict(new_kwargs)
