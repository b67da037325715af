"""Qwen2.5-VL for onnxruntime-genai's image pipeline: a vision encoder, an embedding, a decoder.

genai 0.18 runs its ``qwen2_5_vl`` type (a multimodal model, not the builder's
``qwen2_5_vl_text``) from three files, laid out as in genai's own test model
(``test/test_models/qwen-vision-preprocessing/genai_config.json``):

- ``vision.onnx``: ``pixel_values`` ``[patches, channels * temporal_patch * patch^2]``
  (the image cut into patches, as transformers' Qwen2-VL image processor lays it out)
  and ``image_grid_thw`` ``[1, 3]`` -> ``image_features`` ``[image_tokens, hidden]``;
- ``embedding.onnx``: ``input_ids`` and ``image_features`` -> ``inputs_embeds``: the
  token embeddings, with each image token's row replaced by the next image feature, in
  order (the model's ``masked_scatter``); with no image, ``image_features`` is
  ``[0, hidden]``;
- ``model.onnx``: the text decoder on ``inputs_embeds``, ``attention_mask``,
  ``position_ids`` ``[3, batch_size, sequence_length]`` (time, height and width
  positions; genai computes them from ``image_grid_thw`` and ``vision_start_token_id``
  as transformers' ``get_rope_index`` does) and the key/value cache.

genai runs the vision file once per prompt with the image's tensors and the
``num_image_tokens`` its processor gives. Where the vision tower's code loops over the
grid's values in Python (its rotary positions, windows and attention segments), the
graph is captured at one image size, the export's ``image_size``: those values are
computed once, eagerly, and are constants of the graph. A ``pixel_values`` of another
size fails onnxruntime's shape check; an ``image_grid_thw`` other than the exported one
fails a Reshape named after the size the file takes, so another image size is an error,
never a wrong answer. ``processor_config.json`` resizes every image to that size.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.errors import InvalidInputError
from pt2onnx.llm import _attention, _families, _wrapper
from pt2onnx.llm._families import Layout

MODEL_TYPE = GENAI_TYPE = "qwen2_5_vl"
VISION_FILE, EMBEDDING_FILE = "vision.onnx", "embedding.onnx"
PROCESSOR_FILE = "processor_config.json"
GENERATION_CLASS = "Qwen2_5_VLForConditionalGeneration"
# The precisions tested through genai's image pipeline (int4: the decoder's Linear
# weights as MatMulNBits; the vision encoder stays float32).
PRECISIONS = ("fp32", "int4")
BATCH, SEQ, PAST, TOTAL = ("batch_size", "sequence_length", "past_sequence_length",
                           "total_sequence_length")
IMAGE_TOKENS = "num_image_tokens"
# transformers' Qwen2-VL image processor's defaults (CLIP's mean and std).
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)


def image_size_of(value: Any) -> tuple[int, int] | None:
    """``image_size`` as (height, width): an int (square), a pair, or ``"HxW"``."""
    if value is None:
        return None
    if isinstance(value, str):
        parts = value.lower().split("x")
        if len(parts) == 2 and all(p.strip().isdigit() for p in parts):
            return int(parts[0]), int(parts[1])
    elif isinstance(value, int) and not isinstance(value, bool):
        return value, value
    elif isinstance(value, (tuple, list)) and len(value) == 2 \
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return int(value[0]), int(value[1])
    raise InvalidInputError(
        f"image_size={value!r} is not an image size. Next step: pass the height and width "
        "in pixels, as a pair (448, 448), an int for a square, or the text '448x448'.")


def check(config: Any, image_size: tuple[int, int], precision: str) -> tuple[int, int, int]:
    """The image grid (t, h, w) in patches the vision graph is captured at; refuses
    what genai's image pipeline can't run from export-llm's files, naming what is
    missing."""
    model_type = str(getattr(config, "model_type", "") or "")
    name = _families.label(config)
    if model_type != MODEL_TYPE:
        raise InvalidInputError(
            f"{name}: export-llm writes the image pipeline (a vision encoder, an embedding "
            f"and a decoder on inputs_embeds) for {MODEL_TYPE} checkpoints "
            "(Qwen2_5_VLForConditionalGeneration) only; image_size was given for a "
            f"{model_type or 'checkpoint without a model_type'}. Next step: leave out "
            "image_size to export the text decoder, or export the vision tower with "
            "pt2onnx.export.")
    if precision not in PRECISIONS:
        raise InvalidInputError(
            f"{name}: the image pipeline is written in {' or '.join(PRECISIONS)} only; "
            f"{precision} is not tested through genai's image pipeline. Next step: pass "
            "precision='fp32' or 'int4', or leave out image_size for the text decoder.")
    try:
        from transformers import vision_utils  # noqa: F401
    except ImportError as exc:
        raise InvalidInputError(
            f"{name}: exporting the vision tower needs transformers' vision_utils (its "
            "precomputed rotary positions and windows), which this transformers lacks. "
            "Next step: upgrade transformers (the llm extra's pin).") from exc
    vision = config.vision_config
    factor = int(vision.patch_size) * int(vision.spatial_merge_size)
    height, width = image_size
    if height <= 0 or width <= 0 or height % factor or width % factor:
        def near(n: int) -> int:
            return max(factor, round(n / factor) * factor)
        raise InvalidInputError(
            f"{name}: image_size {height}x{width} is not a multiple of the patch size times "
            f"the merge size ({vision.patch_size} x {vision.spatial_merge_size} = {factor}) "
            f"in both dims, so the image does not cut into whole merged patches. Next step: "
            f"pass image_size={near(height)}x{near(width)}.")
    return 1, height // int(vision.patch_size), width // int(vision.patch_size)


def load(folder: Any, dtype: torch.dtype) -> Any:
    """The checkpoint as the whole model (vision tower, language model, LM head)."""
    import transformers

    cls = getattr(transformers, GENERATION_CLASS)
    try:
        model = cls.from_pretrained(folder, dtype=dtype)
    except TypeError:  # transformers < 4.56 names it torch_dtype
        model = cls.from_pretrained(folder, torch_dtype=dtype)
    return model.eval()


class VisionForGenai(torch.nn.Module):
    """``(pixel_values, image_grid_thw)`` -> ``image_features``, at one image grid.

    The grid's rotary positions, window order and attention segments are computed
    here, eagerly, by transformers' own functions (``vision_utils``), and given to the
    tower as its precomputed inputs: in the captured forward they are constants (Python
    lists made tensors), so no value of the grid is read while tracing.
    """

    def __init__(self, visual: Any, grid: tuple[int, int, int]) -> None:
        super().__init__()
        from transformers import vision_utils

        self.visual = visual
        self.grid = [list(grid)]
        thw = torch.tensor(self.grid)
        merge = int(visual.spatial_merge_size)
        self.position_ids = vision_utils.get_vision_position_ids(thw, merge).tolist()
        cu_seqlens, _ = vision_utils.get_vision_attention_seqlens(thw, visual.config)
        self.cu_seqlens = cu_seqlens.tolist()
        window, cu_window = vision_utils.get_vision_window_index(
            thw, merge, int(visual.window_size), int(visual.patch_size))
        self.window_index, self.cu_window_seqlens = window.tolist(), cu_window.tolist()

    def forward(self, pixel_values: torch.Tensor, image_grid_thw: torch.Tensor) -> torch.Tensor:
        del image_grid_thw  # checked in the graph (guard_grid)
        given = {"position_ids": torch.tensor(self.position_ids),
                 "cu_seqlens": torch.tensor(self.cu_seqlens, dtype=torch.int32),
                 "window_index": torch.tensor(self.window_index),
                 "cu_window_seqlens": torch.tensor(self.cu_window_seqlens, dtype=torch.int32)}
        pixel_values = pixel_values.to(self.visual.dtype)
        out = self.visual(pixel_values, grid_thw=torch.tensor(self.grid), **given)
        return out.pooler_output


def vision_wrapper(model: Any, image_size: Any) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """Qwen2.5-VL's vision tower at one image size as export-llm captures it: the module
    ``(pixel_values, image_grid_thw) -> image_features`` and an example of its inputs
    (random pixels, the grid). For exporting the encoder with another tool, or running
    it eagerly against a file export-llm wrote."""
    size = image_size_of(image_size)
    if size is None:
        raise InvalidInputError("vision_wrapper needs the image size (height, width) the "
                                "vision tower is to run at. Next step: pass image_size.")
    grid = check(model.config, size, "fp32")
    return VisionForGenai(model.model.visual, grid), (pixel_example(model.config, grid),
                                                      torch.tensor([grid]))


class EmbeddingForGenai(torch.nn.Module):
    """``(input_ids, image_features)`` -> ``inputs_embeds``: the model's token embedding,
    each image token's row replaced by the next image feature (the model's
    ``masked_scatter``)."""

    def __init__(self, model: Any, image_token_id: int) -> None:
        super().__init__()
        self.embed = model.get_input_embeddings()
        self.image_token_id = image_token_id

    def forward(self, input_ids: torch.Tensor, image_features: torch.Tensor) -> torch.Tensor:
        embeds = self.embed(input_ids)
        count = image_features.shape[0]
        is_image = (input_ids == self.image_token_id).reshape(-1)
        # With no features (a text prompt, or a decode step that generated an image
        # token) every token keeps its embedding, as in the model's forward.
        scatter = is_image & (count > 0)
        # The k-th image token reads feature row k; the others a zero row after the
        # last. Image tokens and features of different counts (the model raises) read
        # a row past the table: an index error here and in onnxruntime.
        mismatch = (count > 0) & (is_image.sum() != count)
        row = torch.where(scatter, torch.cumsum(is_image.to(torch.int64), 0) - 1, count)
        row = torch.where(mismatch, count + 1, row)
        table = torch.cat([image_features.to(embeds.dtype),
                           embeds.new_zeros(1, embeds.shape[-1])])
        picked = table[row].reshape(embeds.shape)
        return torch.where(scatter.reshape(input_ids.shape).unsqueeze(-1), picked, embeds)


class DecoderForGenai(torch.nn.Module):
    """``(inputs_embeds, attention_mask, position_ids [3, b, s], past...)`` ->
    ``(logits, present...)``: the whole model's forward given its embeddings and
    three-row positions, which runs the language model and the LM head alone."""

    def __init__(self, model: Any, num_layers: int) -> None:
        super().__init__()
        self.model = model
        self.num_layers = num_layers

    def forward(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor,
                position_ids: torch.Tensor, past: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        cache = DynamicCache()
        for i in range(self.num_layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(inputs_embeds=inputs_embeds, attention_mask=attention_mask,
                         position_ids=position_ids,
                         **{_families.cache_keyword(self.model): cache}, use_cache=True)
        presents: list[torch.Tensor] = []
        for layer in _wrapper.output_cache(out).layers:
            presents += [layer.keys, layer.values]
        return (out.logits, *presents)


class FusedDecoderForGenai(_attention.FusedDecoderWithCache):
    """As DecoderForGenai, with each layer's attention one GroupQueryAttention: the
    model's own rotary runs before it, on genai's three position rows (which the op's
    one-row rotary can't read), and the op takes the rotated query and key."""

    def __init__(self, model: Any, num_layers: int) -> None:
        super().__init__(model, num_layers, None)

    def forward(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor,
                position_ids: torch.Tensor, past: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return self.step(None, attention_mask, past,  # type: ignore[arg-type]
                         inputs_embeds=inputs_embeds, position_ids=position_ids)


def decoder(model: Any, layout: Layout, dtype: torch.dtype,
            fused: bool) -> tuple[torch.nn.Module, str | None]:
    """The decoder wrapper: the fused one where it computes what the plain one does on
    a first step (empty past) and a step over a past, with three different position
    rows; otherwise the plain one and why (None: as asked)."""
    plain = DecoderForGenai(model, layout.num_layers)
    if not fused:
        return plain, None
    if dtype == torch.bfloat16:
        return plain, "onnxruntime's CPU provider has no bfloat16 GroupQueryAttention"
    examples = [decoder_example(layout, dtype, past=past) for past in (0, 5)]
    for args in examples:  # the rows differ, as for an image's tokens
        args[2][1] += 2
        args[2][2] += 5
    with torch.no_grad():
        wants = [plain(*args) for args in examples]
    try:
        _attention.setup()
    except Exception as exc:  # transformers without AttentionInterface
        return plain, f"transformers has no attention interface to register with ({exc})"
    fused_wrapper = FusedDecoderForGenai(model, layout.num_layers)
    why = _attention.agrees(fused_wrapper, examples, wants, dtype)
    return (plain, why) if why is not None else (fused_wrapper, None)


def layout(config: Any) -> Layout:
    """The text decoder's layout (genai_config.json's ``decoder`` section)."""
    text = config.get_text_config()
    heads = int(text.num_attention_heads)
    hidden = int(text.hidden_size)
    return Layout(
        model_type=MODEL_TYPE, genai_type=GENAI_TYPE, num_layers=int(text.num_hidden_layers),
        num_kv_heads=int(getattr(text, "num_key_value_heads", None) or heads),
        head_size=int(getattr(text, "head_dim", None) or hidden // heads),
        num_attention_heads=heads, hidden_size=hidden, vocab_size=int(text.vocab_size),
        context_length=_families.context_length(text), uses_position_ids=True, known=True)


def pixel_example(config: Any, grid: tuple[int, int, int]) -> torch.Tensor:
    vision = config.vision_config
    patches = grid[0] * grid[1] * grid[2]
    width = int(vision.in_channels) * int(vision.temporal_patch_size) * int(vision.patch_size) ** 2
    return torch.randn(patches, width)


def image_tokens(config: Any, grid: tuple[int, int, int]) -> int:
    return grid[0] * grid[1] * grid[2] // int(config.vision_config.spatial_merge_size) ** 2


def decoder_names(num_layers: int) -> tuple[list[str], list[str]]:
    pasts = [f"past_key_values.{i}.{kv}" for i in range(num_layers) for kv in ("key", "value")]
    presents = [f"present.{i}.{kv}" for i in range(num_layers) for kv in ("key", "value")]
    return ["inputs_embeds", "attention_mask", "position_ids", *pasts], ["logits", *presents]


def decoder_dims(num_layers: int) -> tuple[Any, ...]:
    from torch.export import Dim

    batch, seq, past, total = Dim(BATCH), Dim(SEQ), Dim(PAST), Dim(TOTAL, min=4)
    return ({0: batch, 1: seq}, {0: batch, 1: total}, {1: batch, 2: seq},
            [{0: batch, 2: past}] * (2 * num_layers))


def decoder_example(layout: Layout, dtype: torch.dtype, seq: int = 3,
                    past: int = 5) -> tuple[Any, ...]:
    positions = torch.arange(past, past + seq).reshape(1, 1, seq).expand(3, 1, seq)
    return (torch.randn(1, seq, layout.hidden_size, dtype=dtype),
            torch.ones(1, past + seq, dtype=torch.int64), positions.contiguous(),
            [torch.randn(1, layout.num_kv_heads, past, layout.head_size, dtype=dtype)
             for _ in range(2 * layout.num_layers)])


def embedding_example(config: Any, layout: Layout, dtype: torch.dtype) -> tuple[Any, ...]:
    """Six tokens, two of them image tokens, and two image features."""
    image = int(config.image_token_id)
    ids = torch.tensor([[3, image, image, 4, 5, 6]]) % layout.vocab_size
    return ids, torch.randn(2, layout.hidden_size, dtype=dtype)


def embedding_dims() -> tuple[Any, ...]:
    from torch.export import Dim

    return ({0: Dim(BATCH), 1: Dim(SEQ)}, {0: Dim(IMAGE_TOKENS)})


def guard_grid(model: ir.Model, grid: tuple[int, int, int], image_size: tuple[int, int]) -> None:
    """``image_features`` through a Reshape whose shape is invalid (two -1s) unless
    ``image_grid_thw`` equals the grid the graph was captured at: another image size
    fails, naming the size, instead of giving features computed for the wrong one."""
    graph = model.graph
    grid_in = next(v for v in graph.inputs if v.name == "image_grid_thw")
    out = graph.outputs[0]
    height, width = image_size
    name = (f"image_grid_thw_must_be_{grid[0]}x{grid[1]}x{grid[2]}_the_image_{height}x{width}"
            "_this_file_was_exported_for")

    def const(value: list[int], tag: str) -> ir.Value:
        node = ir.node("Constant", [], attributes={
            "value": ir.tensor(torch.tensor(value, dtype=torch.int64), name=tag)},
            name=f"{name}_{tag}")
        graph.append(node)
        return node.outputs[0]

    def add(op: str, inputs: list[ir.Value], **attributes: Any) -> ir.Value:
        node = ir.node(op, inputs, attributes=attributes or None, name=f"{name}_{op}")
        graph.append(node)
        return node.outputs[0]

    hidden = out.shape[1] if out.shape is not None else -1
    same = add("Equal", [add("Cast", [grid_in], to=ir.DataType.INT64), const(list(grid), "grid")])
    every = add("ReduceMin", [add("Cast", [same], to=ir.DataType.INT64)], keepdims=0)
    shape = add("Where", [add("Cast", [every], to=ir.DataType.BOOL),
                          const([-1, int(hidden) if isinstance(hidden, int) else -1], "good"),
                          const([-1, -1], "bad")])
    node = ir.node("Reshape", [out, shape], name=name)
    graph.append(node)
    checked = node.outputs[0]
    checked.name, checked.shape, checked.type = out.name, out.shape, out.type
    out.name = f"{out.name}_unchecked"
    graph.outputs[0] = checked


def genai_sections(config: Any, layout: Layout, cfg: dict[str, Any],
                   image_size: tuple[int, int]) -> dict[str, Any]:
    """genai_config.json's image pipeline: the decoder on ``inputs_embeds``, the
    ``embedding`` and ``vision`` sections, and the token ids genai's positions read."""
    model = cfg["model"]
    decoder = model["decoder"]
    inputs = {"inputs_embeds": "inputs_embeds"}
    inputs.update({k: v for k, v in decoder["inputs"].items() if k != "input_ids"})
    decoder["inputs"] = inputs
    session = {"log_id": "onnxruntime-genai", "provider_options": []}
    model["type"] = GENAI_TYPE
    model["image_token_id"] = int(config.image_token_id)
    model["video_token_id"] = int(config.video_token_id)
    model["vision_start_token_id"] = int(config.vision_start_token_id)
    model["embedding"] = {
        "filename": EMBEDDING_FILE, "session_options": dict(session),
        "inputs": {"input_ids": "input_ids", "image_features": "image_features"},
        "outputs": {"inputs_embeds": "inputs_embeds"}}
    vision = config.vision_config
    model["vision"] = {
        "filename": VISION_FILE, "config_filename": PROCESSOR_FILE,
        "session_options": dict(session),
        "spatial_merge_size": int(vision.spatial_merge_size),
        "tokens_per_second": float(getattr(vision, "tokens_per_second", 2) or 2),
        "inputs": {"pixel_values": "pixel_values", "image_grid_thw": "image_grid_thw"},
        "outputs": {"image_features": "image_features"}}
    return cfg


def processor_dict(config: Any, folder: Any, image_size: tuple[int, int]) -> dict[str, Any]:
    """processor_config.json for genai's image processor (onnxruntime-extensions'
    transforms): decode as RGB, resize every image to ``image_size`` (``smart_resize``
    0: the size is fixed, as the vision graph is), rescale to [0, 1], normalize with the
    checkpoint's mean and std (its preprocessor_config.json, else transformers'
    Qwen2-VL defaults), and cut into patches in transformers' order."""
    import json
    from pathlib import Path

    mean, std = list(MEAN), list(STD)
    if folder is not None:
        try:
            pre = json.loads((Path(folder) / "preprocessor_config.json").read_text())
            mean, std = list(pre.get("image_mean", mean)), list(pre.get("image_std", std))
        except (OSError, ValueError):
            pass
    vision = config.vision_config
    height, width = image_size
    patch, merge = int(vision.patch_size), int(vision.spatial_merge_size)

    def op(name: str, kind: str, **attrs: Any) -> dict[str, Any]:
        return {"operation": {"name": name, "type": kind, **({"attrs": attrs} if attrs else {})}}

    return {"processor": {"name": "qwen2_5_image_processor", "transforms": [
        op("decode_image", "DecodeImage", color_space="RGB"),
        op("convert_to_rgb", "ConvertRGB"),
        op("resize", "Resize", width=width, height=height, smart_resize=0, patch_size=patch,
           merge_size=merge),
        op("rescale", "Rescale", rescale_factor=1 / 255),
        op("normalize", "Normalize", mean=mean, std=std, qwen2_5_vl=1),
        op("patch_image", "PatchImage", patch_size=patch,
           temporal_patch_size=int(vision.temporal_patch_size), merge_size=merge),
    ]}}
