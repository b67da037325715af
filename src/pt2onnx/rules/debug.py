"""pt2onnx's own debugging ops (see pt2onnx.debug)."""

from __future__ import annotations

import torch

from pt2onnx.frontends import _as_output  # noqa: F401  (defines torch.ops.pt2onnx.as_output)
from pt2onnx.translate._builder import RuleContext
from pt2onnx.translate._registry import translation


@translation(torch.ops.pt2onnx.as_output.default)
def as_output(g: RuleContext, x: object, name: str) -> object:
    """pt2onnx::as_output(Tensor x, str name) -> Tensor"""
    g.extra_outputs.append((name, x))  # type: ignore[attr-defined]
    return x
