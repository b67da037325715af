"""Core ATen ops that OpInfo samples do not reach: gradients, random factories, col2im.

Each case calls the ATen op directly inside a module, exports it at opset 17 and at the
default opset, and compares with eager (random ops: shape, dtype and range only).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import opinfo_harness as harness
import pytest
import torch

import pt2onnx

aten = torch.ops.aten
OPSETS = (17, pt2onnx.DEFAULT_OPSET)


class Call(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> Any:
        return self.fn(*xs)


def _maxpool_grad(x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    _, idx = aten.max_pool2d_with_indices(x, [2, 2], [2, 2])
    return aten.max_pool2d_with_indices_backward(grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False,
                                                 idx)


def _layer_norm_grad(x: torch.Tensor, grad: torch.Tensor, w: torch.Tensor,
                     b: torch.Tensor) -> Any:
    _, mean, rstd = aten.native_layer_norm(x, [4], w, b, 1e-5)
    return aten.native_layer_norm_backward(grad, x, [4], mean, rstd, w, b, [True, True, True])


r = torch.randn
CASES: dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]] = {
    "embedding_dense_backward": (
        lambda g, i: aten.embedding_dense_backward(g, i, 10, 2, False),
        (r(3, 4, 5), torch.tensor([[0, 2, 3, 3], [9, 1, 2, 0], [4, 4, 4, 5]])),
    ),
    "max_pool2d_with_indices_backward": (_maxpool_grad, (r(2, 3, 6, 6), r(2, 3, 3, 3))),
    "avg_pool2d_backward": (
        lambda g, x: aten.avg_pool2d_backward(g, x, [3, 3], [2, 2], [1, 1], False, True, None),
        (r(2, 3, 4, 4), r(2, 3, 7, 8)),
    ),
    "avg_pool2d_backward.exclude_pad": (
        lambda g, x: aten.avg_pool2d_backward(g, x, [3, 3], [2, 2], [1, 1], False, False, None),
        (r(2, 3, 4, 4), r(2, 3, 7, 8)),
    ),
    "_adaptive_avg_pool2d_backward": (
        lambda g, x: aten._adaptive_avg_pool2d_backward(g, x), (r(2, 3, 2, 3), r(2, 3, 6, 6)),
    ),
    "native_layer_norm_backward": (_layer_norm_grad, (r(2, 3, 4), r(2, 3, 4), r(4), r(4))),
    "col2im": (lambda x: aten.col2im(x, [5, 6], [2, 3], [1, 1], [1, 1], [2, 1]),
               (r(2, 3 * 6, 3 * 6),)),
    "col2im.unbatched_dilated": (lambda x: aten.col2im(x, [6, 6], [2, 2], [2, 1], [0, 1], [1, 2]),
                                 (r(2 * 4, 4 * 4),)),
    "atan2.out": (lambda a, b: torch.atan2(a, b), (r(3, 4), r(3, 4))),
    # Outputs of length 1: torch samples the centre of the input (half_pixel), not index 0.
    "upsample_bilinear2d.to_length_1": (
        lambda x: torch.nn.functional.interpolate(x, size=(1, 5), mode="bilinear"), (r(2, 3, 9, 7),)),
    "upsample_bicubic2d.to_length_1": (
        lambda x: torch.nn.functional.interpolate(x, size=(4, 1), mode="bicubic"), (r(2, 3, 9, 7),)),
    "upsample_bilinear2d.default": (
        lambda x: aten.upsample_bilinear2d.default(x, [5, 11], False), (r(1, 2, 4, 4),)),
    "upsample_bilinear2d.default_scales": (
        lambda x: aten.upsample_bilinear2d.default(x, [6, 10], False, 1.5, 2.5), (r(1, 2, 4, 4),)),
    "upsample_nearest2d.default": (
        lambda x: aten.upsample_nearest2d.default(x, [7, 3]), (r(1, 2, 4, 5),)),
}
RANDOM: dict[str, tuple[Callable[..., Any], tuple[int, ...], torch.dtype]] = {
    "rand": (lambda: torch.rand(3, 4), (3, 4), torch.float32),
    "randn": (lambda: torch.randn(2, 5), (2, 5), torch.float32),
    "randperm": (lambda: torch.randperm(7), (7,), torch.int64),
}


def _export(module: torch.nn.Module, args: tuple[Any, ...], opset: int) -> pt2onnx.OnnxProgram:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pt2onnx.export(module, args, opset=opset)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_core_extra(name: str, opset: int) -> None:
    fn, args = CASES[name]
    module = Call(fn)
    expected = harness.eager(module, args)
    actual = _export(module, args, opset).run(*args)
    outcome = harness.compare_outputs(expected, actual)
    assert outcome.ok, f"{name}: {outcome.message}"


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random(name: str, opset: int) -> None:
    fn, shape, dtype = RANDOM[name]
    (out,) = _export(Call(fn), (), opset).run()
    assert out.shape == shape
    assert out.dtype == torch.empty((), dtype=dtype).numpy().dtype
    if name == "rand":
        assert ((out >= 0) & (out < 1)).all()
    if name == "randperm":
        assert sorted(out.tolist()) == list(range(shape[0]))


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_for_cpu_returns_output_and_logsumexp(causal):
    class Flash(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                q, k, v, 0.0, causal)

    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 8)
    prog = pt2onnx.export(Flash(), (q, k, v))
    out, lse = Flash()(q, k, v)
    got = prog.run(q, k, v)
    assert got[1].shape == tuple(lse.shape) == (2, 3, 5)
    torch.testing.assert_close(torch.from_numpy(got[0]), out, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.from_numpy(got[1]), lse, rtol=1e-4, atol=1e-5)
