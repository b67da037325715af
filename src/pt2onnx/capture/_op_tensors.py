"""Walking an op's arguments for their tensors, without pytree: the recording's
dispatcher calls these once per op, where pytree's cost shows; and a Python call's
arguments in its ATen op's schema order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _tensors(value: Any, found: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """The tensors in an op's arguments (nested tuples, lists and dicts), in order."""
    found = [] if found is None else found
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _tensors(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors(v, found)
    return found


def _map_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    """``value`` with each tensor replaced by ``fn(tensor)``; tuples (named ones too)
    come back as plain tuples. Much cheaper than pytree on the dispatcher's hot path."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(_map_tensors(fn, v) for v in value)
    if isinstance(value, list):
        return [_map_tensors(fn, v) for v in value]
    if isinstance(value, dict):
        return {k: _map_tensors(fn, v) for k, v in value.items()}
    return value


def _bind_schema(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The call's arguments in the ATen schema's order; None if they don't map."""
    names = [a.name for a in op._schema.arguments]
    if len(args) > len(names) or any(k not in names for k in kwargs):
        return None
    values: list[Any] = list(args)
    for arg in op._schema.arguments[len(args):]:
        if arg.name in kwargs:
            values.append(kwargs[arg.name])
        elif arg.has_default_value():
            values.append(arg.default_value)
        else:
            return None
    if any(a.kwarg_only for a in op._schema.arguments[: len(args)]):
        return None
    return tuple(values)
