"""pt2onnx's own debugging ops (see pt2onnx.debug)."""

from __future__ import annotations

import torch

import pt2onnx.frontends  # noqa: F401  (its door defines torch.ops.pt2onnx.as_output)
from pt2onnx.rule_api import RuleContext, translation


@translation(torch.ops.pt2onnx.as_output.default)
def as_output(g: RuleContext, x: object, name: str) -> object:
    """pt2onnx::as_output(Tensor x, str name) -> Tensor"""
    g.extra_outputs.append((name, x))  # type: ignore[attr-defined]
    return x
