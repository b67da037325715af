"""``pt2onnx::as_output``: the op behind ``pt2onnx.as_output`` (an intermediate value
made a named graph output). Defined here, below both ``pt2onnx.debug`` (which calls it)
and ``rules/debug.py`` (which translates it)."""

from __future__ import annotations

import torch

from pt2onnx.frontends import _custom_ops


def _as_output(x: torch.Tensor, name: str) -> torch.Tensor:
    return x.clone()


def _fake(x: torch.Tensor, name: str) -> torch.Tensor:
    return torch.empty_like(x)


_custom_ops.define("as_output(Tensor x, str name) -> Tensor", _as_output, _fake)


def as_output_op(x: torch.Tensor, name: str) -> torch.Tensor:
    """``x``, marked to become the graph output ``name``."""
    out: torch.Tensor = torch.ops.pt2onnx.as_output(x, name)
    return out
