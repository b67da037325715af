"""The tools people run after exporting accept pt2onnx's files (issue 27): onnxruntime's
symbolic shape inference and transformer optimizer, onnxslim, float16 conversion and
onnxruntime's dynamic and static quantization, on resnet18, BERT and Llama (random
weights). Each tool's output file is run in onnxruntime against eager PyTorch.

The table beside torch.onnx's files is ``benchmarks/downstream_tools.py``
(docs/compatibility.md)."""

from __future__ import annotations

import pytest
import torch

import pt2onnx
from pt2onnx.testing.downstream import run_tools

pytestmark = pytest.mark.models

# float16 and int8 change the numbers; these bound how much (a broken graph is far off).
TOLERANCE = {"symbolic shape inference": 1e-4, "transformer optimizer": 1e-3,
             "onnxslim": 1e-4, "float16": 0.1, "dynamic quantization": None,
             "static quantization": None}


def _resnet18():
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    return model, {"x": torch.randn(2, 3, 64, 64)}, {"x": {0: "batch"}}, None


def _bert():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, vocab_size=1000)
    model = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 1000, (2, 16))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
              "token_type_ids": torch.zeros_like(ids)}
    axes = {k: {0: "batch", 1: "seq"} for k in inputs}
    return model, inputs, axes, {"model_type": "bert", "num_heads": 4, "hidden_size": 64}


def _llama():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=128, vocab_size=1000,
                                   max_position_embeddings=64, use_cache=False)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 1000, (2, 16))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    return model, inputs, {k: {0: "batch", 1: "seq"} for k in inputs}, None


MODELS = {"resnet18": _resnet18, "bert": _bert, "llama": _llama}


@pytest.mark.parametrize("name", list(MODELS))
def test_downstream_tools_accept_the_file(tmp_path, name):
    model, inputs, axes, optimizer = MODELS[name]()
    path = tmp_path / f"{name}.onnx"
    names = list(inputs)
    pt2onnx.export(model, tuple(inputs.values()), path, input_names=names, dynamic_axes=axes)
    feeds = {k: v.numpy() for k, v in inputs.items()}
    with torch.no_grad():
        out = model(*inputs.values())
    first = out if isinstance(out, torch.Tensor) else out[0]
    results = run_tools(path, feeds, [first.numpy()], optimizer)
    # Compare the first output only (the tools keep the outputs' order).
    for tool, result in results.items():
        if result.status == "skipped" and "not installed" in result.detail:
            pytest.skip(f"{tool}: {result.detail} (pip install 'pt2onnx[models]')")
        assert result.status in ("ok", "skipped"), f"{tool}: {result.detail}"
        bound = TOLERANCE[tool]
        if result.status == "ok" and bound is not None:
            assert result.max_error is not None and result.max_error < bound, (tool, result)


def test_bert_optimizer_fuses_what_it_fuses_for_torch_onnx(tmp_path):
    """onnxruntime's transformer optimizer on BERT: at least torch.onnx's fusions (it needs
    symbolic shape inference to get through the graph first)."""
    pytest.importorskip("onnxscript")
    model, inputs, axes, optimizer = _bert()
    counts = {}
    for exporter in ("pt2onnx", "torch.onnx"):
        path = tmp_path / f"{exporter}.onnx"
        args = tuple(inputs.values())
        if exporter == "pt2onnx":
            pt2onnx.export(model, args, path, input_names=list(inputs), dynamic_axes=axes)
        else:
            torch.onnx.export(model, args, str(path), input_names=list(inputs),
                              dynamic_axes=axes, dynamo=True)
        with torch.no_grad():
            expected = [model(*args)[0].numpy()]
        result = run_tools(path, {k: v.numpy() for k, v in inputs.items()}, expected,
                           optimizer, tools=("transformer optimizer",))["transformer optimizer"]
        assert result.status == "ok", (exporter, result.detail)
        counts[exporter] = result.fused
    for op, n in counts["torch.onnx"].items():
        assert counts["pt2onnx"].get(op, 0) >= n, counts
