"""``pt2onnx::as_output``: the op behind ``pt2onnx.as_output`` (an intermediate value
made a named graph output). Defined here, below both ``pt2onnx.debug`` (which calls it)
and ``rules/debug.py`` (which translates it)."""

from __future__ import annotations

import torch


@torch.library.custom_op("pt2onnx::as_output", mutates_args=())
def as_output_op(x: torch.Tensor, name: str) -> torch.Tensor:
    return x.clone()


@as_output_op.register_fake
def _(x: torch.Tensor, name: str) -> torch.Tensor:
    return torch.empty_like(x)
