"""export-llm from the meta device: the checkpoint's weights streamed, not loaded.

A checkpoint folder is exported with the model built on the meta device and each
weight read from the safetensors files (converted to the precision) as it is written.
Each case exports the same tiny random checkpoint that way and with
``PT2ONNX_LLM_META=0`` (``from_pretrained``, as before) and compares the two: the same
weights in the files and the same outputs in onnxruntime, on a left-padded batch with
a non-empty past. The families: Llama, Gemma2 (tied embeddings, soft-capping, an
embedding scale computed as a buffer), GPT-2 (Conv1D weights used untransposed, tied)
and GPT-NeoX (a checkpoint name transformers renames: ``embed_out`` is ``lm_head``),
in fp32, fp16 and int4. Then onnxruntime-genai's greedy tokens from a streamed Llama
export against transformers' generate, and the fallbacks: a checkpoint without
safetensors files, and Falcon, whose forward makes index tensors on the model's
device (no data on the meta device).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pt2onnx
from pt2onnx import _compat
from pt2onnx.llm import _meta

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from test_export_llm import FAMILIES, PROMPT, _genai, _genai_tokens, _reference, _vary  # noqa: E402
from test_llm_stamp import CONFIGS, _feeds  # noqa: E402

FELL_BACK = "not streamed from the checkpoint"


def _gptj_indexes_its_buffer() -> bool:
    """transformers 5.24's GPT-J indexes embed_positions with position_ids as they are."""
    import inspect

    from transformers.models.gptj import modeling_gptj

    return "to(position_ids.device)" not in inspect.getsource(modeling_gptj)


_GPTJ_ON_META = _gptj_indexes_its_buffer()


def _checkpoint(name, path, layers=None, seed=0, dtype=None):
    """save_pretrained of a random model: ``layers`` layers where given (the stamping
    tests' configs), else the generation tests' three; stored in ``dtype`` if given."""
    torch.manual_seed(seed)
    config = CONFIGS[name](layers) if layers is not None else FAMILIES[name]()
    model = _vary(transformers.AutoModelForCausalLM.from_config(config).eval())
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(path)
    return model


def _both(ckpt, tmp_path, monkeypatch, precision):
    streamed = pt2onnx.export_llm(ckpt, tmp_path / "streamed", precision=precision)
    monkeypatch.setenv(_meta.ENV, "0")
    loaded = pt2onnx.export_llm(ckpt, tmp_path / "loaded", precision=precision)
    monkeypatch.delenv(_meta.ENV)
    return streamed, loaded


def _outputs(path, feeds=None, half=False):
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    if feeds is None:
        # Batch 1: onnxruntime's GroupQueryAttention (the fused graph) takes several new
        # tokens over a past for one sequence only.
        feeds = _feeds(session, batch=1)
        if half:
            feeds = {k: v.astype(np.float16) if v.dtype == np.float32 else v
                     for k, v in feeds.items()}
    return [o.name for o in session.get_outputs()], session.run(None, feeds), feeds


def _weights(path):
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(path))
    return {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}


@pytest.mark.models
@pytest.mark.parametrize(("name", "layers", "precision"), [
    *((name, layers, precision) for name, layers in (("llama", 4), ("gemma2", 7), ("gpt2", 4))
      for precision in ("fp32", "fp16", "int4")),
    ("gpt_neox", None, "fp32"),
    # GPT-J indexes its computed position table with the inputs (transformers 5.24):
    # captured with the buffer on meta too, then streamed like a weight.
    *(pytest.param("gptj", None, precision, marks=pytest.mark.skipif(
        not _GPTJ_ON_META, reason="before transformers 5.24 GPT-J moves its position table "
        "to the inputs' device, and the streamed file folds the three layers' copies into "
        "one constant: other initializer names than from_pretrained's, the same values"))
      for precision in ("fp32", "fp16"))])
def test_streamed_export_equals_from_pretrained(name, layers, precision, tmp_path,
                                                monkeypatch):
    _checkpoint(name, tmp_path / "ckpt", layers)
    _streamed_equals_loaded(tmp_path, monkeypatch, precision, layers)


@pytest.mark.models
@pytest.mark.parametrize("precision", ["fp32", "fp16", "int4"])
def test_a_bfloat16_checkpoint_streams_converted_a_block_at_a_time(precision, tmp_path,
                                                                   monkeypatch):
    """Every weight is converted on the way (bfloat16 to float32 or float16, or to
    float32 rows for int4), a block at a time: the same bytes as from_pretrained's
    whole-model conversion."""
    _checkpoint("llama", tmp_path / "ckpt", 4, dtype=torch.bfloat16)
    _streamed_equals_loaded(tmp_path, monkeypatch, precision, 4)


def _streamed_equals_loaded(tmp_path, monkeypatch, precision, layers):
    streamed, loaded = _both(tmp_path / "ckpt", tmp_path, monkeypatch, precision)
    assert not [w for w in streamed.warnings if FELL_BACK in w], streamed.warnings
    # Built on the meta device: no parameter was ever loaded.
    module = streamed.program._module
    assert all(p.is_meta for p in module.parameters())
    assert streamed.captured_layers == loaded.captured_layers < (layers or 3)
    assert streamed.quantized == loaded.quantized
    # The same weights, byte for byte (the quantized ones included).
    got, want = _weights(streamed.model_path), _weights(loaded.model_path)
    assert {k for k, v in got.items() if v.size > 8} == {k for k, v in want.items() if v.size > 8}
    for key in (k for k, v in want.items() if v.size > 8):
        assert got[key].dtype == want[key].dtype and np.array_equal(got[key], want[key]), key
    names, a, feeds = _outputs(streamed.model_path, half=precision == "fp16")
    names_b, b, _ = _outputs(loaded.model_path, feeds)
    assert names == names_b
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.models
def test_streamed_folder_generates_transformers_greedy_tokens_in_genai(tmp_path):
    _genai()
    model = _checkpoint("llama", tmp_path / "ckpt", layers=4, seed=3)
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    assert not [w for w in result.warnings if FELL_BACK in w], result.warnings
    # The fused attention's check ran on a random-weight stand-in (the model has no
    # weights on the meta device) and passed: the graph has the fused op.
    assert not [w for w in result.warnings if "not fused" in w], result.warnings
    assert any(n.op_type == "GroupQueryAttention" for n in result.program.model.graph)
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == _reference(model, [PROMPT])


@pytest.mark.models
def test_a_forward_that_makes_tensors_on_the_meta_device_falls_back(tmp_path, monkeypatch):
    """Falcon's head split indexes with torch.tensor(..., device=x.device): on the meta
    device that constant holds no data, so the weights are loaded instead."""
    _checkpoint("falcon", tmp_path / "ckpt")
    streamed, loaded = _both(tmp_path / "ckpt", tmp_path, monkeypatch, "fp32")
    notes = [w for w in streamed.warnings if FELL_BACK in w]
    assert len(notes) == 1 and "did not export" in notes[0], streamed.warnings
    _, a, feeds = _outputs(streamed.model_path)
    _, b, _ = _outputs(loaded.model_path, feeds)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.skipif(not _compat.META_DEVICE_EXPORT,
                    reason="torch before 2.13 cannot capture on the meta device: nothing streams")
def test_a_checkpoint_without_safetensors_is_not_streamed(tmp_path):
    config = FAMILIES["llama"]()
    config.save_pretrained(tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(_meta.NotStreamable, match="no safetensors weights.*pytorch_model.bin"):
        _meta.load(tmp_path, config, torch.float32)


@pytest.mark.skipif(not _compat.META_DEVICE_EXPORT,
                    reason="torch before 2.13 cannot capture on the meta device: nothing streams")
def test_a_checkpoint_naming_a_tensor_otherwise_is_not_streamed(tmp_path):
    from pt2onnx.save import write_safetensors

    config = FAMILIES["llama"]()
    config.save_pretrained(tmp_path)
    with _meta.params_on_meta():
        state = transformers.AutoModelForCausalLM.from_config(config).state_dict()
    state["lm_head.weight_renamed"] = state.pop("lm_head.weight")
    write_safetensors(tmp_path / "model.safetensors", state,
                      lambda name, t: torch.zeros(t.shape, dtype=t.dtype))
    with pytest.raises(_meta.NotStreamable, match="no tensor 'lm_head.weight'"):
        _meta.load(tmp_path, config, torch.float32)


@pytest.mark.skipif(not _compat.META_DEVICE_EXPORT,
                    reason="torch before 2.13 cannot capture on the meta device: nothing streams")
def test_meta_model_buffers_equal_from_pretrained_ones(tmp_path):
    """The computed buffers (rotary inv_freq, Gemma's embedding scale, GPT-J's
    sinusoids) are what from_pretrained gives, in half precision too."""
    for name in ("gemma2", "gptj"):
        _checkpoint(name, tmp_path / name)
        config = transformers.AutoConfig.from_pretrained(tmp_path / name)
        for dtype in (torch.float32, torch.float16):
            model, checkpoint = _meta.load(tmp_path / name, config, dtype)
            ref = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / name, dtype=dtype)
            assert all(p.is_meta for p in model.parameters())
            for key, buf in ref.named_buffers():
                mine = model.get_buffer(key)
                assert mine.dtype == buf.dtype and torch.equal(mine, buf), (name, dtype, key)
            for key, p in ref.named_parameters():
                got = checkpoint.load(key, p.dtype)
                assert torch.equal(got, p.detach()), (name, dtype, key)


def test_where_scalar_overloads_match_eager(tmp_path):
    """A model on the meta device captures torch.where with a Python number as
    where.ScalarOther (Gemma2's masks): these overloads, in onnxruntime."""
    import onnxruntime as ort

    class Where(torch.nn.Module):
        def forward(self, c, x):
            where = torch.ops.aten.where
            return (where.ScalarOther(c, x, -3.5), where.ScalarSelf(c, 2, x),
                    where.Scalar(c, 1.5, 2))

    c, x = torch.rand(3, 4) > 0.5, torch.randn(3, 4, dtype=torch.float16)
    pt2onnx.export(Where(), (c, x), tmp_path / "where.onnx")
    session = ort.InferenceSession(str(tmp_path / "where.onnx"),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    got = session.run(None, {names[0]: c.numpy(), names[1]: x.numpy()})
    for a, b in zip(got, Where()(c, x)):
        assert a.dtype == b.numpy().dtype
        np.testing.assert_array_equal(a, b.numpy())
