"""passes/fold_batch_norm.py: an inference batch norm after a Conv is folded into the
Conv's weights (it was done inside the batch-norm rule, which looked back at the node
before it; rules read only their own inputs now)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import pt2onnx
from pt2onnx.passes import fold_batch_norm


def _export(model: nn.Module, *args: torch.Tensor, **kw):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pt2onnx.export(model.eval(), args, **kw)


def _stats(model: nn.Module) -> nn.Module:
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) * 2 - 1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
            if m.affine:
                m.weight.data.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.data.copy_(torch.rand(m.bias.shape, generator=g) - 0.5)
    return model


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("conv_bias", [True, False])
@pytest.mark.parametrize("optimize", [True, False])
def test_conv_then_norm_is_one_conv(affine: bool, conv_bias: bool, optimize: bool) -> None:
    """The norm's output as a graph output, and a norm inside the graph, both folded;
    with and without the norm's affine parameters and the Conv's bias."""
    model = _stats(nn.Sequential(nn.Conv2d(3, 8, 3, bias=conv_bias), nn.BatchNorm2d(8, affine=affine),
                                 nn.ReLU(), nn.Conv2d(8, 4, 1),
                                 nn.BatchNorm2d(4)))
    x = torch.randn(2, 3, 10, 10)
    prog = _export(model, x, optimize=optimize)
    assert [n.op_type for n in prog.model.graph] == ["Conv", "Relu", "Conv"]
    assert prog.verify(x, atol=1e-5).ok


class _Shared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):  # type: ignore[no-untyped-def]
        y = self.conv(x)
        return self.bn(y), y.mean()


def test_a_conv_output_read_elsewhere_keeps_its_norm() -> None:
    model = _stats(_Shared())
    x = torch.randn(2, 3, 8, 8)
    prog = _export(model, x)
    assert "BatchNormalization" in [n.op_type for n in prog.model.graph]
    assert prog.verify(x, atol=1e-5).ok


def test_a_shared_weight_stays_for_its_other_reader() -> None:
    """Two Convs with one weight, one of them followed by a norm: the folded Conv gets
    new weights, the other keeps the original ones."""
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x):  # type: ignore[no-untyped-def]
            return self.bn(self.conv(x)), self.conv(x * 2)

    model = _stats(Twice())
    x = torch.randn(1, 3, 6, 6)
    prog = _export(model, x)
    assert [n.op_type for n in prog.model.graph].count("BatchNormalization") == 0
    assert prog.verify(x, atol=1e-5).ok


def test_the_pass_counts_and_leaves_training_norms() -> None:
    model = _stats(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)))
    x = torch.randn(2, 3, 6, 6)
    prog = _export(model, x, optimize=False)
    assert fold_batch_norm.apply(prog.model) == 0  # already folded at export
    train = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(train, (x,))
    out = prog.run(x)[0]
    np.testing.assert_allclose(out, train(x).detach().numpy(), atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(300, 64, 3, 3), (3, 40000, 1, 1), (5, 2, 7)])
def test_blockwise_scaling_writes_the_same_bits(dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    """The folded weight is scaled a block of output channels at a time (several blocks
    here; one channel larger than a block in the second case): the same float64 product,
    rounded once to the weight's dtype, as scaling the whole weight at once."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(shape, generator=g).to(dtype)
    scale = (torch.rand(shape[0], generator=g, dtype=torch.float64) * 3).reshape(
        -1, *([1] * (len(shape) - 1)))
    whole = (w.double() * scale).to(dtype)
    folded = fold_batch_norm._Scaled(w, lambda: scale.reshape(-1))
    bits = torch.int16 if dtype != torch.float32 else torch.int32
    got = folded()
    assert got.dtype == dtype and got.shape == w.shape
    assert torch.equal(got.view(bits), whole.view(bits))
    blocks = list(folded.blocks())  # what the writer takes: the same rows, in order
    assert len(blocks) > 1 or shape[0] == 3 or shape == (5, 2, 7)
    assert torch.equal(torch.cat(blocks).view(bits), whole.view(bits))


@pytest.mark.parametrize("external", [True, False])
def test_a_folded_weight_is_written_a_block_at_a_time(tmp_path, monkeypatch, external) -> None:
    """Saving never makes a folded weight whole (its peak is one block, not the
    largest conv's weight): the file is written from the blocks, and runs as eager."""
    model = _stats(nn.Sequential(nn.Conv2d(8, 600, 3), nn.BatchNorm2d(600), nn.ReLU(),
                                 nn.Conv2d(600, 4, 1), nn.BatchNorm2d(4))).eval()
    x = torch.randn(1, 8, 6, 6)
    prog = _export(model, x)
    assert prog.report.op_histogram.get("BatchNormalization", 0) == 0

    def whole(self):  # type: ignore[no-untyped-def]
        raise AssertionError("the folded weight was made whole at save")

    monkeypatch.setattr(fold_batch_norm._Scaled, "__call__", whole)
    path = tmp_path / "m.onnx"
    prog.save(path, external_data=external)
    monkeypatch.undo()
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-4, atol=1e-4)
