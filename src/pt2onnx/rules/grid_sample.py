"""``grid_sampler_3d`` before opset 20 (ONNX GridSample takes 5-D inputs from opset 20).

The sampling is written out as torch's CPU kernel computes it: the grid is unnormalised
to voxel coordinates, the padding mode folds them (border clamps, reflection reflects
about the edges or the edge centres), then each output point gathers its 8 corner voxels
(trilinear) or its nearest voxel (rounded half to even, as ``nearbyint``) from the input
flattened to (N, D*H*W, C) with GatherND (batch_dims=1). Corners outside the volume
count as zeros, as in torch, whatever the padding mode.
"""

from __future__ import annotations

import itertools

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, rank
from pt2onnx.rules.nn import _GRID_MODES_20, _GRID_PADDING

_I64 = ir.DataType.INT64


def _source_index(g: RuleContext, coord: ir.Value, size: ir.Value, padding: str,
                  align_corners: bool, dtype: ir.DataType) -> ir.Value:
    """torch's grid_sampler_compute_source_index for one axis (``size`` as a float)."""
    one, two = g.const(1.0, dtype), g.const(2.0, dtype)
    zero = g.const(0.0, dtype)
    if align_corners:
        c = g.op.Mul(g.op.Div(g.op.Add(coord, one), two), g.op.Sub(size, one))
    else:
        c = g.op.Div(g.op.Sub(g.op.Mul(g.op.Add(coord, one), size), one), two)
    if padding == "zeros":
        return c
    if padding == "reflection":
        # reflect_coordinates(c, 2 * low, 2 * high), low/high the reflection bounds.
        low = zero if align_corners else g.const(-0.5, dtype)
        span = g.op.Sub(size, one) if align_corners else size
        d = g.op.Abs(g.op.Sub(c, low))
        safe_span = g.op.Where(g.op.Equal(span, zero), one, span)
        extra = g.op.Mod(d, safe_span, fmod=1)
        flips = g.op.Floor(g.op.Div(d, safe_span))
        even = g.op.Equal(g.op.Mod(flips, two, fmod=1), zero)
        c = g.op.Where(even, g.op.Add(extra, low), g.op.Add(g.op.Sub(span, extra), low))
        c = g.op.Where(g.op.Equal(span, zero), zero, c)
    # clip_coordinates: border, and reflection after reflecting.
    return g.op.Min(g.op.Max(c, zero), g.op.Sub(size, one))


@translation(aten.grid_sampler_3d.default)
def grid_sampler_3d_gather(g: RuleContext, x: ir.Value, grid: ir.Value,
                           interpolation_mode: int, padding_mode: int,
                           align_corners: bool) -> ir.Value:
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor"""
    mode = _GRID_MODES_20[interpolation_mode]
    if mode == "cubic":
        raise NotImplementedError("grid_sampler_3d has no bicubic mode in torch")
    padding = _GRID_PADDING[padding_mode]
    n = rank(x) - 2
    dtype = x.dtype if x.dtype is not None else ir.DataType.FLOAT
    xshape, gshape = g.op.Shape(x), g.op.Shape(grid)
    # Sizes of the spatial axes, innermost (W) first, the order of the grid's coordinates.
    sizes_i = [g.op.Gather(xshape, g.const(1 + n - k), axis=0) for k in range(n)]
    sizes_f = [g.cast(s, dtype) for s in sizes_i]
    coords = [_source_index(g, g.op.Gather(grid, g.const(k), axis=-1), sizes_f[k], padding,
                            bool(align_corners), dtype) for k in range(n)]

    # (N, C, *S) -> (N, prod(S), C), and the grid's points flattened to (N, Q).
    batch_c = g.op.Slice(xshape, g.const([0]), g.const([2]))
    xt = g.op.Transpose(g.op.Reshape(x, g.op.Concat(batch_c, g.const([-1]), axis=0)),
                        perm=[0, 2, 1])
    points = g.op.Concat(g.op.Slice(gshape, g.const([0]), g.const([1])), g.const([-1, 1]),
                         axis=0)

    def corner(idx: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
        """The (N, Q, C) values at integer coordinates ``idx`` (int64, innermost first)
        and the (N, Q, 1) mask of those inside the volume."""
        inside = None
        flat = None
        for k in reversed(range(n)):  # outermost (D) first
            ok = g.op.And(g.op.GreaterOrEqual(idx[k], g.const(0, _I64)),
                          g.op.Less(idx[k], sizes_i[k]))
            inside = ok if inside is None else g.op.And(inside, ok)
            clamped = g.op.Min(g.op.Max(idx[k], g.const(0, _I64)),
                               g.op.Sub(sizes_i[k], g.const(1, _I64)))
            flat = clamped if flat is None else g.op.Add(g.op.Mul(flat, sizes_i[k]), clamped)
        assert flat is not None and inside is not None
        values = g.op.GatherND(xt, g.op.Reshape(flat, points), batch_dims=1)
        return values, g.op.Reshape(inside, points)

    zero = g.const(0.0, dtype)
    if mode == "nearest":
        values, inside = corner([g.cast(g.op.Round(c), _I64) for c in coords])
        out = g.op.Where(inside, values, zero)
    else:
        lows = [g.op.Floor(c) for c in coords]
        one = g.const(1.0, dtype)
        # Per axis: the weight of the low corner (low + 1 - c) and of the high one (c - low).
        weights = [(g.op.Sub(g.op.Add(lo, one), c), g.op.Sub(c, lo))
                   for lo, c in zip(lows, coords, strict=True)]
        lows_i = [g.cast(lo, _I64) for lo in lows]
        out = None
        # torch's order: outermost axis slowest (tnw, tne, tsw, tse, bnw, ...).
        for bits in itertools.product((0, 1), repeat=n):
            picks = list(reversed(bits))  # innermost first
            idx = [g.op.Add(lo, g.const(1, _I64)) if b else lo
                   for lo, b in zip(lows_i, picks, strict=True)]
            w = weights[0][picks[0]]
            for k in range(1, n):
                w = g.op.Mul(w, weights[k][picks[k]])
            values, inside = corner(idx)
            term = g.op.Where(inside, g.op.Mul(values, g.op.Reshape(w, points)), zero)
            out = term if out is None else g.op.Add(out, term)
    assert out is not None
    out = g.op.Transpose(out, perm=[0, 2, 1])  # (N, C, Q)
    out_shape = g.op.Concat(batch_c, g.op.Slice(gshape, g.const([1]), g.const([1 + n])),
                            axis=0)
    return g.op.Reshape(out, out_shape)
