"""Advanced indexing as models write it: any pattern of None (slices) and tensor indices,
read (``x[:, i, :, j]``) and written (``x[:, i] = v``, ``index_copy``, accumulate), boolean
and uint8 masks, negative and broadcast indices, dynamic shapes. Each case runs in
onnxruntime and is compared with eager PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch.export import Dim

import pt2onnx

T = torch.tensor
I0 = T([0, 2, -1])            # negative index
I1 = T([[1], [3]])            # broadcasts against I2
I2 = T([4, -2, 0])
DUP = T([1, 1, -1])           # duplicates, for accumulate
MASK = T([[1, 0, 1, 1, 0], [0, 0, 1, 0, 1], [1, 1, 1, 0, 0], [0, 1, 0, 0, 1]])
MASK_U8, MASK_B = MASK.to(torch.uint8), MASK.bool()


class Fn(torch.nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def setitem(key):
    def fn(x, v):
        y = x.clone()
        y[key] = v
        return y

    return fn


def _check(fn, args, opset=None, dynamic_shapes=None, more=()):
    model = Fn(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager's uint8-index deprecation warning
        # forward(*args): the spec of the one variadic argument is the tuple of specs.
        spec = None if dynamic_shapes is None else (dynamic_shapes,)
        prog = pt2onnx.export(model, args, opset=opset, dynamic_shapes=spec)
        for inputs in (args, *more):
            with torch.no_grad():
                expected = fn(*[a.clone() for a in inputs])
            (actual,) = prog.run(*inputs)
            assert actual.shape == tuple(expected.shape)
            np.testing.assert_allclose(actual, expected.numpy(), rtol=1e-6, atol=1e-6)
    return prog


X = torch.randn(4, 5, 6, 7)
GET = {
    "leading_slice": lambda x: x[:, I0],
    "two_slices": lambda x: x[:, :, I2],
    "consecutive_front": lambda x: x[I0, I2],
    "consecutive_inside": lambda x: x[:, I0, I2],
    "consecutive_broadcast": lambda x: x[:, :, I1, I2],
    "separated": lambda x: x[I0, :, I2],
    "separated_inside": lambda x: x[:, I0, :, I2],
    "separated_broadcast": lambda x: x[I1, :, :, I2],
    "ellipsis": lambda x: x[..., I0],
    "zero_d_and_none": lambda x: x[:, T(0), T([0, 2]), T([[1, 3], [4, 0]]), None],
    "int_between": lambda x: x[I0, 1, I2],
    "mask_bool": lambda x: x[MASK_B],
    "mask_uint8": lambda x: x[MASK_U8],
    "mask_after_slice": lambda x: x[:, :, torch.ones(6, 7, dtype=torch.bool)],
}


@pytest.mark.parametrize("name", sorted(GET))
def test_index_read(name):
    _check(GET[name], (X,))


SET = {
    "leading_slice": ((slice(None), I0), (4, 3, 6, 7)),
    "leading_slice_broadcast_value": ((slice(None), I0), (7,)),
    "two_slices": ((slice(None), slice(None), I2), (4, 5, 3, 7)),
    "consecutive_inside": ((slice(None), I1, I2), (4, 2, 3, 7)),
    "separated": ((I0, slice(None), I2), (3, 5, 7)),
    "separated_inside": ((slice(None), I0, slice(None), I2), (3, 4, 6)),
    "mask_bool": (MASK_B, (6, 7)),
    "mask_uint8": (MASK_U8, (6, 7)),
    "mask_after_slice": ((slice(None), torch.ones(5, 6, dtype=torch.bool)), ()),
}


@pytest.mark.parametrize("name", sorted(SET))
def test_index_write(name):
    key, shape = SET[name]
    _check(setitem(key), (X, torch.randn(shape)))


@pytest.mark.parametrize("indices,shape", [
    ([None, DUP], (4, 3, 6, 7)),
    ([DUP, None, T([2, 2, 2])], (3, 5, 7)),
    ([None, None, None, T([1, -1, 1])], (3,)),
])
def test_index_put_accumulate(indices, shape):
    _check(lambda x, v: torch.ops.aten.index_put(x, indices, v, True), (X, torch.randn(shape)))


def test_index_copy_and_add_along_inner_dims():
    _check(lambda x, v: x.index_copy(1, T([4, 0, 2]), v), (X, torch.randn(4, 3, 6, 7)))
    _check(lambda x, v: x.clone().index_copy_(3, T([6, 1]), v), (X, torch.randn(4, 5, 6, 2)))
    _check(lambda x, v: x.index_add(2, T([5, 1, 5]), v), (X, torch.randn(4, 5, 3, 7)), opset=17)


def test_uint8_mask_input_is_captured_by_torch_export():
    def fn(x, m):
        return x[m] * 2

    m = (torch.rand(4, 5) > 0.5).to(torch.uint8)
    other = (torch.rand(4, 5) > 0.5).to(torch.uint8)
    prog = _check(fn, (X, m), more=((X, other),))
    assert prog.report.capture_strategy.startswith("torch.export")


def test_dynamic_shapes():
    b, n = Dim("b"), Dim("n")

    def put(x, idx, v):
        y = x.clone()
        y[:, idx] = v
        return y

    _check(put, (torch.randn(4, 5, 6), T([0, -1, 2]), torch.randn(4, 3, 6)),
           dynamic_shapes=((b, None, None), (n,), (b, n, None)),
           more=((torch.randn(7, 5, 6), T([1, 3]), torch.randn(7, 2, 6)),))
    _check(lambda x, i0, i1: x[i0, :, i1], (torch.randn(4, 5, 6), T([0, -1, 2]), T([[1], [2]])),
           dynamic_shapes=((b, None, Dim("c")), (n,), None),
           more=((torch.randn(7, 5, 9), T([1, 3, 5, 6, 2]), T([[1], [8]])),))
