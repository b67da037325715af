"""View and layout ops: reshape, permute, expand, cat, slice, split, pad, ..."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx import _compat
from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import (
    INT64_MAX,
    aten,
    axes,
    normalize_dim,
    rank,
    shape_list,
    shape_value,
    static_dims,
)


def _known_true(cond: Any) -> bool:
    """torch's ``statically_known_true``; imported when a symbolic value needs it (it
    imports sympy, which a static export never loads)."""
    if isinstance(cond, bool):
        return cond
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return bool(statically_known_true(cond))


def _computed_can_be_0(d: Any) -> bool:
    """A size computed from others (not a declared dim itself) that may be 0 at run
    time: torch cannot prove it at least 1 over the declared ranges."""
    return isinstance(d, torch.SymInt) and not d.node.expr.is_symbol and not _known_true(d >= 1)


@translation([aten.view.default, aten._unsafe_view.default, aten.reshape.default])
def view(g: RuleContext, x: ir.Value, size: list[Any]) -> ir.Value:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)"""
    static = g.static_shape()
    if static is not None and x.shape is not None and tuple(x.shape) == static:
        return x
    # A 0 in the target is a size, not "copy the input's dim" (also when other dims
    # are dynamic: the fuzzer's Reshape of an empty tensor with a dynamic batch).
    zero = 0 in static if static is not None else any(
        isinstance(s, int) and s == 0 for s in size)
    if static is None and not zero and not g.is_complex and not any(
            isinstance(s, int) and s == -1 for s in size) and any(
            _computed_can_be_0(d) for d in g.shape):
        # A size computed from others that can be 0 over the declared range (the
        # repeats min(t // b, 3) in repeat_interleave's view, at b > t) is empty there.
        # (allowzero cannot hold a -1 beside a 0; such a target keeps the plain Reshape.)
        zero = True
    return g.op.Reshape(x, shape_value(g, size), allowzero=1 if zero else None)


@translation(aten.permute.default)
def permute(g: RuleContext, x: ir.Value, dims: list[int]) -> ir.Value:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    r = rank(x)
    perm = [normalize_dim(d, r) for d in dims]
    if perm == list(range(r)):
        return x
    return g.op.Transpose(x, perm=perm)


@translation(aten.transpose.int)
def transpose(g: RuleContext, x: ir.Value, dim0: int, dim1: int) -> ir.Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    r = rank(x)
    if r == 0:
        return x
    perm = list(range(r))
    d0, d1 = normalize_dim(dim0, r), normalize_dim(dim1, r)
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return permute(g, x, perm)


@translation(aten.t.default)
def t(g: RuleContext, x: ir.Value) -> ir.Value:
    """t(Tensor(a) self) -> Tensor(a)"""
    return x if rank(x) < 2 else g.op.Transpose(x, perm=[1, 0])


@translation(aten.expand.default)
def expand(g: RuleContext, x: ir.Value, size: list[Any], *, implicit: bool = False) -> ir.Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)"""
    static = g.static_shape()
    if static is not None and x.shape is not None and tuple(x.shape) == static:
        return x
    if static is None:
        # -1 keeps the input dim: Expand with 1 there broadcasts to the same thing.
        size = [1 if (isinstance(s, int) and s == -1) else s for s in size]
    return g.op.Expand(x, shape_value(g, size))


@translation(aten.unsqueeze.default)
def unsqueeze(g: RuleContext, x: ir.Value, dim: int) -> ir.Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    return g.op.Unsqueeze(x, axes(g, normalize_dim(dim, rank(x) + 1)))


@translation([aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default])
def squeeze(g: RuleContext, x: ir.Value, dim: Any = None) -> ir.Value:
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)"""
    shape = list(x.shape) if x.shape is not None else []
    r = len(shape)
    if r == 0:
        return x
    dims = list(range(r)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    chosen = sorted({normalize_dim(d, r) for d in dims})
    if any(not isinstance(shape[d], int) for d in chosen):
        return _squeeze_at_run_time(g, x, chosen, r)
    # torch leaves a dim that is not 1 in place; ONNX would fail on it.
    keep = [d for d in chosen if shape[d] == 1]
    if not keep:
        return x
    return g.op.Squeeze(x, axes(g, keep))


def _squeeze_at_run_time(g: RuleContext, x: ir.Value, chosen: list[int], r: int) -> ir.Value:
    """squeeze of a dynamic dim: torch drops it only where it is 1, so the result's rank
    is decided at run time. Reshape to the sizes that stay (``allowzero``: a size 0 is a
    size, not "copy"). A later op that needs the captured rank is found by the size-1
    check, which runs the file where the dim is 1 (capture/_size_one.py)."""
    sizes = g.op.Shape(x)
    chosen_mask = g.const([i in chosen for i in range(r)], ir.DataType.BOOL)
    drop = g.op.And(g.op.Equal(sizes, g.const([1] * r)), chosen_mask)
    kept = g.op.Compress(sizes, g.op.Not(drop), axis=0)
    return g.op.Reshape(x, kept, allowzero=1)


@translation(aten.cat.default)
def cat(g: RuleContext, tensors: list[ir.Value], dim: int = 0) -> ir.Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor"""
    # Legacy behaviour: 1-D empty tensors are skipped whatever their rank.
    parts = [
        g.cast(t, g.dtype) for t in tensors
        if not (t.shape is not None and len(t.shape) == 1 and t.shape[0] == 0)
    ]
    if not parts:  # every input is 1-D and empty: an empty result of the promoted dtype
        return g.op.Identity(g.cast(tensors[0], g.dtype))
    if len(parts) == 1:
        return parts[0]
    return g.op.Concat(*parts, axis=normalize_dim(dim, rank(parts[0])))


@translation(aten.stack.default)
def stack(g: RuleContext, tensors: list[ir.Value], dim: int = 0) -> ir.Value:
    """stack(Tensor[] tensors, int dim=0) -> Tensor"""
    d = normalize_dim(dim, rank(tensors[0]) + 1)
    parts = [g.op.Unsqueeze(g.cast(t, g.dtype), axes(g, d)) for t in tensors]
    return parts[0] if len(parts) == 1 else g.op.Concat(*parts, axis=d)


@translation(aten.slice.Tensor)
def slice_(g: RuleContext, x: ir.Value, dim: int = 0, start: Any = None, end: Any = None,
           step: Any = 1) -> ir.Value:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)"""
    static = g.static_shape()
    if static is not None and x.shape is not None and tuple(x.shape) == static:
        return x
    start = 0 if start is None else start
    end = INT64_MAX if end is None else end
    if isinstance(end, int):
        end = min(end, INT64_MAX)
    d = normalize_dim(dim, rank(x))
    return g.op.Slice(x, g.int_list([start]), g.int_list([end]), axes(g, d), g.int_list([step]))


@translation(aten.narrow.default)
def narrow(g: RuleContext, x: ir.Value, dim: int, start: Any, length: Any) -> ir.Value:
    """narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)"""
    # torch.export keeps narrow where its length is a size it cannot name (an unbacked
    # u0); torch's decomposition traced on such a node fixed the input's size to the
    # example's (fuzz seed 7411, program 1675). A negative start counts from the end.
    d = normalize_dim(dim, rank(x))
    if isinstance(start, int) and start >= 0:
        begin = g.const([start])
    else:
        first = g.int_list([start])
        size = g.op.Shape(x, start=d, end=d + 1)
        begin = g.op.Where(g.op.Less(first, g.const([0])), g.op.Add(first, size), first)
    end = (g.const([start + length]) if isinstance(start, int) and start >= 0
           and isinstance(length, int) else g.op.Add(begin, g.int_list([length])))
    return g.op.Slice(x, begin, end, axes(g, d))


@translation(aten.select.int)
def select(g: RuleContext, x: ir.Value, dim: int, index: Any) -> ir.Value:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    idx = index if isinstance(index, ir.Value) else g.const(int(index))
    return g.op.Gather(x, idx, axis=normalize_dim(dim, rank(x)))


def _split_sizes(g: RuleContext) -> list[int]:
    assert g.node is not None
    return [int(v.shape[g.node.args[2] if len(g.node.args) > 2 else 0]) for v in g.meta]


@translation([aten.split.Tensor, aten.split_with_sizes.default])
def split(g: RuleContext, x: ir.Value, split_size: Any, dim: int = 0) -> tuple[ir.Value | None, ...]:
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"""
    d = normalize_dim(dim, rank(x))
    n = len(g.meta)
    static = [v.shape[d] for v in g.meta]
    symbolic = not isinstance(split_size, (list, tuple)) and not all(
        type(s) is int for s in static)
    if symbolic and g.output_used(n - 1):
        reads = _compat.SPLIT_LAST_READ.get()
        if reads is not None:
            reads.append(True)
        if _compat.SPLIT_LAST_FROM_END.get():
            # The last piece at every size: x[s*(k-1):], k = max(ceil(D / s), 1).
            step = g.int_list([split_size])
            size = g.op.Shape(x, start=d, end=d + 1)
            count = g.op.Max(g.op.Div(g.op.Sub(g.op.Add(size, step), g.const([1])), step),
                             g.const([1]))
            last = g.op.Slice(x, g.op.Mul(step, g.op.Sub(count, g.const([1]))),
                              g.const([INT64_MAX]), axes(g, d))
            return (*_pieces(g, x, split_size, d, n - 1), last)
    if n == 1 and not symbolic:
        return (x,)
    if all(type(s) is int for s in static):
        sizes = g.const(static)
    elif isinstance(split_size, (list, tuple)):
        sizes = g.int_list(split_size)
    else:
        # Symbolic: piece i is x[i*s : (i+1)*s], clamped at the dim's end, as torch
        # computes it at every size where the piece exists. The number of pieces is the
        # example's; a Split into n - 1 pieces of s and the rest failed in onnxruntime
        # below the example (a negative rest), where the pieces the graph reads exist
        # (torch 2.12's deferred guards keep no guard on that number; fuzz seed 7411,
        # program 3660). Whether the number itself matters (``x.split(s)[-1]``) is for
        # the capture's guards and its second-size run, as before; the last piece read
        # from the end is the export's second reading (``_compat.split_reads``).
        return _pieces(g, x, split_size, d, n)
    return g.op.Split(x, sizes, axis=d, _outputs=n)


def _pieces(g: RuleContext, x: ir.Value, split_size: Any, d: int,
            n: int) -> tuple[ir.Value | None, ...]:
    """The first n pieces of x split by a symbolic size along d, each the one at its
    position (None where the graph does not read it)."""
    step = g.int_list([split_size])
    return tuple(
        g.op.Slice(x, g.op.Mul(step, g.const([i])), g.op.Mul(step, g.const([i + 1])),
                   axes(g, d)) if g.output_used(i) else None
        for i in range(n))


@translation(aten.unbind.int)
def unbind(g: RuleContext, x: ir.Value, dim: int = 0) -> tuple[ir.Value, ...]:
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    d = normalize_dim(dim, rank(x))
    n = len(g.meta)
    parts = g.op.Split(x, g.const([1] * n), axis=d, _outputs=n) if n > 1 else (x,)
    return tuple(g.op.Squeeze(p, axes(g, d)) for p in parts)


@translation(aten.repeat.default)
def repeat(g: RuleContext, x: ir.Value, repeats: list[Any]) -> ir.Value:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor"""
    extra = len(repeats) - rank(x)
    if extra > 0:
        x = g.op.Unsqueeze(x, g.const(list(range(extra))))
    return g.op.Tile(x, g.int_list(repeats))


@translation(aten.constant_pad_nd.default)
def constant_pad_nd(g: RuleContext, x: ir.Value, pad: list[Any], value: Any = 0) -> ir.Value:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor"""
    r = rank(x)
    begins = [0] * r
    ends = [0] * r
    for i in range(len(pad) // 2):
        begins[r - 1 - i] = pad[2 * i]
        ends[r - 1 - i] = pad[2 * i + 1]
    return g.op.Pad(x, g.int_list(begins + ends), g.const(value, g.dtype), mode="constant")


@translation(aten.flip.default)
def flip(g: RuleContext, x: ir.Value, dims: list[int]) -> ir.Value:
    """flip(Tensor self, int[] dims) -> Tensor"""
    r = rank(x)
    dims = [normalize_dim(d, r) for d in dims]
    n = len(dims)
    return g.op.Slice(
        x, g.const([-1] * n), g.const([-INT64_MAX] * n), g.const(dims), g.const([-1] * n)
    )


@translation(aten.roll.default)
def roll(g: RuleContext, x: ir.Value, shifts: list[int], dims: list[int] | None = None) -> ir.Value:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor"""
    if not dims:
        flat = g.op.Reshape(x, g.const([-1]))
        static = static_dims(x)
        numel = math.prod(static) if static is not None else None
        rolled = _roll_axis(g, flat, int(shifts[0]), 0, numel)
        return g.op.Reshape(rolled, g.op.Shape(x), allowzero=1)
    r, shape = rank(x), shape_list(x)
    for s, d in zip(shifts, dims, strict=False):
        axis = normalize_dim(d, r)
        size = shape[axis] if isinstance(shape[axis], int) else None
        x = _roll_axis(g, x, int(s), axis, size)
    return x


def _roll_axis(g: RuleContext, x: ir.Value, shift: int, dim: int,
               size: int | None = None) -> ir.Value:
    """out = cat(x[n - s:], x[:n - s]) along dim, with s = shift mod n."""
    if isinstance(size, int):
        if size == 0 or shift % size == 0:
            return x
        k = g.const([size - shift % size])
    else:
        # shift mod n in [0, n) with Mod (fmod=0 takes the divisor's sign, as Python).
        # Not s - trunc(s / n) * n: onnxruntime's DivMulFusion rewrites Div(1, n) * n
        # to 1 also in integers, which made roll by 1 an identity (found by the fuzzer).
        n = g.op.Max(g.op.Shape(x, start=dim, end=dim + 1), g.const([1]))  # no division by 0
        k = g.op.Sub(n, g.op.Mod(g.const([shift]), n, fmod=0))
    head = g.op.Slice(x, k, g.const([INT64_MAX]), g.const([dim]))
    tail = g.op.Slice(x, g.const([0]), k, g.const([dim]))
    return g.op.Concat(head, tail, axis=dim)


def _pad_mode(mode: str, g: RuleContext, x: ir.Value, padding: list[Any]) -> ir.Value:
    r = rank(x)
    begins, ends = [0] * r, [0] * r
    for i in range(len(padding) // 2):
        begins[r - 1 - i] = padding[2 * i]
        ends[r - 1 - i] = padding[2 * i + 1]
    if mode == "edge" and any(isinstance(p, int) and p < 0 for p in begins + ends):
        # onnxruntime's edge Pad rejects negative pads; torch reads output position j
        # of an axis from input clamp(j - begin, 0, n - 1), which a Gather does directly.
        for axis in range(r):
            if begins[axis] != 0 or ends[axis] != 0:
                x = _edge_gather(g, x, axis, begins[axis], ends[axis])
        return x
    return g.op.Pad(x, g.int_list(begins + ends), mode=mode)


def _edge_gather(g: RuleContext, x: ir.Value, axis: int, begin: Any, end: Any) -> ir.Value:
    n = g.op.Squeeze(g.op.Shape(x, start=axis, end=axis + 1), g.const([0]))
    begin = begin if isinstance(begin, ir.Value) else g.const(int(begin))
    end = end if isinstance(end, ir.Value) else g.const(int(end))
    positions = g.op.Range(g.op.Neg(begin), g.op.Add(n, end), g.const(1))
    index = g.op.Max(g.op.Min(positions, g.op.Sub(n, g.const(1))), g.const(0))
    return g.op.Gather(x, index, axis=axis)


for _op, _mode in (
    (aten.reflection_pad1d.default, "reflect"),
    (aten.reflection_pad2d.default, "reflect"),
    (aten.reflection_pad3d.default, "reflect"),
    (aten.replication_pad1d.default, "edge"),
    (aten.replication_pad2d.default, "edge"),
    (aten.replication_pad3d.default, "edge"),
):
    translation(_op)(partial(_pad_mode, _mode))


@translation(aten.diagonal.default)
def diagonal(g: RuleContext, x: ir.Value, offset: int = 0, dim1: int = 0,
             dim2: int = 1) -> ir.Value:
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)"""
    r = rank(x)
    d1, d2 = normalize_dim(dim1, r), normalize_dim(dim2, r)
    n, m = x.shape[d1], x.shape[d2]  # type: ignore[index]
    rest = [d for d in range(r) if d not in (d1, d2)]
    moved = permute(g, x, [*rest, d1, d2])
    if not (isinstance(n, int) and isinstance(m, int)) or n * m == 0:
        # (an empty plane too: a literal 0 in the static Reshape below would copy a dim)
        return _diagonal_dynamic(g, moved, len(rest), int(offset))
    flat = g.op.Reshape(moved, g.const([0] * len(rest) + [n * m]))
    if offset >= 0:
        pairs = [(i, i + offset) for i in range(max(0, min(n, m - offset)))]
    else:
        pairs = [(i - offset, i) for i in range(max(0, min(n + offset, m)))]
    return g.op.Gather(flat, g.const([i * m + j for i, j in pairs]), axis=len(rest))


def _diagonal_dynamic(g: RuleContext, moved: ir.Value, k: int, offset: int) -> ir.Value:
    """diagonal of the last two dims of ``moved`` (k dims before them) whose sizes are
    known at run time only."""
    flat, index = diagonal_positions(g, moved, k, offset)
    return g.op.Gather(flat, index, axis=k)


def diagonal_positions(g: RuleContext, moved: ir.Value, k: int,
                       offset: int) -> tuple[ir.Value, ir.Value]:
    """``moved`` with its last two dims (k dims before them) flattened into one, and the
    flat positions of their diagonal, computed at run time: element i of the diagonal is
    position (i + row0) * m + (i + col0) of the (n * m) plane, for i < its length."""
    i64 = ir.DataType.INT64
    shape = g.op.Shape(moved)
    n = g.op.Gather(shape, g.const(k), axis=0)
    m = g.op.Gather(shape, g.const(k + 1), axis=0)
    zero = g.const(0, i64)
    row0, col0 = max(0, -offset), max(0, offset)
    length = g.op.Max(zero, g.op.Min(g.op.Sub(n, g.const(row0, i64)),
                                     g.op.Sub(m, g.const(col0, i64))))
    step = g.op.Add(m, g.const(1, i64))
    start = g.op.Add(g.op.Mul(g.const(row0, i64), m), g.const(col0, i64))
    index = g.op.Add(g.op.Mul(g.op.Range(zero, length, g.const(1, i64)), step), start)
    plane = g.op.Unsqueeze(g.op.Mul(n, m), g.const([0]))
    flat = g.op.Reshape(moved, g.op.Concat(g.op.Slice(shape, g.const([0]), g.const([k])),
                                           plane, axis=0), allowzero=1)
    return flat, index


@translation(aten.as_strided.default)
def as_strided(g: RuleContext, x: ir.Value, size: list[Any], stride: list[Any],
               storage_offset: Any = None) -> ir.Value:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)"""
    # ONNX tensors are dense, so this is exact when self is contiguous in torch.
    arg = g.node.args[0] if g.node is not None else None
    val = getattr(arg, "meta", {}).get("val")
    if val is not None and not val.is_contiguous():
        raise NotImplementedError("as_strided of a tensor that is not contiguous")
    out = g.meta
    if val is not None and _reads_all_in_order(val, out):
        # A contiguous result over the same storage only renames the layout (for example the
        # restride after adaptive_avg_pool2d), which also holds for symbolic sizes.
        if len(out.shape) == len(val.shape) and all(
                _known_true(a == b) for a, b in zip(out.shape, val.shape, strict=True)):
            return x
        return g.op.Reshape(x, shape_value(g, size))
    flat = g.op.Reshape(x, g.const([-1]))
    return g.op.Gather(flat, strided_index_value(g, size, stride, storage_offset or 0), axis=0)


def strided_index_value(g: RuleContext, size: list[Any], stride: list[Any],
                        offset: Any) -> ir.Value:
    """:func:`strided_index` as a graph value: a constant when every size and stride is an
    int, else built at run time from the symbolic ones (an ``unfold`` of a dynamic
    length, stft's frames), ``offset + sum_d arange(size_d) * stride_d`` broadcast."""
    if all(isinstance(v, int) for v in [*size, *stride, offset]):
        return g.const(strided_index(size, stride, offset))

    def scalar(v: Any) -> ir.Value:
        return g.op.Reshape(v, g.const([], ir.DataType.INT64)) if isinstance(v, ir.Value) \
            else g.const(int(v))

    index = scalar(offset)
    for d, (n, s) in enumerate(zip(size, stride, strict=True)):
        steps = g.op.Mul(g.op.Range(g.const(0), scalar(n), g.const(1)), scalar(s))
        shape = [1] * len(size)
        shape[d] = -1
        index = g.op.Add(index, g.op.Reshape(steps, g.const(shape)))
    # Every dim of size 1 broadcasts from the Reshape; Expand gives zero-size dims too.
    return g.op.Expand(index, g.int_list(list(size)))


def strided_index(size: list[int], stride: list[int], offset: int) -> torch.Tensor:
    """The flat storage position of each element of an as_strided view, shaped like it."""
    index = torch.full(tuple(size), int(offset), dtype=torch.int64)
    for d, (n, s) in enumerate(zip(size, stride, strict=False)):
        shape = [1] * len(size)
        shape[d] = n
        index = index + (torch.arange(n, dtype=torch.int64) * s).reshape(shape)
    return index


def _reads_all_in_order(src: torch.Tensor, out: Any) -> bool:
    """Whether as_strided(src) -> out reads all of a contiguous src, in order."""
    return (
        isinstance(out, torch.Tensor)
        and out.is_contiguous()
        and _known_true(out.storage_offset() == src.storage_offset())
        and _known_true(out.numel() == src.numel())
    )


@translation(aten.resize.default)
def resize(g: RuleContext, x: ir.Value, size: list[Any], *, memory_format: Any = None) -> ir.Value:
    """resize(Tensor self, SymInt[] size, *, MemoryFormat? memory_format=None) -> Tensor"""
    # torch keeps the storage: the first elements in order, and uninitialised memory
    # past the old end, which here reads as zeros.
    shape = shape_value(g, size)
    flat = g.op.Reshape(x, g.const([-1]))
    numel = g.op.ReduceProd(shape, keepdims=1) if g.opset >= 18 else g.op.ReduceProd(
        shape, keepdims=1, axes=[0])
    extra = g.op.Max(g.op.Sub(numel, g.op.Reshape(g.op.Size(x), g.const([1]))), g.const([0]))
    assert x.dtype is not None
    zeros = g.op.Expand(g.const(0, x.dtype), extra)
    kept = g.op.Slice(g.op.Concat(flat, zeros, axis=0), g.const([0]), numel)
    return g.op.Reshape(kept, shape, allowzero=1)
