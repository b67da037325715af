"""The export call people write most: a batch-1 example plus dynamic axes.

Each model exports once, from a batch-1 (or length-1) example, and must match
eager in onnxruntime at three shapes or more, batch 1 included.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import onnx
import pytest
import torch
from torch import nn
from torch.export import Dim

import pt2onnx
from pt2onnx import _compat
from pt2onnx.examples import tiny_resnet

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
TOKENS = dict(vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)
TEXT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            **TOKENS)


# torch 2.12 is exported with deferred runtime asserts (see _compat): a dim the model
# restricts stays dynamic under a runtime assert there instead of specialising.
specialises = pytest.mark.skipif(_compat.TORCH_VERSION < (2, 13),
                                 reason="torch 2.12 keeps such a dim dynamic under a runtime assert")


def _dims(values):
    return [[d if isinstance(d, int) else str(d) for d in v.shape] for v in values]


def _text(batch, seq):
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[-1, seq // 2 + 1:] = 0
    return {"input_ids": torch.randint(3, 128, (batch, seq)), "attention_mask": mask}


def _check(prog, inputs):
    for args, kwargs in inputs:
        result = prog.verify(*args, **kwargs)
        assert result.ok, (args and args[0].shape, {k: getattr(v, "shape", v) for k, v in kwargs.items()}, result)


def test_cnn_dynamic_axes_from_batch_one(tmp_path):
    model, (x,) = tiny_resnet()
    prog = pt2onnx.export(model, (x[:1],), tmp_path / "cnn.onnx", input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}}, verify=True)
    onnx.checker.check_model(str(tmp_path / "cnn.onnx"), full_check=True)
    assert _dims(prog.model.graph.inputs) == [["batch", 3, 32, 32]]
    assert prog.report.verification.runs == ["the example inputs (batch=1)", "batch=2"]
    _check(prog, [((torch.randn(b, 3, 32, 32),), {}) for b in (1, 2, 5)])


def test_bert_batch_and_sequence_bounded_by_position_embeddings():
    """BERT bounds the sequence at max_position_embeddings; the bound is applied and reported."""
    cfg = transformers.BertConfig(max_position_embeddings=512, **TEXT)
    model = transformers.BertModel(cfg).eval()
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    with pytest.warns(UserWarning, match=r"seq bounded to \[\d+, 512\]") as record:
        prog = pt2onnx.export(model, (), kwargs=_text(1, 8), dynamic_axes=axes)
    message = str(next(w.message for w in record if "bounded" in str(w.message)))
    assert "modeling_bert.py:" in message, message  # the model line that asked for it
    assert prog.report.dynamic_dims["seq"].endswith("512]")
    assert any("512" in r for r in prog.report.dynamic_refinements)
    assert "refined: seq bounded" in prog.report.to_markdown()
    _check(prog, [((), _text(b, s)) for b, s in [(1, 8), (1, 3), (3, 17), (2, 64)]])


def test_vit_with_dims():
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, **TEXT)
    model = transformers.ViTModel(cfg).eval()
    prog = pt2onnx.export(model, (), kwargs={"pixel_values": torch.randn(1, 3, 32, 32)},
                          dynamic_shapes={"pixel_values": {0: Dim("batch")}})
    _check(prog, [((), {"pixel_values": torch.randn(b, 3, 32, 32)}) for b in (1, 2, 4)])


def _llama():
    cfg = transformers.LlamaConfig(num_key_value_heads=2, max_position_embeddings=128, **TEXT)
    return cfg, transformers.LlamaForCausalLM(cfg).eval()


def _decoder(cfg, batch, seq, past):
    kwargs = _text(batch, past + seq)
    kwargs["input_ids"] = kwargs["input_ids"][:, past:]
    if past:
        cache = transformers.DynamicCache(config=cfg)
        for layer in range(cfg.num_hidden_layers):
            cache.update(torch.randn(batch, 2, past, 8), torch.randn(batch, 2, past, 8), layer)
        kwargs["past_key_values"] = cache
    kwargs["use_cache"] = bool(past)
    return kwargs


def test_llama_without_cache_from_batch_one():
    cfg, model = _llama()
    b, s = Dim("batch"), Dim("seq")
    prog = pt2onnx.export(model, (), kwargs=_decoder(cfg, 1, 5, 0),
                          dynamic_shapes={"input_ids": {0: b, 1: s},
                                          "attention_mask": {0: b, 1: s}})
    assert _dims(prog.model.graph.outputs) == [["batch", "seq", 128]]
    _check(prog, [((), _decoder(cfg, b, s, 0)) for b, s in [(1, 5), (2, 3), (3, 11)]])


def test_llama_with_cache_by_input_names():
    """dynamic_axes reaches the tensors inside the cache by their names."""
    cfg, model = _llama()
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"}}
    for kind in ("key", "value"):
        for layer in range(cfg.num_hidden_layers):
            axes[f"past_key_values_{kind}_{layer}"] = {0: "batch", 2: "past"}
    prog = pt2onnx.export(model, (), kwargs=_decoder(cfg, 1, 2, 3), dynamic_axes=axes)
    assert _dims(prog.model.graph.inputs)[2] == ["batch", 2, "past", 8]
    result = prog.verify()
    assert result.ok and len(result.runs) >= 2, result
    _check(prog, [((), _decoder(cfg, b, s, p)) for b, s, p in [(1, 2, 3), (3, 4, 1), (2, 2, 9)]])


def test_llama_decode_step_example_gives_a_general_graph():
    """A length-1 query (a decode step) takes transformers' special branch; the capture
    starts from a doubled example instead, so the graph also serves longer queries."""
    cfg, model = _llama()
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"}}
    for kind in ("key", "value"):
        for layer in range(cfg.num_hidden_layers):
            axes[f"past_key_values_{kind}_{layer}"] = {0: "batch", 2: "past"}
    prog = pt2onnx.export(model, (), kwargs=_decoder(cfg, 1, 1, 3), dynamic_axes=axes)
    assert _dims(prog.model.graph.inputs)[0] == ["batch", "seq"]
    _check(prog, [((), _decoder(cfg, b, s, p)) for b, s, p in [(1, 1, 3), (2, 1, 6), (3, 4, 2)]])


def test_t5_batch_and_both_sequences():
    cfg = transformers.T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                decoder_start_token_id=0, relative_attention_num_buckets=8,
                                **TOKENS)
    model = transformers.T5ForConditionalGeneration(cfg).eval()

    def inputs(b, s, t):
        return {**_text(b, s), "decoder_input_ids": torch.randint(3, 128, (b, t)),
                "use_cache": False}

    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "decoder_input_ids": {0: "batch", 1: "target"}}
    prog = pt2onnx.export(model, (), kwargs=inputs(1, 6, 4), dynamic_axes=axes)
    _check(prog, [((), inputs(b, s, t)) for b, s, t in [(1, 6, 4), (2, 9, 3), (3, 4, 7)]])


def test_whisper_batch_and_target():
    cfg = transformers.WhisperConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
        max_source_positions=16, max_target_positions=32, decoder_start_token_id=3, **TOKENS)
    model = transformers.WhisperForConditionalGeneration(cfg).eval()

    def inputs(b, t):
        return {"input_features": torch.randn(b, 16, 32),
                "decoder_input_ids": torch.randint(3, 128, (b, t)), "use_cache": False}

    axes = {"input_features": {0: "batch"}, "decoder_input_ids": {0: "batch", 1: "target"}}
    prog = pt2onnx.export(model, (), kwargs=inputs(1, 4), dynamic_axes=axes)
    _check(prog, [((), inputs(b, t)) for b, t in [(1, 4), (2, 7), (3, 2)]])


class Nested(nn.Module):
    def forward(self, pair, extra=None):
        a, b = pair
        return a * 2 + b.sum(-1, keepdim=True) + extra["bias"]


def test_nested_and_keyword_inputs_by_path_names():
    pair = [torch.randn(1, 4), torch.randn(1, 4)]
    extra = {"bias": torch.randn(1, 4)}
    prog = pt2onnx.export(Nested(), (pair,), kwargs={"extra": extra},
                          dynamic_axes={"pair_0": {0: "batch"}, "pair.1": {0: "batch"},
                                        "extra_bias": {0: "batch"}})
    assert [v.name for v in prog.model.graph.inputs] == ["pair_0", "pair_1", "extra_bias"]
    assert _dims(prog.model.graph.inputs) == [["batch", 4]] * 3
    _check(prog, [(([torch.randn(b, 4), torch.randn(b, 4)],), {"extra": {"bias": torch.randn(b, 4)}})
                  for b in (1, 2, 6)])


@specialises
def test_dynamic_true_makes_every_free_axis_dynamic_and_reports_the_fixed_ones():
    class Split(nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], 2, 3).sum(1)

    prog = pt2onnx.export(Split(), (torch.randn(1, 6),), dynamic=True)
    assert _dims(prog.model.graph.inputs) == [["x_dim0", 6]]
    assert len(prog.report.fixed_axes) == 1
    assert "axis 1 fixed to 6" in prog.report.fixed_axes[0]
    assert "test_dynamic_batch1.py" in prog.report.fixed_axes[0]  # the line that fixed it
    _check(prog, [((torch.randn(b, 6),), {}) for b in (1, 4, 7)])


def test_related_dims_are_tied_with_a_warning():
    """cat along dim 1 needs a = b: torch.export ties them, the warning says so, and the
    file names both dims a."""

    class Cat(nn.Module):
        def forward(self, x, y):
            return torch.cat([x, y], 1)

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        prog = pt2onnx.export(Cat(), (torch.randn(1, 3), torch.randn(1, 2)),
                              dynamic_shapes=({0: Dim("a")}, {0: Dim("b")}))
    assert any("b = a" in str(w.message) for w in record)
    assert [str(v.shape) for v in prog.model.graph.inputs] == ["[a,3]", "[a,2]"]
    _check(prog, [((torch.randn(n, 3), torch.randn(n, 2)), {}) for n in (1, 2, 5)])


def test_dims_that_broadcast_are_not_tied():
    """x + y: torch.export ties b to a, but eager also runs with either one 1, so the
    file keeps both names and is right there (issue 26)."""

    class Add(nn.Module):
        def forward(self, x, y):
            return x + y

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        prog = pt2onnx.export(Add(), (torch.randn(1, 3), torch.randn(1, 3)),
                              dynamic_shapes=({0: Dim("a")}, {0: Dim("b")}))
    assert any("a and b broadcast" in str(w.message) for w in record)
    assert not prog.report.dynamic_refinements
    assert [str(v.shape) for v in prog.model.graph.inputs] == ["[a,3]", "[b,3]"]
    _check(prog, [((torch.randn(n, 3), torch.randn(m, 3)), {})
                  for n, m in ((1, 1), (2, 2), (5, 1), (1, 5))])


def test_structure_mismatch_has_its_own_message():
    class Add(nn.Module):
        def forward(self, x, y):
            return x + y

    with pytest.raises(pt2onnx.CaptureError, match="does not match the inputs") as info:
        pt2onnx.export(Add(), (torch.randn(2, 3), torch.randn(2, 3)),
                       dynamic_shapes=({0: Dim("a")},))
    assert "Next step: give dynamic_shapes the structure of the inputs" in str(info.value)


def test_cli_batch_one_with_dynamic_batch(tmp_path):
    """The README's command-line pattern, from a batch-1 example."""
    (tmp_path / "cnn.py").write_text(
        "from pt2onnx.examples import tiny_resnet\n\ndef make():\n    return tiny_resnet()[0]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pt2onnx", "export", "cnn.py:make", "--input", "x:1x3x32x32",
         "--dynamic", "x:0=batch", "-o", "cnn.onnx", "--verify", "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "verified at: the example inputs (batch=1); batch=2" in proc.stdout
    prog_inputs = onnx.load(str(tmp_path / "cnn.onnx")).graph.input
    assert prog_inputs[0].type.tensor_type.shape.dim[0].dim_param == "batch"



class _VarArgsMul(nn.Module):
    """``forward(self, *args)``: the wrapper users write around a model for torch.onnx."""

    def forward(self, *args):  # type: ignore[no-untyped-def]
        return args[0] * args[1]


def test_var_positional_wrapper_grows_a_batch_one_example():
    """dynamic_axes by input names on a ``forward(*args)`` wrapper (issue 37: diffusers'
    SD3 transformer so wrapped was refused, "batch is fixed to 1 by the model", where
    the same wrapper with named parameters exported). The axes under ``args`` are
    declared dims too, so size-1 examples are grown before the capture: here two
    dynamic dims broadcast, either of which may be 1."""
    names = ["x", "y"]
    axes = {"x": {0: "a", 1: "b"}, "y": {0: "c", 1: "d"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(_VarArgsMul(), (torch.randn(1, 4), torch.randn(3, 1)),
                              input_names=names, dynamic_axes=axes)
    _check(prog, [((torch.randn(*x), torch.randn(*y)), {}) for x, y in [
        ((1, 4), (3, 1)), ((2, 4), (2, 4)), ((5, 1), (1, 6)), ((1, 1), (3, 3))]])
