"""Convolution, pooling, resampling and friends."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, torch_dtype, translation
from pt2onnx.rules._common import aten, rank, shape_list, static_dims


def _expand_param(value: Any, n: int) -> list[int]:
    if isinstance(value, int):
        return [value] * n
    value = list(value)
    return value * n if len(value) == 1 else value


@translation(aten.convolution.default)
def convolution(g: RuleContext, x: ir.Value, weight: ir.Value, bias: ir.Value | None,
                stride: list[int], padding: list[int], dilation: list[int], transposed: bool,
                output_padding: list[int], groups: int) -> ir.Value:
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""
    n = rank(weight) - 2
    pads = _expand_param(padding, n)
    attrs: dict[str, Any] = {
        "strides": _expand_param(stride, n),
        "pads": pads + pads,
        "dilations": _expand_param(dilation, n),
        "group": int(groups),
        "kernel_shape": [int(d) for d in shape_list(weight)[2:]],
    }
    if transposed:
        out_pad = _expand_param(output_padding, n)
        if any(out_pad):
            attrs["output_padding"] = out_pad
        return g.op.ConvTranspose(x, weight, bias, **attrs)
    return g.op.Conv(x, weight, bias, **attrs)


def _pool_attrs(n: int, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool) -> dict[str, Any]:
    kernel = _expand_param(kernel_size, n)
    strides = _expand_param(stride, n) if stride else kernel
    pads = _expand_param(padding, n)
    return {"kernel_shape": kernel, "strides": strides, "pads": pads + pads,
            "ceil_mode": int(bool(ceil_mode))}


def _max_pool(n: int, g: RuleContext, x: ir.Value, kernel_size: Any, stride: Any = (),
              padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False) -> Any:
    attrs = _pool_attrs(n, kernel_size, stride, padding, ceil_mode)
    attrs["dilations"] = _expand_param(dilation, n)
    if not g.output_used(1):
        return g.op.MaxPool(x, **attrs), None
    out, flat = g.op.MaxPool(x, **attrs, _outputs=2)
    # ONNX indices count over the whole tensor; torch counts within each plane.
    spatial = g.op.Slice(g.op.Shape(x), g.const([2]), g.const([2 + n]))
    plane = g.op.ReduceProd(spatial, keepdims=1) if g.opset >= 18 else g.op.ReduceProd(
        spatial, keepdims=1, axes=[0])
    return out, g.op.Mod(flat, plane)


@translation(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(g: RuleContext, x: ir.Value, kernel_size: Any, stride: Any = (),
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False) -> Any:
    """max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""
    return _max_pool(2, g, x, kernel_size, stride, padding, dilation, ceil_mode)


@translation(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(g: RuleContext, x: ir.Value, kernel_size: Any, stride: Any = (),
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False) -> Any:
    """max_pool3d_with_indices(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, int[3] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""
    return _max_pool(3, g, x, kernel_size, stride, padding, dilation, ceil_mode)


def _avg_pool(n: int, g: RuleContext, x: ir.Value, kernel_size: Any, stride: Any = (),
              padding: Any = 0, ceil_mode: bool = False, count_include_pad: bool = True,
              divisor_override: Any = None) -> ir.Value:
    if divisor_override is not None:
        return _sum_pool(n, g, x, kernel_size, stride, padding, divisor_override)
    attrs = _pool_attrs(n, kernel_size, stride, padding, ceil_mode)
    return g.op.AveragePool(x, count_include_pad=int(bool(count_include_pad)), **attrs)


def _sum_pool(n: int, g: RuleContext, x: ir.Value, kernel_size: Any, stride: Any,
              padding: Any, divisor: int) -> ir.Value:
    """Window sums (a Conv with a ones kernel on one channel) divided by ``divisor``."""
    out_shape, in_dims = g.static_shape(), static_dims(x)
    if out_shape is None or in_dims is None:
        raise NotImplementedError("avg_pool with divisor_override needs static shapes")
    kernel = _expand_param(kernel_size, n)
    strides = _expand_param(stride, n) if stride else kernel
    pads = _expand_param(padding, n)
    in_sizes, out_sizes = in_dims[-n:], list(out_shape)[-n:]
    # ceil_mode is folded into extra end padding, so that the Conv yields torch's output size.
    end = [max(p, (o - 1) * s + k - i - p)
           for i, o, k, s, p in zip(in_sizes, out_sizes, kernel, strides, pads, strict=True)]
    planes = g.op.Reshape(x, g.const([-1, 1] + in_sizes))
    ones = g.const(torch.ones([1, 1] + kernel, dtype=torch_dtype(g.dtype)))
    sums = g.op.Conv(planes, ones, kernel_shape=kernel, strides=strides, pads=pads + end)
    sums = g.op.Reshape(sums, g.const(list(out_shape)))
    return g.op.Div(sums, g.const(float(divisor), g.dtype))


@translation(aten.avg_pool2d.default)
def avg_pool2d(g: RuleContext, x: ir.Value, kernel_size: Any, stride: Any = (), padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: Any = None) -> ir.Value:
    """avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor"""
    return _avg_pool(2, g, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


@translation(aten.avg_pool1d.default)
def avg_pool1d(g: RuleContext, x: ir.Value, kernel_size: Any, stride: Any = (), padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> ir.Value:
    """avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=0, bool ceil_mode=False, bool count_include_pad=True) -> Tensor"""
    return _avg_pool(1, g, x, kernel_size, stride, padding, ceil_mode, count_include_pad)


@translation(aten.avg_pool3d.default)
def avg_pool3d(g: RuleContext, x: ir.Value, kernel_size: Any, stride: Any = (), padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: Any = None) -> ir.Value:
    """avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor"""
    return _avg_pool(3, g, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _adaptive(onnx_global: str, onnx_pool: str, n: int, g: RuleContext, x: ir.Value,
              output_size: Any) -> ir.Value:
    if rank(x) == n + 1:  # unbatched: ONNX pooling wants a batch axis
        batched = g.op.Unsqueeze(x, g.const([0]))
        batched.type, batched.shape = x.type, ir.Shape([1, *x.shape])  # type: ignore[misc]
        pooled = _adaptive(onnx_global, onnx_pool, n, g, batched, output_size)
        return g.op.Squeeze(pooled, g.const([0]))
    out = _expand_param(output_size, n)
    in_shape = shape_list(x)[-n:]
    out = [i if o is None else o for i, o in zip(in_shape, out, strict=True)]
    if all(o == 1 for o in out):
        return getattr(g.op, onnx_global)(x)
    if all(isinstance(i, int) and i % o == 0 for i, o in zip(in_shape, out, strict=False)):
        k = [i // o for i, o in zip(in_shape, out, strict=False)]
        return getattr(g.op, onnx_pool)(x, kernel_shape=k, strides=k)
    if not all(isinstance(i, int) for i in in_shape):
        raise NotImplementedError(
            f"adaptive pooling from {in_shape} to {out}: the input size is not a multiple of "
            "the output and is not static"
        )
    # Windows are rectangles, so pooling one spatial axis at a time is exact.
    r = rank(x)
    for axis, (size, o) in enumerate(zip(in_shape, out, strict=True), start=r - n):
        x = _adaptive_axis(g, x, r, axis, size, o, onnx_pool == "MaxPool")
    return x


def _adaptive_windows(size: int, out: int) -> tuple[list[list[int]], list[list[bool]]]:
    """torch's adaptive windows [floor(i*size/out), ceil((i+1)*size/out)), padded to one length
    by repeating the last index; the mask marks the real entries."""
    bounds = [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]
    width = max(b - a for a, b in bounds)
    index = [[min(a + j, b - 1) for j in range(width)] for a, b in bounds]
    mask = [[a + j < b for j in range(width)] for a, b in bounds]
    return index, mask


def _adaptive_axis(g: RuleContext, x: ir.Value, r: int, axis: int, size: int, out: int,
                   is_max: bool) -> ir.Value:
    index, mask = _adaptive_windows(size, out)
    windows = g.op.Gather(x, g.const(index), axis=axis)  # (..., out, width, ...)
    if is_max:
        return _reduce(g, "ReduceMax", windows, axis + 1)
    if not all(all(row) for row in mask):
        windows = g.op.Where(g.const(_trailing(mask, r - axis - 1)), windows,
                             g.const(0.0, g.dtype))
    counts = [[float(sum(row))] for row in mask]
    total = _reduce(g, "ReduceSum", windows, axis + 1)
    return g.op.Div(total, g.const(_trailing(counts, r - axis - 2), g.dtype))


def _trailing(rows: list[Any], n: int) -> Any:
    """A nested list with ``n`` trailing size-1 axes, to broadcast against (..., out, width, ...)."""
    arr = np.asarray(rows)
    return arr.reshape(arr.shape + (1,) * max(n, 0)) if n >= 0 else arr.reshape(-1)


def _reduce(g: RuleContext, onnx_op: str, x: ir.Value, axis: int) -> ir.Value:
    if onnx_op == "ReduceSum" or g.opset >= 18:
        return getattr(g.op, onnx_op)(x, g.const([axis]), keepdims=0)
    return getattr(g.op, onnx_op)(x, axes=[axis], keepdims=0)


def _adaptive_max(n: int, g: RuleContext, x: ir.Value, output_size: Any) -> Any:
    if not g.output_used(1):
        return _adaptive("GlobalMaxPool", "MaxPool", n, g, x, output_size), None
    out = _expand_param(output_size, n)
    # Only the pooled dims shape the windows and the indices (flat within each plane):
    # the batch and channel dims may be dynamic.
    in_shape = shape_list(x)[-n:]
    if not all(isinstance(d, int) for d in in_shape):
        raise NotImplementedError(
            f"adaptive_max_pool indices need static pooled dims, not {in_shape}")
    # One axis at a time, last first: the first maximum in each window's row-major order.
    r = rank(x)
    values, flat, inner = x, None, 1
    for axis in reversed(range(r - n, r)):
        size, o = in_shape[axis - r + n], out[axis - r + n]
        index, _ = _adaptive_windows(size, o)
        starts = g.const(_trailing([row[0] for row in index], r - axis - 1))
        windows = g.op.Gather(values, g.const(index), axis=axis)
        pick = g.op.ArgMax(windows, axis=axis + 1, keepdims=1)
        values = g.op.Squeeze(g.op.GatherElements(windows, pick, axis=axis + 1),
                              g.const([axis + 1]))
        pos = g.op.Add(g.op.Squeeze(pick, g.const([axis + 1])), starts)
        if flat is None:
            flat = pos
        else:
            chosen = g.op.GatherElements(g.op.Gather(flat, g.const(index), axis=axis), pick,
                                         axis=axis + 1)
            flat = g.op.Add(g.op.Mul(pos, g.const(inner)),
                            g.op.Squeeze(chosen, g.const([axis + 1])))
        inner *= size
    return values, flat


@translation(aten.adaptive_max_pool2d.default)
def adaptive_max_pool2d(g: RuleContext, x: ir.Value, output_size: Any) -> Any:
    """adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)"""
    return _adaptive_max(2, g, x, output_size)


@translation(aten.adaptive_max_pool3d.default)
def adaptive_max_pool3d(g: RuleContext, x: ir.Value, output_size: Any) -> Any:
    """adaptive_max_pool3d(Tensor self, int[3] output_size) -> (Tensor, Tensor)"""
    return _adaptive_max(3, g, x, output_size)


@translation(aten.adaptive_max_pool1d.default)
def adaptive_max_pool1d(g: RuleContext, x: ir.Value, output_size: Any) -> Any:
    """adaptive_max_pool1d(Tensor self, int[1] output_size) -> (Tensor, Tensor)"""
    return _adaptive_max(1, g, x, output_size)


@translation(aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(g: RuleContext, x: ir.Value, output_size: Any) -> ir.Value:
    """_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor"""
    return _adaptive("GlobalAveragePool", "AveragePool", 2, g, x, output_size)


@translation(aten._adaptive_avg_pool3d.default)
def adaptive_avg_pool3d(g: RuleContext, x: ir.Value, output_size: Any) -> ir.Value:
    """_adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor"""
    return _adaptive("GlobalAveragePool", "AveragePool", 3, g, x, output_size)


@translation(aten._adaptive_avg_pool1d.default if hasattr(aten, "_adaptive_avg_pool1d")
             else aten.adaptive_avg_pool1d.default)
def adaptive_avg_pool1d(g: RuleContext, x: ir.Value, output_size: Any) -> ir.Value:
    """adaptive_avg_pool1d(Tensor self, int[1] output_size) -> Tensor"""
    return _adaptive("GlobalAveragePool", "AveragePool", 1, g, x, output_size)


# -- resampling ---------------------------------------------------------------


def _in_float(g: RuleContext, x: ir.Value, compute: Any) -> ir.Value:
    """``compute(x)`` for a float ``x``; an integer image (uint8) is resampled in float32,
    then rounded and clamped to its dtype's range, as torch's integer kernels round (torch
    rounds in fixed point: within 1 of eager, where ONNX's integer Resize and a MatMul
    in uint8 were not)."""
    dtype = x.dtype if x.dtype is not None else g.dtype
    if dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16,
                 ir.DataType.BFLOAT16, None):
        return compute(x)
    info = torch.iinfo(torch_dtype(dtype))
    y = g.op.Round(compute(g.cast(x, ir.DataType.FLOAT)))
    y = g.op.Clip(y, g.const(float(info.min), ir.DataType.FLOAT),
                  g.const(float(info.max), ir.DataType.FLOAT))
    return g.cast(y, dtype)


def _resize(g: RuleContext, x: ir.Value, mode: str, align_corners: bool | None,
            scale_factors: Any, n: int, output_size: Any = None) -> ir.Value:
    dtype = x.dtype if x.dtype is not None else g.dtype
    if mode == "nearest" or dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE,
                                      ir.DataType.FLOAT16, ir.DataType.BFLOAT16, None):
        return _resize_float(g, x, mode, align_corners, scale_factors, n, output_size)
    # An integer image: torch resamples one axis at a time from the last, rounding to the
    # dtype in between (a bicubic overshoot is clamped before the next axis).
    sizes = _target_shape(g, x, scale_factors, n, output_size)
    y = x
    for axis in range(n - 1, -1, -1):
        keep = g.op.Shape(y)
        target = g.op.Concat(g.op.Slice(keep, g.const([0]), g.const([2 + axis])),
                             g.op.Slice(sizes, g.const([2 + axis]), g.const([3 + axis])),
                             g.op.Slice(keep, g.const([3 + axis]), g.const([2 + n])), axis=0)
        y = _in_float(g, y, lambda yf, target=target, axis=axis: _resize_to(
            g, yf, mode, align_corners, scale_factors, n, axis, target))
    return y


def _resize_to(g: RuleContext, x: ir.Value, mode: str, align_corners: bool | None,
               scale_factors: Any, n: int, axis: int, sizes: ir.Value) -> ir.Value:
    """One axis of an integer image's resampling (the others keep their sizes)."""
    attrs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode":
                             "align_corners" if align_corners else "half_pixel"}
    if mode == "cubic":
        attrs["cubic_coeff_a"] = -0.75
    if scale_factors is not None and not align_corners:
        scales = [1.0] * (2 + n)
        scales[2 + axis] = float(_expand_param(scale_factors, n)[axis])
        return g.op.Resize(x, None, g.const(scales, ir.DataType.FLOAT), **attrs)
    return g.op.Resize(x, None, None, sizes, **attrs)


def _resize_float(g: RuleContext, x: ir.Value, mode: str, align_corners: bool | None,
                  scale_factors: Any, n: int, output_size: Any = None) -> ir.Value:
    attrs: dict[str, Any] = {"mode": mode}
    if mode == "nearest":
        attrs["coordinate_transformation_mode"] = "asymmetric"
        attrs["nearest_mode"] = "floor"
    elif align_corners:
        attrs["coordinate_transformation_mode"] = "align_corners"
    else:
        # Not pytorch_half_pixel: that maps an output of length 1 to source index 0,
        # while torch samples the centre, as half_pixel does (measured, linear and cubic).
        attrs["coordinate_transformation_mode"] = "half_pixel"
    if mode == "cubic":
        attrs["cubic_coeff_a"] = -0.75
    if scale_factors is not None and not align_corners:
        scales = [1.0, 1.0] + [float(s) for s in _expand_param(scale_factors, n)]
        return g.op.Resize(x, None, g.const(scales, ir.DataType.FLOAT), **attrs)
    return g.op.Resize(x, None, None, _target_shape(g, x, scale_factors, n, output_size),
                       **attrs)


def _target_shape(g: RuleContext, x: ir.Value, scale_factors: Any, n: int,
                  output_size: Any) -> ir.Value:
    """The resampled shape, a 1-D int64 value: static where known, else the batch and
    channel dims of x and the spatial sizes torch computes."""
    static = g.static_shape()
    if static is not None:
        return g.const(list(static))
    # A dynamic batch or channel dim: keep those from x and compute the spatial sizes.
    in_shape = g.op.Shape(x)
    lead = g.op.Slice(in_shape, g.const([0]), g.const([2]))
    if output_size is not None:
        spatial = g.int_list(list(output_size))
    else:
        # torch takes floor(in * scale) in double precision.
        factors = g.const([float(s) for s in _expand_param(scale_factors, n)], ir.DataType.DOUBLE)
        in_spatial = g.cast(g.op.Slice(in_shape, g.const([2]), g.const([2 + n])),
                            ir.DataType.DOUBLE)
        spatial = g.cast(g.op.Floor(g.op.Mul(in_spatial, factors)), ir.DataType.INT64)
    return g.op.Concat(lead, spatial, axis=0)


def _upsample(mode: str, n: int, align: bool):  # type: ignore[no-untyped-def]
    if align:
        def rule(g: RuleContext, x: ir.Value, output_size: Any, align_corners: bool,
                 scale_factors: Any) -> ir.Value:
            return _resize(g, x, mode, align_corners, scale_factors, n, output_size)
    else:
        def rule(g: RuleContext, x: ir.Value, output_size: Any,  # type: ignore[misc]
                 scale_factors: Any) -> ir.Value:
            return _resize(g, x, mode, None, scale_factors, n, output_size)
    rule.__doc__ = f"upsample ({mode}, {n}-d, vec overload)"
    return rule




def _upsample_sized(mode: str, n: int, align: bool):  # type: ignore[no-untyped-def]
    # The .default overloads take the output size and, optionally, the scales
    # the size came from; torch maps coordinates with the scales when all are given.
    def rule(g: RuleContext, x: ir.Value, output_size: Any, *rest: Any) -> ir.Value:
        align_corners = bool(rest[0]) if align else None
        scales = list(rest[1:] if align else rest)
        if len(scales) == n and all(s is not None for s in scales) and not align_corners:
            return _resize(g, x, mode, align_corners, scales, n)
        return _resize(g, x, mode, align_corners, None, n, output_size)

    rule.__doc__ = f"upsample ({mode}, {n}-d, output_size overload)"
    return rule


# Each upsample op has a .vec overload (output size or scale factors) and a .default
# one (output size, optionally with the scales it came from).
for _packet, _mode, _n, _align in (
    (aten.upsample_nearest1d, "nearest", 1, False),
    (aten.upsample_nearest2d, "nearest", 2, False),
    (aten.upsample_nearest3d, "nearest", 3, False),
    (aten.upsample_linear1d, "linear", 1, True),
    (aten.upsample_bilinear2d, "linear", 2, True),
    (aten.upsample_trilinear3d, "linear", 3, True),
    (aten.upsample_bicubic2d, "cubic", 2, True),
):
    translation(_packet.vec)(_upsample(_mode, _n, _align))
    translation(_packet.default)(_upsample_sized(_mode, _n, _align))


def _aa_filter(mode: str, x: float) -> float:
    x = abs(x)
    if mode == "linear":
        return 1.0 - x if x < 1.0 else 0.0
    a = -0.5  # torch's antialiased bicubic uses PIL's kernel
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    if x < 2.0:
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return 0.0


def _aa_weights(mode: str, size_in: int, size_out: int, align_corners: bool,
                scale: float | None) -> np.ndarray:
    """The (size_out, size_in) matrix of torch's antialiased interpolation along one
    axis: PIL's separable filter, its support widened by the scale when downsampling."""
    if align_corners:
        ratio = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale is not None and scale > 0 else size_in / size_out
    interp = 2.0 if mode == "linear" else 4.0
    support = interp * 0.5 * ratio if ratio >= 1.0 else interp * 0.5
    invscale = 1.0 / ratio if ratio >= 1.0 else 1.0
    w = np.zeros((size_out, size_in), dtype=np.float64)
    for i in range(size_out):
        center = ratio * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), size_in)
        row = [_aa_filter(mode, (j - center + 0.5) * invscale) for j in range(lo, hi)]
        total = sum(row)
        if total != 0.0:
            w[i, lo:hi] = [v / total for v in row]
    return w


def _upsample_aa(mode: str):  # type: ignore[no-untyped-def]
    def rule(g: RuleContext, x: ir.Value, output_size: Any, align_corners: bool,
             *scales: Any) -> ir.Value:
        # ONNX Resize's antialias (opset 18) weighs the source pixels differently from
        # torch (measured: 0.13 off when downsampling), so the filter is applied as two
        # MatMuls with torch's weights, computed here from the static sizes.
        dims = static_dims(x)
        out = g.static_shape()
        if dims is None or out is None:
            raise NotImplementedError(
                "antialiased interpolation needs static spatial sizes (the filter "
                "weights are computed at export); export with fixed height and width")
        factors = list(scales[0]) if scales and isinstance(scales[0], (list, tuple)) \
            else list(scales)
        factors = factors if len(factors) == 2 and all(f is not None for f in factors) \
            else [None, None]
        wh = _aa_weights(mode, dims[-2], out[-2], bool(align_corners), factors[0])
        ww = _aa_weights(mode, dims[-1], out[-1], bool(align_corners), factors[1])

        dtype = x.dtype if x.dtype is not None else g.dtype
        if dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16,
                     ir.DataType.BFLOAT16):
            y = g.op.MatMul(x, g.const(torch.tensor(ww.T), dtype))
            return g.op.MatMul(g.const(torch.tensor(wh), dtype), y)
        # An integer image: torch filters the rows, rounds to the dtype, then the columns.
        f32 = ir.DataType.FLOAT
        y = _in_float(g, x, lambda xf: g.op.MatMul(xf, g.const(torch.tensor(ww.T), f32)))
        return _in_float(g, y, lambda yf: g.op.MatMul(g.const(torch.tensor(wh), f32), yf))

    rule.__doc__ = f"antialiased {mode} interpolation as torch computes it (static sizes)"
    return rule


# interpolate(..., antialias=True).
for _packet, _mode in ((aten._upsample_bilinear2d_aa, "linear"),
                       (aten._upsample_bicubic2d_aa, "cubic")):
    translation(_packet.default)(_upsample_aa(_mode))
    translation(_packet.vec)(_upsample_aa(_mode))


@translation(aten.pixel_shuffle.default)
def pixel_shuffle(g: RuleContext, x: ir.Value, upscale_factor: int) -> ir.Value:
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor"""
    r, k = int(upscale_factor), rank(x) - 3
    if k == 1:
        return g.op.DepthToSpace(x, blocksize=r, mode="CRD")
    # (*, C*r*r, H, W) -> (*, C, r, r, H, W) -> (*, C, H, r, W, r) -> (*, C, H*r, W*r),
    # with sizes read from the graph: any number of batch dims, any of them dynamic.
    lead, c, h, w = _last_three(g, x)
    y = g.op.Reshape(x, g.op.Concat(lead, g.op.Div(c, g.const([r * r])), g.const([r, r]),
                                    h, w, axis=0), allowzero=1)
    y = g.op.Transpose(y, perm=[*range(k), k, k + 3, k + 1, k + 4, k + 2])
    return g.op.Reshape(y, g.op.Concat(lead, g.op.Div(c, g.const([r * r])),
                                       g.op.Mul(h, g.const([r])), g.op.Mul(w, g.const([r])),
                                       axis=0), allowzero=1)


@translation(aten.pixel_unshuffle.default)
def pixel_unshuffle(g: RuleContext, x: ir.Value, downscale_factor: int) -> ir.Value:
    """pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor"""
    r, k = int(downscale_factor), rank(x) - 3
    # (*, C, H, W) -> (*, C, H/r, r, W/r, r) -> (*, C, r, r, H/r, W/r) -> (*, C*r*r, H/r, W/r)
    lead, c, h, w = _last_three(g, x)
    hr, wr = g.op.Div(h, g.const([r])), g.op.Div(w, g.const([r]))
    y = g.op.Reshape(x, g.op.Concat(lead, c, hr, g.const([r]), wr, g.const([r]), axis=0),
                     allowzero=1)
    y = g.op.Transpose(y, perm=[*range(k), k, k + 2, k + 4, k + 1, k + 3])
    return g.op.Reshape(y, g.op.Concat(lead, g.op.Mul(c, g.const([r * r])), hr, wr, axis=0),
                        allowzero=1)


def _last_three(g: RuleContext, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """Shape(x) as (the leading dims, C, H, W), each a 1-D int64 value (the leading
    part possibly empty); constants where the sizes are static."""
    n = rank(x)
    dims = x.shape
    if dims is not None and all(isinstance(d, int) for d in dims):
        sizes = [int(d) for d in dims]  # type: ignore[arg-type]
        return (g.const(sizes[:-3] or np.zeros(0, np.int64)), g.const(sizes[-3:-2]),
                g.const(sizes[-2:-1]), g.const(sizes[-1:]))
    shape = g.op.Shape(x)
    return (g.op.Slice(shape, g.const([0]), g.const([n - 3])),
            g.op.Slice(shape, g.const([n - 3]), g.const([n - 2])),
            g.op.Slice(shape, g.const([n - 2]), g.const([n - 1])),
            g.op.Slice(shape, g.const([n - 1]), g.const([n])))


_GRID_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_GRID_MODES_20 = {0: "linear", 1: "nearest", 2: "cubic"}
_GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@translation(aten.grid_sampler_2d.default)
def grid_sampler_2d(g: RuleContext, x: ir.Value, grid: ir.Value, interpolation_mode: int,
                    padding_mode: int, align_corners: bool) -> ir.Value:
    """grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor"""
    modes = _GRID_MODES_20 if g.opset >= 20 else _GRID_MODES
    return g.op.GridSample(x, grid, mode=modes[interpolation_mode],
                           padding_mode=_GRID_PADDING[padding_mode],
                           align_corners=int(bool(align_corners)))


@translation(aten.grid_sampler_3d.default, since=20)
def grid_sampler_3d(g: RuleContext, x: ir.Value, grid: ir.Value, interpolation_mode: int,
                    padding_mode: int, align_corners: bool) -> ir.Value:
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor"""
    # GridSample takes 5-D inputs from opset 20.
    return g.op.GridSample(x, grid, mode=_GRID_MODES_20[interpolation_mode],
                           padding_mode=_GRID_PADDING[padding_mode],
                           align_corners=int(bool(align_corners)))


@translation(aten.col2im.default)
def col2im(g: RuleContext, x: ir.Value, output_size: Any, kernel_size: Any, dilation: Any,
           padding: Any, stride: Any) -> ir.Value:
    """col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor"""
    h, w = _expand_param(output_size, 2)
    kh, kw = _expand_param(kernel_size, 2)
    dh, dw = _expand_param(dilation, 2)
    ph, pw = _expand_param(padding, 2)
    sh, sw = _expand_param(stride, 2)
    shape = list(x.shape)  # type: ignore[arg-type]
    if not all(isinstance(d, int) for d in shape):
        raise NotImplementedError("col2im with dynamic input sizes")
    batched = len(shape) == 3
    n = shape[0] if batched else 1
    c = shape[-2] // (kh * kw)
    hp, wp = h + 2 * ph, w + 2 * pw
    bh = (hp - dh * (kh - 1) - 1) // sh + 1
    bw = (wp - dw * (kw - 1) - 1) // sw + 1
    # Column (ki, kj, block) adds into the padded output at a position known now.
    pos = [
        (bi * sh + ki * dh) * wp + (bj * sw + kj * dw)
        for ki in range(kh) for kj in range(kw) for bi in range(bh) for bj in range(bw)
    ]
    cols = g.op.Reshape(x, g.const([n, c, kh * kw * bh * bw]))
    index = g.op.Expand(g.const([[pos]]), g.const([n, c, len(pos)]))
    zeros = g.op.Expand(g.const(0.0, g.dtype), g.const([n, c, hp * wp]))
    out = g.op.ScatterElements(zeros, index, cols, axis=2, reduction="add")
    out = g.op.Reshape(out, g.const([n, c, hp, wp]))
    out = g.op.Slice(out, g.const([ph, pw]), g.const([ph + h, pw + w]), g.const([2, 3]))
    return out if batched else g.op.Reshape(out, g.const([c, h, w]))
