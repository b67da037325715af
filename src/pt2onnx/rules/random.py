"""Random ops: samplers, dropout, rrelu and fractional max pooling.

The exported graph draws from onnxruntime's generator (RandomUniform, RandomNormal,
Multinomial), so values never equal eager's; only the distribution does.
tests/test_random_rules.py checks each distribution statistically. Other distributions
are transforms of uniform or normal samples (inverse CDFs). A ``torch.Generator``
argument does not carry over: the rule warns and samples from onnxruntime's generator.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, op_name, torch_dtype, translation
from pt2onnx.rules._common import aten, shape_value

_FLOAT, _DOUBLE = ir.DataType.FLOAT, ir.DataType.DOUBLE


def _work(dtype: ir.DataType) -> ir.DataType:
    # onnxruntime's Random* kernels produce float and double only (no float16/bfloat16).
    return _DOUBLE if dtype == _DOUBLE else _FLOAT


def _no_generator(g: RuleContext, generator: Any) -> None:
    if generator is not None:
        op = op_name(g.node.target) if g.node is not None else "a random op"
        warnings.warn(
            f"{op} was given a torch.Generator: its seed and state do not carry over to ONNX. "
            "The exported model samples from onnxruntime's generator (seed it with "
            "onnxruntime.set_seed before creating the session for repeatable runs).",
            stacklevel=2,
        )


def _output(g: RuleContext, value: ir.Value, have: ir.DataType) -> ir.Value:
    """``value``, computed as ``have``, as the output dtype (a Cast only when they differ)."""
    value.dtype = have
    return g.cast(value, g.dtype)


def _draw(g: RuleContext, kind: str, like: ir.Value | None = None, size: Any = None,
          work: ir.DataType | None = None) -> ir.Value:
    """Standard ``kind`` ("RandomUniform" [0, 1) or "RandomNormal") samples in the
    output's shape, as float or double; ``like`` or ``size`` gives a dynamic shape."""
    work = work or _work(g.dtype)
    static = g.static_shape()
    if static is not None:
        return getattr(g.op, kind)(dtype=work, shape=list(static))
    if like is None:
        like = g.op.ConstantOfShape(shape_value(g, size))
    return getattr(g.op, f"{kind}Like")(like, dtype=work)


def _affine(g: RuleContext, z: ir.Value, shift: Any, scale: Any,
            work: ir.DataType | None = None) -> ir.Value:
    """shift + scale * z (z of type ``work``, by default the output's sampling type);
    shift and scale are Python floats or tensors."""
    work = work or _work(g.dtype)
    if not isinstance(scale, ir.Value) and scale == 1:
        out = z
    else:
        s = g.cast(scale, work) if isinstance(scale, ir.Value) else g.const(float(scale), work)
        out = g.op.Mul(z, s)
    if not isinstance(shift, ir.Value) and shift == 0:
        return out
    m = g.cast(shift, work) if isinstance(shift, ir.Value) else g.const(float(shift), work)
    return g.op.Add(out, m)


def _uniform_output(g: RuleContext, value: ir.Value, high: float) -> ir.Value:
    """Uniform float32/float64 samples below ``high`` as the output dtype. For float16
    and bfloat16 the draws are first clamped to the largest value of that type below
    ``high``, which rounding then cannot cross."""
    if g.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16):
        dtype = torch_dtype(g.dtype)
        top = torch.nextafter(torch.tensor(high, dtype=dtype),
                              torch.tensor(-math.inf, dtype=dtype))
        value = g.op.Min(value, g.const(float(top), _FLOAT))
    return _output(g, value, _work(g.dtype))


# -- uniform and normal ---------------------------------------------------------------

@translation([aten.rand.default, aten.rand.generator])
def rand(g: RuleContext, size: list[Any], *, generator: Any = None, **_: Any) -> ir.Value:
    """rand(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    _no_generator(g, generator)
    return _uniform_output(g, _draw(g, "RandomUniform", size=size), 1.0)


@translation([aten.randn.default, aten.randn.generator])
def randn(g: RuleContext, size: list[Any], *, generator: Any = None, **_: Any) -> ir.Value:
    """randn(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    _no_generator(g, generator)
    return _output(g, _draw(g, "RandomNormal", size=size), _work(g.dtype))


@translation([aten.rand_like.default, aten.rand_like.generator])
def rand_like(g: RuleContext, x: ir.Value, *, generator: Any = None, **_: Any) -> ir.Value:
    """rand_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    _no_generator(g, generator)
    return _uniform_output(g, _draw(g, "RandomUniform", like=x), 1.0)


@translation([aten.randn_like.default, aten.randn_like.generator])
def randn_like(g: RuleContext, x: ir.Value, *, generator: Any = None, **_: Any) -> ir.Value:
    """randn_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    _no_generator(g, generator)
    return _output(g, _draw(g, "RandomNormal", like=x), _work(g.dtype))


@translation(aten.uniform.default)
def uniform(g: RuleContext, x: ir.Value, low: float = 0.0, high: float = 1.0, *,
            generator: Any = None) -> ir.Value:
    """uniform(Tensor self, float from=0., float to=1., *, Generator? generator=None) -> Tensor"""
    _no_generator(g, generator)
    u = _draw(g, "RandomUniform", like=x)
    return _uniform_output(g, _affine(g, u, low, float(high) - float(low)), high)


@translation(aten.normal_functional.default)
def normal_functional(g: RuleContext, x: ir.Value, mean: float = 0.0, std: float = 1.0, *,
                      generator: Any = None) -> ir.Value:
    """normal_functional(Tensor self, float mean=0., float std=1., *, Generator? generator=None) -> Tensor"""
    _no_generator(g, generator)
    return _output(g, _affine(g, _draw(g, "RandomNormal", like=x), mean, std), _work(g.dtype))


@translation([aten.normal.Tensor_float, aten.normal.float_Tensor, aten.normal.Tensor_Tensor])
def normal(g: RuleContext, mean: Any, std: Any = 1.0, *, generator: Any = None) -> ir.Value:
    """normal.Tensor_Tensor(Tensor mean, Tensor std, *, Generator? generator=None) -> Tensor"""
    _no_generator(g, generator)
    work = _work(g.dtype)
    tensors = [g.cast(v, work) for v in (mean, std) if isinstance(v, ir.Value)]
    # The output has the broadcast shape of mean and std.
    like = tensors[0] if len(tensors) == 1 else g.op.Add(*tensors)
    z = _draw(g, "RandomNormal", like=like)
    return _output(g, _affine(g, z, mean, std), _work(g.dtype))


@translation(aten.normal.float_float)
def normal_float_float(g: RuleContext, mean: float, std: float, size: list[Any], *,
                       generator: Any = None, **_: Any) -> ir.Value:
    """normal.float_float(float mean, float std, SymInt[] size, *, Generator? generator=None, ScalarType? dtype=None, ...) -> Tensor"""
    _no_generator(g, generator)
    z = _draw(g, "RandomNormal", size=size)
    return _output(g, _affine(g, z, mean, std), _work(g.dtype))


@translation(aten.log_normal.default)
def log_normal(g: RuleContext, x: ir.Value, mean: float = 1.0, std: float = 2.0, *,
               generator: Any = None) -> ir.Value:
    """log_normal(Tensor self, float mean=1., float std=2., *, Generator? generator=None) -> Tensor"""
    _no_generator(g, generator)
    z = _draw(g, "RandomNormal", like=x)
    return _output(g, g.op.Exp(_affine(g, z, mean, std)), _work(g.dtype))


# -- inverse-CDF transforms of uniform samples ----------------------------------------

def _one_minus_uniform(g: RuleContext, x: ir.Value) -> tuple[ir.Value, ir.DataType]:
    """Uniform samples on (0, 1]: 1 - U[0, 1), so that their log is finite."""
    work = _work(g.dtype)
    return g.op.Sub(g.const(1.0, work), _draw(g, "RandomUniform", like=x)), work


@translation(aten.exponential.default)
def exponential(g: RuleContext, x: ir.Value, lambd: float = 1.0, *,
                generator: Any = None) -> ir.Value:
    """exponential(Tensor self, float lambd=1., *, Generator? generator=None) -> Tensor"""
    _no_generator(g, generator)
    v, work = _one_minus_uniform(g, x)
    out = g.op.Mul(g.op.Log(v), g.const(-1.0 / float(lambd), work))
    return _output(g, out, _work(g.dtype))


@translation(aten.geometric.default)
def geometric(g: RuleContext, x: ir.Value, p: float, *, generator: Any = None) -> ir.Value:
    """geometric(Tensor self, float p, *, Generator? generator=None) -> Tensor"""
    _no_generator(g, generator)
    if p >= 1:
        return _output(g, g.op.Expand(g.const(1.0, _FLOAT), g.op.Shape(x)), _FLOAT)
    v, work = _one_minus_uniform(g, x)
    # The number of trials to the first success: ceil(log V / log(1 - p)), at least 1
    # (V = 1 has probability ~2**-24 and would give 0).
    trials = g.op.Ceil(g.op.Div(g.op.Log(v), g.const(math.log1p(-float(p)), work)))
    return _output(g, g.op.Max(trials, g.const(1.0, work)), _work(g.dtype))


@translation(aten.cauchy.default)
def cauchy(g: RuleContext, x: ir.Value, median: float = 0.0, sigma: float = 1.0, *,
           generator: Any = None) -> ir.Value:
    """cauchy(Tensor self, float median=0., float sigma=1., *, Generator? generator=None) -> Tensor"""
    _no_generator(g, generator)
    work = _work(g.dtype)
    u = _draw(g, "RandomUniform", like=x)
    angle = g.op.Mul(g.op.Sub(u, g.const(0.5, work)), g.const(math.pi, work))
    # onnxruntime has no double Tan kernel.
    tan = g.op.Tan(angle) if work == _FLOAT else g.op.Div(g.op.Sin(angle), g.op.Cos(angle))
    return _output(g, _affine(g, tan, median, sigma), _work(g.dtype))


# -- integers -------------------------------------------------------------------------

def _randint(g: RuleContext, low: Any, high: Any, like: ir.Value | None = None,
             size: Any = None) -> ir.Value:
    """Integers uniform on [low, high): floor(low + U * (high - low)) in double, so
    every integer is reachable exactly while high - low <= 2**53."""
    u = _draw(g, "RandomUniform", like=like, size=size, work=_DOUBLE)
    lo = g.cast(low, _DOUBLE) if isinstance(low, ir.Value) else g.const(float(low), _DOUBLE)
    hi = g.cast(high, _DOUBLE) if isinstance(high, ir.Value) else g.const(float(high), _DOUBLE)
    value = g.op.Floor(g.op.Add(lo, g.op.Mul(u, g.op.Sub(hi, lo))))
    # Rounding of low + U * span can reach high; keep the bound exclusive (the largest
    # double below high where high - 1 rounds back to high, as 2**63 - 1 does).
    if isinstance(high, ir.Value):
        top = g.op.Sub(hi, g.const(1.0, _DOUBLE))
    else:
        top = g.const(float(np.nextafter(float(high), -np.inf)) if float(high - 1) == float(high)
                      else float(high - 1), _DOUBLE)
    value = g.op.Min(value, top)
    return _output(g, value, _DOUBLE)


@translation([aten.randint.default, aten.randint.generator])
def randint(g: RuleContext, high: Any, size: list[Any], *, generator: Any = None,
            **_: Any) -> ir.Value:
    """randint(SymInt high, SymInt[] size, *, ScalarType? dtype=long, ...) -> Tensor"""
    _no_generator(g, generator)
    return _randint(g, 0, high, size=size)


@translation([aten.randint.low, aten.randint.low_generator])
def randint_low(g: RuleContext, low: Any, high: Any, size: list[Any], *,
                generator: Any = None, **_: Any) -> ir.Value:
    """randint.low(SymInt low, SymInt high, SymInt[] size, *, ScalarType? dtype=long, ...) -> Tensor"""
    _no_generator(g, generator)
    return _randint(g, low, high, size=size)


@translation([aten.randint_like.default, aten.randint_like.generator,
              aten.randint_like.Tensor, aten.randint_like.Tensor_generator])
def randint_like(g: RuleContext, x: ir.Value, high: Any, *, generator: Any = None,
                 **_: Any) -> ir.Value:
    """randint_like(Tensor self, SymInt high, *, ScalarType? dtype=None, ...) -> Tensor"""
    _no_generator(g, generator)
    return _randint(g, 0, high, like=x)


@translation([aten.randint_like.low_dtype, aten.randint_like.low_generator_dtype])
def randint_like_low(g: RuleContext, x: ir.Value, low: Any, high: Any, *,
                     generator: Any = None, **_: Any) -> ir.Value:
    """randint_like.low_dtype(Tensor self, SymInt low, SymInt high, *, ScalarType? dtype=None, ...) -> Tensor"""
    _no_generator(g, generator)
    return _randint(g, low, high, like=x)


def _random_bound(dtype: ir.DataType) -> int:
    """The inclusive upper end of ``random_()`` without ``to``: 2**digits for floats (every
    integer up to it is representable), the largest value for integers."""
    digits = {ir.DataType.FLOAT16: 11, ir.DataType.BFLOAT16: 8, _FLOAT: 24, _DOUBLE: 53}
    if dtype in digits:
        return 2 ** digits[dtype]
    if dtype == ir.DataType.BOOL:
        return 1
    return int(np.iinfo(dtype.numpy()).max)


@translation([aten.random.default, aten.random.to, getattr(aten.random, "from")])
def random(g: RuleContext, x: ir.Value, *bounds: Any, generator: Any = None) -> ir.Value:
    """random.from(Tensor self, int from, int? to, *, Generator? generator=None) -> Tensor

    ``random(self)`` and ``random.to(self, to)`` are the same with from = 0.
    """
    _no_generator(g, generator)
    low, high = (0, bounds[0]) if len(bounds) == 1 else (bounds + (0, None))[:2]
    if high is None:
        high = _random_bound(g.dtype) + 1
    return _randint(g, low, high, like=x)


@translation(aten.randperm.default)
def randperm(g: RuleContext, n: Any, **_: Any) -> ir.Value:
    """randperm(SymInt n, *, ScalarType? dtype=long, ...) -> Tensor"""
    count = g.const([int(n)]) if isinstance(n, int) else g.op.Reshape(n, g.const([1]))
    keys = g.op.RandomUniformLike(g.op.ConstantOfShape(count), dtype=_FLOAT)
    # The order that sorts i.i.d. uniform keys is a uniformly random permutation.
    _, order = g.op.TopK(keys, count, axis=0, _outputs=2)
    return _output(g, order, ir.DataType.INT64)


# -- bernoulli and multinomial --------------------------------------------------------

@translation([aten.bernoulli.default, aten.bernoulli.p, aten.bernoulli.Tensor])
def bernoulli(g: RuleContext, x: ir.Value, p: Any = None, *, generator: Any = None) -> ir.Value:
    """bernoulli.Tensor(Tensor self, Tensor p, *, Generator? generator=None) -> Tensor

    ``bernoulli(self)`` draws with the probabilities in self; ``.p`` and ``.Tensor``
    take them from p, in self's shape.
    """
    _no_generator(g, generator)
    # U < p, not ONNX Bernoulli: onnxruntime 1.31's Bernoulli kernel gives 1 with
    # probability 1 - p (measured: P(1) = 0.9 for p = 0.1).
    work = _work(g.dtype)
    u = _draw(g, "RandomUniform", like=x)
    if p is None:
        p = x
    prob = g.cast(p, work) if isinstance(p, ir.Value) else g.const(float(p), work)
    return _output(g, g.op.Less(u, prob), ir.DataType.BOOL)


@translation(aten.multinomial.default)
def multinomial(g: RuleContext, weights: ir.Value, num_samples: int, replacement: bool = False,
                *, generator: Any = None) -> ir.Value:
    """multinomial(Tensor self, SymInt num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor"""
    _no_generator(g, generator)
    assert weights.shape is not None
    batched = len(weights.shape) == 2
    w = weights if batched else g.op.Unsqueeze(weights, g.const([0]))
    # onnxruntime's Multinomial takes float logits only; the weights need not sum to 1.
    logits = g.op.Log(g.cast(w, _FLOAT))
    if replacement:
        out = g.op.Multinomial(logits, sample_size=int(num_samples), dtype=ir.DataType.INT64)
    else:
        # Gumbel-top-k: the k largest of log w + Gumbel noise are k draws without
        # replacement, in draw order.
        u = g.op.RandomUniformLike(logits, dtype=_FLOAT)
        gumbel = g.op.Neg(g.op.Log(g.op.Neg(g.op.Log(u))))
        k = g.const([int(num_samples)])
        _, out = g.op.TopK(g.op.Add(logits, gumbel), k, axis=-1, _outputs=2)
    if not batched:
        out = g.op.Squeeze(out, g.const([0]))
    return _output(g, out, ir.DataType.INT64)


# -- dropout and rrelu ----------------------------------------------------------------

@translation(aten.native_dropout.default)
def native_dropout(g: RuleContext, x: ir.Value, p: float,
                   train: bool | None) -> tuple[ir.Value, ir.Value]:
    """native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)"""
    if not train or p == 0:
        mask = g.op.Expand(g.const(True), g.op.Shape(x))
        return g.op.Identity(x), mask
    if p >= 1:
        zeros = g.op.Mul(x, g.const(0.0, x.dtype))
        return zeros, g.op.Cast(zeros, to=ir.DataType.BOOL)
    out, mask = g.op.Dropout(x, g.const(float(p), x.dtype), g.const(True), _outputs=2)
    return out, mask


def _rrelu(g: RuleContext, x: ir.Value, lower: float, upper: float,
           training: bool) -> tuple[ir.Value, ir.Value | None]:
    """(output, slopes): slopes ~ U[lower, upper) where x <= 0 and 1 elsewhere in
    training; the fixed slope (lower + upper) / 2 and no slopes in eval."""
    dtype = g.dtype
    if not training:
        slope = g.const((float(lower) + float(upper)) / 2, dtype)
        return g.op.Where(g.op.Greater(x, g.const(0.0, dtype)), x, g.op.Mul(x, slope)), None
    u = _draw(g, "RandomUniform", like=x)
    r = g.cast(_affine(g, u, lower, float(upper) - float(lower)), dtype)
    not_positive = g.op.LessOrEqual(x, g.const(0.0, dtype))
    return g.op.Where(not_positive, g.op.Mul(x, r), x), g.op.Where(not_positive, r, g.const(1.0, dtype))


@translation(aten.rrelu.default)
def rrelu(g: RuleContext, x: ir.Value, lower: float = 0.125, upper: float = 1 / 3,
          training: bool = False, generator: Any = None) -> ir.Value:
    """rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.333, bool training=False, Generator? generator=None) -> Tensor"""
    _no_generator(g, generator)
    return _rrelu(g, x, lower, upper, training)[0]


@translation(aten.rrelu_with_noise_functional.default)
def rrelu_with_noise_functional(g: RuleContext, x: ir.Value, noise: ir.Value,
                                lower: float = 0.125, upper: float = 1 / 3,
                                training: bool = False,
                                generator: Any = None) -> tuple[ir.Value, ir.Value]:
    """rrelu_with_noise_functional(Tensor self, Tensor noise, Scalar lower=0.125, Scalar upper=0.333, bool training=False, Generator? generator=None) -> (Tensor, Tensor noise_out)"""
    _no_generator(g, generator)
    out, slopes = _rrelu(g, x, lower, upper, training)
    return out, (g.op.Identity(noise) if slopes is None else slopes)


# -- fractional max pooling -----------------------------------------------------------

def _interval_starts(g: RuleContext, sample: ir.Value, work: ir.DataType, size: int,
                     out: int, pool: int) -> ir.Value:
    """[N, C, out] window starts for one spatial dim from [N, C, 1] samples in [0, 1):
    trunc((i + s) * alpha) - trunc(s * alpha) with alpha = (size - pool) / (out - 1)
    in the samples' float type, and the last window flush with the end."""
    np_type = np.float64 if work == _DOUBLE else np.float32
    last = g.op.Expand(g.const([[[size - pool]]]), g.op.Shape(sample))
    if out == 1:
        return last
    alpha = g.const(float(np_type(size - pool) / np_type(out - 1)), work)
    i = g.const(np.arange(out - 1, dtype=np_type))
    head = g.op.Cast(g.op.Mul(g.op.Add(i, sample), alpha), to=ir.DataType.INT64)
    base = g.op.Cast(g.op.Mul(sample, alpha), to=ir.DataType.INT64)
    return g.op.Concat(g.op.Sub(head, base), last, axis=-1)


def _fractional_max_pool(g: RuleContext, x: ir.Value, kernel_size: list[int],
                         output_size: list[int], samples: ir.Value) -> tuple[ir.Value, ir.Value]:
    n = len(kernel_size)
    dims = list(x.shape) if x.shape is not None else []
    spatial = [d for d in dims[-n:] if isinstance(d, int)]
    if len(dims) not in (n + 1, n + 2) or len(spatial) != n:
        raise ValueError(f"fractional_max_pool{n}d needs an input of rank {n + 1} or {n + 2} "
                         f"with static spatial sizes; got shape {x.shape}")
    batched = len(dims) == n + 2
    if not batched:
        x = g.op.Unsqueeze(x, g.const([0]))
    work = _DOUBLE if samples.dtype == _DOUBLE else _FLOAT
    samples = g.cast(samples, work)
    # torch stores the samples per plane as (W, H) for 2-D and (T, H, W) for 3-D.
    order = [1, 0] if n == 2 else [0, 1, 2]
    flat: ir.Value | None = None
    stride = 1
    for d in reversed(range(n)):
        s = g.op.Slice(samples, g.const([order[d]]), g.const([order[d] + 1]), g.const([2]))
        starts = _interval_starts(g, s, work, spatial[d], int(output_size[d]), int(kernel_size[d]))
        # Positions [N, C, out_d, k_d], placed on axes (2 + d) and (2 + n + d) of
        # [N, C, out_0..out_{n-1}, k_0..k_{n-1}].
        pos = g.op.Add(g.op.Unsqueeze(starts, g.const([-1])),
                       g.const(list(range(int(kernel_size[d])))))
        shape = [0, 0] + [1] * (2 * n)
        shape[2 + d], shape[2 + n + d] = int(output_size[d]), int(kernel_size[d])
        pos = g.op.Reshape(pos, g.const(shape))
        term = g.op.Mul(pos, g.const(stride))
        flat = term if flat is None else g.op.Add(flat, term)
        stride *= spatial[d]
    assert flat is not None
    out_cells = int(np.prod([int(o) for o in output_size]))
    window = int(np.prod([int(k) for k in kernel_size]))
    xs = g.op.Shape(x)
    nc = g.op.Slice(xs, g.const([0]), g.const([2]))
    full = g.op.Concat(nc, g.const([out_cells * window]), axis=0)
    index = g.op.Reshape(g.op.Expand(flat, g.op.Concat(nc, g.const([1] * (2 * n)), axis=0)), full)
    planes = g.op.Reshape(x, g.op.Concat(nc, g.const([-1]), axis=0))
    grouped = g.op.Concat(nc, g.const([out_cells, window]), axis=0)
    values = g.op.Reshape(g.op.GatherElements(planes, index, axis=2), grouped)
    index = g.op.Reshape(index, grouped)
    # torch keeps the first maximum, unless the window holds NaN: then the last NaN.
    nan = g.op.IsNaN(values)
    dtype = g.dtype
    finite_first = g.op.ArgMax(g.op.Where(nan, g.const(-math.inf, dtype), values), axis=-1)
    nan_last = g.op.ArgMax(g.op.Cast(nan, to=ir.DataType.INT32), axis=-1, select_last_index=1)
    any_nan = g.op.GatherElements(nan, nan_last, axis=-1)
    pick = g.op.Where(any_nan, nan_last, finite_first)
    result_shape = g.op.Concat(nc, g.const([int(o) for o in output_size]), axis=0)
    out = g.op.Reshape(g.op.GatherElements(values, pick, axis=-1), result_shape)
    idx = g.op.Reshape(g.op.GatherElements(index, pick, axis=-1), result_shape)
    if not batched:
        out, idx = g.op.Squeeze(out, g.const([0])), g.op.Squeeze(idx, g.const([0]))
    return out, idx


@translation(aten.fractional_max_pool2d.default)
def fractional_max_pool2d(g: RuleContext, x: ir.Value, kernel_size: list[int],
                          output_size: list[int],
                          random_samples: ir.Value) -> tuple[ir.Value, ir.Value]:
    """fractional_max_pool2d(Tensor self, int[2] kernel_size, int[2] output_size, Tensor random_samples) -> (Tensor, Tensor)"""
    return _fractional_max_pool(g, x, kernel_size, output_size, random_samples)


@translation(aten.fractional_max_pool3d.default)
def fractional_max_pool3d(g: RuleContext, x: ir.Value, kernel_size: list[int],
                          output_size: list[int],
                          random_samples: ir.Value) -> tuple[ir.Value, ir.Value]:
    """fractional_max_pool3d(Tensor self, int[3] kernel_size, int[3] output_size, Tensor random_samples) -> (Tensor, Tensor)"""
    return _fractional_max_pool(g, x, kernel_size, output_size, random_samples)
