"""The call's arguments as the capture takes them: checks on ``args`` and ``kwargs``,
torch.onnx's trailing-dict convention, a plain callable as a module, and keyword inputs
that forward takes through ``**kwargs`` named for the capture."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from pt2onnx.errors import InvalidInputError


class _CallableModule(torch.nn.Module):
    """Wraps a plain function so that torch.export can capture it."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def check_args(args: Any, kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(args, torch.Tensor):
        raise InvalidInputError(
            "args must be a tuple of example inputs, got a single Tensor. "
            "Next step: pass args=(x,) (note the trailing comma)."
        )
    if isinstance(args, list):
        args = tuple(args)
    if not isinstance(args, tuple):
        raise InvalidInputError(
            f"args must be a tuple of example inputs, got {type(args).__name__}. "
            "Next step: wrap the inputs in a tuple, e.g. args=(x, mask)."
        )
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise InvalidInputError(
            f"kwargs must be a dict of keyword inputs, got {type(kwargs).__name__}."
        )
    return args, kwargs


def split_trailing_kwargs(
    model: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None,
) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    """torch.onnx's convention: a dict at the end of ``args`` holds keyword inputs.

    torch.onnx.export reads ``args=(x, {"mask": m})`` as ``forward(x, mask=m)`` (and
    ``(x, {})`` as ``forward(x)``: its way to pass a dict positionally is to add an
    empty dict after it). pt2onnx reads ``args`` as positional inputs, as
    torch.export does, and follows torch.onnx only where the call says so: no
    ``kwargs`` were given, and forward cannot take the dict positionally, or the dict
    is empty, or each of its keys names a parameter the other arguments leave free.
    """
    if kwargs or not args or type(args[-1]) is not dict or isinstance(
            model, torch.export.ExportedProgram):
        return args, kwargs
    import inspect

    if isinstance(model, _CallableModule):
        model = model.fn
    forward = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        signature = inspect.signature(forward)
    except (TypeError, ValueError):
        return args, kwargs
    head, last = args[:-1], args[-1]

    def binds(*a: Any, **k: Any) -> bool:
        try:
            signature.bind(*a, **k)
        except TypeError:
            return False
        return True

    if not all(isinstance(k, str) for k in last) or not binds(*head, **last):
        return args, kwargs
    if not binds(*args) or not last:
        return head, dict(last)
    free = set(signature.parameters) - set(signature.bind_partial(*head).arguments)
    named = {n for n, p in signature.parameters.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if set(last) <= free & named:
        return head, dict(last)
    return args, kwargs


def as_module(model: Any) -> torch.nn.Module:
    if isinstance(model, torch.nn.Module):
        return model
    if callable(model):
        return _CallableModule(model)
    raise InvalidInputError(
        f"model must be a torch.nn.Module, a callable or a torch.export.ExportedProgram, "
        f"got {type(model).__name__}."
    )


@contextlib.contextmanager
def named_var_kwargs(module: Any, kwargs: dict[str, Any]) -> Iterator[None]:
    """Keyword inputs that forward takes through ``**kwargs`` become named parameters of
    forward while the model is captured.

    torch.export cannot give dynamic shapes to what ``**kwargs`` receives (nor name it),
    and transformers 5.24 moved ``past_key_values`` there (the parameter is ``cache``
    now, the old keyword still accepted through ``**kwargs`` until 5.40). With forward
    seen as ``forward(..., *, past_key_values=None)``, ``dynamic_shapes`` and
    ``dynamic_axes`` keyed by that name work, and the input keeps its name."""
    import inspect

    if not isinstance(module, torch.nn.Module) or not kwargs:
        yield
        return
    try:
        signature = inspect.signature(module.forward)
    except (TypeError, ValueError):
        yield
        return
    params = list(signature.parameters.values())
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        yield
        return
    extra = [k for k in kwargs if k not in signature.parameters]
    if not extra:
        yield
        return
    original = module.forward
    named = [p for p in params if p.kind is not p.VAR_KEYWORD] + [
        inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None) for k in extra]

    def forward(*args: Any, **kw: Any) -> Any:
        return original(*args, **kw)

    forward.__signature__ = signature.replace(parameters=named)  # type: ignore[attr-defined]
    had = "forward" in module.__dict__
    saved = module.__dict__.get("forward")
    module.__dict__["forward"] = forward
    try:
        yield
    finally:
        if had:
            module.__dict__["forward"] = saved
        else:
            del module.__dict__["forward"]
