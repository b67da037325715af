"""sdpa's fully masked rows (issue 41): torch returns 0 for a query whose mask hides
every key. The file decides which rows those are from the mask alone, so a model whose
layers share one mask computes the predicate once (one ArgMax in the whole graph), not
once per layer over that layer's [B, H, Lq, Lk] scores.

Eager, for a row whose float mask is all the dtype's lowest value (transformers'
convention) rather than -inf, does not return 0: float32 and bfloat16 give the mean of
the values, float16 the unmasked attention. The file used to return 0 there too.
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import pt2onnx

# The file and eager round at different points, so half types may differ by a few steps.
TOL = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 2e-2), torch.float16: (4e-3, 4e-3)}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# The float mask's value at a hidden key; None: the bool mask itself.
FILLS = {"bool": None, "-inf": float("-inf"), "lowest": "lowest"}
LAYERS = 3


class Layers(torch.nn.Module):
    """``layers`` attention layers with residuals, in ``dtype``, all reading one mask;
    float32 at the boundary (onnxruntime's Python API takes no bfloat16 arrays)."""

    def __init__(self, dtype: torch.dtype, fill: object, layers: int = LAYERS) -> None:
        super().__init__()
        self.dtype, self.fill, self.layers = dtype, fill, layers

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        x = x.to(self.dtype)
        mask = keep
        if self.fill is not None:
            fill = torch.finfo(self.dtype).min if self.fill == "lowest" else self.fill
            mask = torch.zeros(keep.shape, dtype=self.dtype).masked_fill(~keep, fill)
        for _ in range(self.layers):
            # Small scores: a flat softmax, whose rounding does not grow layer by layer.
            x = x + torch.nn.functional.scaled_dot_product_attention(x * 0.3, x * 0.3, x,
                                                                     attn_mask=mask)
        return x.float()


def _keep(shape: str, batch: int, seq: int) -> torch.Tensor:
    """A mask with at least one query row that sees no key."""
    if shape == "padding":  # [B, 1, 1, S]: the last sample is all padding
        keep = torch.ones(batch, 1, 1, seq, dtype=torch.bool)
        keep[0, ..., -1] = False
        keep[-1] = False
        return keep
    dims = {"2d": (seq, seq), "4d": (batch, 1, seq, seq), "heads": (batch, 2, seq, seq)}[shape]
    keep = torch.rand(dims) > 0.3
    keep[..., 0, :] = False  # the first query row of every sample and head
    return keep


MASK_AXES = {"padding": lambda b, s: {0: b, 3: s}, "2d": lambda b, s: {0: s, 1: s},
             "4d": lambda b, s: {0: b, 2: s, 3: s}, "heads": lambda b, s: {0: b, 2: s, 3: s}}


def _export(model: torch.nn.Module, shape: str) -> pt2onnx.OnnxProgram:
    torch.manual_seed(0)
    b, s = Dim("b"), Dim("s")
    example = (torch.randn(2, 2, 5, 8), _keep(shape, 2, 5))
    return pt2onnx.export(model, example, dynamic_shapes=({0: b, 2: s}, MASK_AXES[shape](b, s)))


def _count(prog: pt2onnx.OnnxProgram, op_type: str) -> int:
    return sum(node.op_type == op_type for node in prog.model_proto.graph.node)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("fill", list(FILLS), ids=list(FILLS))
@pytest.mark.parametrize("shape", list(MASK_AXES))
def test_fully_masked_rows_match_eager(shape, fill, dtype):
    """At the example, at batch and sequence 1, and at a larger size; the predicate is
    computed once for all the layers."""
    model = Layers(dtype, FILLS[fill])
    prog = _export(model, shape)
    assert _count(prog, "ArgMax") == 1, "the masked-row check is computed per layer"
    atol, rtol = TOL[dtype]
    for batch, seq in ((2, 5), (1, 1), (3, 7)):
        torch.manual_seed(batch + seq)
        args = (torch.randn(batch, 2, seq, 8), _keep(shape, batch, seq))
        got = torch.from_numpy(prog.run(*args)[0])
        torch.testing.assert_close(got, model(*args), atol=atol, rtol=rtol)


@pytest.mark.parametrize("fill", list(FILLS), ids=list(FILLS))
def test_masked_row_check_does_not_grow_with_layers(fill):
    """One layer or three: one ArgMax and one GatherElements (only the Where that zeroes
    the rows is per layer)."""
    counts = []
    for layers in (1, 3):
        prog = _export(Layers(torch.float32, FILLS[fill], layers), "4d")
        counts.append((_count(prog, "ArgMax"), _count(prog, "GatherElements")))
    assert counts == [(1, 1), (1, 1)], counts


class Lowest(torch.nn.Module):
    """One sdpa whose float mask hides keys with the dtype's lowest value."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, q, k, v, keep):
        q, k, v = (t.to(self.dtype) for t in (q, k, v))
        mask = torch.zeros(keep.shape, dtype=self.dtype).masked_fill(
            ~keep, torch.finfo(self.dtype).min)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).float()


# bfloat16 is not here: computed in float32, its lowest value was above float32's, and
# such a row was never zeroed (test_fully_masked_rows_match_eager covers it).
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_lowest_value_rows_are_not_zeroed(dtype):
    """A row of the dtype's lowest value is not hidden in eager, and the file agrees. It
    used to return 0 in float32, and in float16 where the row's scores are all negative
    (their sum with the mask then is at or below the lowest value)."""
    model = Lowest(dtype)
    q, k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8).abs(), torch.randn(2, 2, 5, 8)
    q[..., 0, :] = -q[..., 0, :].abs()  # the hidden row's scores are all negative
    keep = torch.ones(2, 1, 5, 5, dtype=torch.bool)
    keep[..., 0, :] = False
    prog = pt2onnx.export(model, (q, k, v, keep))
    expected = model(q, k, v, keep)
    assert expected[..., 0, :].abs().min() > 0.01, "eager zeroed the row"
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(torch.from_numpy(prog.run(q, k, v, keep)[0]), expected,
                               atol=atol, rtol=rtol)
