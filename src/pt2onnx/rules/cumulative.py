"""Running reductions along one axis as an ONNX Scan: cummax, cummin, cumprod, logcumsumexp.

Each step combines the running state with the next slice in the same order as
torch's CPU kernels, so results match exactly (cummax/cummin, including ties and
NaN) or to rounding (cumprod, logcumsumexp). cumsum has its own ONNX op (reduction.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, torch_dtype, translation
from pt2onnx.rules._common import aten, is_float, normalize_dim, rank

# A step: (g, states, slice, step index) -> new states (also the scan outputs).
Step = Callable[[RuleContext, list[ir.Value], ir.Value, ir.Value], list[ir.Value]]


def _formal(g: RuleContext, name: str, dtype: ir.DataType) -> ir.Value:
    g._counter += 1
    return ir.Value(name=f"{name}_{g._counter}", type=ir.TensorType(dtype))


def _running(g: RuleContext, x: ir.Value, axis: int, init: list[ir.Value],
             step: Step) -> tuple[ir.Value, ...]:
    """Scans ``x`` along ``axis``; returns the stacked states of every step."""
    assert x.dtype is not None and x.shape is not None
    if any(isinstance(d, int) and d == 0 for d in x.shape):
        # An empty result. onnxruntime's Scan rejects a zero-length scan axis, and
        # dies (SIGFPE) scanning a state with a 0 dim (found by the fuzzer).
        return tuple(g.op.Cast(x, to=v.dtype) for v in init)
    if all(isinstance(d, int) for d in x.shape):
        return _scan(g, x, axis, init, step)
    # A dynamic dim may be 0 at run time: the same empty result under an If, around a
    # Scan onnxruntime would reject (or die in).
    empty = g.op.Equal(g.op.Size(x), g.const(0))
    with g.scope() as then_nodes:
        then_outs = [g.op.Cast(x, to=v.dtype) for v in init]
    with g.scope() as else_nodes:
        else_outs = list(_scan(g, x, axis, init, step))
    for nodes in (then_nodes, else_nodes):
        for node in nodes:
            for out in node.outputs:
                if out.name is None:
                    out.name = _formal(g, "cumulative", x.dtype).name
    outs = g.op.If(empty, then_branch=g.subgraph("cumulative_empty", [], then_outs, then_nodes),
                   else_branch=g.subgraph("cumulative_scan", [], else_outs, else_nodes),
                   _outputs=len(init))
    outs = (outs,) if isinstance(outs, ir.Value) else tuple(outs)
    for out, v in zip(outs, init):
        out.dtype = v.dtype
    return outs


def _scan(g: RuleContext, x: ir.Value, axis: int, init: list[ir.Value],
          step: Step) -> tuple[ir.Value, ...]:
    """The Scan itself, over an ``x`` with no zero dim."""
    assert x.dtype is not None
    n = g.op.Squeeze(g.op.Shape(x, start=axis, end=axis + 1), g.const([0]))
    steps = g.op.Range(g.const(0), n, g.const(1))
    with g.scope() as body_nodes:
        states = [_formal(g, "state", v.dtype) for v in init]  # type: ignore[arg-type]
        elem = _formal(g, "elem", x.dtype)
        index = _formal(g, "step", ir.DataType.INT64)
        new = step(g, states, elem, index)
    for node in body_nodes:  # subgraph values need names of their own (SSA across graphs)
        for out in node.outputs:
            if out.name is None:
                out.name = _formal(g, "cumulative", x.dtype).name
    body = g.subgraph("cumulative_body", [*states, elem, index], [*new, *new], body_nodes)
    k = len(init)
    outs = g.op.Scan(*init, x, steps, body=body, num_scan_inputs=2,
                     scan_input_axes=[axis, 0], scan_output_axes=[axis] * k, _outputs=2 * k)
    for out, v in zip(outs[k:], init):
        out.dtype = v.dtype
    return outs[k:]


def _fill(g: RuleContext, x: ir.Value, axis: int, value: Any, dtype: ir.DataType) -> ir.Value:
    """A tensor of ``value`` shaped like one slice of ``x`` along ``axis`` (x may be empty)."""
    shape = g.op.Shape(x)
    sizes = g.op.Concat(g.op.Slice(shape, g.const([0]), g.const([axis])),
                        g.op.Slice(shape, g.const([axis + 1]), g.const([rank(x)])), axis=0)
    out = g.op.Expand(g.const(value, dtype), sizes)
    out.dtype = dtype
    return out


def _extreme_step(ge: str, g: RuleContext, states: list[ir.Value], elem: ir.Value,
                  index: ir.Value) -> list[ir.Value]:
    best, at = states
    # torch: take the new element when it is NaN, or when neither is NaN and it ties or wins.
    better = getattr(g.op, ge)(elem, best)
    if is_float(elem.dtype):
        better = g.op.Or(g.op.IsNaN(elem), g.op.And(g.op.Not(g.op.IsNaN(best)), better))
    return [g.op.Where(better, elem, best), g.op.Where(better, index, at)]


def _cum_extreme(ge: str, g: RuleContext, x: ir.Value, dim: int) -> tuple[ir.Value, ir.Value]:
    if rank(x) == 0:
        return g.op.Identity(x), g.const(0)
    assert x.dtype is not None
    axis = normalize_dim(dim, rank(x))
    if x.dtype == ir.DataType.BOOL:  # ONNX compares no bools: as int32, then != 0
        values, indices = _cum_extreme(ge, g, g.cast(x, ir.DataType.INT32), dim)
        return g.op.Cast(values, to=ir.DataType.BOOL), indices
    info = torch.finfo if is_float(x.dtype) else torch.iinfo
    limits = info(torch_dtype(x.dtype))
    start: Any = limits.min if ge == "GreaterOrEqual" else limits.max
    if is_float(x.dtype):
        start = float("-inf") if ge == "GreaterOrEqual" else float("inf")
    init = [_fill(g, x, axis, start, x.dtype), _fill(g, x, axis, 0, ir.DataType.INT64)]
    values, indices = _running(g, x, axis, init, partial(_extreme_step, ge))
    return values, indices


@translation(aten.cummax.default)
def cummax(g: RuleContext, x: ir.Value, dim: int) -> tuple[ir.Value, ir.Value]:
    """cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)"""
    return _cum_extreme("GreaterOrEqual", g, x, dim)


@translation(aten.cummin.default)
def cummin(g: RuleContext, x: ir.Value, dim: int) -> tuple[ir.Value, ir.Value]:
    """cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)"""
    return _cum_extreme("LessOrEqual", g, x, dim)


def _prod_step(g: RuleContext, states: list[ir.Value], elem: ir.Value,
               index: ir.Value) -> list[ir.Value]:
    return [g.op.Mul(states[0], elem)]


@translation(aten.cumprod.default)
def cumprod(g: RuleContext, x: ir.Value, dim: int, *, dtype: Any = None) -> ir.Value:
    """cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"""
    x = g.cast(x, g.dtype)
    if rank(x) == 0:
        return x
    axis = normalize_dim(dim, rank(x))
    (out,) = _running(g, x, axis, [_fill(g, x, axis, 1, g.dtype)], _prod_step)
    return out


def _logaddexp_step(g: RuleContext, states: list[ir.Value], elem: ir.Value,
                    index: ir.Value) -> list[ir.Value]:
    acc = states[0]
    hi = g.op.Max(acc, elem)
    lo = g.op.Min(acc, elem)
    # hi + log1p(exp(lo - hi)), stable; an infinite hi is its own answer (no inf - inf).
    total = g.op.Add(hi, g.op.Log(g.op.Add(g.const(1.0, elem.dtype), g.op.Exp(g.op.Sub(lo, hi)))))
    out = g.op.Where(g.op.IsInf(hi), hi, total)
    nan = g.op.Or(g.op.IsNaN(acc), g.op.IsNaN(elem))
    return [g.op.Where(nan, g.op.Add(acc, elem), out)]


@translation(aten.logcumsumexp.default)
def logcumsumexp(g: RuleContext, x: ir.Value, dim: int) -> ir.Value:
    """logcumsumexp(Tensor self, int dim) -> Tensor"""
    x = g.cast(x, g.dtype)
    if rank(x) == 0:
        return x
    # float16 and bfloat16 accumulate in float32, as torch's kernel does: each step's
    # log1p(exp(..)) rounded to 11 bits drifts (fuzz seed 2613, program 5999, where a
    # layer_norm over the result then magnified it).
    narrow = g.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
    work = ir.DataType.FLOAT if narrow else g.dtype
    x = g.cast(x, work)
    axis = normalize_dim(dim, rank(x))
    start = _fill(g, x, axis, float("-inf"), work)
    (out,) = _running(g, x, axis, [start], _logaddexp_step)
    return g.cast(out, g.dtype) if narrow else out
