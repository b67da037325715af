"""Matrix products: linear, addmm, mm, bmm, matmul, baddbmm."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx._builder import RuleContext
from pt2onnx._registry import translation
from pt2onnx.rules._common import aten, rank


@translation(aten.linear.default)
def linear(g: RuleContext, x: ir.Value, weight: ir.Value, bias: ir.Value | None = None) -> ir.Value:
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"""
    if rank(x) == 2 and rank(weight) == 2:
        return g.op.Gemm(x, weight, bias, transB=1)
    # A weight used only here is stored transposed (lazily, at save time); a shared
    # one (tied embeddings) gets a Transpose node, which onnxruntime fuses into MatMul.
    fx_weight = g.node.args[1] if g.node is not None and len(g.node.args) > 1 else None
    shared = isinstance(fx_weight, torch.fx.Node) and len(fx_weight.users) > 1
    w = g.op.Transpose(weight, perm=[1, 0]) if shared else g.transposed(weight)
    out = g.op.MatMul(x, w)
    return g.op.Add(out, bias) if bias is not None else out


@translation(aten.addmm.default)
def addmm(g: RuleContext, bias: ir.Value, a: ir.Value, b: ir.Value, *, beta: Any = 1,
          alpha: Any = 1) -> ir.Value:
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    if ir.DataType.FLOAT == g.dtype or g.dtype in (ir.DataType.FLOAT16, ir.DataType.DOUBLE):
        return g.op.Gemm(a, b, bias, alpha=float(alpha), beta=float(beta))
    prod = g.op.MatMul(a, b)
    if alpha != 1:
        prod = g.op.Mul(prod, g.const(alpha, g.dtype))
    scaled = bias if beta == 1 else g.op.Mul(bias, g.const(beta, g.dtype))
    return g.op.Add(prod, scaled)


@translation([aten.mm.default, aten.bmm.default, aten.matmul.default])
def matmul(g: RuleContext, a: ir.Value, b: ir.Value) -> ir.Value:
    """mm(Tensor self, Tensor mat2) -> Tensor"""
    return g.op.MatMul(a, b)


@translation(aten.baddbmm.default)
def baddbmm(g: RuleContext, bias: ir.Value, a: ir.Value, b: ir.Value, *, beta: Any = 1,
            alpha: Any = 1) -> ir.Value:
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    prod = g.op.MatMul(a, b)
    if alpha != 1:
        prod = g.op.Mul(prod, g.const(alpha, g.dtype))
    if beta == 0:
        return prod
    scaled = bias if beta == 1 else g.op.Mul(bias, g.const(beta, g.dtype))
    return g.op.Add(prod, scaled)
