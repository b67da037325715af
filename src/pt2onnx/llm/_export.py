"""``pt2onnx.export_llm``: a transformers decoder -> a folder onnxruntime-genai runs."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.errors import ExportError, InvalidInputError
from pt2onnx.frontends import converted_copy
from pt2onnx.llm import (
    _attention,
    _families,
    _fusion,
    _genai,
    _hybrid,
    _meta,
    _multi,
    _quant,
    _stamp,
    _vision,
    _whisper,
    _wrapper,
)
from pt2onnx.llm._families import Layout
from pt2onnx.llm._files import (
    HALF,
    LLMExport,
    export_notes,
    fused_rewrites,
    name_total_dims,
    no_fake_tensor_cache,
    unique_node_names,
)

PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
              "int4": torch.float32}
# pt2onnx.export's names for the same precisions, taken here too.
LONG_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
MODEL_FILE = "model.onnx"


def export_llm(
    model_or_dir: str | os.PathLike[str] | torch.nn.Module,
    out_dir: str | os.PathLike[str],
    *,
    precision: str = "fp32",
    opset: int | None = None,
    tokenizer: Any = None,
    int4_block_size: int = _quant.BLOCK,
    int4_accuracy_level: int = 0,
    fuse_projections: bool = True,
    stamp: bool | None = None,
    fused_ops: bool = True,
    image_size: int | tuple[int, int] | str | None = None,
) -> LLMExport:
    """Exports a transformers decoder for generation in onnxruntime-genai.

    Args:
        model_or_dir: a local checkpoint folder (``config.json`` and weights, as
            ``save_pretrained`` writes it) or a loaded ``PreTrainedModel``.
        out_dir: the folder to write ``model.onnx`` (+ ``model.onnx.data``),
            ``genai_config.json`` and the tokenizer files into; created if missing.
        precision: ``"fp32"``; ``"fp16"`` or ``"bf16"`` (weights and compute in
            float16 or bfloat16, softmax, norms and reductions in float32, as
            ``pt2onnx.export(precision=...)``); or ``"int4"`` (Linear weights
            round-to-nearest in blocks of ``int4_block_size`` as ``MatMulNBits``,
            activations in float32). ``"float32"``, ``"float16"`` and ``"bfloat16"``
            (``export``'s names) are the same as ``"fp32"``, ``"fp16"`` and ``"bf16"``.
        opset: the ONNX opset (default: pt2onnx's default).
        tokenizer: where the tokenizer files come from: a folder, or an object with
            ``save_pretrained``; default: the checkpoint folder, if one was given.
        int4_accuracy_level: MatMulNBits' ``accuracy_level``; 0 computes in float32
            (exactly the dequantized weights), 4 lets onnxruntime quantize the
            activations to int8 (faster, not exact).
        fuse_projections: one MatMul for the q/k/v projections that
            GroupQueryAttention reads packed (with ``fused_ops``): one
            matrix-vector product per decode step instead of three. Other shared-input
            projections (gate/up) stay separate, which decodes faster.
        stamp: capture the decoder layers once per kind (one period of the layer
            pattern, twice) and copy that graph for every layer, instead of
            capturing every layer; the graph is the same. Default: on, unless the
            environment variable ``PT2ONNX_LLM_STAMP`` is ``0``. When the layers
            differ in structure the whole model is captured, with a note in
            ``LLMExport.warnings``.
        fused_ops: onnxruntime's fused ops where they compute what the model does:
            each layer's attention as one com.microsoft ``GroupQueryAttention``
            (cache growth, causal and sliding-window masking, soft-capping inside
            the op), captured through transformers' ``AttentionInterface``, with
            genai sharing the past and present buffers; and each float32 RMSNorm
            as one ``SimplifiedLayerNormalization``. A family whose attention the
            op can't express exactly keeps the model's own attention ops, with a
            note in ``LLMExport.warnings``. With the fused attention the attention
            mask is read as lengths (no left padding), as in onnxruntime-genai's
            builder. ``False`` writes standard ONNX ops only (and ``MatMulNBits``
            for int4).
        image_size: for a Qwen2.5-VL checkpoint, the image pipeline instead of the text
            decoder: ``vision.onnx``, ``embedding.onnx`` and ``model.onnx`` (on
            ``inputs_embeds``) under genai's ``qwen2_5_vl`` type, with a
            ``processor_config.json`` that resizes every image to this size (height,
            width; an int for a square, or ``"HxW"``), the one size the vision graph
            takes; each a multiple of the patch size times the merge size (28).
            fp32 or int4 (the decoder's weights).

    The graph takes ``input_ids``, ``attention_mask``, ``position_ids`` (where the
    family uses them) and ``past_key_values.{i}.key/.value``, and returns ``logits``
    and ``present.{i}.key/.value``, with the dims ``batch_size``,
    ``sequence_length``, ``past_sequence_length`` and ``total_sequence_length``.
    """
    start = time.perf_counter()
    precision = LONG_NAMES.get(precision, precision)
    if precision not in PRECISIONS:
        raise InvalidInputError(
            f"precision {precision!r} is not one export-llm writes. Next step: pass one of "
            f"{', '.join(PRECISIONS)} (or {', '.join(LONG_NAMES)}).")
    if stamp is None:
        stamp = os.environ.get(_stamp.ENV, "1") != "0"
    # As in pt2onnx.export: the export makes many objects that live until it ends, and
    # the cyclic GC would rescan all of them again and again.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _export_llm(model_or_dir, Path(out_dir), PRECISIONS[precision], precision,
                           opset, tokenizer, int4_block_size, int4_accuracy_level,
                           fuse_projections, stamp, _Fusion(fused_ops),
                           _vision.image_size_of(image_size), start)
    finally:
        if gc_was_enabled:
            gc.enable()


def _export_llm(model_or_dir: Any, out: Path, dtype: torch.dtype, precision: str,
                opset: int | None, tokenizer: Any, int4_block_size: int,
                int4_accuracy_level: int, fuse_projections: bool, stamp: bool,
                fusion: _Fusion, image_size: tuple[int, int] | None,
                start: float) -> LLMExport:
    notes: list[str] = []
    with _refusing_untyped(_families.named(model_or_dir)):
        if _whisper.is_whisper(model_or_dir):
            return _multi.export_whisper(
                model_or_dir, out, dtype, precision, opset, tokenizer, fusion.requested,
                (int4_block_size, int4_accuracy_level), start)
        if image_size is not None:
            return _multi.export_vlm(
                model_or_dir, out, dtype, precision, opset, tokenizer, fusion.requested,
                (int4_block_size, int4_accuracy_level), image_size, fuse_projections, start)
        model, folder, checkpoint = _load(model_or_dir, dtype, notes)
        config = model.config
        model_type = _families.check_family(config)
        out.mkdir(parents=True, exist_ok=True)
        model, config, folder, checkpoint, prog, layout, fusion = _graph_with_fallbacks(
            model, config, folder, checkpoint, model_type, dtype, opset, stamp, notes, fusion)
    return _finish(model, config, folder, checkpoint, prog, layout, fusion, model_type, out,
                   precision, tokenizer, int4_block_size, int4_accuracy_level,
                   fuse_projections, notes, start)


@contextlib.contextmanager
def _refusing_untyped(name: str) -> Iterator[None]:
    """An error of the model's, its config's or its cache's own code, raised while
    export-llm loads, runs or captures it, as a typed refusal naming the architecture
    (the original is its ``__cause__``). pt2onnx's typed errors pass as they are."""
    try:
        yield
    except (ExportError, MemoryError):
        raise
    except Exception as exc:
        text = str(exc).strip().splitlines()
        first = text[0][:300] if text else ""
        raise InvalidInputError(
            f"export-llm can't export {name}: {type(exc).__name__}: {first} (raised while "
            "export-llm loaded it, or ran or captured it as a decoder over a transformers "
            "DynamicCache of key/value layers, the one state onnxruntime-genai's decoder "
            "loop feeds: past_key_values.{i}.key/.value). What the architecture needs "
            "beyond that is what the original error, this error's __cause__, names. Next "
            "step: export its forward with pt2onnx.export, or report the architecture with "
            "this message.") from exc


def _graph_with_fallbacks(model: Any, config: Any, folder: Path | None,
                          checkpoint: _meta.Checkpoint | None, model_type: str,
                          dtype: torch.dtype, opset: int | None, stamp: bool,
                          notes: list[str], fusion: _Fusion) -> tuple[Any, ...]:
    """The graph, from the meta-device model where it captures, else from the loaded one."""
    kept = len(notes)
    try:
        try:
            prog, layout = _graph(model, config, model_type, dtype, opset, stamp, notes,
                                  checkpoint, fusion)
        except Exception:
            # Buffers stay real on the meta path (the rotary tables are computed, not
            # stored); a forward that indexes one with the meta inputs instead of moving
            # it first fails. Again with every buffer on meta, attached like a weight.
            if checkpoint is None or not _meta.buffers_to_meta(model, checkpoint):
                raise
            del notes[kept:]  # the failed attempt's
            fusion = _Fusion(fusion.requested)
            prog, layout = _graph(model, config, model_type, dtype, opset, stamp, notes,
                                  checkpoint, fusion)
    except Exception as exc:
        if checkpoint is None:
            raise
        # The meta-device model did not capture: today's load, and the model's own
        # error (if it has one) comes again from there.
        text = str(exc).strip().splitlines()
        notes[:] = [f"the weights were loaded with from_pretrained, not streamed from the "
                    f"checkpoint: the model built on the meta device did not export "
                    f"({type(exc).__name__}: {text[0][:200] if text else ''})."]
        assert folder is not None
        checkpoint = None
        model, folder = _load_pretrained(folder, dtype)
        config = model.config
        fusion = _Fusion(fusion.requested)
        prog, layout = _graph(model, config, model_type, dtype, opset, stamp, notes, None,
                              fusion)
    return model, config, folder, checkpoint, prog, layout, fusion


def _finish(model: Any, config: Any, folder: Path | None,
            checkpoint: _meta.Checkpoint | None, prog: Any, layout: Layout, fusion: _Fusion,
            model_type: str, out: Path, precision: str, tokenizer: Any, int4_block_size: int,
            int4_accuracy_level: int, fuse_projections: bool, notes: list[str],
            start: float) -> LLMExport:
    """The graph's rewrites, the files and the result."""
    in_names, _ = _wrapper.names(layout)
    if not layout.known:
        notes.append(f"{model_type} is not one of the families export-llm is tested on; it "
                     "was exported as onnxruntime-genai's generic 'decoder' type.")
    name_total_dims(prog.model)
    fused_rewrites(prog.model, fusion.on, fusion.requested, fuse_projections)
    quantized = []
    if precision == "int4":
        quantized = _quant.quantize_model(prog.model, int4_block_size, int4_accuracy_level)
    unique_node_names(prog.model)
    path = out / MODEL_FILE
    for stale in (path, path.with_name(path.name + ".data")):
        stale.unlink(missing_ok=True)
    prog.save(path, external_data=True, weights=checkpoint)
    generation = getattr(model, "generation_config", None)
    cfg = _genai.config_dict(layout, config, generation, MODEL_FILE, in_names,
                             share_buffer=_attention.shares_buffer(prog.model))
    _genai.write_config(out, cfg)
    copied = _genai.copy_tokenizer(tokenizer if tokenizer is not None else folder, out)
    captured = getattr(prog, "_stamped_from", layout.num_layers)
    return LLMExport(out, path, cfg, layout, precision, prog, copied, quantized, notes,
                     time.perf_counter() - start, captured)


class _Fusion:
    """Whether the attention is fused; turned off for the export once a check fails."""

    def __init__(self, on: bool) -> None:
        self.on = self.requested = on
        self.checked = False
        self.no_positions = False  # every layer's rotary inside the op: no position_ids
        self.rotary_op = True  # a rotation outside the op as pt2onnx::rotary

    def wrap(self, model: torch.nn.Module, layout: Layout, dtype: torch.dtype,
             notes: list[str]) -> _wrapper.DecoderWithCache:
        if self.on and not self.checked and dtype == torch.bfloat16:
            self.checked, self.on = True, False
            notes.append("the attention was not fused into GroupQueryAttention (onnxruntime's "
                         "CPU provider has no bfloat16 kernel for it); the model's own "
                         "attention ops were exported instead.")
        if self.on and not self.checked:
            self.checked = True
            # The check compares values: a model on the meta device has none, so it
            # runs on a stand-in with random weights of the same config.
            checked, checked_layout = _meta.stand_in(model, layout, dtype)
            found = _fusion.check(checked, checked_layout, dtype)
            self.no_positions, self.rotary_op = found.no_positions, found.rotary_op
            if found.reason is not None:
                self.on = False
                notes.append(f"the attention was not fused into GroupQueryAttention "
                             f"({found.reason}); "
                             "the model's own attention ops were exported instead.")
        if not self.on:
            return _wrapper.wrap(model, layout)
        return _fusion.wrap(model, self.layout(layout), dtype, rotary_op=self.rotary_op)

    def layout(self, layout: Layout) -> Layout:
        """The layout of the graph the fused wrapper gives."""
        if self.on and self.no_positions and layout.uses_position_ids:
            return dataclasses.replace(layout, uses_position_ids=False)
        return layout


def _graph(model: torch.nn.Module, config: Any, model_type: str, dtype: torch.dtype,
           opset: int | None, stamp: bool, notes: list[str],
           checkpoint: _meta.Checkpoint | None, fusion: _Fusion) -> tuple[Any, Layout]:
    """The captured (and stamped) program; its weights read from ``checkpoint`` when
    the model is on the meta device."""
    prog = layout = None
    if _hybrid.is_hybrid(model_type):
        # Not stamped (one capture of every layer); the attention layers fused as any
        # decoder's where the check finds the op computes what they do.
        layout = _hybrid.layout(model, config, model_type)
        prog = _capture(model, layout, dtype, opset, notes, fusion=fusion)
        layout = fusion.layout(layout)
        stamp = False
    if stamp:
        prog, layout = _stamped(model, config, model_type, dtype, opset, notes, fusion)
    if prog is None or layout is None:
        layout = _wrapper.probe(model, config, model_type)
        prog = _capture(model, layout, dtype, opset, notes, fusion=fusion)
        layout = fusion.layout(layout)
    if checkpoint is not None:
        _meta.attach(prog.model, checkpoint)
    return prog, layout


def _capture(model: torch.nn.Module, layout: Layout, dtype: torch.dtype, opset: int | None,
             notes: list[str], optimize: bool = True, fusion: _Fusion | None = None) -> Any:
    """pt2onnx.export of the model wrapped for genai's I/O."""
    from pt2onnx import _api

    if fusion is None:
        fusion = _Fusion(False)
    wrapper = fusion.wrap(model, layout, dtype, notes)
    layout = fusion.layout(layout)
    in_names, out_names = _wrapper.names(layout)
    from pt2onnx.capture import trusted

    size_one = trusted("export-llm: genai's loop runs batch 1, one token and an empty cache")
    with warnings.catch_warnings(record=True) as caught, no_fake_tensor_cache(), size_one:
        warnings.simplefilter("always")
        prog = _api.export(
            wrapper, _meta.example(model, _wrapper.example(layout, dtype)), None,
            input_names=in_names,
            output_names=out_names, dynamic_shapes=_wrapper.dynamic_shapes(layout), opset=opset,
            optimize=optimize, precision=HALF.get(dtype, "keep"))
    notes.extend(export_notes(caught))
    return prog


def _stamped(model: torch.nn.Module, config: Any, model_type: str, dtype: torch.dtype,
             opset: int | None, notes: list[str], fusion: _Fusion,
             ) -> tuple[Any, Layout | None]:
    """The export of a copy cut to a few layers, grown to every layer (see _stamp);
    (None, None) when the whole model is to be captured."""
    from pt2onnx import passes

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    plan = None
    try:
        plan = _stamp.plan(model, text)
        if plan is None:
            return None, None
        caught: list[str] = []
        with _stamp.reduced(model, text, plan):
            captured, prog = _capture_cut(model, config, model_type, plan, dtype, opset,
                                          caught, fusion)
        layout = fusion.layout(dataclasses.replace(captured, num_layers=plan.num_layers))
        full = fusion.wrap(model, layout, dtype, caught)
        state = {**dict(full.named_parameters(remove_duplicate=False)),
                 **dict(full.named_buffers(remove_duplicate=False))}

        def weight(name: str) -> torch.Tensor:
            if name not in state:
                raise _stamp.Unstampable(f"the model has no tensor {name}")
            return state[name]

        _stamp.stamp(prog.model, plan, "model." + plan.list_path, weight)
    except _stamp.Unstampable as exc:
        notes.append(f"the decoder layers were not stamped from one capture ({exc}); the "
                     "whole model was captured instead.")
        return None, None
    except Exception as exc:  # the model's own error comes again from the full capture
        text_ = str(exc).strip().splitlines()
        cut = plan.captured if plan is not None else "fewer"
        notes.append(f"the decoder layers were not stamped from one capture (the copy cut "
                     f"to {cut} layers did not export: {type(exc).__name__}: "
                     f"{text_[0][:200] if text_ else ''}); the whole model was captured "
                     "instead.")
        return None, None
    notes.extend(caught)
    prog.model = passes.optimize(prog.model)
    # run()/verify() compare with the whole model; the FX program is the cut copy's.
    prog._module = prog._call_model = full
    prog._example = (_wrapper.example(layout, dtype), {})
    prog._program, prog._fx_values = None, {}
    prog._stamped_from = plan.captured
    return prog, layout


def _capture_cut(model: torch.nn.Module, config: Any, model_type: str, plan: _stamp.Plan,
                 dtype: torch.dtype, opset: int | None, notes: list[str],
                 fusion: _Fusion | None = None) -> tuple[Layout, Any]:
    """The capture of the cut copy. Its layout is read from the config where the family
    states it (checked against the graph's presents and logits), which saves the probe
    run; otherwise, or if the graph disagrees, the probe's."""
    guess = _wrapper.layout_from_config(model, config, model_type, plan.captured)
    if guess is not None:
        caught: list[str] = []
        try:
            prog = _capture(model, guess, dtype, opset, caught, optimize=False, fusion=fusion)
        except Exception:
            prog = None
        if prog is not None and _agrees(prog.model, guess):
            notes.extend(caught)
            return guess, prog
    layout = _wrapper.probe(model, config, model_type)
    return layout, _capture(model, layout, dtype, opset, notes, optimize=False, fusion=fusion)


def _agrees(model: ir.Model, layout: Layout) -> bool:
    outputs = {v.name: v.shape for v in model.graph.outputs}
    logits, present = outputs.get("logits"), outputs.get("present.0.key")
    if logits is None or present is None or len(logits) != 3 or len(present) != 4:
        return False
    return (logits[2] == layout.vocab_size and present[1] == layout.num_kv_heads
            and present[3] == layout.head_size)


def _load(model_or_dir: Any, dtype: torch.dtype, notes: list[str],
          ) -> tuple[torch.nn.Module, Path | None, _meta.Checkpoint | None]:
    """The model, its checkpoint folder, and the checkpoint its weights stream from
    when it was built on the meta device (None: its weights are loaded)."""
    if isinstance(model_or_dir, torch.nn.Module):
        if not hasattr(model_or_dir, "config"):
            raise InvalidInputError(
                f"export-llm takes a transformers PreTrainedModel or a checkpoint folder, "
                f"got a {type(model_or_dir).__name__} with no .config. Next step: use "
                "pt2onnx.export for other modules.")
        # A converted copy: the caller's model keeps its dtype.
        return converted_copy(model_or_dir, dtype).eval(), None, None
    folder = Path(model_or_dir)
    if not (folder / "config.json").is_file():
        raise InvalidInputError(
            f"{folder} is not a transformers checkpoint folder (no config.json). Next step: "
            "pass the folder save_pretrained wrote (config.json plus the weights).")
    try:
        from transformers import AutoConfig
    except ImportError as exc:
        raise InvalidInputError(
            "export-llm loads checkpoints with transformers, which is not installed. "
            "Next step: pip install transformers.") from exc
    config = AutoConfig.from_pretrained(folder)
    _families.check_family(config)
    if _meta.enabled():
        try:
            model, checkpoint = _meta.load(folder, config, dtype)
            return model, folder, checkpoint
        except _meta.NotStreamable as exc:
            notes.append(f"the weights were loaded with from_pretrained, not streamed from "
                         f"the checkpoint: {exc}.")
    model, _ = _load_pretrained(folder, dtype, config)
    return model, folder, None


def _load_pretrained(folder: Path, dtype: torch.dtype, config: Any = None,
                     ) -> tuple[torch.nn.Module, Path]:
    from transformers import AutoConfig

    if config is None:
        config = AutoConfig.from_pretrained(folder)
    auto = _families.auto_class(config)
    try:
        model = auto.from_pretrained(folder, dtype=dtype)
    except TypeError:  # transformers < 4.56 names it torch_dtype
        model = auto.from_pretrained(folder, torch_dtype=dtype)
    except ValueError as exc:
        raise InvalidInputError(
            f"transformers has no causal-LM class for {folder} ({config.model_type}): {exc} "
            "Next step: export-llm exports decoder-only models with a *ForCausalLM class.",
        ) from exc
    return model.eval(), folder
