"""Composite ops as torch.export records them before decomposition.

When every op of a captured program has a rule, pt2onnx translates the
program as captured and skips ``run_decompositions`` (a full retrace, often
the slowest stage). These rules cover the composite (CompositeImplicit) ops
that common models leave in that graph; each maps to what its decomposition
would produce, or to a better ONNX op.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules import nn as nn_rules
from pt2onnx.rules import norm as norm_rules
from pt2onnx.rules._common import aten, normalize_dim, rank, shape_value
from pt2onnx.rules.creation import _fill
from pt2onnx.rules.elementwise import _bitwise


@translation(aten.to.dtype_layout)
def to_dtype_layout(g: RuleContext, x: ir.Value, **_: Any) -> ir.Value:
    """to.dtype_layout(Tensor(a) self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)"""
    return g.cast(x, g.dtype)


@translation([aten.to.device, aten.to.other])
def to_device(g: RuleContext, x: ir.Value, *_: Any, **__: Any) -> ir.Value:
    """to.device(Tensor(a) self, Device device, ScalarType dtype, bool non_blocking=False, bool copy=False, *, MemoryFormat? memory_format=None) -> Tensor(a)"""
    return g.cast(x, g.dtype)


@translation(aten.dropout.default)
def dropout(g: RuleContext, x: ir.Value, p: float, train: bool) -> ir.Value:
    """dropout(Tensor input, float p, bool train) -> Tensor"""
    if not train or p == 0:
        return x
    if p >= 1:  # onnxruntime's Dropout rejects ratio 1; torch returns input * 0
        return g.op.Mul(x, g.const(0.0, x.dtype))
    ratio = g.const(float(p), ir.DataType.FLOAT)
    return g.op.Dropout(x, ratio, g.const(True))


@translation(aten.__and__.Tensor)
def and_(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """__and__.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _bitwise("And", "BitwiseAnd", g, a, b)


@translation(aten.__or__.Tensor)
def or_(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """__or__.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _bitwise("Or", "BitwiseOr", g, a, b)


@translation([aten.new_ones.default, aten.new_zeros.default, aten.new_empty.default])
def new_filled(g: RuleContext, x: ir.Value, size: list[Any], **_: Any) -> ir.Value:
    """new_ones(Tensor self, SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    assert g.node is not None
    value = 1 if g.node.target is aten.new_ones.default else 0
    return _fill(g, shape_value(g, size), value)


@translation(aten.new_full.default)
def new_full(g: RuleContext, x: ir.Value, size: list[Any], fill_value: Any, **_: Any) -> ir.Value:
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(g, shape_value(g, size), fill_value)


@translation(aten.diff.default)
def diff(g: RuleContext, x: ir.Value, n: int = 1, dim: int = -1, prepend: Any = None,
         append: Any = None) -> ir.Value:
    """diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor"""
    d = normalize_dim(dim, rank(x))
    if n == 0:  # torch returns self, ignoring prepend and append
        return x
    if prepend is not None or append is not None:
        x = g.op.Concat(*[v for v in (prepend, x, append) if v is not None], axis=d)
    axis = g.const([d])
    for _ in range(n):
        hi = g.op.Slice(x, g.const([1]), g.const([2**62]), axis)
        lo = g.op.Slice(x, g.const([0]), g.const([-1]), axis)
        x = g.op.Xor(hi, lo) if x.dtype == ir.DataType.BOOL else g.op.Sub(hi, lo)
    return x


@translation(aten.flatten.using_ints)
def flatten(g: RuleContext, x: ir.Value, start_dim: int = 0, end_dim: int = -1) -> ir.Value:
    """flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)"""
    r = rank(x)
    if r == 0:
        return g.op.Reshape(x, g.const([1]))
    s, e = normalize_dim(start_dim, r), normalize_dim(end_dim, r)
    if s == e:
        return x
    if x.shape is not None and any(isinstance(d, int) and d == 0 for d in x.shape):
        # An empty input: -1 is ambiguous there (onnxruntime refuses 0 beside -1), so
        # the flattened size is the product of its dims, and 0 means 0 (allowzero).
        shape = g.op.Shape(x)
        merged = g.op.ReduceProd(g.op.Slice(shape, g.const([s]), g.const([e + 1])),
                                 keepdims=1)
        parts = [g.op.Slice(shape, g.const([0]), g.const([s])), merged,
                 g.op.Slice(shape, g.const([e + 1]), g.const([r]))]
        return g.op.Reshape(x, g.op.Concat(*parts, axis=0), allowzero=1)
    if e == r - 1:
        return g.op.Reshape(x, g.const([0] * s + [-1]))
    static = g.static_shape()
    if static is not None:
        return g.op.Reshape(x, g.const(list(static)))
    shape = g.op.Shape(x)
    parts = [g.op.Slice(shape, g.const([0]), g.const([s])), g.const([-1]),
             g.op.Slice(shape, g.const([e + 1]), g.const([r]))]
    return g.op.Reshape(x, g.op.Concat(*parts, axis=0))


@translation(aten.unflatten.int)
def unflatten(g: RuleContext, x: ir.Value, dim: int, sizes: list[Any]) -> ir.Value:
    """unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)"""
    static = g.static_shape()
    if static is not None:  # allowzero: a 0 in the literal shape is an empty dimension
        return g.op.Reshape(x, g.const(list(static)), allowzero=1)
    r = rank(x)
    d = normalize_dim(dim, r)
    shape = g.op.Shape(x)
    sizes = list(sizes)
    if any(isinstance(s, int) and s == -1 for s in sizes):
        # The -1 computed here, so the Reshape can take allowzero: Shape(x)[:d] may be
        # 0 (an empty tensor), and a 0 beside a -1 is refused by
        # onnxruntime (found by the fuzzer).
        k = next(i for i, s in enumerate(sizes) if isinstance(s, int) and s == -1)
        rest: ir.Value = g.const([1])
        for i, s in enumerate(sizes):
            if i != k:
                rest = g.op.Mul(rest, g.op.Reshape(s, g.const([1])) if isinstance(s, ir.Value)
                                else g.const([int(s)]))
        whole = g.op.Slice(shape, g.const([d]), g.const([d + 1]))
        sizes[k] = g.op.Div(whole, g.op.Max(rest, g.const([1])))
    parts = [g.op.Slice(shape, g.const([0]), g.const([d])), g.int_list(sizes),
             g.op.Slice(shape, g.const([d + 1]), g.const([r]))]
    return g.op.Reshape(x, g.op.Concat(*parts, axis=0), allowzero=1)


def _conv(n: int):  # type: ignore[no-untyped-def]
    def rule(g: RuleContext, x: ir.Value, weight: ir.Value, bias: ir.Value | None = None,
             stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1) -> ir.Value:
        if rank(x) == n + 1:  # unbatched input: torch adds a batch dimension and removes it
            batched = g.op.Unsqueeze(x, g.const([0]))
            batched.shape = ir.Shape([1, *x.shape])  # type: ignore[misc]
            out = rule(g, batched, weight, bias, stride, padding, dilation, groups)
            return g.op.Squeeze(out, g.const([0]))
        if isinstance(padding, str):
            return _conv_str_padding(g, x, weight, bias, stride, padding, dilation, groups, n)
        return nn_rules.convolution(g, x, weight, bias, _seq(stride, n), _seq(padding, n),
                                    _seq(dilation, n), False, [0] * n, groups)

    rule.__doc__ = f"conv{n}d(Tensor input, Tensor weight, Tensor? bias=None, ...) -> Tensor"
    return rule


def _seq(v: Any, n: int) -> list[int]:
    return [int(v)] * n if isinstance(v, int) else (list(v) * n if len(v) == 1 else list(v))


def _conv_str_padding(g: RuleContext, x: ir.Value, weight: ir.Value, bias: ir.Value | None,
                      stride: Any, padding: str, dilation: Any, groups: int, n: int) -> ir.Value:
    dil = _seq(dilation, n)
    kernel = [int(k) for k in list(weight.shape)[2:]]  # type: ignore[arg-type]
    if padding == "valid":
        pads = [0] * n
        return nn_rules.convolution(g, x, weight, bias, _seq(stride, n), pads, dil, False,
                                    [0] * n, groups)
    # "same": torch pads the extra element at the end when the total is odd.
    total = [d * (k - 1) for d, k in zip(dil, kernel)]
    begin = [t // 2 for t in total]
    end = [t - b for t, b in zip(total, begin)]
    return g.op.Conv(x, weight, bias, strides=_seq(stride, n), pads=begin + end, dilations=dil,
                     group=int(groups), kernel_shape=kernel)


for _n in (1, 2, 3):
    _packet = getattr(aten, f"conv{_n}d")
    translation([_packet.default, _packet.padding])(_conv(_n))


@translation(aten.batch_norm.default)
def batch_norm(g: RuleContext, x: ir.Value, weight: ir.Value | None, bias: ir.Value | None,
               running_mean: ir.Value | None, running_var: ir.Value | None, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool) -> ir.Value:
    """batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor"""
    out = norm_rules.native_batch_norm(g, x, weight, bias, running_mean, running_var, training,
                                       momentum, eps)
    return out[0]


@translation(aten.max_pool2d.default)
def max_pool2d(g: RuleContext, x: ir.Value, kernel_size: Any, stride: Any = (), padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False) -> ir.Value:
    """max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> Tensor"""
    attrs = nn_rules._pool_attrs(2, kernel_size, stride, padding, ceil_mode)
    return g.op.MaxPool(x, dilations=nn_rules._expand_param(dilation, 2), **attrs)


@translation(aten.adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(g: RuleContext, x: ir.Value, output_size: Any) -> ir.Value:
    """adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor"""
    return nn_rules.adaptive_avg_pool2d(g, x, output_size)


@translation(aten.einsum.default)
def einsum(g: RuleContext, equation: str, tensors: list[ir.Value], *,
           path: Any = None) -> ir.Value:
    """einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor"""
    return g.op.Einsum(*[g.cast(t, g.dtype) for t in tensors], equation=equation.replace(" ", ""))


@translation([aten.expand_as.default, aten.view_as.default, aten.reshape_as.default])
def like_other(g: RuleContext, x: ir.Value, other: ir.Value) -> ir.Value:
    """expand_as(Tensor(a) self, Tensor other) -> Tensor(a)"""
    assert g.node is not None
    static = g.static_shape()
    shape = g.const(list(static)) if static is not None else g.op.Shape(other)
    if g.node.target is aten.expand_as.default:
        return g.op.Expand(x, shape)
    return g.op.Reshape(x, shape)


@translation(torch.ops.higher_order.wrap_with_set_grad_enabled)
def wrap_with_set_grad_enabled(g: RuleContext, enabled: bool, body: torch.fx.GraphModule,
                               *args: Any) -> tuple[Any, ...]:
    """wrap_with_set_grad_enabled(enabled, body, *args): gradients do not exist in ONNX."""
    return tuple(g.inline(body, list(args)))
