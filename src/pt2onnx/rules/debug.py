"""pt2onnx's own debugging ops (see pt2onnx.debug)."""

from __future__ import annotations

import torch

import pt2onnx.debug  # noqa: F401  (defines torch.ops.pt2onnx.as_output)
from pt2onnx._builder import RuleContext
from pt2onnx._registry import translation


@translation(torch.ops.pt2onnx.as_output.default)
def as_output(g: RuleContext, x: object, name: str) -> object:
    """pt2onnx::as_output(Tensor x, str name) -> Tensor"""
    g.extra_outputs.append((name, x))  # type: ignore[attr-defined]
    return x
