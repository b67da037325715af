"""genai_config.json and the tokenizer files beside the model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pt2onnx.llm._families import Layout

# What onnxruntime-genai's tokenizer (and transformers) read from a model folder.
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.json", "merges.txt", "vocab.txt", "tokenizer.model", "spiece.model",
    "chat_template.jinja", "chat_template.json",
)


def _token_ids(config: Any, generation: Any) -> tuple[Any, Any, Any]:
    """bos, eos and pad: generation_config.json first (it names a chat model's end of
    turn), then config.json; pad falls back to the first eos, as genai needs one."""
    def pick(name: str) -> Any:
        for source in (generation, config):
            value = getattr(source, name, None) if source is not None else None
            if value is not None:
                return value
        return None

    bos, eos, pad = pick("bos_token_id"), pick("eos_token_id"), pick("pad_token_id")
    if isinstance(eos, (list, tuple)) and len(eos) == 1:
        eos = eos[0]
    if eos is None:  # genai needs one in the vocabulary
        eos = pad if pad is not None else 0
    if pad is None:
        pad = eos[0] if isinstance(eos, (list, tuple)) else eos
    return bos if bos is not None else pad, eos, pad


def config_dict(layout: Layout, config: Any, generation: Any, filename: str,
                inputs: list[str], share_buffer: bool = False) -> dict[str, Any]:
    bos, eos, pad = _token_ids(config, generation)
    names = {"input_ids": "input_ids", "attention_mask": "attention_mask"}
    if "position_ids" in inputs:
        names["position_ids"] = "position_ids"
    names["past_key_names"] = "past_key_values.%d.key"
    names["past_value_names"] = "past_key_values.%d.value"
    outputs = {"logits": "logits", "present_key_names": "present.%d.key",
               "present_value_names": "present.%d.value"}
    cfg = _dict(layout, bos, eos, pad, filename, names, outputs, share_buffer)
    if layout.layer_kinds:
        from pt2onnx.llm import _hybrid

        _hybrid.genai_fields(layout, names, outputs, cfg["model"]["decoder"])
    return cfg


def _dict(layout: Layout, bos: Any, eos: Any, pad: Any, filename: str,
          names: dict[str, str], outputs: dict[str, str], share_buffer: bool,
          ) -> dict[str, Any]:
    return {
        "model": {
            "bos_token_id": bos,
            "context_length": layout.context_length,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": filename,
                "head_size": layout.head_size,
                "hidden_size": layout.hidden_size,
                "inputs": names,
                "outputs": outputs,
                "num_attention_heads": layout.num_attention_heads,
                "num_hidden_layers": layout.num_layers,
                "num_key_value_heads": layout.num_kv_heads,
            },
            "eos_token_id": eos,
            "pad_token_id": pad,
            "type": layout.genai_type,
            "vocab_size": layout.vocab_size,
        },
        "search": {
            "diversity_penalty": 0.0,
            "do_sample": False,
            "early_stopping": True,
            "length_penalty": 1.0,
            "max_length": layout.context_length,
            "min_length": 0,
            "no_repeat_ngram_size": 0,
            "num_beams": 1,
            "num_return_sequences": 1,
            # Fused attention (GroupQueryAttention) writes the new keys and values into
            # the past buffer in place: genai allocates it at max_length and passes it as
            # both. Otherwise the graph returns present = concat(past, new), which genai
            # swaps in as the next past.
            "past_present_share_buffer": share_buffer,
            "repetition_penalty": 1.0,
            "temperature": 1.0,
            "top_k": 50,
            "top_p": 1.0,
        },
    }


def write_config(out_dir: Path, cfg: dict[str, Any]) -> Path:
    path = out_dir / "genai_config.json"
    path.write_text(json.dumps(cfg, indent=4) + "\n")
    return path


def copy_tokenizer(source: Any, out_dir: Path) -> list[str]:
    """Copies the tokenizer files of a checkpoint folder, or saves a tokenizer object."""
    if source is None:
        return []
    if hasattr(source, "save_pretrained"):
        return [Path(p).name for p in source.save_pretrained(str(out_dir))]
    folder = Path(source)
    copied = []
    for name in TOKENIZER_FILES:
        if (folder / name).is_file():
            shutil.copyfile(folder / name, out_dir / name)
            copied.append(name)
    return copied
