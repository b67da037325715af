"""The torch.export front end: argument checks, capture with fallbacks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from pt2onnx import _compat
from pt2onnx.errors import CaptureError, InvalidInputError


@dataclass
class CaptureResult:
    program: torch.export.ExportedProgram
    strategy: str
    fallbacks: list[str] = field(default_factory=list)


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


def as_module(model: Any) -> torch.nn.Module:
    if isinstance(model, torch.nn.Module):
        return model
    if callable(model):
        return _CallableModule(model)
    raise InvalidInputError(
        f"model must be a torch.nn.Module, a callable or a torch.export.ExportedProgram, "
        f"got {type(model).__name__}."
    )


def _short(exc: BaseException, limit: int = 1200) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > limit:
        text = text[:limit] + " [...]"
    return text


def capture(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any = None,
) -> CaptureResult:
    """torch.export with strict=False, then strict=True; both errors if both fail."""
    if isinstance(model, torch.export.ExportedProgram):
        return CaptureResult(model, "given ExportedProgram")
    module = as_module(model)
    errors: list[str] = []
    for strict in (False, True):
        try:
            ep = _compat.export(module, args, kwargs, dynamic_shapes, strict=strict)
        except Exception as exc:
            errors.append(f"torch.export.export(strict={strict}) failed: {_short(exc)}")
            continue
        return CaptureResult(ep, f"torch.export(strict={strict})", errors)
    raise CaptureError(
        "torch.export could not capture the model.\n"
        + "\n".join(f"  - {e}" for e in errors)
        + "\nNext step: fix the first error in your model's forward (often data-dependent "
        "Python control flow or an unsupported Python construct), or export a smaller "
        "submodule. See https://pytorch.org/docs/stable/export.html"
    )
