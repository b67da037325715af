"""Edge cases of the special-function rules that OpInfo samples do not reach.

Orthogonal polynomials (negative, fractional, NaN and large degrees, the interval ends),
Hurwitz zeta and polygamma (poles, negative arguments), the incomplete gamma functions
(zeros, infinities, NaN, large parameters) and nextafter (signed zeros, subnormals,
infinities): each grid is exported and compared with eager, NaN and inf positions
included.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import pt2onnx

INF, NAN = math.inf, math.nan


class Call(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> Any:
        return self.fn(*xs)


def _run(fn: Callable[..., Any], *args: torch.Tensor, opset: int = pt2onnx.DEFAULT_OPSET
         ) -> tuple[torch.Tensor, torch.Tensor]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(Call(fn), args, opset=opset)
    got = torch.from_numpy(np.asarray(prog.run(*args)[0]))
    return got, fn(*args)


def _assert_close(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float,
                  wide: torch.Tensor | None = None) -> None:
    """``got`` against eager's ``want``; where ``wide`` (eager in float64) is given, a value
    within tolerance of it is right too: at a float32 rounding boundary eager's own result
    depends on the CPU's kernels (T_129(1.25) = 2**128 is inf from torch's unvectorized
    kernel, the largest float32 from its AVX2 and AVX-512 ones)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    ok = torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if wide is not None:
        ok |= torch.isclose(got.double(), wide, rtol=rtol, atol=atol, equal_nan=True)
    bad = (~ok).nonzero()
    assert not len(bad), (f"{len(bad)} mismatches, first at {bad[0].tolist()}: "
                          f"got {got[tuple(bad[0])].item()}, eager {want[tuple(bad[0])].item()}")


POLYNOMIALS = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p",
]
_X = [-3.0, -1.5, -1.0, -0.999, -0.7, -0.3, 0.0, 0.2, 0.5, 0.8, 0.9999, 1.0, 1.25, 2.5,
      NAN, INF, -INF]
_N = [-5.0, -1.0, -0.5, 0.0, 0.9, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 9.0, 12.0, 40.0, 129.0,
      NAN, INF]


@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.float64, marks=pytest.mark.slow)],
                         ids=["f32", "f64"])
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_edges(name: str, dtype: torch.dtype) -> None:
    fn = getattr(torch.special, name)
    x = torch.tensor(_X, dtype=dtype)[:, None]
    n = torch.tensor(_N, dtype=dtype)[None, :]
    got, want = _run(fn, x, n)
    # The recurrence matches torch to rounding; the trigonometric branch (|x| < 1, large
    # n) differs by n ulps of acos at most.
    wide = fn(x.double(), n.double()) if dtype == torch.float32 else None
    _assert_close(got, want, rtol=1e-5 if dtype == torch.float32 else 1e-10,
                  atol=1e-4 if dtype == torch.float32 else 1e-10, wide=wide)


def test_polynomial_scalar_degree_opset17() -> None:
    x = torch.linspace(-2, 2, 41)
    got, want = _run(lambda t: torch.special.legendre_polynomial_p(t, 7), x, opset=17)
    _assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_zeta_edges(dtype: torch.dtype) -> None:
    x = torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0, 4.5, 7.0, 30.0, 1e20, NAN, INF],
                     dtype=dtype)[:, None]
    q = torch.tensor([-12.5, -3.0, -2.5, -0.5, 0.0, 1e-30, 0.3, 1.0, 2.5, 9.0, 50.0, 1e8,
                      INF, -INF, NAN], dtype=dtype)[None, :]
    got, want = _run(torch.special.zeta, x, q)
    _assert_close(got, want, rtol=1e-6 if dtype == torch.float32 else 1e-13, atol=0.0)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_polygamma_negative_and_poles(n: int) -> None:
    x = torch.tensor([-8.478, -3.0, -2.5, -1.0, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 3.7, 60.0,
                      INF, -INF, NAN])
    got, want = _run(lambda t: torch.polygamma(n, t), x)
    _assert_close(got, want, rtol=1e-5, atol=0.0)


_A = [0.0, 1e-20, 1e-3, 0.3, 1.0, 2.5, 10.0, 25.0, 150.0, 1000.0, INF, NAN, -1.0]
_XI = [0.0, 1e-20, 1e-3, 0.4, 0.9, 1.05, 2.0, 8.0, 24.0, 160.0, 1050.0, INF, NAN, -1.0]


@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac], ids=["igamma", "igammac"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_incomplete_gamma_edges(fn: Callable[..., torch.Tensor], dtype: torch.dtype) -> None:
    a = torch.tensor(_A, dtype=dtype)[:, None]
    x = torch.tensor(_XI, dtype=dtype)[None, :]
    got, want = _run(fn, a, x)
    _assert_close(got, want, rtol=1e-4 if dtype == torch.float32 else 1e-8, atol=1e-6
                  if dtype == torch.float32 else 1e-9)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_nextafter_exact(dtype: torch.dtype) -> None:
    info = torch.finfo(dtype)
    tiny = info.smallest_normal * info.eps  # the smallest subnormal
    values = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e-30, -7e5, info.max, -info.max,
              info.smallest_normal, -info.smallest_normal, tiny, -tiny, 2 * tiny, INF, -INF, NAN]
    x = torch.tensor(values, dtype=dtype)[:, None]
    y = torch.tensor(values, dtype=dtype)[None, :]
    got, want = _run(torch.nextafter, x, y)
    same = (got == want) & (torch.signbit(got) == torch.signbit(want))
    same |= got.isnan() & want.isnan()
    assert bool(same.all()), f"first mismatch at {(~same).nonzero()[0].tolist()}"
