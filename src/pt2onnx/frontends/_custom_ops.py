"""pt2onnx's own torch ops (``pt2onnx::name``): each is defined once per process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pt2onnx import _compat

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
        code = fake.__code__
        _compat.register_fake(lib, f"pt2onnx::{name}", fake,
                              f"{code.co_filename}:{code.co_firstlineno}")
    _LIBS[name] = lib
