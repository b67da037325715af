"""export-llm for vision-language checkpoints (issue 40): their text decoder.

onnxruntime-genai's model builder writes, for ``Qwen2_5_VLForConditionalGeneration``,
``Qwen3VLForConditionalGeneration``, ``Gemma3ForConditionalGeneration``,
``Mistral3ForConditionalGeneration`` and ``Lfm2VlForConditionalGeneration``, the text
decoder with its embedding and LM head, as types ``qwen2_5_vl_text``,
``qwen3_vl_text``, ``gemma3_vl_text``, ``mistral3_text`` and ``lfm2_vl_text``. Each case here: a tiny random-weight checkpoint of the whole model
(vision tower too; nothing is downloaded) written with save_pretrained, exported, then
onnxruntime-genai's own loop fed a text prompt: its 32 greedy tokens must equal the
whole model's ``generate(do_sample=False)``, and the file holds no vision weight.

The genai cases need onnxruntime-genai (the ``llm`` extra; ``make test-llm``).
"""

from __future__ import annotations

import onnx
import pytest
import torch

import pt2onnx
from pt2onnx import InvalidInputError

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from test_export_llm import PROMPT, T, _genai, _genai_tokens, _reference, _vary  # noqa: E402

# The text decoders: three layers (captured as two and stamped where the layers are
# alike); the weights drawn as wide as makes the greedy tokens vary.
TEXT = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, intermediate_size=64, max_position_embeddings=128, **T)
# Multimodal rotary: the head's 8 frequencies split 2 / 3 / 3 between the time, height
# and width positions (a text prompt gives the three the same positions).
MROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
QWEN_VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2,
                   out_hidden_size=64)
SIGLIP = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
              image_size=28, patch_size=14)

VLMS = {
    "qwen2_5_vl": lambda: transformers.Qwen2_5_VLForConditionalGeneration(
        transformers.Qwen2_5_VLConfig(
            text_config=dict(TEXT, initializer_range=0.2, rope_parameters=MROPE),
            vision_config=QWEN_VISION, **T)),
    # Qwen3-VL: q/k norms, and the sections interleaved.
    "qwen3_vl": lambda: transformers.Qwen3VLForConditionalGeneration(
        transformers.Qwen3VLConfig(
            text_config=dict(TEXT, initializer_range=0.3,
                             rope_parameters=dict(MROPE, mrope_interleaved=True)),
            vision_config=dict(QWEN_VISION, deepstack_visual_indexes=[0]), **T)),
    # Gemma 3: sliding (window 8, < the 38 positions generated) and full layers, each
    # kind with its own rope base.
    "gemma3": lambda: transformers.Gemma3ForConditionalGeneration(
        transformers.Gemma3Config(
            text_config=dict(TEXT, initializer_range=0.05, sliding_window=8,
                             layer_types=["sliding_attention", "full_attention",
                                          "sliding_attention"]),
            vision_config=SIGLIP, mm_tokens_per_image=4, **T)),
    # Mistral 3: a Mistral text decoder beside a Pixtral vision tower.
    "mistral3": lambda: transformers.Mistral3ForConditionalGeneration(
        transformers.Mistral3Config(
            text_config=dict(TEXT, initializer_range=0.2, model_type="mistral"),
            vision_config=dict(SIGLIP, head_dim=8), **T)),
    # LFM2-VL: an LFM2 text decoder (convolution layers, their states in genai's layout)
    # beside a SigLIP2 vision tower.
    "lfm2_vl": lambda: transformers.Lfm2VlForConditionalGeneration(
        transformers.Lfm2VlConfig(
            text_config=dict(TEXT, initializer_range=0.3,
                             layer_types=["conv", "full_attention", "conv"]),
            vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                               num_attention_heads=2),
            projector_hidden_size=32, **T)),
}
GENAI_TYPE = {"qwen2_5_vl": "qwen2_5_vl_text", "qwen3_vl": "qwen3_vl_text",
              "gemma3": "gemma3_vl_text", "mistral3": "mistral3_text",
              "lfm2_vl": "lfm2_vl_text"}


def _checkpoint(name, path, seed=0):
    torch.manual_seed(seed)
    model = _vary(VLMS[name]()).eval()
    model.save_pretrained(path)
    return model


@pytest.mark.models
@pytest.mark.parametrize("name", sorted(VLMS))
def test_vlm_text_decoder_generates_the_whole_models_greedy_tokens_in_genai(name, tmp_path):
    """The text decoder of a vision-language checkpoint (refused before, or exported as
    the generic decoder for Gemma 3), under the type genai's builder gives it; genai's
    greedy tokens on a text prompt equal the whole model's."""
    _genai()
    model = _checkpoint(name, tmp_path / "ckpt")
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")
    assert result.genai_config["model"]["type"] == GENAI_TYPE[name]
    assert not [w for w in result.warnings if "from_pretrained" in w]  # streamed
    proto = onnx.load(str(result.model_path), load_external_data=False)
    # Every layer's rotary inside GroupQueryAttention (positions from the mask's
    # lengths), as the builder's fused graphs; LFM2-VL's attention layers too, beside
    # its convolution layers.
    assert "position_ids" not in {i.name for i in proto.graph.input}
    assert "GroupQueryAttention" in {n.op_type for n in proto.graph.node}
    weights = [i.name for i in proto.graph.initializer]
    assert not [w for w in weights if "vision" in w or "visual" in w or "projector" in w]
    want = _reference(model, [PROMPT])
    assert len(set(want[0][len(PROMPT):])) > 3  # the tokens vary
    assert _genai_tokens(tmp_path / "onnx", [PROMPT]) == want


@pytest.mark.models
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "plain"])
def test_qwen2_5_vl_batch_of_two_prompts(fused, tmp_path):
    """Batch 2, through both graphs: fused, every layer's rotary inside
    GroupQueryAttention (its table the model's rotary module run at every position with
    the three sections' positions equal, as for text) and no position_ids, as the
    builder's fused graphs; plain, ``position_ids`` ``[batch_size, sequence_length]``,
    which the model gives all three sections (genai 0.18 feeds each row its text
    positions). genai's tokens equal the whole model's."""
    _genai()
    model = _checkpoint("qwen2_5_vl", tmp_path / "ckpt", seed=1)
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", fused_ops=fused)
    proto = onnx.load(str(result.model_path), load_external_data=False)
    inputs = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in proto.graph.input}
    if fused:
        assert "position_ids" not in inputs
        assert {n.op_type for n in proto.graph.node} >= {"GroupQueryAttention"}
    else:
        assert inputs["position_ids"] == ["batch_size", "sequence_length"]
    prompts = [PROMPT, [1, 40, 41, 42, 43, 44]]
    assert _genai_tokens(tmp_path / "onnx", prompts) == _reference(model, prompts)

def test_vlm_without_a_text_decoder_type_is_refused_naming_it(tmp_path):
    """A vision-language checkpoint whose text decoder export-llm does not write (LLaVA:
    no causal-LM class in transformers, no text type in genai's builder): a typed
    refusal naming the architecture, what is missing and what to do."""
    config = transformers.LlavaConfig(
        text_config=dict(model_type="llama", hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=64, **T),
        vision_config=dict(model_type="clip_vision_model", hidden_size=16,
                           intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                           image_size=28, patch_size=14))
    config.architectures = ["LlavaForConditionalGeneration"]
    config.save_pretrained(tmp_path / "ckpt")
    with pytest.raises(InvalidInputError, match=r"LlavaForConditionalGeneration \(llava\) is "
                       r"a vision-language model .* no causal-LM class for llava"):
        pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx")


# ---- The image pipeline: vision.onnx, embedding.onnx and model.onnx (genai's qwen2_5_vl)

# A byte-level vocabulary (256 bytes) and Qwen's special tokens after it, so genai's
# processor tokenizes a prompt and expands its image placeholder.
SPECIALS = ["<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
            "<|video_pad|>", "<|im_start|>", "<|im_end|>"]
IDS = {t: 256 + i for i, t in enumerate(SPECIALS)}
# Two vision blocks: windowed (window 56 px: 2 x 2 merged patches) then full attention.
IMAGE_VISION = dict(QWEN_VISION, depth=2, window_size=56, fullatt_block_indexes=[1])
IMAGE = (56, 84)  # height, width: a 4 x 6 grid of 14-pixel patches, 6 image tokens
IMAGE_NEW_TOKENS = 24


def _byte_tokenizer(path):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.save_pretrained(path)


def _image_checkpoint(path, seed=0):
    torch.manual_seed(seed)
    ids = dict(vocab_size=264, pad_token_id=IDS["<|endoftext|>"], bos_token_id=None,
               eos_token_id=IDS["<|im_end|>"])
    config = transformers.Qwen2_5_VLConfig(
        text_config=dict(TEXT, **ids, initializer_range=0.2, rope_parameters=MROPE),
        vision_config=IMAGE_VISION, image_token_id=IDS["<|image_pad|>"],
        video_token_id=IDS["<|video_pad|>"], vision_start_token_id=IDS["<|vision_start|>"],
        vision_end_token_id=IDS["<|vision_end|>"], **ids)
    model = _vary(transformers.Qwen2_5_VLForConditionalGeneration(config)).eval()
    model.save_pretrained(path)
    _byte_tokenizer(path)
    return model


def _png(path, rgb):
    """An 8-bit RGB PNG (zlib and the format's chunks; no imaging library needed)."""
    import struct
    import zlib

    height, width, _ = rgb.shape
    raw = b"".join(b"\x00" + row.astype("uint8").tobytes() for row in rgb)

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    path.write_bytes(b"\x89PNG\r\n\x1a\n"
                     + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _patches(rgb, patch=14, merge=2, temporal=2):
    """transformers' Qwen2-VL image processor's layout of an image already at its size:
    rescaled, normalized (CLIP's mean and std), repeated over the temporal patch, cut
    into patches ordered by merged block."""
    import numpy as np

    from pt2onnx.llm._vision import MEAN, STD

    image = (rgb / 255.0 - np.array(MEAN)) / np.array(STD)
    image = np.repeat(image.transpose(2, 0, 1)[None], temporal, axis=0)  # T, C, H, W
    _, channels, height, width = image.shape
    gh, gw = height // patch, width // patch
    x = image.reshape(1, temporal, channels, gh // merge, merge, patch, gw // merge, merge,
                      patch)
    x = x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return x.reshape(gh * gw, channels * temporal * patch * patch).astype("float32")


def _genai_image_tokens(folder, prompt, images):
    """genai's processor (tokenizer and image processor from the exported folder) and
    its greedy loop: the processor's tensors and the tokens."""
    og = _genai()
    model = og.Model(str(folder))
    processor = model.create_multimodal_processor()
    inputs = processor(prompt, images=og.Images.open(*map(str, images)) if images else None)
    tensors = {k: inputs[k].as_numpy() for k in inputs.keys()}
    params = og.GeneratorParams(model)
    total = tensors["input_ids"].shape[-1] + IMAGE_NEW_TOKENS
    params.set_search_options(max_length=total, min_length=total)
    gen = og.Generator(model, params)
    gen.set_inputs(inputs)
    while not gen.is_done():
        gen.generate_next_token()
    return tensors, [int(t) for t in gen.get_sequence(0)]


def _image_reference(model, tensors):
    """transformers' greedy tokens on the same ids, pixels and grid (the image tokens
    marked, as its processor's mm_token_type_ids do, so the positions are 3-D)."""
    ids = torch.from_numpy(tensors["input_ids"]).long()
    extra = {}
    if "pixel_values" in tensors:
        extra = dict(pixel_values=torch.from_numpy(tensors["pixel_values"]),
                     image_grid_thw=torch.from_numpy(tensors["image_grid_thw"]),
                     mm_token_type_ids=(ids == IDS["<|image_pad|>"]).int())
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=IMAGE_NEW_TOKENS, min_new_tokens=IMAGE_NEW_TOKENS,
                             **extra)
    return out[0].tolist()


@pytest.fixture(scope="module")
def image_export(tmp_path_factory):
    _genai()
    tmp = tmp_path_factory.mktemp("qwen_image")
    model = _image_checkpoint(tmp / "ckpt")
    result = pt2onnx.export_llm(tmp / "ckpt", tmp / "onnx", image_size=IMAGE)
    return model, result, tmp


@pytest.mark.models
def test_qwen2_5_vl_image_prompt_through_genais_processor_gives_the_models_tokens(
        image_export):
    """An image prompt end to end in genai: its processor reads a PNG (with the
    folder's processor_config.json) into the pixels transformers' processor lays out,
    the vision file runs once, the embedding scatters its features into the image
    tokens, and the decoder takes genai's 3-D positions. The tokens equal the model's
    generate on the same ids, pixels and grid."""
    import numpy as np

    model, result, tmp = image_export
    assert result.genai_config["model"]["type"] == "qwen2_5_vl"
    assert sorted(result.files) == ["embedding.onnx", "model.onnx", "vision.onnx"]
    decoder = onnx.load(str(result.model_path), load_external_data=False)
    assert [i.name for i in decoder.graph.input][:3] == [
        "inputs_embeds", "attention_mask", "position_ids"]
    assert not [w.name for w in decoder.graph.initializer if "visual" in w.name]
    # Each layer's attention one GroupQueryAttention (the model's rotary before it, on
    # genai's three position rows), writing into genai's shared past buffer.
    ops = [n.op_type for n in decoder.graph.node]
    assert ops.count("GroupQueryAttention") == 3 and not result.warnings
    assert result.genai_config["search"]["past_present_share_buffer"] is True
    rgb = np.random.default_rng(0).integers(0, 256, (*IMAGE, 3))
    _png(tmp / "image.png", rgb)
    prompt = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>what is it?"
    tensors, got = _genai_image_tokens(result.out_dir, prompt, [tmp / "image.png"])
    assert tensors["image_grid_thw"].tolist() == [[1, 4, 6]]
    assert (tensors["input_ids"] == IDS["<|image_pad|>"]).sum() == 6
    # The pixels are transformers' layout of the image (no resize at this size).
    np.testing.assert_allclose(tensors["pixel_values"], _patches(rgb), atol=1e-5)
    want = _image_reference(model, tensors)
    assert len(set(want[-IMAGE_NEW_TOKENS:])) > 3  # the tokens vary
    assert got == want


@pytest.mark.models
def test_qwen2_5_vl_two_images_and_a_resized_one(image_export):
    """Two images in one prompt, one of them larger than the export's size: the
    processor resizes it to the size the vision file takes, genai runs the file once
    per image, and the tokens equal the model's on the same ids, pixels and grids."""
    import numpy as np

    model, result, tmp = image_export
    rng = np.random.default_rng(1)
    _png(tmp / "a.png", rng.integers(0, 256, (*IMAGE, 3)))
    _png(tmp / "b.png", rng.integers(0, 256, (100, 130, 3)))
    prompt = ("<|vision_start|><|image_pad|><|vision_end|>and"
              "<|vision_start|><|image_pad|><|vision_end|>?")
    tensors, got = _genai_image_tokens(result.out_dir, prompt, [tmp / "a.png", tmp / "b.png"])
    assert tensors["image_grid_thw"].tolist() == [[1, 4, 6], [1, 4, 6]]
    assert got == _image_reference(model, tensors)


@pytest.mark.models
def test_qwen2_5_vl_image_pipeline_with_standard_ops(tmp_path):
    """``fused_ops=False``: the decoder's attention as the model's own ops (no
    GroupQueryAttention, present = past + the new positions); the tokens on an image
    prompt equal the model's."""
    import numpy as np

    model = _image_checkpoint(tmp_path / "ckpt", seed=4)
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", image_size=IMAGE,
                                fused_ops=False)
    decoder = onnx.load(str(result.model_path), load_external_data=False)
    assert "GroupQueryAttention" not in {n.op_type for n in decoder.graph.node}
    assert result.genai_config["search"]["past_present_share_buffer"] is False
    _png(tmp_path / "image.png", np.random.default_rng(5).integers(0, 256, (*IMAGE, 3)))
    tensors, got = _genai_image_tokens(
        result.out_dir, "<|vision_start|><|image_pad|><|vision_end|>hi", [tmp_path / "image.png"])
    assert got == _image_reference(model, tensors)


@pytest.mark.models
def test_qwen2_5_vl_image_folder_runs_a_text_prompt(image_export):
    """No image: the embedding gets no features (a [0, hidden] tensor) and genai's
    positions are the text's; the tokens equal the model's."""
    model, result, _ = image_export
    tensors, got = _genai_image_tokens(result.out_dir, "<|im_start|>user\nhello there", [])
    assert "pixel_values" not in tensors
    assert got == _image_reference(model, tensors)


def test_qwen2_5_vl_vision_file_refuses_another_grid(image_export):
    """The vision graph holds one grid's rotary positions and windows: an image_grid_thw
    with the same patch count but another shape fails, naming the size the file was
    exported for, and so does a pixel_values of another patch count."""
    import numpy as np
    import onnxruntime as ort

    model, result, _ = image_export
    session = ort.InferenceSession(str(result.files["vision.onnx"]))
    pixels = np.random.default_rng(0).standard_normal((24, 1176)).astype(np.float32)
    features = session.run(None, {"pixel_values": pixels,
                                  "image_grid_thw": np.array([[1, 4, 6]])})[0]
    assert features.shape == (6, 64)
    # The file computes what pt2onnx.llm.vision_wrapper (the module it was captured
    # from) does, which is the model's own vision tower on that grid.
    wrapper, _ = pt2onnx.llm.vision_wrapper(model, IMAGE)
    with torch.no_grad():
        want = model.model.visual(torch.from_numpy(pixels),
                                  grid_thw=torch.tensor([[1, 4, 6]])).pooler_output
        np.testing.assert_allclose(wrapper(torch.from_numpy(pixels), None).numpy(),
                                   want.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(features, want.numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(Exception, match="image_grid_thw_must_be_1x4x6_the_image_56x84"):
        session.run(None, {"pixel_values": pixels, "image_grid_thw": np.array([[1, 6, 4]])})
    with pytest.raises(Exception, match="pixel_values"):
        session.run(None, {"pixel_values": np.zeros((48, 1176), np.float32),
                           "image_grid_thw": np.array([[1, 8, 6]])})


@pytest.mark.parametrize("kwargs, match", [
    (dict(image_size=(50, 84)), r"not a multiple of .* 28.* image_size=56x84"),
    (dict(image_size="56x84", precision="fp16"), r"fp32 or int4 only"),
    (dict(image_size="big"), r"is not an image size"),
])
def test_qwen2_5_vl_image_pipeline_refusals(kwargs, match, tmp_path):
    """What the image pipeline can't be written for: a size that does not cut into
    whole merged patches (the nearest that does is named), an untested precision, a
    size that is not one. Each before any weight is loaded."""
    transformers.Qwen2_5_VLConfig(
        text_config=dict(TEXT, rope_parameters=MROPE), vision_config=QWEN_VISION,
        **T).save_pretrained(tmp_path / "ckpt")
    with pytest.raises(InvalidInputError, match=match):
        pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", **kwargs)
    assert not (tmp_path / "onnx").exists()


def test_image_size_for_another_family_is_refused(tmp_path):
    """image_size names the image pipeline, which export-llm writes for Qwen2.5-VL only."""
    torch.manual_seed(0)
    VLMS["gemma3"]().save_pretrained(tmp_path / "ckpt")
    with pytest.raises(InvalidInputError, match=r"for qwen2_5_vl checkpoints .* only"):
        pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", image_size=56)


def test_qwen2_5_vl_embedding_file_keeps_a_generated_image_token_and_refuses_a_mismatch(
        image_export):
    """The embedding file against the model's embedding: image features scattered in
    order; no features (a decode step, even one that generated an image token): the
    token's own embedding, as the model's forward gives; image tokens and features of
    different counts (the model raises): an index error."""
    import numpy as np
    import onnxruntime as ort

    model, result, _ = image_export
    session = ort.InferenceSession(str(result.files["embedding.onnx"]))
    table = model.get_input_embeddings().weight.detach().numpy()
    pad = IDS["<|image_pad|>"]
    ids = np.array([[5, pad, pad, 7]])
    feats = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    got = session.run(None, {"input_ids": ids, "image_features": feats})[0]
    np.testing.assert_array_equal(got[0], np.stack([table[5], feats[0], feats[1], table[7]]))
    got = session.run(None, {"input_ids": np.array([[pad]]),
                             "image_features": np.zeros((0, 64), np.float32)})[0]
    np.testing.assert_array_equal(got[0, 0], table[pad])
    for count in (1, 3):
        with pytest.raises(Exception, match="out of"):
            session.run(None, {"input_ids": ids, "image_features": feats[:1].repeat(count, 0)})


@pytest.mark.models
def test_qwen2_5_vl_image_pipeline_int4_decodes_as_the_dequantized_model(tmp_path):
    """int4: the decoder's Linear weights as MatMulNBits (the vision encoder stays
    float32); genai's tokens on an image prompt equal the model's with those weights
    dequantized."""
    import numpy as np

    model = _image_checkpoint(tmp_path / "ckpt", seed=2)
    result = pt2onnx.export_llm(tmp_path / "ckpt", tmp_path / "onnx", image_size=IMAGE,
                                precision="int4")
    names = {q.removeprefix("model.").removesuffix(".weight.T") for q in result.quantized}
    linears = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert names and names <= linears
    assert not [n for n in names if "visual" in n]
    vision = onnx.load(str(result.files["vision.onnx"]), load_external_data=False)
    assert "MatMulNBits" not in {n.op_type for n in vision.graph.node}
    with torch.no_grad():
        for name in names:
            weight = model.get_submodule(name).weight
            weight.copy_(pt2onnx.llm.quantize_rtn(weight)[2])
    _png(tmp_path / "image.png", np.random.default_rng(3).integers(0, 256, (*IMAGE, 3)))
    tensors, got = _genai_image_tokens(
        result.out_dir, "<|vision_start|><|image_pad|><|vision_end|>hi", [tmp_path / "image.png"])
    assert got == _image_reference(model, tensors)


def test_cli_image_size_reaches_export_llm_and_names_the_three_files(
        image_export, tmp_path, monkeypatch, capsys):
    """``--image-size 56x84`` is passed through as given, and the CLI prints the three
    files (the export itself is the fixture's: export_llm is swapped for one recording
    its arguments and returning that result)."""
    import pt2onnx.llm
    from pt2onnx.cli import main

    _, result, _ = image_export
    (tmp_path / "config.json").write_text("{}")
    seen = {}
    monkeypatch.setattr(pt2onnx.llm, "export_llm", lambda *a, **k: seen.update(k) or result)
    assert main(["export-llm", str(tmp_path), "-o", str(tmp_path / "out"), "-q",
                 "--image-size", "56x84"]) == 0
    assert seen["image_size"] == "56x84"
    printed = capsys.readouterr().out
    assert "vision.onnx, embedding.onnx, model.onnx (qwen2_5_vl, 3 layers, fp32)" in printed
    assert "type 'qwen2_5_vl'" in printed
