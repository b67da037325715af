"""What every export-llm path shares: the result it returns, the capture of a wrapper
whose inputs and outputs are genai's, and the last touches to a graph before saving."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.llm import _attention, _conv, _fuse, _heads, _norm, _slices, _wrapper
from pt2onnx.llm._families import Layout
from pt2onnx.passes import unsplit_heads

# The model is loaded in its dtype already; export's precision= adds the float32 ops.
HALF = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


@dataclass
class LLMExport:
    """What ``export_llm`` wrote, and how."""

    out_dir: Path
    model_path: Path
    genai_config: dict[str, Any]
    layout: Layout
    precision: str
    program: Any  # the OnnxProgram of the graph before quantization's rewrite
    tokenizer_files: list[str] = field(default_factory=list)
    quantized: list[str] = field(default_factory=list)  # weights int4 replaced
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    captured_layers: int = 0  # the layers torch.export captured; fewer when stamped
    # Whisper: the encoder's file and program (model_path and program are the decoder's).
    encoder_path: Path | None = None
    encoder_program: Any = None
    # Several files (Whisper, the image pipeline): each file's name -> its path.
    files: dict[str, Path] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"LLMExport({self.layout.model_type} -> {self.out_dir}, {self.precision}, "
                f"genai type {self.layout.genai_type!r}, {self.layout.num_layers} layers, "
                f"{self.seconds:.1f}s)")


def capture_module(module: torch.nn.Module, example: tuple[Any, ...], in_names: list[str],
                    out_names: list[str], dims: tuple[Any, ...] | None, dtype: torch.dtype,
                    opset: int | None, notes: list[str], tested_in: str) -> Any:
    """pt2onnx.export of a wrapper whose I/O is genai's, as _capture does for decoders."""
    from pt2onnx import _api
    from pt2onnx.capture import trusted

    # The size-1 points (batch 1, one token, an empty past) are run against eager in
    # the tests named by ``tested_in``; the proof's extra captures tripled Whisper's
    # decoder's time.
    size_one = trusted(f"export-llm: {tested_in}")
    with warnings.catch_warnings(record=True) as caught, no_fake_tensor_cache(), size_one:
        warnings.simplefilter("always")
        prog = _api.export(module, example, None, input_names=in_names,
                           output_names=out_names, dynamic_shapes=dims, opset=opset,
                           precision=HALF.get(dtype, "keep"))
    notes.extend(export_notes(caught))
    return prog


def export_notes(caught: list[warnings.WarningMessage]) -> list[str]:
    """The warnings raised during a capture that are notes on the export: not the
    deprecation notices of torch's or transformers' own code, which say nothing about
    the file (Qwen3.5's capture raised ``torch.jit.script_method`` 14 times)."""
    quiet = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
    return [str(w.message) for w in caught if not issubclass(w.category, quiet)]


def no_fake_tensor_cache() -> Any:
    """torch.export's fake-tensor dispatch cache, off: with a decoder's symbolic dims,
    checking and filling it costs more than the ops it saves (1.9 s against 2.9 s for
    a two-layer Llama's capture, measured with torch 2.13). Only a cache: the program
    is the same."""
    import contextlib

    try:
        import torch._dynamo.config as dynamo_config
    except ImportError:  # pragma: no cover - torch without dynamo
        return contextlib.nullcontext()
    if not hasattr(dynamo_config, "fake_tensor_cache_enabled"):
        return contextlib.nullcontext()
    return dynamo_config.patch(fake_tensor_cache_enabled=False)


def unique_node_names(model: ir.Model) -> None:
    """Stamped layers copy their nodes' names, and the float32 groups of a half-precision
    export add casts named by counting per capture: a name met twice gets a suffix
    (onnxruntime refuses "two nodes with same node name")."""
    seen: set[str] = set()
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if not node.name:
            continue
        name, i = node.name, 1
        while name in seen:
            name, i = f"{node.name}_{i}", i + 1
        node.name = name
        seen.add(name)


def name_total_dims(model: ir.Model, prefix: str = "present.") -> None:
    """The present outputs' length is past + sequence; genai's dim name is
    total_sequence_length, the attention mask's."""
    for value in model.graph.outputs:
        if value.name and value.name.startswith(prefix) and value.shape is not None \
                and not value.name.endswith((".conv", ".recurrent")):
            dims = list(value.shape)
            dims[2] = ir.SymbolicDim(_wrapper.TOTAL)
            value.shape = ir.Shape(dims)


def fused_rewrites(model: ir.Model, attention: bool, norms: bool, projections: bool) -> None:
    """A decoder graph's rewrites to onnxruntime's fused forms: with the attention
    fused, the slices Phi's partial rotary left rejoined, the q/k/v projections
    GroupQueryAttention reads packed (``projections``), reshape round trips dropped;
    with fused ops asked for (``norms``), the RMSNorms as SimplifiedLayerNormalization
    (and the residual adds before them as SkipSimplifiedLayerNormalization), and LFM2's
    convolutions as CausalConvWithState."""
    if attention and _slices.rejoin_slices(model):
        # Phi's partial rotary (_attention._unrotated): the op now reads the model's
        # split into heads, which the optimize stage's pass merges back.
        unsplit_heads.apply(model)
        ir.passes.common.RemoveUnusedNodesPass()(model)  # the split, unread
    if projections and attention:
        _fuse.fuse_shared_input_matmuls(model, accept=_attention.reads_packed)
    if attention:
        _attention.pack_qkv(model)
        _attention.drop_reshape_round_trips(model)
    if norms:
        _norm.fuse_rms_norms(model)
        _norm.fuse_skip_norms(model)
        _conv.fuse_causal_convs(model)
    if attention and _heads.rotary_heads_last(model):
        _attention.drop_reshape_round_trips(model)
