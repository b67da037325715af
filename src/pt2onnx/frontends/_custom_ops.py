"""pt2onnx's own torch ops (``pt2onnx::name``): each is defined once per process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_LIBS: dict[str, Any] = {}


def define(schema: str, impl: Callable[..., Any], fake: Callable[..., Any] | None = None) -> None:
    """Defines ``pt2onnx::<name>`` from ``schema`` (``"name(...) -> ..."``) with ``impl`` as
    its eager kernel and ``fake`` as its shape function, unless it is defined already."""
    name = schema.split("(", 1)[0]
    if name in _LIBS:
        return
    lib = torch.library.Library("pt2onnx", "FRAGMENT")
    lib.define(schema)
    lib.impl(name, impl, "CompositeExplicitAutograd")
    if fake is not None:
        torch.library.register_fake(f"pt2onnx::{name}", fake, lib=lib)
    _LIBS[name] = lib
