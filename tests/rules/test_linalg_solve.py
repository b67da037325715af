"""Linear solves and factorisations (rules/linalg_solve.py, rules/linalg_factor.py) beyond
the OpInfo samples: dynamic matrix sizes, singular and indefinite inputs (info, pivots),
2x2 Bunch-Kaufman blocks mixed across a batch, float64, and the error check a
whole-program retrace wraps in with_effects."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
import torch

import pt2onnx
from pt2onnx.translate import _decomp


class _Fn(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> Any:
        return self.fn(*args)


def _assert_matches(expected: Any, actual: list[np.ndarray], rtol: float = 1e-5) -> None:
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual, strict=True):
        e = e.numpy()
        assert e.shape == a.shape and e.dtype == a.dtype
        if not np.issubdtype(e.dtype, np.floating):
            np.testing.assert_array_equal(a, e)
        else:
            scale = max(np.abs(e[np.isfinite(e)]).max(initial=0), 1)
            np.testing.assert_allclose(a, e, rtol=0, atol=rtol * scale)  # NaN where eager has


def _check(fn: Callable[..., Any], *args: torch.Tensor, rtol: float = 1e-5) -> pt2onnx.OnnxProgram:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(_Fn(fn), args)
    _assert_matches(fn(*args), prog.run(*args), rtol)
    return prog


def _symmetric(*shape: int) -> torch.Tensor:
    x = torch.randn(*shape)
    return x + x.mT


def test_dynamic_matrix_size(tmp_path):
    torch.manual_seed(0)
    n = torch.export.Dim("n", min=2, max=64)
    b = torch.export.Dim("b")

    class Model(torch.nn.Module):
        def forward(self, a):
            p, low, up = torch.linalg.lu(a)
            spd = a @ a.mT + a.shape[-1] * torch.eye(a.shape[-1])
            return torch.linalg.inv(a), p, low, up, torch.linalg.cholesky(spd)

    path = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(Model(), (torch.randn(2, 5, 5),), path,
                              dynamic_shapes={"a": {0: b, 1: n, 2: n}})
    onnx.checker.check_model(str(path), full_check=True)
    for shape in ((2, 5, 5), (3, 9, 9)):
        a = torch.randn(*shape)
        _assert_matches(Model()(a), prog.run(a))


@pytest.mark.parametrize("a", [
    torch.tensor([[0., 1, 2], [0, 2, 4], [1, 1, 1]]),
    torch.zeros(3, 3),
    torch.randint(-2, 3, (6, 5, 5)).float(),  # ties between pivot candidates
    torch.randn(7, 4),
    torch.randn(4, 7),
], ids=["singular", "zeros", "ties", "tall", "wide"])
def test_lu_factor_info_and_pivots(a):
    _check(torch.linalg.lu_factor_ex, a)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_not_positive_definite(upper):
    a = torch.tensor([[[4., 2, 3], [2, 1, 4], [3, 4, 5]], [[-1., 2, 3], [2, 1, 4], [3, 4, 5]],
                      [[2., 1, 0], [1, 2, 1], [0, 1, 2]]])
    _check(lambda x: torch.linalg.cholesky_ex(x, upper=upper), a)


def test_ldl_blocks_mixed_across_batch():
    torch.manual_seed(1)
    a = _symmetric(16, 6, 6)
    ld, pivots = torch.linalg.ldl_factor(a)
    assert (pivots < 0).any(-1).any() and not (pivots < 0).any(-1).all()
    _check(torch.linalg.ldl_factor_ex, a)
    _check(lambda x, p, y: torch.linalg.ldl_solve(x, p, y), ld, pivots, torch.randn(16, 6, 3))
    _check(lambda x, p, y: torch.linalg.ldl_solve(x, p, y), ld[0], pivots[0], torch.randn(4, 6, 2))


def test_solve_broadcasts_and_left_false():
    torch.manual_seed(2)
    _check(torch.linalg.solve, torch.randn(3, 4, 4), torch.randn(4, 2))
    _check(torch.linalg.solve_ex, torch.randn(4, 4), torch.randn(2, 4, 2))
    _check(lambda a, b: torch.linalg.solve(a, b, left=False), torch.randn(2, 4, 4),
           torch.randn(3, 4))
    t = torch.randn(2, 1, 5, 5).triu() + 3 * torch.eye(5)
    _check(lambda a, b: torch.linalg.solve_triangular(a, b, upper=True, left=False), t,
           torch.randn(3, 2, 5))


def test_float64():
    torch.manual_seed(3)
    a = torch.randn(2, 9, 9, dtype=torch.float64)
    _check(torch.linalg.inv, a, rtol=1e-12)
    _check(torch.linalg.qr, a[:, :, :6], rtol=1e-12)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (3, 5, 5)])
def test_qr_modes(mode, shape):
    torch.manual_seed(4)
    _check(lambda a: torch.linalg.qr(a, mode=mode), torch.randn(*shape))


def test_error_check_under_with_effects():
    a = torch.randn(4, 4)
    program = torch.export.export(_Fn(lambda x: torch.linalg.inv(x) * 2), (a,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        retraced = program.run_decompositions(_decomp.decomposition_table())
        ops = {n.target for n in retraced.graph.nodes if n.op == "call_function"}
        if torch.ops.higher_order.with_effects not in ops:
            pytest.skip(f"torch {torch.__version__}'s run_decompositions keeps the error "
                        "check without with_effects, so there is no wrapper to test")
        prog = pt2onnx.export(retraced, (a,))
    _assert_matches(torch.linalg.inv(a) * 2, prog.run(a))


@pytest.mark.parametrize("where", [(0, 0), (2, 1), (3, 4), (4, 2)])
def test_nan_positions_and_pivots(where):
    # LAPACK's pivot search never takes a NaN unless it sits on the diagonal; Q's
    # reflectors act on their own block only, so a NaN stays where LAPACK leaves it.
    torch.manual_seed(6)
    a = torch.randn(5, 5)
    a[where] = float("nan")
    _check(torch.linalg.lu_factor_ex, a)
    _check(torch.linalg.inv_ex, a)
    if where != (0, 0):  # a NaN leading entry: MKL's norm drops it, ours is NaN (not checked)
        _check(torch.linalg.qr, a)
