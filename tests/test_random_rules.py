"""Random ops, checked by distribution: the OpInfo table can only compare their shapes.

Each test exports a sampling op on a large tensor (100k draws), runs it in onnxruntime
seeded with ``onnxruntime.set_seed`` (so the test is deterministic) and checks the
draws against the distribution's parameters: mean and variance within a few standard
errors, the support, integer values, rates and frequencies. (Small seeds are avoided:
onnxruntime seeds the random nodes of a session consecutively, and after ``set_seed(0)``
the first two draw the same values; see docs/ops.md.)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pt2onnx
from pt2onnx import _compat

ort = pytest.importorskip("onnxruntime")

N = 100_000
# How many standard errors an estimate may stray from its expected value.
Z = 5.0


class _Fn(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


class _Fn2(_Fn):
    """Two named inputs, for ``dynamic_shapes`` (which cannot name ``*args``)."""

    def forward(self, x: torch.Tensor, s: torch.Tensor | None = None) -> Any:  # type: ignore[override]
        return self.fn(x) if s is None else self.fn(x, s)


def sample(fn: Callable[..., Any], *inputs: torch.Tensor, seed: int = 1234,
           opset: int | None = None) -> list[np.ndarray]:
    """fn's outputs from the exported model, with onnxruntime's generator seeded."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(_Fn(fn), inputs, opset=opset or pt2onnx.DEFAULT_OPSET)
    ort.set_seed(seed)
    return prog.run(*inputs)


def check_mean(x: np.ndarray, mean: float, var: float) -> None:
    """The sample mean is within Z standard errors of ``mean``."""
    x = x.astype(np.float64).ravel()
    se = math.sqrt(var / x.size)
    assert abs(x.mean() - mean) < Z * se, f"mean {x.mean():.5g}, expected {mean:.5g} ± {Z * se:.2g}"


def check_var(x: np.ndarray, var: float, kurtosis: float = 3.0) -> None:
    """The sample variance is within Z standard errors of ``var`` (kurtosis: E(x-m)^4/var^2)."""
    x = x.astype(np.float64).ravel()
    se = var * math.sqrt((kurtosis - 1) / x.size)
    assert abs(x.var() - var) < Z * se, f"variance {x.var():.5g}, expected {var:.5g} ± {Z * se:.2g}"


def check_rate(hits: np.ndarray, p: float) -> None:
    """The fraction of true entries is within Z standard errors of ``p``."""
    hits = np.asarray(hits).ravel()
    se = math.sqrt(max(p * (1 - p), 1e-12) / hits.size)
    rate = float(hits.mean())
    assert abs(rate - p) < Z * se + 1e-12, f"rate {rate:.5g}, expected {p:.5g} ± {Z * se:.2g}"


def check_frequencies(values: np.ndarray, probs: dict[int, float]) -> None:
    """Pearson's chi-square over the categories stays below dof + Z * sqrt(2 dof)."""
    values = np.asarray(values).ravel()
    assert set(np.unique(values).tolist()) <= set(probs), f"values outside {sorted(probs)}"
    n = values.size
    chi2 = sum((np.count_nonzero(values == k) - n * p) ** 2 / (n * p)
               for k, p in probs.items() if p > 0)
    dof = sum(1 for p in probs.values() if p > 0) - 1
    assert chi2 < dof + Z * math.sqrt(2 * dof), f"chi-square {chi2:.1f} with {dof} dof"


def integral(x: np.ndarray) -> bool:
    return bool(np.all(x == np.floor(x)))


X = torch.zeros(250, 400)  # 100k elements


# -- uniform and normal ----------------------------------------------------------------

def test_rand_uniform_on_unit_interval() -> None:
    (u,) = sample(lambda x: torch.rand(x.shape), X)
    assert u.dtype == np.float32 and u.shape == (250, 400)
    assert u.min() >= 0 and u.max() < 1
    check_mean(u, 0.5, 1 / 12)
    check_var(u, 1 / 12, kurtosis=1.8)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_rand_like_keeps_dtype(dtype: torch.dtype) -> None:
    (u,) = sample(lambda x: torch.rand_like(x, dtype=dtype), X)
    assert u.dtype == torch.empty(0, dtype=dtype).numpy().dtype
    assert u.min() >= 0 and u.max() < 1
    check_mean(u, 0.5, 1 / 12)


def test_uniform_float16_stays_below_high() -> None:
    (u,) = sample(lambda x: x.clone().uniform_(2.0, 4.0), X.half())
    assert u.dtype == np.float16 and u.min() >= 2 and u.max() < 4
    check_mean(u, 3.0, 4 / 12)


def test_uniform_range() -> None:
    (u,) = sample(lambda x: x.clone().uniform_(-3.0, 5.0), X)
    assert u.min() >= -3 and u.max() < 5
    check_mean(u, 1.0, 64 / 12)
    check_var(u, 64 / 12, kurtosis=1.8)


@pytest.mark.parametrize("fn", [
    lambda x: torch.randn(x.shape),
    lambda x: torch.randn_like(x),
    lambda x: torch.randn_like(x, dtype=torch.float64),
], ids=["randn", "randn_like", "randn_like-float64"])
def test_standard_normal(fn: Callable[..., Any]) -> None:
    (z,) = sample(fn, X)
    check_mean(z, 0.0, 1.0)
    check_var(z, 1.0)
    # Normal tails: about 4.55% of draws lie beyond 2 standard deviations.
    check_rate(np.abs(z) > 2, 0.0455)


def test_normal_in_place_mean_std() -> None:
    (z,) = sample(lambda x: x.clone().normal_(2.0, 3.0), X)
    check_mean(z, 2.0, 9.0)
    check_var(z, 9.0)


def test_normal_float_float() -> None:
    (z,) = sample(lambda x: torch.normal(-1.5, 0.5, size=tuple(x.shape)), X)
    assert z.shape == (250, 400)
    check_mean(z, -1.5, 0.25)
    check_var(z, 0.25)


def test_normal_tensor_mean_and_std_broadcast() -> None:
    # Per column: mean 0 or 10, std 1 or 4; std broadcasts over rows.
    mean = torch.zeros(250, 400)
    mean[:, 200:] = 10.0
    std = torch.ones(1, 400)
    std[:, 200:] = 4.0
    (z,) = sample(lambda m, s: torch.normal(m, s), mean, std)
    assert z.shape == (250, 400)
    check_mean(z[:, :200], 0.0, 1.0)
    check_var(z[:, :200], 1.0)
    check_mean(z[:, 200:], 10.0, 16.0)
    check_var(z[:, 200:], 16.0)


def test_log_normal() -> None:
    (x,) = sample(lambda t: t.clone().log_normal_(0.5, 0.25), X)
    assert x.min() > 0
    check_mean(np.log(x), 0.5, 0.0625)
    check_var(np.log(x), 0.0625)


# -- inverse-CDF transforms --------------------------------------------------------------

def test_exponential() -> None:
    (x,) = sample(lambda t: t.clone().exponential_(2.0), X)
    assert x.min() >= 0
    check_mean(x, 0.5, 0.25)
    check_var(x, 0.25, kurtosis=9.0)
    # P(X > 1) = exp(-lambda).
    check_rate(x > 1, math.exp(-2.0))


def test_exponential_float64() -> None:
    (x,) = sample(lambda t: t.clone().exponential_(0.5), X.double())
    assert x.dtype == np.float64 and x.min() >= 0
    check_mean(x, 2.0, 4.0)


@pytest.mark.parametrize("p", [0.3, 0.9])
def test_geometric(p: float) -> None:
    (x,) = sample(lambda t: t.clone().geometric_(p), X)
    assert x.dtype == np.float32 and integral(x) and x.min() >= 1
    check_mean(x, 1 / p, (1 - p) / p**2)
    # P(X = k) = (1 - p)^(k - 1) p
    check_rate(x == 1, p)
    check_rate(x == 2, (1 - p) * p)


def test_cauchy() -> None:
    median, sigma = 1.0, 2.0
    (x,) = sample(lambda t: t.clone().cauchy_(median, sigma), X)
    assert np.isfinite(x).all()
    # No mean: check the CDF, F(median ± sigma) = 1/2 ± 1/4 and F(median + 10 sigma).
    check_rate(x < median, 0.5)
    check_rate(x < median - sigma, 0.25)
    check_rate(x < median + sigma, 0.75)
    check_rate(x < median + 10 * sigma, 0.5 + math.atan(10) / math.pi)


# -- integers ------------------------------------------------------------------------------

def test_randint_low_high() -> None:
    (x,) = sample(lambda t: torch.randint(3, 13, tuple(t.shape)), X)
    assert x.dtype == np.int64
    assert x.min() == 3 and x.max() == 12  # low inclusive, high exclusive
    check_frequencies(x, {k: 0.1 for k in range(3, 13)})


def test_randint_high_only_and_dtype() -> None:
    (x,) = sample(lambda t: torch.randint(5, tuple(t.shape), dtype=torch.int32), X)
    assert x.dtype == np.int32
    check_frequencies(x, {k: 0.2 for k in range(5)})


def test_randint_float_dtype_is_integral() -> None:
    (x,) = sample(lambda t: torch.randint(-4, 4, tuple(t.shape), dtype=torch.float32), X)
    assert x.dtype == np.float32 and integral(x)
    check_frequencies(x.astype(np.int64), {k: 1 / 8 for k in range(-4, 4)})


def test_randint_large_range() -> None:
    high = 2**40
    (x,) = sample(lambda t: torch.randint(high, tuple(t.shape)), X)
    assert x.min() >= 0 and x.max() < high
    check_mean(x / high, 0.5, 1 / 12)
    # The low bits are uniform too (the draw is made in double, exact up to 2**53).
    check_frequencies(x % 4, {k: 0.25 for k in range(4)})


def test_randint_like() -> None:
    (a, b) = sample(lambda t: (torch.randint_like(t, 7), torch.randint_like(t, -2, 2)), X)
    assert a.dtype == np.float32 and integral(a) and integral(b)
    check_frequencies(a.astype(np.int64), {k: 1 / 7 for k in range(7)})
    check_frequencies(b.astype(np.int64), {k: 0.25 for k in range(-2, 2)})


def test_random_in_place() -> None:
    (a, b, c, d) = sample(
        lambda t, i, u, f: (t.clone().random_(7), i.clone().random_(), u.clone().random_(),
                            f.clone().random_()),
        X, torch.zeros(N, dtype=torch.int64), torch.zeros(N, dtype=torch.uint8), X.half())
    assert a.dtype == np.float32 and integral(a)
    check_frequencies(a.astype(np.int64), {k: 1 / 7 for k in range(7)})
    # Without bounds: the dtype's range, [0, 2**11] for float16.
    assert b.dtype == np.int64 and b.min() >= 0
    check_mean(b / 2.0**63, 0.5, 1 / 12)
    check_frequencies(c, {k: 1 / 256 for k in range(256)})
    assert d.dtype == np.float16 and integral(d) and d.min() >= 0 and d.max() <= 2048
    check_mean(d.astype(np.float64) / 2049, 0.5, 1 / 12)


def test_randperm_is_a_permutation() -> None:
    (x,) = sample(lambda t: torch.randperm(1000) + t.sum().long(), torch.zeros(1))
    assert sorted(x.tolist()) == list(range(1000))
    assert x.tolist() != list(range(1000))


# -- bernoulli, dropout and multinomial ----------------------------------------------------

def test_bernoulli_probability_tensor() -> None:
    probs = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0]).repeat_interleave(20_000).reshape(5, -1)
    (x,) = sample(torch.bernoulli, probs)
    assert x.dtype == np.float32 and set(np.unique(x).tolist()) <= {0.0, 1.0}
    assert (x[0] == 0).all() and (x[4] == 1).all()
    for row, p in zip(x[1:4], (0.1, 0.5, 0.9), strict=True):
        check_rate(row == 1, p)


def test_bernoulli_float64_and_scalar_p() -> None:
    (x, y) = sample(lambda t: (torch.bernoulli(t), torch.bernoulli(t, 0.25)),
                    torch.full((N,), 0.7, dtype=torch.float64))
    assert x.dtype == np.float64 and y.dtype == np.float64
    check_rate(x == 1, 0.7)
    check_rate(y == 1, 0.25)


def test_bernoulli_in_place_with_tensor_p() -> None:
    p = torch.tensor([0.2, 0.6]).repeat(N // 2)
    (x,) = sample(lambda t, q: t.clone().bernoulli_(q), torch.zeros(N), p)
    check_rate(x[0::2] == 1, 0.2)
    check_rate(x[1::2] == 1, 0.6)


def test_dropout_rate_and_scale() -> None:
    (x,) = sample(lambda t: F.dropout(t, 0.3, training=True), torch.ones(N))
    check_rate(x == 0, 0.3)
    np.testing.assert_allclose(x[x != 0], 1 / 0.7, rtol=1e-6)


def test_multinomial_with_replacement() -> None:
    weights = torch.tensor([1.0, 0.0, 2.0, 3.0, 4.0])  # unnormalised, one impossible
    (x,) = sample(lambda w: torch.multinomial(w, N, replacement=True), weights)
    assert x.dtype == np.int64 and x.shape == (N,)
    check_frequencies(x, {0: 0.1, 1: 0.0, 2: 0.2, 3: 0.3, 4: 0.4})


def test_multinomial_with_replacement_batched() -> None:
    weights = torch.tensor([[1.0, 1.0, 2.0], [0.0, 5.0, 5.0]], dtype=torch.float64)
    (x,) = sample(lambda w: torch.multinomial(w, N // 2, replacement=True), weights)
    assert x.shape == (2, N // 2)
    check_frequencies(x[0], {0: 0.25, 1: 0.25, 2: 0.5})
    check_frequencies(x[1], {0: 0.0, 1: 0.5, 2: 0.5})


def test_multinomial_without_replacement() -> None:
    rows = 20_000
    w = torch.tensor([1.0, 2.0, 3.0, 4.0, 0.0])
    (x,) = sample(lambda t: torch.multinomial(t, 3), w.expand(rows, 5).contiguous())
    assert x.shape == (rows, 3)
    # Distinct indices in each row, never the zero-weight one.
    assert all(len(set(r)) == 3 for r in x.tolist())
    assert (x != 4).all()
    p = (w / w.sum()).tolist()
    check_frequencies(x[:, 0], dict(enumerate(p)))
    # The second draw: P(j) = sum_i p_i p_j / (1 - p_i) over i != j.
    second = {j: sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j) for j in range(4)}
    check_frequencies(x[:, 1], {**second, 4: 0.0})


def test_multinomial_without_replacement_full_permutation() -> None:
    (x,) = sample(lambda t: torch.multinomial(t, 6), torch.ones(6))
    assert sorted(x.tolist()) == list(range(6))


# -- rrelu and fractional max pooling ------------------------------------------------------

def test_rrelu_training_samples_slopes() -> None:
    x = torch.cat([-torch.ones(N // 2), torch.full((N // 2,), 2.0)])
    lower, upper = 0.1, 0.4
    (y,) = sample(lambda t: F.rrelu(t, lower, upper, training=True), x)
    slopes = -y[: N // 2]
    assert slopes.min() >= lower and slopes.max() <= upper
    check_mean(slopes, (lower + upper) / 2, (upper - lower) ** 2 / 12)
    check_var(slopes, (upper - lower) ** 2 / 12, kurtosis=1.8)
    assert (y[N // 2:] == 2.0).all()


def test_rrelu_eval_is_deterministic() -> None:
    x = torch.linspace(-5, 5, 101)
    fn = lambda t: F.rrelu(t, 0.1, 0.3, training=False)  # noqa: E731
    (y,) = sample(fn, x)
    np.testing.assert_allclose(y, fn(x).numpy(), rtol=1e-6)


@pytest.mark.parametrize(("n", "shape", "kernel", "out"), [
    (2, (2, 3, 9, 9), 3, (2, 3)),
    (2, (3, 10, 11), (2, 3), (5, 4)),
    (3, (2, 3, 5, 6, 7), (2, 3, 2), (2, 3, 4)),
])
def test_fractional_max_pool_given_samples_matches_eager(n: int, shape: tuple[int, ...],
                                                        kernel: Any, out: Any) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape)
    x[..., 0, 0] = float("nan")
    batch = shape[0] if len(shape) == n + 2 else 1
    samples = torch.rand(batch, shape[-n - 1], n)
    pool = F.fractional_max_pool2d if n == 2 else F.fractional_max_pool3d

    def fn(t: torch.Tensor, s: torch.Tensor) -> Any:
        return pool(t, kernel, output_size=out, return_indices=True, _random_samples=s)

    values, indices = sample(fn, x, samples)
    expected = fn(x, samples)
    np.testing.assert_array_equal(indices, expected[1].numpy())
    np.testing.assert_allclose(values, expected[0].numpy(), rtol=0, atol=0)


def test_fractional_max_pool_random_windows() -> None:
    x = torch.randn(2, 3, 9, 9)
    values, indices = sample(
        lambda t: F.fractional_max_pool2d(t, 3, output_size=(4, 4), return_indices=True), x)
    # Each output is its input at the returned index, and a 3x3 window's maximum.
    planes = x.reshape(2, 3, 81).numpy()
    np.testing.assert_array_equal(np.take_along_axis(planes, indices.reshape(2, 3, 16), 2),
                                  values.reshape(2, 3, 16))
    assert (values >= F.avg_pool2d(x, 3, stride=1).amin(dim=(-1, -2), keepdim=True).numpy()).all()


# -- generators, opsets, determinism -------------------------------------------------------

@pytest.mark.skipif(_compat.TORCH_VERSION < (2, 13),
                    reason="torch 2.12's torch.export cannot capture a torch.Generator argument "
                           "(NotImplementedError: argument of type Generator)")
def test_generator_warns_and_still_samples() -> None:
    class WithGenerator(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gen = torch.Generator().manual_seed(1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.rand(x.shape, generator=self.gen)

    with pytest.warns(UserWarning, match="torch.Generator"):
        prog = pt2onnx.export(WithGenerator(), (X,))
    ort.set_seed(1234)
    (u,) = prog.run(X)
    check_mean(u, 0.5, 1 / 12)


@pytest.mark.parametrize("opset", [17, 21])
def test_opsets(opset: int) -> None:
    outs = sample(lambda t: (torch.rand_like(t), torch.multinomial(t[0] + 1, 5),
                             torch.randint(0, 3, (10,)), t.clone().geometric_(0.5)),
                  torch.zeros(4, 5), opset=opset)
    assert [o.shape for o in outs] == [(4, 5), (5,), (10,), (4, 5)]


def test_seeded_runs_repeat() -> None:
    fn = lambda t: (torch.rand_like(t), torch.multinomial(t + 1, 3))  # noqa: E731
    first = sample(fn, torch.zeros(8), seed=7)
    again = sample(fn, torch.zeros(8), seed=7)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)


DYNAMIC = {
    "rand_like": lambda x: torch.rand_like(x),
    "randn_size": lambda x: torch.randn(x.shape, dtype=torch.float16),
    "normal_tensors": lambda x: torch.normal(x, x.abs() + 1),
    "normal_size": lambda x: torch.normal(0.0, 1.0, size=x.shape),
    "geometric_": lambda x: x.clone().geometric_(0.3),
    "randint_size": lambda x: torch.randint(0, 5, x.shape),
    "bernoulli": lambda x: torch.bernoulli(x.sigmoid()),
    "multinomial": lambda x: torch.multinomial(x.abs() + 0.1, 4),
    "multinomial_replacement": lambda x: torch.multinomial(x.abs() + 0.1, 4, replacement=True),
    "rrelu": lambda x: F.rrelu(x, training=True),
}


@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_dynamic_batch(name: str) -> None:
    fn = DYNAMIC[name]
    batch = torch.export.Dim("batch", min=2, max=1024)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(_Fn2(fn), (torch.randn(4, 12),),
                              dynamic_shapes={"x": {0: batch}})
    for n in (3, 9):
        x = torch.randn(n, 12)
        (out,) = prog.run(x)
        expected = fn(x)
        assert out.shape == tuple(expected.shape) and out.dtype == expected.numpy().dtype


def test_fractional_max_pool_dynamic_batch_matches_eager() -> None:
    def fn(t: torch.Tensor, s: torch.Tensor) -> Any:
        return F.fractional_max_pool2d(t, 2, output_size=(3, 2), return_indices=True,
                                       _random_samples=s)

    batch = torch.export.Dim("batch", min=2, max=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(_Fn2(fn), (torch.randn(4, 3, 7, 5), torch.rand(4, 3, 2)),
                              dynamic_shapes={"x": {0: batch}, "s": {0: batch}})
    x, s = torch.randn(6, 3, 7, 5), torch.rand(6, 3, 2)
    values, indices = prog.run(x, s)
    expected = fn(x, s)
    np.testing.assert_array_equal(indices, expected[1].numpy())
    np.testing.assert_array_equal(values, expected[0].numpy())
