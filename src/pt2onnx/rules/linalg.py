"""Matrix products (linear, addmm, mm, bmm, matmul, baddbmm, addmv, addbmm, bilinear) and
determinants (ONNX Det)."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, translation, value_dtype
from pt2onnx.rules._common import aten, operand, rank


@translation(aten.linear.default)
def linear(g: RuleContext, x: ir.Value, weight: ir.Value, bias: ir.Value | None = None) -> ir.Value:
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"""
    if x.shape is not None and len(x.shape) and x.shape[-1] == 0 and rank(weight) == 2:
        # No input features: a sum over nothing, zeros of (x's batch dims, out_features)
        # (onnxruntime's Gemm rewrite refuses the 0).
        static = g.static_shape()
        shape = g.const(list(static)) if static is not None else g.op.Concat(
            g.op.Slice(g.op.Shape(x), g.const([0]), g.const([-1])),
            g.op.Slice(g.op.Shape(weight), g.const([0]), g.const([1])), axis=0)
        out = g.op.Expand(g.const(0, value_dtype(x) or g.dtype), shape)
        return g.op.Add(out, bias) if bias is not None else out
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
    empty = a.shape is not None and len(a.shape) and a.shape[-1] == 0
    numbers = not isinstance(alpha, ir.Value) and not isinstance(beta, ir.Value)
    if numbers and not empty and g.dtype in (ir.DataType.FLOAT, ir.DataType.FLOAT16,
                                             ir.DataType.DOUBLE):
        return g.op.Gemm(a, b, bias, alpha=float(alpha), beta=float(beta))
    return scaled_sum(g, product(g, a, b), bias, alpha, beta)


def scaled_sum(g: RuleContext, prod: ir.Value, bias: ir.Value, alpha: Any,
               beta: Any) -> ir.Value:
    """``alpha * prod + beta * bias`` as torch computes it: a beta of 0 ignores ``bias``
    (NaN included). alpha and beta are Python numbers or, for a tensor passed as the
    Scalar (the TorchScript exporter's tests do), 0-d values known only at run time."""
    dtype = g.dtype
    if isinstance(alpha, ir.Value) or alpha != 1:
        prod = g.op.Mul(prod, operand(g, alpha, dtype))
    if isinstance(beta, ir.Value):
        b = operand(g, beta, dtype)
        summed = g.op.Add(prod, g.op.Mul(bias, b))
        return g.op.Where(g.op.Equal(b, g.const(0, dtype)), prod, summed)
    if beta == 0:
        return prod
    scaled = bias if beta == 1 else g.op.Mul(bias, g.const(beta, dtype))
    return g.op.Add(prod, scaled)


def product(g: RuleContext, a: ir.Value, b: ir.Value) -> ir.Value:
    """``MatMul(a, b)``, or zeros of its shape when the contraction dim is 0: a sum over
    nothing. onnxruntime's MatMul leaves such an output uninitialised (found by the
    fuzzer, float16 with static shapes and float32 with a dynamic batch)."""
    k = a.shape[-1] if a.shape is not None and len(a.shape) else None
    zero = g.const(0, value_dtype(a) or g.dtype)
    if any(isinstance(d, int) and d == 0 for d in g.shape):
        # An empty result: onnxruntime refuses some MatMuls with a 0 batch dim ("cannot
        # broadcast on dim 0"), so its shape is computed without one.
        return g.op.Expand(zero, _product_shape(g, a, b))
    if not (isinstance(k, int) and k == 0):
        if rank(b) == 1 and rank(a) >= 2 and _may_be_empty(g):
            return _matrix_vector(g, a, b)
        return g.op.MatMul(a, b)
    return g.op.Expand(zero, _product_shape(g, a, b))


def _may_be_empty(g: RuleContext) -> bool:
    """Whether the product (a matrix's rows times a vector) is not known to have rows:
    a size of 0 or a symbolic one. Any symbolic size counts: ``dynamic_axes`` declares
    sizes from 0, and the shape env's range at translation is the capture's, which can
    be narrower than the declared one."""
    sizes = getattr(g.meta, "shape", None)
    return sizes is None or any(not isinstance(d, int) or d == 0 for d in sizes)


def _matrix_vector(g: RuleContext, a: ir.Value, b: ir.Value) -> ir.Value:
    """``a @ b`` for a vector ``b``, as one (rows, k) @ (k, 1) product: onnxruntime's
    MatMul of an operand with a 0 dim and a vector (``(0, 4) @ (4,)``, ``(0, 3, 4) @
    (4,)``) fails ("left operand cannot broadcast on dim 0"; fuzz seed 5227, program
    4949, at B = 1 of ``x[:-2] @ v``), where the flattened product runs."""
    shape = g.op.Shape(a)
    k = g.op.Slice(shape, g.const([-1]), g.const([2**62]))
    flat = g.op.Reshape(a, g.op.Concat(g.const([-1]), k, axis=0))
    column = g.op.MatMul(flat, g.op.Unsqueeze(b, g.const([-1])))
    rows = g.op.Slice(shape, g.const([0]), g.const([-1]))
    return g.op.Reshape(column, rows, allowzero=1)


def _product_shape(g: RuleContext, a: ir.Value, b: ir.Value) -> ir.Value:
    """The shape of ``a @ b`` (torch.matmul's broadcasting), computed from the operands'."""
    static = g.static_shape()
    if static is not None:
        return g.const(list(static))
    sa, sb = g.op.Shape(a), g.op.Shape(b)

    def part(shape: ir.Value, start: int, end: int | None = None) -> ir.Value:
        return g.op.Slice(shape, g.const([start]), g.const([end if end is not None else 2**62]))

    if rank(b) == 1:
        return part(sa, 0, -1)
    if rank(a) == 1:
        return g.op.Concat(part(sb, 0, -2), part(sb, -1), axis=0)
    # Broadcast the batch dims: expand an empty tensor of one batch shape to the other.
    batch = g.op.Shape(g.op.Expand(g.op.ConstantOfShape(part(sa, 0, -2)), part(sb, 0, -2)))
    return g.op.Concat(batch, part(sa, -2, -1), part(sb, -1), axis=0)


@translation([aten.mm.default, aten.bmm.default, aten.matmul.default, aten.mv.default])
def matmul(g: RuleContext, a: ir.Value, b: ir.Value) -> ir.Value:
    """mm(Tensor self, Tensor mat2) -> Tensor"""
    return product(g, a, b)


@translation(aten.baddbmm.default)
def baddbmm(g: RuleContext, bias: ir.Value, a: ir.Value, b: ir.Value, *, beta: Any = 1,
            alpha: Any = 1) -> ir.Value:
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    return scaled_sum(g, product(g, a, b), bias, alpha, beta)


@translation(aten.addmv.default)
def addmv(g: RuleContext, bias: ir.Value, mat: ir.Value, vec: ir.Value, *, beta: Any = 1,
          alpha: Any = 1) -> ir.Value:
    """addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    return baddbmm(g, bias, mat, vec, beta=beta, alpha=alpha)


@translation(aten.addbmm.default)
def addbmm(g: RuleContext, bias: ir.Value, a: ir.Value, b: ir.Value, *, beta: Any = 1,
           alpha: Any = 1) -> ir.Value:
    """addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    prod = g.op.ReduceSum(g.op.MatMul(a, b), g.const([0]), keepdims=0)
    return scaled_sum(g, prod, bias, alpha, beta)


@translation(aten._trilinear.default)
def trilinear(g: RuleContext, i1: ir.Value, i2: ir.Value, i3: ir.Value, expand1: Any,
              expand2: Any, expand3: Any, sumdim: Any, unroll_dim: int = 1) -> ir.Value:
    """_trilinear(Tensor i1, Tensor i2, Tensor i3, int[] expand1, int[] expand2, int[] expand3, int[] sumdim, int unroll_dim=1) -> Tensor"""
    # One Einsum: each input carries the letters of the dims it is not expanded along.
    total = rank(i1) + len(expand1)
    letters = "abcdefghijklmnopqrstuvwxyz"[:total]
    terms = ["".join(c for d, c in enumerate(letters) if d not in set(expand))
             for expand in (expand1, expand2, expand3)]
    out = "".join(c for d, c in enumerate(letters) if d not in set(sumdim))
    return g.op.Einsum(i1, i2, i3, equation=",".join(terms) + "->" + out)


def _det(g: RuleContext, a: ir.Value) -> ir.Value:
    shape = a.shape
    if shape is not None and shape[-1] == 0:  # the determinant of a 0x0 matrix is 1
        return g.op.Expand(g.const(1.0, a.dtype), g.op.Shape(a, start=0, end=-2))
    return g.op.Det(a)


@translation([aten.linalg_det.default, aten.det.default])
def linalg_det(g: RuleContext, a: ir.Value) -> ir.Value:
    """linalg_det(Tensor A) -> Tensor"""
    return _det(g, a)


@translation(aten._linalg_det.default)
def _linalg_det(g: RuleContext, a: ir.Value) -> tuple[Any, ...]:
    """_linalg_det(Tensor A) -> (Tensor result, Tensor LU, Tensor pivots)"""
    if g.output_used(1) or g.output_used(2):
        raise NotImplementedError("_linalg_det's LU and pivots outputs (ONNX Det gives only det)")
    return _det(g, a), None, None


@translation(aten._linalg_slogdet.default)
def _linalg_slogdet(g: RuleContext, a: ir.Value) -> tuple[Any, ...]:
    """_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots)"""
    if g.output_used(2) or g.output_used(3):
        raise NotImplementedError("_linalg_slogdet's LU and pivots outputs")
    det = _det(g, a)
    return g.op.Sign(det), g.op.Log(g.op.Abs(det)), None, None


@translation([aten.linalg_slogdet.default, aten.slogdet.default])
def linalg_slogdet(g: RuleContext, a: ir.Value) -> tuple[ir.Value, ir.Value]:
    """linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)"""
    det = _det(g, a)
    return g.op.Sign(det), g.op.Log(g.op.Abs(det))


@translation(aten.logdet.default)
def logdet(g: RuleContext, a: ir.Value) -> ir.Value:
    """logdet(Tensor self) -> Tensor"""
    return g.op.Log(_det(g, a))  # NaN for a negative determinant, -inf for zero, as torch
