"""Orthogonal polynomials (torch.special.*_polynomial_*) and a per-element ONNX Loop helper.

torch evaluates these in the input dtype with a three-term recurrence up to the
element's degree n (n truncated to an integer; n < 0 gives 0), with shortcuts at the
interval ends and, for the Chebyshev kinds with |x| < 1 and large n, a trigonometric
formula. The rules do the same, in the same dtype and operation order, so overflow to
inf/NaN happens where torch's does: the recurrence runs in one ONNX ``Loop`` for all
elements, with a data-dependent trip count (it stops once every element reached its
degree or went NaN), and each element keeps the value at its own degree. Transcendental
steps (acos, sin, cos) are evaluated in float64 and rounded to the dtype, as the C
library's float functions are correctly rounded to within an ulp.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, operand

F64 = ir.DataType.DOUBLE
I64 = ir.DataType.INT64
BOOL = ir.DataType.BOOL

# A loop body: (g, iteration number, states) -> (continue?, new states).
Body = Callable[[RuleContext, ir.Value, list[ir.Value]], tuple[ir.Value, list[ir.Value]]]


def _formal(g: RuleContext, name: str, dtype: ir.DataType,
            shape: ir.Shape | None = None) -> ir.Value:
    g._counter += 1
    return ir.Value(name=f"{name}_{g._counter}", type=ir.TensorType(dtype), shape=shape)


def any_true(g: RuleContext, mask: ir.Value) -> ir.Value:
    """A bool scalar: whether any element of ``mask`` is set (False when it is empty)."""
    count = g.op.ReduceSum(g.op.Cast(mask, to=I64), keepdims=0)
    return g.op.Greater(count, g.const(0, I64))


def loop(g: RuleContext, first: ir.Value, init: list[ir.Value], body: Body,
         max_trips: ir.Value | None = None) -> list[ir.Value]:
    """An ONNX Loop running ``body`` while it returns True (``first``: run at all?).

    ``init`` values must have their dtype set; states keep their shapes.
    """
    dtypes = [v.dtype for v in init]
    with g.scope() as nodes:
        it = _formal(g, "iter", I64, ir.Shape([]))
        cond_in = _formal(g, "cond", BOOL, ir.Shape([]))
        states = [_formal(g, "state", dt) for dt in dtypes]  # type: ignore[arg-type]
        again, new = body(g, it, states)
    for node in nodes:  # subgraph values need names of their own (SSA across graphs)
        for out in node.outputs:
            if out.name is None:
                out.name = _formal(g, "loop", BOOL).name
    graph = g.subgraph("loop_body", [it, cond_in, *states], [again, *new], nodes)
    outs = g.op.Loop(max_trips, first, *init, body=graph, _outputs=len(init))
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    for out, dt in zip(outs, dtypes):
        out.dtype = dt
    return outs


def in_f64(g: RuleContext, op: str, x: ir.Value, dtype: ir.DataType) -> ir.Value:
    """``op`` (Sin, Cos, Acos) evaluated in float64 and rounded once to ``dtype``."""
    x64 = g.cast(x, F64)
    out = acos64(g, x64) if op == "Acos" else getattr(g.op, op)(x64)
    return g.cast(out, dtype)


def acos64(g: RuleContext, x: ir.Value) -> ir.Value:
    """acos in float64 (onnxruntime has no float64 Acos kernel).

    acos|x| = 2 asin(u) with u = sqrt((1 - |x|) / 2) <= 0.71, where asin is
    well-conditioned: a float32 Asin start, then two Newton steps on sin(phi) = u.
    """
    ax = g.op.Abs(x)
    u = g.op.Sqrt(g.op.Mul(g.op.Sub(g.const(1.0, F64), ax), g.const(0.5, F64)))
    phi = g.op.Cast(g.op.Asin(g.op.Cast(u, to=ir.DataType.FLOAT)), to=F64)
    for _ in range(2):
        phi = g.op.Sub(phi, g.op.Div(g.op.Sub(g.op.Sin(phi), u), g.op.Cos(phi)))
    theta = g.op.Mul(g.const(2.0, F64), phi)
    return g.op.Where(g.op.Less(x, g.const(0.0, F64)),
                      g.op.Sub(g.const(math.pi, F64), theta), theta)


def _degree(g: RuleContext, n: ir.Value) -> ir.Value:
    """torch's int64 degree: n truncated; NaN, inf and |n| >= 2^63 read as negative."""
    t = g.op.Where(g.op.Less(n, g.const(0.0, n.dtype)), g.op.Ceil(n), g.op.Floor(n))
    bad = g.op.Or(g.op.IsNaN(n), g.op.Not(g.op.Less(g.op.Abs(n), g.const(2.0 ** 63, n.dtype))))
    t = g.op.Where(bad, g.const(-1.0, n.dtype), t)
    return g.op.Cast(t, to=I64)


class _Spec:
    """One polynomial family: the recurrence and torch's special cases."""

    def __init__(self, kind: str, shifted: bool = False) -> None:
        self.kind = kind  # T, U, V, W, H, He, L, P
        self.shifted = shifted
        # torch's threshold on n for the trigonometric formula (|y| < 1).
        self.trig_above = ({"T": 6, "U": 6, "V": 6, "W": 4} if shifted else
                           {"T": 6, "U": 8, "V": 8, "W": 8}).get(kind)


def _polynomial(spec: _Spec, g: RuleContext, x_in: Any, n_in: Any) -> ir.Value:
    dt = g.dtype
    x = operand(g, x_in, dt)
    n = operand(g, n_in, dt)
    x = g.op.Expand(x, g.op.Shape(n))  # both to the broadcast shape
    n = g.op.Expand(n, g.op.Shape(x))
    x.dtype = n.dtype = dt
    ni = _degree(g, n)
    nf = g.op.Cast(ni, to=dt)

    def c(v: float) -> ir.Value:
        return g.const(v, dt)

    def ci(v: int) -> ir.Value:
        return g.const(v, I64)

    kind = spec.kind
    # y is the Chebyshev argument (2x - 1 for the shifted kinds, computed as torch does).
    y = g.op.Sub(g.op.Add(x, x), c(1.0)) if spec.shifted else x
    y2 = g.op.Add(y, y)
    first = {  # the degree-1 value
        "T": y, "U": y2, "V": g.op.Sub(y2, c(1.0)), "W": g.op.Add(y2, c(1.0)),
        "H": g.op.Add(x, x), "He": x, "L": g.op.Sub(c(1.0), x), "P": x,
    }[kind]

    # torch's compiled kernel fuses a step's last multiply-add into an fma (one rounding):
    # for float32 the step runs in float64, where a float32 product is exact, and rounds
    # once, so results match bit for bit and overflow to inf, then NaN, at torch's step.
    work = F64 if dt in (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16) else dt
    xw, yw = g.cast(x, work), g.cast(y, work)
    y2w = g.op.Add(yw, yw)

    def w(v: float) -> ir.Value:
        return g.const(v, work)

    def fused(a: ir.Value, b: ir.Value, c: ir.Value, d: ir.Value) -> ir.Value:
        """fma(a, b, -(c*d)) in the dtype: c*d rounded, then one rounding (as torch's build)."""
        if work == dt:
            return g.op.Sub(g.op.Mul(a, b), g.op.Mul(c, d))
        cd = g.cast(g.cast(g.op.Mul(c, d), dt), work)
        return g.cast(g.op.Sub(g.op.Mul(a, b), cd), dt)

    def rnd(v: ir.Value) -> ir.Value:
        return g.cast(g.cast(v, dt), work)

    def step(k: ir.Value, p: ir.Value, q: ir.Value) -> ir.Value:
        """Degree k + 1 from q (degree k) and p (degree k - 1); k an int64 scalar."""
        kw = g.op.Cast(k, to=work)
        p, q = g.cast(p, work), g.cast(q, work)
        if kind in ("T", "U", "V", "W"):
            return g.cast(g.op.Sub(g.op.Mul(y2w, q), p), dt)
        if kind == "H":
            return fused(rnd(g.op.Add(xw, xw)), q, g.op.Add(kw, kw), p)
        if kind == "He":
            return fused(xw, q, kw, p)
        if kind == "L":
            a = rnd(g.op.Add(g.op.Add(kw, kw), rnd(g.op.Sub(w(1.0), xw))))
        else:  # P
            a = rnd(g.op.Mul(g.op.Add(g.op.Add(kw, kw), w(1.0)), xw))
        return g.op.Div(fused(a, q, kw, p), g.cast(g.op.Add(kw, w(1.0)), dt))

    # Elements whose value is a special case never need the recurrence.
    special = g.op.Less(ni, ci(2))
    trig_mask = None
    if spec.trig_above is not None:
        trig_mask = g.op.And(g.op.Greater(ni, ci(spec.trig_above)),
                             g.op.Less(g.op.Abs(y), c(1.0)))
        special = g.op.Or(special, trig_mask)
    if kind in ("T", "U", "V", "W", "P"):
        special = g.op.Or(special, g.op.Equal(g.op.Abs(y), c(1.0)))
    if kind == "L":
        special = g.op.Or(special, g.op.Equal(x, c(0.0)))
    limit = None
    if kind in ("H", "He"):
        limit = 512 if dt == F64 else 128
        special = g.op.Or(special, g.op.Greater(ni, ci(limit)))
    need = g.op.Not(special)

    ones = g.op.Expand(c(1.0), g.op.Shape(x))
    res0 = g.op.Where(g.op.Equal(ni, ci(0)), ones, first)
    for v in (ones, first, res0):
        v.dtype = dt

    def body(g: RuleContext, it: ir.Value, states: list[ir.Value]) -> tuple[ir.Value, list[ir.Value]]:
        p, q, res = states
        k = g.op.Add(it, ci(1))  # the degree of q
        q_new = step(k, p, q)
        k1 = g.op.Add(k, ci(1))
        # torch stops at the first NaN and returns it.
        nan = g.op.IsNaN(q_new)
        going = g.op.GreaterOrEqual(ni, k1)
        res = g.op.Where(g.op.And(going, g.op.Or(g.op.Equal(ni, k1), nan)), q_new, res)
        more = g.op.And(g.op.And(need, g.op.Greater(ni, k1)), g.op.Not(nan))
        return any_true(g, more), [q, q_new, res]

    start = any_true(g, g.op.And(need, g.op.Greater(ni, ci(1))))
    _, _, res = loop(g, start, [ones, first, res0], body)

    if trig_mask is not None:
        res = g.op.Where(trig_mask, _trig(g, spec, y, ni, nf, dt), res)
    even = g.op.Equal(g.op.Sub(ni, g.op.Mul(g.op.Div(ni, ci(2)), ci(2))), ci(0))
    sign = g.op.Where(even, c(1.0), c(-1.0))
    n1 = g.op.Cast(g.op.Add(ni, ci(1)), to=dt)
    n21 = g.op.Cast(g.op.Add(g.op.Add(ni, ni), ci(1)), to=dt)
    if kind in ("T", "U", "V", "W", "P"):
        # At y = 1 and y = -1 (x = 1 and x = 0 for the shifted kinds).
        at_one = {"T": c(1.0), "P": c(1.0), "U": n1, "V": c(1.0), "W": n21}[kind]
        at_minus = {"T": sign, "P": sign, "U": g.op.Mul(sign, n1), "V": g.op.Mul(sign, n21),
                    "W": sign}[kind]
        res = g.op.Where(g.op.Equal(y, c(-1.0)), at_minus, res)
        res = g.op.Where(g.op.Equal(y, c(1.0)), at_one, res)
        # n = 0 and n = 1 come after the interval ends in torch's order.
    if kind == "L":
        res = g.op.Where(g.op.Equal(x, c(0.0)), c(1.0), res)
    if limit is not None:
        res = g.op.Where(g.op.Greater(ni, ci(limit)), c(math.nan), res)
    return g.op.Where(g.op.Less(ni, ci(0)), c(0.0), res)


def _trig(g: RuleContext, spec: _Spec, y: ir.Value, ni: ir.Value, nf: ir.Value,
          dt: ir.DataType) -> ir.Value:
    """torch's closed forms for |y| < 1, each step rounded to the dtype as in C."""

    def c(v: float) -> ir.Value:
        return g.const(v, dt)

    theta = in_f64(g, "Acos", y, dt)
    kind = spec.kind
    if kind == "T":
        return in_f64(g, "Cos", g.op.Mul(nf, theta), dt)
    even = g.op.Equal(g.op.Sub(ni, g.op.Mul(g.op.Div(ni, g.const(2, I64)), g.const(2, I64))),
                      g.const(0, I64))
    sign = g.op.Where(even, c(1.0), c(-1.0))
    n21 = g.op.Cast(g.op.Add(g.op.Add(ni, ni), g.const(1, I64)), to=dt)
    if kind == "U":
        n1 = g.op.Cast(g.op.Add(ni, g.const(1, I64)), to=dt)
        a = g.op.Mul(n1, theta)
        s = in_f64(g, "Sin", theta, dt)
        main = g.op.Div(in_f64(g, "Sin", a, dt), s)
        other = g.op.Div(g.op.Mul(n1, in_f64(g, "Cos", a, dt)), y)
        return g.op.Where(g.op.Equal(s, c(0.0)), other, main)
    half = g.op.Div(theta, c(2.0))
    a = g.op.Mul(g.op.Add(nf, c(0.5)), theta)
    if kind == "V":
        main = g.op.Div(in_f64(g, "Cos", a, dt), in_f64(g, "Cos", half, dt))
        edge = g.op.Equal(in_f64(g, "Sin", half, dt), c(1.0))
        return g.op.Where(edge, g.op.Mul(sign, n21), main)
    # W
    main = g.op.Div(in_f64(g, "Sin", a, dt), in_f64(g, "Sin", half, dt))
    edge = g.op.Equal(in_f64(g, "Cos", half, dt), c(1.0))
    fallback = sign if spec.shifted else g.op.Where(g.op.Greater(y, c(0.0)), n21, sign)
    return g.op.Where(edge, fallback, main)


def _register(op_name: str, spec: _Spec) -> None:
    packet = getattr(aten, op_name)

    def rule(g: RuleContext, x: Any, n: Any) -> ir.Value:
        return _polynomial(spec, g, x, n)

    rule.__name__ = op_name
    rule.__doc__ = f"{op_name}(Tensor x, Tensor n) -> Tensor"
    translation([packet.default, packet.x_scalar, packet.n_scalar])(rule)


for _name, _spec in [
    ("special_chebyshev_polynomial_t", _Spec("T")),
    ("special_chebyshev_polynomial_u", _Spec("U")),
    ("special_chebyshev_polynomial_v", _Spec("V")),
    ("special_chebyshev_polynomial_w", _Spec("W")),
    ("special_shifted_chebyshev_polynomial_t", _Spec("T", shifted=True)),
    ("special_shifted_chebyshev_polynomial_u", _Spec("U", shifted=True)),
    ("special_shifted_chebyshev_polynomial_v", _Spec("V", shifted=True)),
    ("special_shifted_chebyshev_polynomial_w", _Spec("W", shifted=True)),
    ("special_hermite_polynomial_h", _Spec("H")),
    ("special_hermite_polynomial_he", _Spec("He")),
    ("special_laguerre_polynomial_l", _Spec("L")),
    ("special_legendre_polynomial_p", _Spec("P")),
]:
    _register(_name, _spec)
