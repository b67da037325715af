"""scaled_dot_product_attention at opset 23+: the fused ONNX Attention op, and its fallback.

Each case exports at opset 23 and 26, checks whether the graph uses Attention or the
decomposition (MatMul, Softmax, MatMul), runs it in onnxruntime and compares with eager.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F

import pt2onnx

OPSETS = (23, 26)
torch.manual_seed(0)  # the cases below are built at import time


class Sdpa(torch.nn.Module):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self.kwargs = kwargs

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                *mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, *mask, **self.kwargs)


def _qkv(b: int = 2, h: int = 4, sq: int = 5, skv: int = 5, d: int = 8,
         hkv: int | None = None) -> tuple[torch.Tensor, ...]:
    hkv = h if hkv is None else hkv
    return (torch.randn(b, h, sq, d), torch.randn(b, hkv, skv, d), torch.randn(b, hkv, skv, d))


def _bool_mask(*shape: int) -> torch.Tensor:
    mask = torch.rand(*shape) > 0.4
    mask[..., 0] = True  # no fully masked rows
    return mask


CASES: dict[str, tuple[dict[str, Any], tuple[torch.Tensor, ...]]] = {
    "no_mask": ({}, _qkv()),
    "bool_mask": ({}, (*_qkv(), _bool_mask(5, 5))),
    "bool_mask_4d": ({}, (*_qkv(), _bool_mask(2, 1, 5, 5))),
    "float_mask": ({}, (*_qkv(), torch.randn(2, 4, 5, 5))),
    "float_mask_3d": ({}, (*_qkv(), torch.randn(1, 5, 5))),
    "causal": ({"is_causal": True}, _qkv()),
    "causal_sq_lt_skv": ({"is_causal": True}, _qkv(sq=3, skv=7)),
    "causal_sq_gt_skv": ({"is_causal": True}, _qkv(sq=7, skv=3)),
    "scale": ({"scale": 0.3}, _qkv()),
    "gqa": ({"enable_gqa": True}, _qkv(h=6, hkv=2, skv=7)),
    "gqa_causal_mqa": ({"enable_gqa": True, "is_causal": True}, _qkv(h=4, hkv=1, sq=3, skv=6)),
    "v_head_size": ({}, (torch.randn(1, 2, 4, 8), torch.randn(1, 2, 6, 8),
                         torch.randn(1, 2, 6, 16))),
}
# Not exactly what ONNX Attention (or onnxruntime's kernel) computes: the decomposition.
FALLBACK: dict[str, tuple[dict[str, Any], tuple[torch.Tensor, ...]]] = {
    "3d": ({}, (torch.randn(4, 5, 8), torch.randn(4, 6, 8), torch.randn(4, 6, 8))),
    "5d": ({}, (torch.randn(2, 2, 3, 5, 8), torch.randn(2, 2, 3, 6, 8),
                torch.randn(2, 2, 3, 6, 8))),
    # onnxruntime rejects a mask whose last two dims are not (S_q, S_kv).
    "padding_mask_broadcast": ({}, (*_qkv(), _bool_mask(2, 1, 1, 5))),
    "gqa_padding_mask_broadcast": ({"enable_gqa": True},
                                   (*_qkv(h=4, hkv=2, skv=6), _bool_mask(2, 1, 1, 6))),
    "batch_broadcast": ({}, (torch.randn(2, 4, 5, 8), torch.randn(1, 4, 5, 8),
                             torch.randn(1, 4, 5, 8))),
    "float64": ({}, tuple(t.double() for t in _qkv())),
    # onnxruntime's float16 Attention is less accurate than the decomposition.
    "float16": ({}, tuple(t.half() for t in _qkv())),
}


def _check(kwargs: dict[str, Any], inputs: tuple[torch.Tensor, ...], opset: int,
           fused: bool, tmp_path: Any) -> None:
    model = Sdpa(**kwargs)
    path = tmp_path / "sdpa.onnx"
    prog = pt2onnx.export(model, inputs, path, opset=opset)
    onnx.checker.check_model(str(path), full_check=True)
    op_types = {n.op_type for n in prog.model_proto.graph.node}
    assert ("Attention" in op_types) == fused, op_types
    if not fused:
        assert "Softmax" in op_types, op_types
    got = prog.run(*inputs)
    got = got[0] if isinstance(got, (list, tuple)) else got
    expected = model(*inputs)
    tol = 1e-2 if expected.dtype == torch.float16 else 1e-5
    np.testing.assert_allclose(np.asarray(got), expected.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_attention(case: str, opset: int, tmp_path: Any) -> None:
    kwargs, inputs = CASES[case]
    _check(kwargs, inputs, opset, True, tmp_path)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("case", sorted(FALLBACK))
def test_fallback_decomposition(case: str, opset: int, tmp_path: Any) -> None:
    kwargs, inputs = FALLBACK[case]
    _check(kwargs, inputs, opset, False, tmp_path)


@pytest.mark.parametrize("opset", OPSETS)
def test_dropout_falls_back(opset: int) -> None:
    # dropout_p > 0 is random in eager; the export is inference attention without dropout.
    q, k, v = _qkv()
    prog = pt2onnx.export(Sdpa(dropout_p=0.5), (q, k, v), opset=opset)
    assert "Attention" not in {n.op_type for n in prog.model_proto.graph.node}
    got = prog.run(q, k, v)
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(np.asarray(got), F.scaled_dot_product_attention(q, k, v).numpy(),
                               rtol=1e-5, atol=1e-5)


def test_opset_22_keeps_the_decomposition() -> None:
    prog = pt2onnx.export(Sdpa(is_causal=True), _qkv(), opset=22)
    assert "Attention" not in {n.op_type for n in prog.model_proto.graph.node}


def test_dynamic_sequence_length(tmp_path: Any) -> None:
    q, k, v = _qkv(sq=6, skv=6)
    seq = torch.export.Dim("seq", min=2, max=64)
    dyn = ({2: seq}, {2: seq}, {2: seq})
    prog = pt2onnx.export(Sdpa(is_causal=True), (q, k, v), opset=23, dynamic_shapes=dyn)
    assert "Attention" in {n.op_type for n in prog.model_proto.graph.node}
    q, k, v = _qkv(sq=9, skv=9)
    got = prog.run(q, k, v)
    got = got[0] if isinstance(got, (list, tuple)) else got
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(np.asarray(got), expected.numpy(), rtol=1e-5, atol=1e-5)
