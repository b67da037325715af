"""optimize="onnxruntime" on PyTorch's own sdpa samples (op_db, slow tier): every
sample without dropout (random, so not comparable) exports, and the file equals eager
in onnxruntime whether the attention became MultiHeadAttention or stayed standard
(3-D inputs, causal, grouped heads do). The count of fused samples is asserted, so a
change that stops the fusion fails here too."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import pt2onnx

pytestmark = pytest.mark.slow
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
pytest.importorskip("expecttest", reason="op_db needs expecttest")


def _samples():
    from torch.testing._internal.common_methods_invocations import op_db

    ops = [o for o in op_db if o.name == "nn.functional.scaled_dot_product_attention"]
    for op in ops:
        for sample in op.sample_inputs("cpu", torch.float32):
            if not sample.kwargs.get("dropout_p", 0):
                yield sample


class _Sdpa(torch.nn.Module):
    def __init__(self, kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, *tensors):
        return torch.nn.functional.scaled_dot_product_attention(*tensors, **self.kwargs)


def test_every_sdpa_sample_matches_eager_with_onnxruntime_ops():
    fused = total = 0
    for sample in _samples():
        tensors = tuple(a for a in (sample.input, *sample.args) if isinstance(a, torch.Tensor))
        module = _Sdpa(sample.kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog = pt2onnx.export(module, tensors, None, optimize="onnxruntime")
        total += 1
        fused += any(n.op_type == "MultiHeadAttention" for n in prog.model.graph)
        session = ort.InferenceSession(prog.model_proto.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), tensors)}
        got = session.run(None, feeds)[0]
        with torch.no_grad():
            want = module(*tensors).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True,
                                   err_msg=f"{[t.shape for t in tensors]} {sample.kwargs}")
    assert total >= 5
    print(f"{fused} of {total} samples fused")
    assert fused >= 1  # torch 2.13: 13 samples without dropout, 2 of them fused (its causal samples have more keys than queries or 3-D inputs)
