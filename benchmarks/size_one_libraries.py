"""Real libraries' models exported from a size-1 example with dynamic axes, run in
onnxruntime at the example and at a second size against eager (issue 26).

Twelve cases from libraries no test here depends on: whisper (decoder with dynamic
tokens, encoder with a dynamic batch), PyG (GATConv and GCNConv with dynamic nodes and
edges), segmentation-models-pytorch (Segformer, Unet), kornia (a colour round trip, a
blur and Sobel), segment-anything (a small image encoder; the prompt encoder and mask
decoder with dynamic points) and open_clip (small image and text towers). Every model
is built from a config with random weights; nothing is downloaded.

    pip install openai-whisper torch_geometric segmentation-models-pytorch kornia \
        segment-anything open_clip_torch        # beside torch and torchvision
    python benchmarks/size_one_libraries.py pt2onnx      # or dynamo, torchscript
    python benchmarks/size_one_libraries.py pt2onnx whisper   # the cases naming whisper

One line per case: ok, refused (the error's first line), a run-time failure, or WRONG
(shape or values). Not a test: the libraries are not dependencies of pt2onnx.
"""

import os
import sys
import tempfile
import traceback
import types
import warnings

import numpy as np
import onnxruntime as ort
import torch

# whisper imports numba for word timestamps only; a stand-in avoids installing it
sys.modules.setdefault("numba", types.SimpleNamespace(jit=lambda *a, **k: lambda f: f))
TMP = tempfile.mkdtemp()
warnings.filterwarnings("ignore")
torch.manual_seed(0)
EXPORTER = sys.argv[1] if len(sys.argv) > 1 else "pt2onnx"
ONLY = sys.argv[2:]


def W(fn):
    import inspect

    n = len(inspect.signature(fn).parameters) - 1

    class M1(torch.nn.Module):
        def __init__(s, mod=None):
            super().__init__()
            s.mod = mod

        def forward(s, x):
            return fn(s.mod, x)

    class M2(M1):
        def forward(s, x, y):
            return fn(s.mod, x, y)

    return M1 if n == 1 else M2


CASES = {}


def case(name):
    def deco(f):
        CASES[name] = f
        return f

    return deco


def whisper_model():
    import whisper

    m = whisper.model.Whisper(whisper_dims()).eval()
    with (
        torch.no_grad()
    ):  # whisper leaves positional_embedding as torch.empty (a checkpoint fills it)
        m.decoder.positional_embedding.normal_()
    return m


def whisper_dims():
    import whisper

    return whisper.model.ModelDimensions(
        n_mels=80,
        n_audio_ctx=16,
        n_audio_state=32,
        n_audio_head=2,
        n_audio_layer=1,
        n_vocab=100,
        n_text_ctx=16,
        n_text_state=32,
        n_text_head=2,
        n_text_layer=2,
    )


@case("whisper decoder, dynamic tokens")
def _():
    m = whisper_model()

    def mk(t):
        return (torch.randint(0, 100, (1, t)), torch.randn(1, 16, 32))

    return (
        W(lambda mod, tok, a: mod.decoder(tok, a))(m),
        mk,
        {"tokens": {1: "t"}},
        ["tokens", "audio"],
        1,
        5,
    )


@case("whisper encoder, dynamic batch")
def _():
    m = whisper_model()

    def mk(b):
        return (torch.randn(b, 80, 32),)

    return W(lambda mod, mel: mod.encoder(mel))(m), mk, {"mel": {0: "b"}}, ["mel"], 1, 3


@case("PyG GATConv, dynamic nodes and edges")
def _():
    from torch_geometric.nn import GATConv

    m = GATConv(8, 4, heads=2).eval()

    def mk(n):
        return (torch.randn(n, 8), torch.randint(0, n, (2, 2 * n)))

    return (
        W(lambda mod, x, e: mod(x, e))(m),
        mk,
        {"x": {0: "n"}, "edge_index": {1: "e"}},
        ["x", "edge_index"],
        1,
        5,
    )


@case("PyG GCNConv, dynamic nodes and edges")
def _():
    from torch_geometric.nn import GCNConv

    m = GCNConv(8, 4).eval()

    def mk(n):
        return (torch.randn(n, 8), torch.randint(0, n, (2, 2 * n)))

    return (
        W(lambda mod, x, e: mod(x, e))(m),
        mk,
        {"x": {0: "n"}, "edge_index": {1: "e"}},
        ["x", "edge_index"],
        1,
        5,
    )


@case("smp Segformer mit_b0, dynamic batch")
def _():
    import segmentation_models_pytorch as smp

    m = smp.Segformer("mit_b0", encoder_weights=None, classes=2).eval()
    return m, (lambda b: (torch.randn(b, 3, 64, 64),)), {"x": {0: "b"}}, ["x"], 1, 3


@case("smp Unet resnet18, dynamic batch")
def _():
    import segmentation_models_pytorch as smp

    m = smp.Unet("resnet18", encoder_weights=None, classes=2).eval()
    return m, (lambda b: (torch.randn(b, 3, 64, 64),)), {"x": {0: "b"}}, ["x"], 1, 3


@case("kornia rgb->hsv->rgb, dynamic batch")
def _():
    import kornia

    f = W(
        lambda mod, x: kornia.color.hsv_to_rgb(
            kornia.color.rgb_to_hsv(x) * torch.tensor([1.0, 0.5, 1.0]).view(1, 3, 1, 1)
        )
    )()
    return f, (lambda b: (torch.rand(b, 3, 16, 16),)), {"x": {0: "b"}}, ["x"], 1, 3


@case("kornia gaussian blur + sobel, dynamic batch")
def _():
    import kornia

    f = W(
        lambda mod, x: kornia.filters.sobel(kornia.filters.gaussian_blur2d(x, (5, 5), (1.5, 1.5)))
    )()
    return f, (lambda b: (torch.rand(b, 3, 16, 16),)), {"x": {0: "b"}}, ["x"], 1, 3


@case("SAM image encoder (small), dynamic batch")
def _():
    from segment_anything.modeling import ImageEncoderViT

    m = ImageEncoderViT(
        img_size=64,
        patch_size=16,
        embed_dim=32,
        depth=2,
        num_heads=2,
        out_chans=16,
        window_size=2,
        global_attn_indexes=(1,),
    ).eval()
    return m, (lambda b: (torch.randn(b, 3, 64, 64),)), {"x": {0: "b"}}, ["x"], 1, 3


@case("SAM prompt encoder + mask decoder, dynamic points")
def _():
    from segment_anything.modeling import MaskDecoder, PromptEncoder, TwoWayTransformer

    pe = PromptEncoder(
        embed_dim=32, image_embedding_size=(4, 4), input_image_size=(64, 64), mask_in_chans=4
    ).eval()
    md = MaskDecoder(
        transformer_dim=32,
        transformer=TwoWayTransformer(depth=1, embedding_dim=32, mlp_dim=64, num_heads=2),
        num_multimask_outputs=3,
        iou_head_hidden_dim=32,
    ).eval()

    class SAM(torch.nn.Module):
        def __init__(s):
            super().__init__()
            s.pe, s.md = pe, md

        def forward(s, emb, coords, labels):
            sp, de = s.pe(points=(coords, labels), boxes=None, masks=None)
            return s.md(emb, s.pe.get_dense_pe(), sp, de, multimask_output=True)

    def mk(n):
        return (torch.randn(1, 32, 4, 4), torch.rand(1, n, 2) * 64, torch.randint(0, 2, (1, n)))

    return SAM(), mk, {"coords": {1: "n"}, "labels": {1: "n"}}, ["emb", "coords", "labels"], 1, 4


@case("open_clip image tower (small), dynamic batch")
def _():
    import open_clip

    m = open_clip.CLIP(
        embed_dim=16,
        vision_cfg=dict(layers=1, width=32, patch_size=16, image_size=32, head_width=16),
        text_cfg=dict(context_length=8, vocab_size=100, width=32, heads=2, layers=1),
    ).eval()
    return (
        W(lambda mod, x: mod.encode_image(x))(m),
        (lambda b: (torch.randn(b, 3, 32, 32),)),
        {"x": {0: "b"}},
        ["x"],
        1,
        3,
    )


@case("open_clip text tower (small), dynamic batch")
def _():
    import open_clip

    m = open_clip.CLIP(
        embed_dim=16,
        vision_cfg=dict(layers=1, width=32, patch_size=16, image_size=32, head_width=16),
        text_cfg=dict(context_length=8, vocab_size=100, width=32, heads=2, layers=1),
    ).eval()
    return (
        W(lambda mod, t: mod.encode_text(t))(m),
        (lambda b: (torch.randint(0, 100, (b, 8)),)),
        {"t": {0: "b"}},
        ["t"],
        1,
        3,
    )


def flat(o):
    if isinstance(o, torch.Tensor):
        return [o]
    if isinstance(o, (list, tuple)):
        return [t for x in o for t in flat(x)]
    return []


def run(name):
    model, mk, axes, names, ex, second = CASES[name]()
    path = os.path.join(TMP, f"{EXPORTER}_{len(name)}_{abs(hash(name))}.onnx")
    args = mk(ex)
    try:
        if EXPORTER == "pt2onnx":
            import pt2onnx

            pt2onnx.export(model, args, path, input_names=names, dynamic_axes=axes)
        else:
            torch.onnx.export(
                model,
                args,
                path,
                input_names=names,
                dynamic_axes=axes,
                dynamo=(EXPORTER == "dynamo"),
            )
    except Exception as e:
        return f"refused {type(e).__name__}: " + str(e).splitlines()[0][:200]
    sess = ort.InferenceSession(path)
    for n in (ex, second):
        a = mk(n)
        with torch.no_grad():
            exp = flat(model(*a))
        feeds = {i.name: t.numpy() for i, t in zip(sess.get_inputs(), a)}
        try:
            got = sess.run(None, feeds)
        except Exception as e:
            return f"runtime at {n}: {str(e).splitlines()[0][:150]}"
        for e_, g_ in zip(exp, got):
            if tuple(e_.shape) != tuple(g_.shape):
                return f"WRONG shape at {n}: {tuple(g_.shape)} vs {tuple(e_.shape)}"
            err = (
                float(np.abs(e_.float().numpy() - g_.astype(np.float32)).max()) if e_.numel() else 0
            )
            if not err <= 1e-3 + 1e-3 * float(e_.float().abs().max() if e_.numel() else 0):
                return f"WRONG at {n}: max err {err:.3g}"
    return "ok"


for name in CASES:
    if ONLY and not any(o in name for o in ONLY):
        continue
    try:
        r = run(name)
    except Exception as e:
        r = "harness error: " + "".join(traceback.format_exception_only(e)).strip()[:200]
    print(f"{EXPORTER:8} | {name:48} | {r}", flush=True)
