"""export-llm for Whisper: encoder.onnx and decoder.onnx in onnxruntime-genai's whisper layout.

A tiny random-weight WhisperForConditionalGeneration (nothing is downloaded; the
encoder keeps Whisper's 1500 positions, as genai feeds 3000 mel frames) is written with
save_pretrained and exported; then
- the encoder's outputs (hidden states and each decoder layer's cross-attention
  keys/values) equal eager's, at batch 1 and 2;
- a decoder step equals eager's over an empty past and over a past, one token and
  several, batch 1 and 2;
- onnxruntime-genai's whisper loop, given log-mel features and the decoder prompt,
  generates transformers' ``generate`` greedy tokens (batch 1 and 2).

The genai cases need onnxruntime-genai (the ``llm`` extra; ``make test-llm``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import pt2onnx
from pt2onnx import InvalidInputError

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

NEW_TOKENS = 24
PROMPT = [3, 5, 6]  # start of transcript, then two task tokens
MELS, LAYERS, HEADS, D = 8, 2, 4, 16


def _config(**over):
    base = dict(vocab_size=96, num_mel_bins=MELS, d_model=D, encoder_layers=LAYERS,
                decoder_layers=LAYERS, encoder_attention_heads=HEADS,
                decoder_attention_heads=HEADS, encoder_ffn_dim=32, decoder_ffn_dim=32,
                max_source_positions=1500, max_target_positions=64, pad_token_id=0,
                bos_token_id=1, eos_token_id=2, decoder_start_token_id=3,
                begin_suppress_tokens=None, suppress_tokens=None)
    return transformers.WhisperConfig(**{**base, **over})


def _vary(model):
    """Wider weights than transformers' 0.02 (its greedy tokens then repeat one id), and
    noise on the constant-initialised ones (biases, norm scales)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            p.add_(torch.randn(p.shape, generator=g) * (0.3 if p.dim() > 1 else 0.1))
    return model


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whisper")
    torch.manual_seed(0)
    model = _vary(transformers.WhisperForConditionalGeneration(_config()).eval())
    model.save_pretrained(tmp / "ckpt")
    result = pt2onnx.export_llm(tmp / "ckpt", tmp / "onnx")
    return model, result, tmp / "onnx"


def _features(batch, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, MELS, 3000, generator=g)


def _session(path):
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_folder_holds_genais_whisper_layout(exported):
    _, result, out = exported
    names = sorted(p.name for p in out.iterdir())
    assert {"encoder.onnx", "decoder.onnx", "genai_config.json",
            "audio_processor_config.json"} <= set(names)
    cfg = json.loads((out / "genai_config.json").read_text())
    assert cfg == result.genai_config
    model = cfg["model"]
    assert model["type"] == "whisper" and model["context_length"] == 64
    assert model["encoder"]["filename"] == "encoder.onnx"
    assert model["encoder"]["inputs"] == {"audio_features": "audio_features"}
    assert model["encoder"]["outputs"]["cross_present_key_names"] == "present_key_cross_%d"
    assert model["decoder"]["filename"] == "decoder.onnx"
    assert model["decoder"]["inputs"]["cross_past_value_names"] == "past_value_cross_%d"
    assert model["decoder"]["outputs"]["present_key_names"] == "present_key_self_%d"
    assert model["decoder"]["num_hidden_layers"] == LAYERS
    assert cfg["search"]["past_present_share_buffer"] is False
    enc, dec = _session(result.encoder_path), _session(result.model_path)
    assert [i.name for i in enc.get_inputs()] == ["audio_features"]
    assert [o.name for o in enc.get_outputs()] == ["hidden_states"] + [
        f"present_{kv}_cross_{i}" for i in range(LAYERS) for kv in ("key", "value")]
    self_names = [f"{{}}_{kv}_self_{i}" for i in range(LAYERS) for kv in ("key", "value")]
    assert [i.name for i in dec.get_inputs()] == ["input_ids"] + [
        n.format("past") for n in self_names] + [
        f"past_{kv}_cross_{i}" for i in range(LAYERS) for kv in ("key", "value")]
    assert [o.name for o in dec.get_outputs()] == ["logits"] + [
        n.format("present") for n in self_names]
    assert dec.get_outputs()[1].shape[2] == "total_sequence_length"


@pytest.mark.parametrize("batch", [1, 2])
def test_encoder_outputs_equal_eager(exported, batch):
    model, result, _ = exported
    feats = _features(batch, seed=batch)
    got = _session(result.encoder_path).run(None, {"audio_features": feats.numpy()})
    with torch.no_grad():
        hidden = model.model.encoder(feats).last_hidden_state
        # The decoder's own cross-attention keys/values, as its cache holds them.
        cache = transformers.EncoderDecoderCache(transformers.DynamicCache(),
                                                 transformers.DynamicCache())
        model.model.decoder(input_ids=torch.tensor([PROMPT] * batch),
                            encoder_hidden_states=hidden, past_key_values=cache,
                            use_cache=True)
    want = [hidden] + [t for layer in cache.cross_attention_cache.layers
                       for t in (layer.keys, layer.values)]
    assert len(got) == len(want) == 1 + 2 * LAYERS
    assert got[0].shape == (batch, 1500, D)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), atol=1e-4, rtol=1e-4)


def test_decoder_step_equals_eager(exported):
    model, result, _ = exported
    from pt2onnx.llm import _whisper

    session = _session(result.model_path)
    names = [i.name for i in session.get_inputs()]
    wrapper = _whisper.WhisperDecoderForGenai(model)
    rng = np.random.default_rng(0)
    for batch, past, seq in ((1, 0, 3), (1, 5, 1), (2, 4, 2), (2, 0, 1)):
        feeds = {"input_ids": rng.integers(3, 96, (batch, seq))}
        for name in names[1:]:
            length = 1500 if "cross" in name else past
            feeds[name] = rng.standard_normal((batch, HEADS, length, D // HEADS),
                                              dtype=np.float32)
        got = session.run(None, feeds)
        tensors = {k: torch.from_numpy(v) for k, v in feeds.items()}
        own = [tensors[n] for n in names[1:1 + 2 * LAYERS]]
        cross = [tensors[n] for n in names[1 + 2 * LAYERS:]]
        with torch.no_grad():
            want = wrapper(tensors["input_ids"], own, cross)
        assert len(got) == len(want) == 1 + 2 * LAYERS
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), atol=1e-4, rtol=1e-4)


def _genai_tokens(out_dir, feats, prompts, **search):
    og = pytest.importorskip(
        "onnxruntime_genai",
        reason="onnxruntime-genai is not installed (the llm extra; make test-llm runs these)")
    model = og.Model(str(out_dir))
    params = og.GeneratorParams(model)
    total = len(prompts[0]) + NEW_TOKENS
    params.set_search_options(max_length=total, min_length=total, batch_size=len(prompts),
                              **search)
    gen = og.Generator(model, params)
    inputs = og.NamedTensors()
    inputs["audio_features"] = feats.numpy()  # float16 for an fp16 folder
    inputs["input_ids"] = np.array(prompts, dtype=np.int32)
    gen.set_inputs(inputs)
    while not gen.is_done():
        gen.generate_next_token()
    return [[int(t) for t in gen.get_sequence(i)] for i in range(len(prompts))]


def _reference(model, feats, prompts, **search):
    ids = torch.tensor(prompts)
    with torch.no_grad():
        out = model.generate(feats, decoder_input_ids=ids, do_sample=False,
                             max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, **search)
    # Whisper's generate returns the new tokens only.
    return [list(p) + row for p, row in zip(prompts, out.tolist())]


@pytest.mark.models
@pytest.mark.parametrize("batch", [1, 2])
def test_genai_whisper_loop_generates_transformers_greedy_tokens(exported, batch):
    model, _, out = exported
    feats = _features(batch, seed=10 + batch)
    prompts = [PROMPT, [3, 7, 8]][:batch]
    got = _genai_tokens(out, feats, prompts)
    want = _reference(model, feats, prompts)
    assert len(set(got[0][len(PROMPT):])) > 2, got  # the tokens vary
    assert got == want


@pytest.mark.models
def test_genai_beam_search_equals_transformers(exported):
    """Two beams: genai reorders the self-attention caches by beam and expands the
    cross caches; the best beam equals transformers' beam search."""
    model, _, out = exported
    feats = _features(1, seed=11)
    got = _genai_tokens(out, feats, [PROMPT], num_beams=2, num_return_sequences=1)
    assert got == _reference(model, feats, [PROMPT], num_beams=2)
    assert got != _reference(model, feats, [PROMPT])  # not the greedy tokens


def test_encoder_of_other_length_is_refused_naming_genais_frames(tmp_path):
    torch.manual_seed(0)
    model = transformers.WhisperForConditionalGeneration(
        _config(max_source_positions=64)).eval()
    with pytest.raises(InvalidInputError, match="3000"):
        pt2onnx.export_llm(model, tmp_path / "out")


def test_other_whisper_heads_are_refused_naming_the_class(tmp_path):
    """A checkpoint of WhisperForAudioClassification: loaded as the generation class, its
    decoder and proj_out would be random."""
    _config(architectures=["WhisperForAudioClassification"]).save_pretrained(tmp_path)
    with pytest.raises(InvalidInputError, match="WhisperForAudioClassification"):
        pt2onnx.export_llm(tmp_path, tmp_path / "out")


def test_whisper_in_bf16_is_refused(tmp_path):
    torch.manual_seed(0)
    model = transformers.WhisperForConditionalGeneration(_config()).eval()
    with pytest.raises(InvalidInputError, match="fp32, fp16 or int4 only"):
        pt2onnx.export_llm(model, tmp_path / "out", precision="bf16")


@pytest.mark.models
def test_int4_decodes_as_eager_with_the_dequantized_weights(tmp_path):
    """int4: every Linear weight of both files (d_model 64: wide enough for 32-weight
    blocks) as MatMulNBits, except proj_out, which shares its weight with the token
    embedding; genai's tokens equal transformers' with those weights dequantized."""
    import onnx

    torch.manual_seed(0)
    model = _vary(transformers.WhisperForConditionalGeneration(
        _config(d_model=64, encoder_ffn_dim=64, decoder_ffn_dim=64)).eval())
    result = pt2onnx.export_llm(model, tmp_path / "onnx", precision="int4")
    linears = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    # The wrappers hold the model as .model; the graph reads each weight transposed.
    names = {q.removeprefix("model.").removesuffix(".weight.T") for q in result.quantized}
    assert names == linears - {"proj_out"}
    # Encoder: q/k/v/out and fc1/fc2 per layer, plus each decoder layer's cross k/v.
    # Decoder: self q/k/v/out, cross q/out and fc1/fc2 per layer.
    for path, count in ((result.encoder_path, 8 * LAYERS), (result.model_path, 8 * LAYERS)):
        proto = onnx.load(str(path), load_external_data=False)
        assert sum(n.op_type == "MatMulNBits" for n in proto.graph.node) == count
    with torch.no_grad():
        for name in names:
            weight = model.get_submodule(name).weight
            weight.copy_(pt2onnx.llm.quantize_rtn(weight)[2])
    feats = _features(1, seed=11)
    got = _genai_tokens(tmp_path / "onnx", feats, [PROMPT])
    assert len(set(got[0][len(PROMPT):])) > 2, got
    assert got == _reference(model, feats, [PROMPT])


def test_cli_names_both_files(exported, tmp_path, monkeypatch, capsys):
    """The CLI prints the encoder's file beside the decoder's (the export itself is the
    fixture's: export_llm is swapped for one returning its result)."""
    import pt2onnx.llm
    from pt2onnx.cli import main

    _, result, _ = exported
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(pt2onnx.llm, "export_llm", lambda *a, **k: result)
    assert main(["export-llm", str(tmp_path), "-o", str(tmp_path / "out"), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "encoder.onnx, decoder.onnx (whisper, 2 layers, fp32)" in printed
    assert "type 'whisper'" in printed


def _tiny_tokenizer(folder):
    """A tokenizer whose special tokens are the test prompt's ids (genai's processor
    tokenizes the decoder prompt; nothing is downloaded)."""
    tokenizers = pytest.importorskip("tokenizers")
    specials = {"<|endoftext|>": 2, "<|startoftranscript|>": 3, "<|en|>": 5,
                "<|transcribe|>": 6}
    vocab = {"<pad>": 0, "<s>": 1, **specials, "a": 4}
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[]))
    tok.add_special_tokens(list(specials))
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "WhisperTokenizer", "bos_token": "<|endoftext|>",
         "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}))


def _wav(path, seconds=2, rate=16000):
    import wave

    t = np.arange(seconds * rate) / rate
    rng = np.random.default_rng(0)
    x = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(t.size)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((x * 32767).astype(np.int16).tobytes())
    return x.astype(np.float32)


@pytest.mark.models
def test_genai_audio_processor_reads_the_written_config(exported, tmp_path):
    """audio_processor_config.json: genai's processor turns a WAV file into the
    encoder's features, transformers' WhisperFeatureExtractor's except at the audio's two
    edges (genai's STFT frames them otherwise: 2 frames at each), and the loop fed the
    processor's output generates transformers' greedy tokens on those features."""
    og = pytest.importorskip("onnxruntime_genai")
    import shutil

    model, _, out = exported
    folder = tmp_path / "onnx"
    shutil.copytree(out, folder)
    _tiny_tokenizer(folder)
    audio = _wav(tmp_path / "a.wav")
    genai_model = og.Model(str(folder))
    processor = genai_model.create_multimodal_processor()
    inputs = processor("<|startoftranscript|><|en|><|transcribe|>",
                       audios=og.Audios.open(str(tmp_path / "a.wav")))
    feats = inputs["audio_features"].as_numpy()
    assert inputs["input_ids"].as_numpy().tolist() == [PROMPT]
    want = transformers.WhisperFeatureExtractor(feature_size=MELS)(
        audio, sampling_rate=16000, return_tensors="np").input_features
    assert feats.shape == want.shape == (1, MELS, 3000)
    off = np.where(np.abs(feats - want)[0].max(axis=0) > 1e-3)[0].tolist()
    assert off == [0, 1, 200, 201], off  # the 2 s audio ends at frame 200
    params = og.GeneratorParams(genai_model)
    total = len(PROMPT) + NEW_TOKENS
    params.set_search_options(max_length=total, min_length=total)
    gen = og.Generator(genai_model, params)
    gen.set_inputs(inputs)
    while not gen.is_done():
        gen.generate_next_token()
    got = [[int(t) for t in gen.get_sequence(0)]]
    assert got == _reference(model, torch.from_numpy(feats), [PROMPT])


@pytest.mark.models
def test_fp16_folder_runs_in_genai_and_decodes_as_eager_half(exported, tmp_path):
    """fp16: weights and compute in float16 (softmax and norms in float32), the
    features fed in float16; genai's greedy tokens equal transformers' on the model in
    float16, and the encoder's output is eager's (float16) within its rounding."""
    _, _, out = exported
    result = pt2onnx.export_llm(out.parent / "ckpt", tmp_path / "onnx", precision="fp16")
    feats = _features(1, seed=11).half()
    half = transformers.WhisperForConditionalGeneration.from_pretrained(
        out.parent / "ckpt", dtype=torch.float16).eval()
    got = _session(result.encoder_path).run(None, {"audio_features": feats.numpy()})
    assert got[0].dtype == np.float16
    with torch.no_grad():
        want = half.model.encoder(feats).last_hidden_state.float().numpy()
    np.testing.assert_allclose(got[0].astype(np.float32), want, atol=3e-2, rtol=3e-2)
    tokens = _genai_tokens(tmp_path / "onnx", feats, [PROMPT])
    assert len(set(tokens[0][len(PROMPT):])) > 2, tokens
    assert tokens == _reference(half, feats, [PROMPT])
