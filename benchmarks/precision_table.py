"""bfloat16 and float16 exports of a model zoo, pt2onnx against torch.onnx (issue 39).

Each model (random weights: torchvision ``weights=None``, timm ``pretrained=False``,
transformers from small configs) is exported in bfloat16 and float16 with float32 at
its boundary, and run in onnxruntime's CPU provider:

- pt2onnx: ``pt2onnx.export(model, ..., precision=dtype)`` (the default
  ``precision_io="keep"``);
- torch.onnx: ``torch.onnx.export(..., dynamo=True)`` of the model converted with
  ``.to(dtype)`` behind casts from and to float32 (what ``precision=`` does by hand).

For each: whether the file loads, and whether its first output matches the model run
in eager in that dtype within verify's tolerance for it (``pt2onnx.verify.TOLERANCES``).
Prints a Markdown table. Run it in the models venv (torchvision, timm, transformers):

    python benchmarks/precision_table.py                      # every model (long)
    python benchmarks/precision_table.py --models resnet18,bert,llama
"""

from __future__ import annotations

import argparse
import copy
import io
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import pt2onnx
from pt2onnx.verify import TOLERANCES

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
Factory = Callable[[], tuple[torch.nn.Module, dict[str, torch.Tensor]]]


class First(torch.nn.Module):
    """The model's first output tensor (a classifier's logits, an encoder's hidden state)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, **kwargs: torch.Tensor) -> torch.Tensor:
        out = self.model(**kwargs)
        if isinstance(out, torch.Tensor):
            return out
        return out[0] if not isinstance(out, dict) else next(iter(out.values()))


class Boundary(torch.nn.Module):
    """``model`` in ``dtype`` with float32 at its boundary."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype) -> None:
        super().__init__()
        self.model, self.dtype = model, dtype

    def forward(self, **kwargs: torch.Tensor) -> torch.Tensor:
        cast = {k: v.to(self.dtype) if isinstance(v, torch.Tensor) and v.is_floating_point()
                else v for k, v in kwargs.items()}
        return self.model(**cast).float()


class Image(torch.nn.Module):
    """A vision model called with ``x=`` (so every model here takes keywords)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


def _torchvision(name: str, size: int = 224) -> Factory:
    def make() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
        import torchvision

        model = torchvision.models.get_model(name, weights=None).eval()
        return Image(model), {"x": torch.randn(1, 3, size, size)}
    return make


def _timm(name: str, size: int = 224) -> Factory:
    def make() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
        import timm

        model = timm.create_model(name, pretrained=False).eval()
        return Image(model), {"x": torch.randn(1, 3, size, size)}
    return make


TINY = dict(vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)
LAYERS = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=64, max_position_embeddings=64)


def _tokens() -> dict[str, torch.Tensor]:
    ids = torch.randint(3, 128, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.int64)
    mask[1, :3] = 0  # a padded sample
    return {"input_ids": ids, "attention_mask": mask}


def _hf(kind: str) -> Factory:
    def make() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
        import transformers as tf

        inputs = _tokens()
        if kind == "bert":
            model: Any = tf.BertModel(tf.BertConfig(**LAYERS, **TINY), add_pooling_layer=False)
        elif kind == "roberta":
            model = tf.RobertaModel(tf.RobertaConfig(**dict(LAYERS, max_position_embeddings=70),
                                                     **TINY), add_pooling_layer=False)
        elif kind == "distilbert":
            model = tf.DistilBertModel(tf.DistilBertConfig(
                dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64,
                vocab_size=128, pad_token_id=0))
        elif kind in ("llama", "qwen3", "gemma2"):
            cls = {"llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
                   "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM),
                   "gemma2": (tf.Gemma2Config, tf.Gemma2ForCausalLM)}[kind]
            extra = {"head_dim": 8} if kind != "llama" else {}
            model = cls[1](cls[0](num_key_value_heads=2, **LAYERS, **extra, **TINY))
            inputs["use_cache"] = False  # type: ignore[assignment]
        elif kind == "t5":
            model = tf.T5Model(tf.T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                           num_heads=4, vocab_size=128))
            inputs["decoder_input_ids"] = torch.randint(3, 128, (2, 4))
        elif kind == "vit":
            model = tf.ViTModel(tf.ViTConfig(hidden_size=32, num_hidden_layers=2,
                                             num_attention_heads=4, intermediate_size=64,
                                             image_size=32, patch_size=8),
                                add_pooling_layer=False)
            inputs = {"pixel_values": torch.randn(2, 3, 32, 32)}
        elif kind == "whisper":
            model = tf.WhisperModel(tf.WhisperConfig(
                d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                num_mel_bins=16, max_source_positions=16, max_target_positions=32,
                vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                decoder_start_token_id=1))
            inputs = {"input_features": torch.randn(1, 16, 32),
                      "decoder_input_ids": torch.randint(3, 128, (1, 4))}
        else:
            raise ValueError(kind)
        return First(model.eval()), inputs
    return make


MODELS: dict[str, Factory] = {
    "resnet18": _torchvision("resnet18"),
    "mobilenet_v3_large": _torchvision("mobilenet_v3_large"),
    "efficientnet_b0": _torchvision("efficientnet_b0"),
    "convnext_tiny": _torchvision("convnext_tiny"),
    "swin_t": _torchvision("swin_t"),
    "vit_b_16": _torchvision("vit_b_16"),
    "timm_resnet50": _timm("resnet50"),
    "timm_vit_tiny": _timm("vit_tiny_patch16_224"),
    "bert": _hf("bert"),
    "roberta": _hf("roberta"),
    "distilbert": _hf("distilbert"),
    "llama": _hf("llama"),
    "qwen3": _hf("qwen3"),
    "gemma2": _hf("gemma2"),
    "t5": _hf("t5"),
    "vit": _hf("vit"),
    "whisper": _hf("whisper"),
}


def _ort_run(proto_bytes: bytes, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(proto_bytes, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return np.asarray(session.run(None, {n: feeds[n] for n in names if n in feeds})[0])


def _feeds(inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def _verdict(got: np.ndarray | None, ref: np.ndarray, dtype: str) -> str:
    if got is None:
        return "-"
    atol, rtol = TOLERANCES[dtype]
    err = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max())
    tol = atol + rtol * float(np.abs(ref).max())
    return f"{'yes' if err <= tol else 'NO'} ({err:.2g} / {tol:.2g})"


def _why(exc: Exception) -> str:
    """onnxruntime's message without its error-code prefix, shortened."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text.rsplit(" : ", 1)[-1][:90]


def _pt2onnx(model: torch.nn.Module, inputs: dict[str, Any], dtype: str,
             ) -> tuple[str, np.ndarray | None]:
    try:
        prog = pt2onnx.export(model, (), kwargs=inputs, precision=dtype)
    except Exception as exc:
        return f"export fails ({type(exc).__name__})", None
    try:
        got = prog.run(**inputs)[0]
    except Exception as exc:
        return f"no ({_why(exc)})", None
    return "yes", got


def _torch_onnx(boundary: torch.nn.Module, inputs: dict[str, Any],
                ) -> tuple[str, np.ndarray | None]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(boundary, (), kwargs=inputs, dynamo=True,
                                        verbose=False)
            assert program is not None
            buffer = io.BytesIO()
            program.save(buffer)
    except Exception as exc:
        return f"export fails ({type(exc).__name__})", None
    try:
        got = _ort_run(buffer.getvalue(), _feeds(inputs))
    except Exception as exc:
        return f"no ({_why(exc)})", None
    return "yes", got


def run(name: str, dtype: str) -> dict[str, str]:
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    boundary = Boundary(copy.deepcopy(model).to(DTYPES[dtype]), DTYPES[dtype]).eval()
    with torch.no_grad():
        ref = boundary(**inputs).numpy()
    start = time.perf_counter()
    loads, got = _pt2onnx(model, inputs, dtype)
    ours = time.perf_counter() - start
    start = time.perf_counter()
    t_loads, t_got = _torch_onnx(boundary, inputs)
    theirs = time.perf_counter() - start
    return {"model": name, "dtype": dtype, "pt2onnx loads": loads,
            "pt2onnx matches": _verdict(got, ref, dtype), "torch.onnx loads": t_loads,
            "torch.onnx matches": _verdict(t_got, ref, dtype),
            "export s (pt2onnx / torch.onnx)": f"{ours:.1f} / {theirs:.1f}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--dtypes", default="bfloat16,float16")
    args = parser.parse_args(argv)
    rows = []
    for name in args.models.split(","):
        for dtype in args.dtypes.split(","):
            try:
                rows.append(run(name, dtype))
            except Exception:
                traceback.print_exc()
                rows.append({"model": name, "dtype": dtype, "pt2onnx loads": "error"})
            print(rows[-1], file=sys.stderr, flush=True)
    keys = list(rows[0]) if rows else []
    for row in rows:
        keys += [k for k in row if k not in keys]
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(row.get(k, "") for k in keys) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
