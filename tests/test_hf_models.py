"""Hugging Face models built from tiny configs with random weights."""

from __future__ import annotations

import pytest
import torch

from conftest import export_and_verify

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

TINY = dict(vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _bert():
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=64, **TINY)
    return transformers.BertModel(cfg)


def _gpt2():
    cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, **TINY)
    return transformers.GPT2LMHeadModel(cfg)


def _llama():
    cfg = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=64,
                                   max_position_embeddings=64, **TINY)
    return transformers.LlamaForCausalLM(cfg)


CASES = {"bert": (_bert, {}), "gpt2": (_gpt2, {"use_cache": False}),
         "llama": (_llama, {"use_cache": False})}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hf_model(name, tmp_path):
    factory, extra = CASES[name]
    model = factory().eval()
    ids = torch.randint(3, 128, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.int64)
    mask[1, 7:] = 0
    kwargs = {"input_ids": ids, "attention_mask": mask, **extra}
    prog = export_and_verify(model, (), tmp_path, kwargs=kwargs, name=name)
    outputs = [v.name for v in prog.model.graph.outputs]
    expected = {"bert": ["last_hidden_state", "pooler_output"], "gpt2": ["logits"],
                "llama": ["logits"]}[name]
    assert outputs == expected


@pytest.mark.parametrize("name", sorted(CASES))
def test_hf_model_as_functions(name, tmp_path):
    """export_modules_as_functions=True (issue 41): each module call is a function call;
    the two decoder or encoder layers are two calls of one function, and the file
    matches eager."""
    factory, extra = CASES[name]
    model = factory().eval()
    ids = torch.randint(3, 128, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.int64)
    mask[1, 7:] = 0
    kwargs = {"input_ids": ids, "attention_mask": mask, **extra}
    prog = export_and_verify(model, (), tmp_path, kwargs=kwargs, name=name,
                             export_modules_as_functions=True)
    layer = {"bert": "BertLayer", "gpt2": "GPT2Block", "llama": "LlamaDecoderLayer"}[name]
    layers = [f for f in prog.report.functions if f.split("::")[1].startswith(layer)]
    assert len(layers) == 1 and layers[0].endswith(f"::{layer}: 2 call(s)"), \
        prog.report.functions
