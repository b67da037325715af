"""Complex tensors, carried as (real, imag) pairs in a trailing axis of size 2.

onnxruntime has no complex kernels, so a complex tensor of shape S lives in the
graph as a float tensor of shape S + [2] (``torch.view_as_real`` of it), and a
complex model input or output is exactly that float tensor. ONNX DFT uses the
same layout. Every rule here is registered with ``complex=True``: the translator
uses these rules, and only these, for nodes that read or write complex tensors,
so a rule written for real tensors never sees a pair by mistake.

Dims given to a complex op count the complex tensor's own axes; the rules here
normalize them (a negative dim would otherwise land one axis off) and then reuse
the real layout rules, which see the pair axis as one more trailing dim.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, is_complex, translation
from pt2onnx.rules import core, shape
from pt2onnx.rules._common import aten, axes, normalize_dim, rank

# -- the pair layout -------------------------------------------------------------------


def real_part(g: RuleContext, x: ir.Value) -> ir.Value:
    """The real parts of a pair tensor (the trailing axis dropped)."""
    return g.op.Gather(x, g.const(0), axis=-1)


def imag_part(g: RuleContext, x: ir.Value) -> ir.Value:
    return g.op.Gather(x, g.const(1), axis=-1)


def make_pair(g: RuleContext, re: ir.Value, im: ir.Value) -> ir.Value:
    """The pair tensor with real parts ``re`` and imaginary parts ``im`` (same shape)."""
    last = g.const([-1])
    return g.op.Concat(g.op.Unsqueeze(re, last), g.op.Unsqueeze(im, last), axis=-1)


def as_pair(g: RuleContext, x: Any, dtype: ir.DataType) -> ir.Value:
    """x (complex or real value, or a Python number) as a pair tensor of ``dtype``."""
    if isinstance(x, complex):
        return g.const([x.real, x.imag], dtype)
    if isinstance(x, (bool, int, float)):
        return g.const([float(x), 0.0], dtype)
    if is_complex(x):
        return g.cast(x, dtype)
    # A real tensor: imaginary parts 0, by padding the new trailing axis.
    r = rank(x)
    pads = [0] * (2 * r + 2)
    pads[-1] = 1
    return g.op.Pad(g.op.Unsqueeze(g.cast(x, dtype), g.const([-1])), g.const(pads),
                    g.const(0.0, dtype), mode="constant")


def real_operand(g: RuleContext, x: Any, dtype: ir.DataType) -> ir.Value:
    """A real operand that broadcasts against pairs: a trailing axis of size 1."""
    if isinstance(x, (bool, int, float)):
        return g.const(float(x), dtype)
    return g.op.Unsqueeze(g.cast(x, dtype), g.const([-1]))


def cdim(dim: int, x: ir.Value, extra: int = 0) -> int:
    """``dim`` of a complex tensor as a non-negative axis of its pair tensor ``x``."""
    return normalize_dim(dim, rank(x) - 1 + extra)


def _is_complex_arg(x: Any) -> bool:
    return isinstance(x, complex) or (isinstance(x, ir.Value) and is_complex(x))


def conj(g: RuleContext, x: ir.Value, dtype: ir.DataType | None = None) -> ir.Value:
    """The conjugate of a pair tensor (of ``dtype``, by default x's or the output's)."""
    return g.op.Mul(x, g.const([1.0, -1.0], dtype or x.dtype or g.dtype))


def cmul(g: RuleContext, a: ir.Value, b: ir.Value) -> ir.Value:
    """The product of two pair tensors (broadcasting)."""
    ar, ai, br, bi = real_part(g, a), imag_part(g, a), real_part(g, b), imag_part(g, b)
    re = g.op.Sub(g.op.Mul(ar, br), g.op.Mul(ai, bi))
    im = g.op.Add(g.op.Mul(ar, bi), g.op.Mul(ai, br))
    return make_pair(g, re, im)


# -- layout ops: normalized dims, then the real rule --------------------------------------


@translation([aten.view.default, aten._unsafe_view.default, aten.reshape.default], complex=True)
def view(g: RuleContext, x: ir.Value, size: list[Any]) -> ir.Value:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)"""
    return shape.view(g, x, [*size, 2])


@translation(aten.permute.default, complex=True)
def permute(g: RuleContext, x: ir.Value, dims: list[int]) -> ir.Value:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    return shape.permute(g, x, [cdim(d, x) for d in dims] + [rank(x) - 1])


@translation(aten.transpose.int, complex=True)
def transpose(g: RuleContext, x: ir.Value, dim0: int, dim1: int) -> ir.Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    return shape.transpose(g, x, cdim(dim0, x), cdim(dim1, x))


@translation(aten.t.default, complex=True)
def t(g: RuleContext, x: ir.Value) -> ir.Value:
    """t(Tensor(a) self) -> Tensor(a)"""
    return x if rank(x) < 3 else shape.transpose(g, x, 0, 1)


@translation(aten.expand.default, complex=True)
def expand(g: RuleContext, x: ir.Value, size: list[Any], *, implicit: bool = False) -> ir.Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)"""
    return shape.expand(g, x, [*size, 2])


@translation(aten.unsqueeze.default, complex=True)
def unsqueeze(g: RuleContext, x: ir.Value, dim: int) -> ir.Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    return shape.unsqueeze(g, x, cdim(dim, x, extra=1))


@translation([aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default], complex=True)
def squeeze(g: RuleContext, x: ir.Value, dim: Any = None) -> ir.Value:
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)"""
    n = rank(x) - 1
    dims = list(range(n)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    if n == 0 or not dims:
        return x
    return shape.squeeze(g, x, [cdim(d, x) for d in dims])


@translation(aten.slice.Tensor, complex=True)
def slice_(g: RuleContext, x: ir.Value, dim: int = 0, start: Any = None, end: Any = None,
           step: Any = 1) -> ir.Value:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)"""
    return shape.slice_(g, x, cdim(dim, x), start, end, step)


@translation(aten.select.int, complex=True)
def select(g: RuleContext, x: ir.Value, dim: int, index: Any) -> ir.Value:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    return shape.select(g, x, cdim(dim, x), index)


@translation([aten.split.Tensor, aten.split_with_sizes.default], complex=True)
def split(g: RuleContext, x: ir.Value, split_size: Any, dim: int = 0) -> tuple[ir.Value, ...]:
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"""
    d = cdim(dim, x)
    n = len(g.meta)
    if n == 1:
        return (x,)
    sizes = [v.shape[d] for v in g.meta]
    if not all(type(s) is int for s in sizes):
        raise NotImplementedError("split of a complex tensor needs static sizes")
    return g.op.Split(x, g.const(sizes), axis=d, _outputs=n)


@translation(aten.unbind.int, complex=True)
def unbind(g: RuleContext, x: ir.Value, dim: int = 0) -> tuple[ir.Value, ...]:
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    return shape.unbind(g, x, cdim(dim, x))


@translation(aten.flip.default, complex=True)
def flip(g: RuleContext, x: ir.Value, dims: list[int]) -> ir.Value:
    """flip(Tensor self, int[] dims) -> Tensor"""
    return shape.flip(g, x, [cdim(d, x) for d in dims])


@translation(aten.roll.default, complex=True)
def roll(g: RuleContext, x: ir.Value, shifts: list[int], dims: list[int] | None = None) -> ir.Value:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor"""
    if not dims:  # roll of the flattened tensor: flatten the complex axes only
        flat = g.op.Reshape(x, g.const([-1, 2]))
        rolled = shape.roll(g, flat, shifts[:1], [0])
        return g.op.Reshape(rolled, g.op.Shape(x), allowzero=1)
    return shape.roll(g, x, shifts, [cdim(d, x) for d in dims])


@translation(aten.constant_pad_nd.default, complex=True)
def constant_pad_nd(g: RuleContext, x: ir.Value, pad: list[Any], value: Any = 0) -> ir.Value:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor"""
    # pad lists the last dim first: the pair axis gets (0, 0) in front.
    value = complex(value)
    if value.imag == 0 and value.real == 0:
        return shape.constant_pad_nd(g, x, [0, 0, *pad], 0.0)
    re = shape.constant_pad_nd(g, real_part(g, x), list(pad), value.real)
    im = shape.constant_pad_nd(g, imag_part(g, x), list(pad), value.imag)
    return make_pair(g, re, im)


@translation(aten.cat.default, complex=True)
def cat(g: RuleContext, tensors: list[ir.Value], dim: int = 0) -> ir.Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor"""
    # Legacy behaviour: 1-D empty tensors are skipped whatever their rank.
    parts = [as_pair(g, t, g.dtype) for t in tensors
             if not (t.shape is not None and tuple(t.shape) in ((0,), (0, 2)))]
    if not parts:
        return g.op.Identity(as_pair(g, tensors[0], g.dtype))
    if len(parts) == 1:
        return parts[0]
    return g.op.Concat(*parts, axis=normalize_dim(dim, len(g.shape) - 1))


@translation(aten.stack.default, complex=True)
def stack(g: RuleContext, tensors: list[ir.Value], dim: int = 0) -> ir.Value:
    """stack(Tensor[] tensors, int dim=0) -> Tensor"""
    d = normalize_dim(dim, len(g.shape) - 1)
    parts = [g.op.Unsqueeze(as_pair(g, t, g.dtype), axes(g, d)) for t in tensors]
    return parts[0] if len(parts) == 1 else g.op.Concat(*parts, axis=d)


@translation([aten.clone.default, aten.alias.default, aten.detach.default,
              aten.lift_fresh_copy.default, aten.contiguous.default, aten.resolve_conj.default,
              aten.resolve_neg.default], complex=True)
def identity(g: RuleContext, x: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
    """clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor"""
    return x


# On real tensors these are no-ops (real is the tensor itself).
translation([aten.resolve_conj.default, aten.resolve_neg.default, aten.conj.default,
             aten._conj.default, aten.conj_physical.default, aten._conj_physical.default,
             aten.real.default])(identity)
translation(operator.getitem, complex=True)(core.getitem)
for _name in ("_assert_tensor_metadata", "_assert_async"):
    translation(getattr(aten, _name), complex=True)(core._noop)
translation(aten.sym_storage_offset.default, complex=True)(core.sym_storage_offset)
translation(aten.sym_is_contiguous.default, complex=True)(core.sym_is_contiguous)


@translation(aten.sym_size.int, complex=True)
def sym_size(g: RuleContext, x: ir.Value, dim: int) -> ir.Value:
    """sym_size.int(Tensor self, int dim) -> SymInt"""
    return core.sym_size(g, x, cdim(dim, x))


@translation(aten.sym_numel.default, complex=True)
def sym_numel(g: RuleContext, x: ir.Value) -> ir.Value:
    """sym_numel(Tensor self) -> SymInt: half the pair tensor's size"""
    return g.op.Div(g.op.Size(x), g.const(2))


@translation(aten.sym_stride.int, complex=True)
def sym_stride(g: RuleContext, x: ir.Value, dim: int) -> ir.Value:
    """sym_stride.int(Tensor self, int dim) -> SymInt (in complex elements)"""
    val = core._input_meta(g)
    d = cdim(dim, x)
    stride = val.stride(d) if val is not None else None
    if isinstance(stride, int):
        return g.const(stride)
    if val is None or not val.is_contiguous():
        raise NotImplementedError("symbolic stride of a tensor that is not contiguous")
    if d == rank(x) - 2:
        return g.const(1)
    tail = g.op.Shape(x, start=d + 1, end=-1)
    return g.op.ReduceProd(tail, keepdims=0) if g.opset >= 18 else g.op.ReduceProd(
        tail, keepdims=0, axes=[0])


# -- the boundary between real and complex ------------------------------------------------


@translation([aten.view_as_real.default, aten.view_as_complex.default], complex=True)
def view_as_real(g: RuleContext, x: ir.Value) -> ir.Value:
    """view_as_real(Tensor(a) self) -> Tensor(a): the pair tensor itself."""
    # A new value: the same data is complex on one side of this node and real on the other.
    return g.op.Identity(x)


@translation(aten.real.default, complex=True)
def real(g: RuleContext, x: ir.Value) -> ir.Value:
    """real(Tensor(a) self) -> Tensor(a)"""
    return real_part(g, x)


@translation(aten.imag.default, complex=True)
def imag(g: RuleContext, x: ir.Value) -> ir.Value:
    """imag(Tensor(a) self) -> Tensor(a)"""
    return imag_part(g, x)


@translation([aten._to_copy.default, aten.to.dtype], complex=True)
def to_copy(g: RuleContext, x: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    if g.is_complex:
        return as_pair(g, x, g.dtype)
    # Complex to real keeps the real part (torch warns); to bool, whether either is nonzero.
    if g.dtype == ir.DataType.BOOL:
        zero = g.const(0.0, x.dtype or ir.DataType.FLOAT)
        return g.op.Or(g.op.Not(g.op.Equal(real_part(g, x), zero)),
                       g.op.Not(g.op.Equal(imag_part(g, x), zero)))
    return g.cast(real_part(g, x), g.dtype)


@translation(aten.complex.default, complex=True)
def complex_(g: RuleContext, re: ir.Value, im: ir.Value) -> ir.Value:
    """complex(Tensor real, Tensor imag) -> Tensor"""
    dtype = g.dtype
    re, im = g.cast(re, dtype), g.cast(im, dtype)
    static = g.static_shape()
    # Broadcast both to the output shape (Shape of a sum: the values do not matter).
    target = g.const(list(static[:-1])) if static is not None else g.op.Shape(g.op.Add(re, im))
    return make_pair(g, g.op.Expand(re, target), g.op.Expand(im, target))


@translation(aten.polar.default, complex=True)
def polar(g: RuleContext, r: ir.Value, theta: ir.Value) -> ir.Value:
    """polar(Tensor abs, Tensor angle) -> Tensor"""
    dtype = g.dtype
    r, theta = g.cast(r, dtype), g.cast(theta, dtype)
    return make_pair(g, g.op.Mul(r, g.op.Cos(theta)), g.op.Mul(r, g.op.Sin(theta)))


# -- arithmetic ---------------------------------------------------------------------------


@translation([aten._conj.default, aten.conj_physical.default, aten._conj_physical.default,
              aten.conj.default], complex=True)
def conj_(g: RuleContext, x: ir.Value) -> ir.Value:
    """_conj(Tensor(a) self) -> Tensor(a)"""
    return conj(g, x)


@translation([aten.neg.default, aten._neg_view.default], complex=True)
def neg(g: RuleContext, x: ir.Value) -> ir.Value:
    """neg(Tensor self) -> Tensor"""
    return g.op.Neg(x)


def _scaled(g: RuleContext, b: Any, alpha: Any) -> Any:
    if alpha is None or alpha == 1:
        return b
    if _is_complex_arg(b) or isinstance(alpha, complex):
        return cmul(g, as_pair(g, b, g.dtype), as_pair(g, alpha, g.dtype))
    if isinstance(b, ir.Value):
        return g.op.Mul(g.cast(b, g.dtype), g.const(float(alpha), g.dtype))
    return b * alpha


def _add_sub(onnx_op: str, g: RuleContext, a: Any, b: Any, alpha: Any = 1) -> ir.Value:
    b = _scaled(g, b, alpha)
    return getattr(g.op, onnx_op)(as_pair(g, a, g.dtype), as_pair(g, b, g.dtype))


@translation([aten.add.Tensor, aten.add.Scalar], complex=True)
def add(g: RuleContext, a: Any, b: Any, alpha: Any = 1) -> ir.Value:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    return _add_sub("Add", g, a, b, alpha)


@translation([aten.sub.Tensor, aten.sub.Scalar], complex=True)
def sub(g: RuleContext, a: Any, b: Any, alpha: Any = 1) -> ir.Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    return _add_sub("Sub", g, a, b, alpha)


@translation([aten.mul.Tensor, aten.mul.Scalar], complex=True)
def mul(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """mul.Tensor(Tensor self, Tensor other) -> Tensor"""
    dtype = g.dtype
    if _is_complex_arg(a) and _is_complex_arg(b):
        return cmul(g, as_pair(g, a, dtype), as_pair(g, b, dtype))
    if not _is_complex_arg(a):
        a, b = b, a
    # a complex, b real: scale both parts.
    return g.op.Mul(as_pair(g, a, dtype), real_operand(g, b, dtype))


@translation([aten.div.Tensor, aten.div.Scalar], complex=True)
def div(g: RuleContext, a: Any, b: Any) -> ir.Value:
    """div.Tensor(Tensor self, Tensor other) -> Tensor"""
    dtype = g.dtype
    if not _is_complex_arg(b):
        return g.op.Div(as_pair(g, a, dtype), real_operand(g, b, dtype))
    b = as_pair(g, b, dtype)
    br, bi = real_part(g, b), imag_part(g, b)
    norm = g.op.Add(g.op.Mul(br, br), g.op.Mul(bi, bi))
    num = cmul(g, as_pair(g, a, dtype), conj(g, b))
    return g.op.Div(num, g.op.Unsqueeze(norm, g.const([-1])))


@translation(aten.abs.default, complex=True)
def abs_(g: RuleContext, x: ir.Value) -> ir.Value:
    """abs(Tensor self) -> Tensor: |re + i im|, in float64 (scaled for float64 inputs)"""
    dtype = g.dtype
    f64 = ir.DataType.DOUBLE
    wide = g.cast(x, f64)
    re, im = real_part(g, wide), imag_part(g, wide)
    big = None
    if dtype == f64:  # float64 squares can overflow: scale by max(|re|, |im|) first
        big = g.op.Max(g.op.Abs(re), g.op.Abs(im))
        plain = g.op.Or(g.op.Equal(big, g.const(0.0, f64)),
                        g.op.Or(g.op.IsInf(big), g.op.IsNaN(big)))
        big = g.op.Where(plain, g.const(1.0, f64), big)
        re, im = g.op.Div(re, big), g.op.Div(im, big)
    r = g.op.Sqrt(g.op.Add(g.op.Mul(re, re), g.op.Mul(im, im)))
    if big is not None:
        r = g.op.Mul(r, big)
    # hypot(inf, nan) is inf.
    inf = g.op.Or(g.op.IsInf(re), g.op.IsInf(im))
    r = g.op.Where(inf, g.const(math.inf, ir.DataType.DOUBLE), r)
    return g.cast(r, dtype)


@translation(aten.exp.default, complex=True)
def exp(g: RuleContext, z: ir.Value) -> ir.Value:
    """exp(Tensor self) -> Tensor: exp(re) * (cos(im), sin(im))"""
    re, im = real_part(g, z), imag_part(g, z)
    rotation = make_pair(g, g.op.Cos(im), g.op.Sin(im))
    return g.op.Mul(rotation, g.op.Unsqueeze(g.op.Exp(re), g.const([-1])))


def _signbit(g: RuleContext, x: ir.Value, dtype: ir.DataType) -> ir.Value:
    """x < 0, and true for -0.0 too (1 / -0.0 is -inf).

    onnxruntime's Where returns +0.0 where it takes a -0.0 from its second input
    (the third keeps it): a signed zero that matters goes there, or is rebuilt.
    """
    zero = g.const(0.0, dtype)
    return g.op.Or(g.op.Less(x, zero),
                   g.op.And(g.op.Equal(x, zero), g.op.Less(g.op.Div(g.const(1.0, dtype), x), zero)))


def atan2(g: RuleContext, y: ir.Value, x: ir.Value) -> ir.Value:
    """atan2 with C's values on the axes, at signed zeros and at infinities (as torch)."""
    dtype = x.dtype or g.dtype
    zero, pi, half = g.const(0.0, dtype), g.const(math.pi, dtype), g.const(math.pi / 2, dtype)
    # Both infinite: the angle of (sign y, sign x), a multiple of pi/4.
    both_inf = g.op.And(g.op.IsInf(x), g.op.IsInf(y))
    x = g.op.Where(both_inf, g.op.Sign(x), x)
    y = g.op.Where(both_inf, g.op.Sign(y), y)
    neg_y = _signbit(g, y, dtype)
    signed_pi = g.op.Where(neg_y, g.op.Neg(pi), pi)
    x_zero = g.op.Equal(x, zero)
    base = g.op.Atan(g.op.Div(y, g.op.Where(x_zero, g.const(1.0, dtype), x)))
    general = g.op.Add(base, g.op.Where(g.op.Less(x, zero), signed_pi, zero))
    # x = +-0: +-pi/2 off the origin; at it, y (a signed 0) or +-pi when x is -0.
    at_origin = g.op.Where(_signbit(g, x, dtype), signed_pi, y)
    on_axis = g.op.Where(g.op.Greater(y, zero), half,
                         g.op.Where(g.op.Less(y, zero), g.op.Neg(half),
                                    g.op.Where(g.op.Equal(y, zero), at_origin,
                                               g.op.Mul(y, zero))))
    return g.op.Where(x_zero, on_axis, general)


@translation(aten.angle.default, complex=True)
def angle(g: RuleContext, x: ir.Value) -> ir.Value:
    """angle(Tensor self) -> Tensor: atan2(imag, real)"""
    dtype = g.dtype
    re, im = real_part(g, x), imag_part(g, x)
    if dtype != ir.DataType.DOUBLE:
        return g.cast(atan2(g, im, re), dtype)
    return _atan2_f64(g, im, re)


def _atan2_f64(g: RuleContext, im: ir.Value, re: ir.Value) -> ir.Value:
    """atan2 in float64. onnxruntime has no float64 Atan: atan2 in float32, then one
    Newton step on im cos(t) - re sin(t) = 0 in float64 (error squared: about 1e-14)."""
    dtype = ir.DataType.DOUBLE
    # An infinite part counts as +-1 and a finite one beside it as +-0 (same angle), and
    # both are scaled by max(|re|, |im|): the float32 start then exists for any input.
    # (Built as magnitude * sign: onnxruntime's Where drops the sign of a -0.0 it
    # takes from its second input, and the sign of a zero decides +-pi.)
    zero, one = g.const(0.0, dtype), g.const(1.0, dtype)
    re_inf, im_inf = g.op.IsInf(re), g.op.IsInf(im)
    any_inf = g.op.Or(re_inf, im_inf)

    # At the origin, re counts as +-1: atan2(+-0, +-0) = atan2(+-0, +-1).
    origin = g.op.And(g.op.Equal(re, zero), g.op.Equal(im, zero))

    def clamped(v: ir.Value, v_inf: ir.Value, at_origin: ir.Value | None) -> ir.Value:
        size = g.op.Abs(v)
        if at_origin is not None:
            size = g.op.Where(at_origin, one, size)
        size = g.op.Where(v_inf, one, g.op.Where(any_inf, g.op.Mul(size, zero), size))
        return g.op.Mul(size, g.op.Where(_signbit(g, v, dtype), g.op.Neg(one), one))

    re, im = clamped(re, re_inf, origin), clamped(im, im_inf, None)
    big = g.op.Max(g.op.Abs(re), g.op.Abs(im))
    unscaled = g.op.Or(g.op.Equal(big, zero), g.op.Or(g.op.IsInf(big), g.op.IsNaN(big)))
    big = g.op.Where(unscaled, g.const(1.0, dtype), big)
    re, im = g.op.Div(re, big), g.op.Div(im, big)
    f32 = ir.DataType.FLOAT
    t = g.cast(atan2(g, g.cast(im, f32), g.cast(re, f32)), dtype)
    cos, sin = g.op.Cos(t), g.op.Sin(t)
    num = g.op.Sub(g.op.Mul(im, cos), g.op.Mul(re, sin))
    den = g.op.Add(g.op.Mul(re, cos), g.op.Mul(im, sin))
    step = g.op.Div(num, g.op.Where(g.op.Equal(den, zero), g.const(1.0, dtype), den))
    # Off the float32 range (or at 0) the start value stands.
    finite = g.op.Not(g.op.Or(g.op.IsNaN(step), g.op.IsInf(step)))
    return g.op.Add(t, g.op.Where(finite, step, zero))


@translation(aten.angle.default)
def angle_real(g: RuleContext, x: ir.Value) -> ir.Value:
    """angle(Tensor self) -> Tensor: pi for negative real numbers, else 0 (NaN stays NaN)"""
    dtype = g.dtype
    x = g.cast(x, dtype)
    zero = g.const(0.0, dtype)
    out = g.op.Where(g.op.Less(x, zero), g.const(math.pi, dtype), zero)
    return g.op.Where(g.op.IsNaN(x), x, out)


def _reduce_sum(g: RuleContext, x: ir.Value, dim: Any, keepdim: bool) -> ir.Value:
    n = rank(x) - 1
    dims = list(range(n)) if not dim and dim != 0 else ([dim] if isinstance(dim, int) else dim)
    dims = [cdim(d, x) for d in dims]
    if not dims:
        return x
    return g.op.ReduceSum(g.cast(x, g.dtype), axes(g, dims), keepdims=int(bool(keepdim)))


@translation([aten.sum.dim_IntList, aten.sum.default], complex=True)
def sum_(g: RuleContext, x: ir.Value, dim: Any = None, keepdim: bool = False, *,
         dtype: Any = None) -> ir.Value:
    """sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    return _reduce_sum(g, x, dim, keepdim)


@translation([aten.mean.dim, aten.mean.default], complex=True)
def mean(g: RuleContext, x: ir.Value, dim: Any = None, keepdim: bool = False, *,
         dtype: Any = None) -> ir.Value:
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    total = _reduce_sum(g, x, dim, keepdim)
    assert g.node is not None
    inp = g.node.args[0].meta["val"]  # type: ignore[union-attr]
    count = inp.numel() // max(g.meta.numel(), 1)
    if not isinstance(count, int):
        raise NotImplementedError("mean of a complex tensor needs static sizes")
    return g.op.Div(total, g.const(float(count), g.dtype))
