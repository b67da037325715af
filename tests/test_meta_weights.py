"""Export from the meta device; weights streamed from safetensors, a mapping or a callable."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import onnx
import pytest
import torch

import pt2onnx
from pt2onnx import _compat
from pt2onnx.save import write_safetensors

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytestmark = pytest.mark.skipif(
    not _compat.META_DEVICE_EXPORT, reason="export from the meta device needs torch 2.13+"
)


@contextlib.contextmanager
def params_on_meta():
    """Parameters on the meta device, buffers real (like accelerate's init_empty_weights)."""
    original = torch.nn.Module.register_parameter

    def register(self, name, param):
        if param is not None:
            param = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        original(self, name, param)

    torch.nn.Module.register_parameter = register
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = original


@pytest.fixture(scope="module")
def models():
    cfg = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=128, vocab_size=100,
                                   pad_token_id=0)
    torch.manual_seed(0)
    real = transformers.LlamaForCausalLM(cfg).eval()
    with params_on_meta():
        meta = transformers.LlamaForCausalLM(cfg).eval()
    assert next(meta.parameters()).is_meta
    return real, meta


def _check(path, real, ids):
    import onnxruntime as ort

    onnx.checker.check_model(str(path), full_check=True)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got, *_) = sess.run(None, {sess.get_inputs()[0].name: ids.numpy()})
    with torch.no_grad():
        ref = real(input_ids=ids, use_cache=False).logits.numpy()
    np.testing.assert_allclose(got, ref, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("kind", ["safetensors", "state_dict", "callable"])
def test_meta_export_streams_weights(kind, models, tmp_path):
    real, meta = models
    state = real.state_dict()
    if kind == "safetensors":
        write_safetensors(tmp_path / "w.safetensors", state)
        weights = tmp_path / "w.safetensors"
    elif kind == "state_dict":
        weights = state
    else:
        weights = state.__getitem__
    ids = torch.randint(1, 100, (1, 8))
    out = tmp_path / "m.onnx"
    pt2onnx.export(meta, (), out, kwargs={"input_ids": ids, "use_cache": False}, weights=weights)
    assert (tmp_path / "m.onnx.data").exists()
    _check(out, real, ids)


def test_meta_export_without_weights_says_what_to_do(models, tmp_path):
    _, meta = models
    ids = torch.randint(1, 100, (1, 8))
    with pytest.raises(pt2onnx.SaveError, match="weights="):
        pt2onnx.export(meta, (), tmp_path / "m.onnx", kwargs={"input_ids": ids, "use_cache": False})
    assert os.listdir(tmp_path) == []
    # The program itself is fine; it can be saved later with weights.
    prog = pt2onnx.export(meta, (), kwargs={"input_ids": ids, "use_cache": False})
    prog.save(tmp_path / "later.onnx", weights=models[0].state_dict())
    assert sorted(os.listdir(tmp_path)) == ["later.onnx", "later.onnx.data"]


def test_wrong_weights_fail_cleanly(models, tmp_path):
    real, meta = models
    state = dict(real.state_dict())
    state["model.norm.weight"] = torch.ones(3)
    ids = torch.randint(1, 100, (1, 8))
    with pytest.raises(pt2onnx.SaveError, match="model.norm.weight"):
        pt2onnx.export(meta, (), tmp_path / "m.onnx",
                       kwargs={"input_ids": ids, "use_cache": False}, weights=state)
    del state["model.norm.weight"]
    with pytest.raises(pt2onnx.SaveError, match="no tensor named 'model.norm.weight'"):
        pt2onnx.export(meta, (), tmp_path / "m.onnx",
                       kwargs={"input_ids": ids, "use_cache": False}, weights=state)
    assert os.listdir(tmp_path) == []
