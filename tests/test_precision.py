"""``export(..., precision=...)`` (issue 39): the weights and compute converted on a copy
of the model, the sensitive ops in float32, the I/O kept or converted; each file loads
in onnxruntime's CPU provider and matches the model run in eager in that precision."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx_ir as ir
import pytest
import torch
from torch.export import Dim

import pt2onnx
from pt2onnx.errors import InvalidInputError
from pt2onnx.verify import TOLERANCES

HALF = ["float16", "bfloat16"]
DTYPE = {"float16": torch.float16, "bfloat16": torch.bfloat16}


class Block(torch.nn.Module):
    """A tiny ResNet basic block with a classifier: Conv, BatchNorm, a residual, a mean
    and a softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.skip = torch.nn.Conv2d(3, 8, 1)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)) + self.skip(x))
        return torch.log_softmax(self.fc(y.mean((2, 3))), dim=-1)


def _block() -> Block:
    torch.manual_seed(0)
    model = Block().eval()
    for bn in (model.bn1, model.bn2):  # statistics that are not the identity
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    return model


def _eager(model: torch.nn.Module, dtype: torch.dtype, *args: torch.Tensor) -> torch.Tensor:
    """The model run in ``dtype`` (on a copy), float32 at its boundary."""
    import copy

    with torch.no_grad():
        out = copy.deepcopy(model).to(dtype)(*(a.to(dtype) for a in args))
    return out.float()


@pytest.mark.parametrize("precision", HALF)
def test_conv_block(precision):
    model = _block()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(2, 3, 16, 16)
    prog = pt2onnx.export(model, (x,), precision=precision,
                          dynamic_shapes=({0: Dim("batch"), 2: Dim("h", min=4),
                                           3: Dim("w", min=4)},))
    # The caller's model is as it was: its dtype and its values.
    assert all(v.dtype == before[k].dtype and torch.equal(v, before[k])
               for k, v in model.state_dict().items())
    graph = prog.model.graph
    assert graph.inputs[0].dtype == ir.DataType.FLOAT  # precision_io="keep"
    assert graph.outputs[0].dtype == ir.DataType.FLOAT
    result = prog.verify()  # the example, batch 1 and a second size
    assert result.ok, str(result)
    assert len(result.runs) == 3
    atol, rtol = TOLERANCES[precision]
    for shape in ((1, 3, 16, 16), (3, 3, 9, 12)):
        x = torch.randn(shape)
        got = torch.from_numpy(prog.run(x)[0])
        torch.testing.assert_close(got, _eager(model, DTYPE[precision], x), atol=atol,
                                   rtol=rtol)


@pytest.mark.parametrize("precision", HALF)
def test_io_convert(precision):
    model = _block()
    x = torch.randn(2, 3, 8, 8)
    prog = pt2onnx.export(model, (x,), precision=precision, precision_io="convert",
                          dynamic_shapes=({0: Dim("batch")},))
    dtype = ir.DataType.FLOAT16 if precision == "float16" else ir.DataType.BFLOAT16
    graph = prog.model.graph
    assert graph.inputs[0].dtype == dtype == graph.outputs[0].dtype
    for batch in (2, 1, 3):
        x = torch.randn(batch, 3, 8, 8)
        # The file takes the precision's dtype; run() casts float32 inputs to it.
        for given in (x, x.to(DTYPE[precision])):
            assert prog.verify(given).ok


def _ops_in_float32(model: ir.Model, op_types: set[str]) -> dict[str, bool]:
    """For each node of ``op_types``: whether all its floating inputs are float32 (types
    from ONNX's inference, for the intermediates the rules leave untyped)."""
    import onnx

    proto = onnx.shape_inference.infer_shapes(ir.to_proto(model))
    types = {v.name: v.type.tensor_type.elem_type for v in (
        *proto.graph.input, *proto.graph.value_info, *proto.graph.output)}
    types.update({t.name: t.data_type for t in proto.graph.initializer})
    floating = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                onnx.TensorProto.DOUBLE}
    found = {}
    for node in proto.graph.node:
        if node.op_type in op_types:
            seen = [types.get(i) for i in node.input if i]
            assert all(t is not None for t in seen), (node.name, node.input)
            wide = [t for t in seen if t in floating]
            found[node.name or node.op_type] = bool(wide) and all(
                t == onnx.TensorProto.FLOAT for t in wide)
    return found


class Sensitive(torch.nn.Module):
    """softmax, layer_norm, group_norm, rms_norm (written as several ONNX ops below
    opset 23), a sum and a variance, between half-precision matmuls."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)
        self.ln = torch.nn.LayerNorm(16)
        self.gn = torch.nn.GroupNorm(4, 16)
        self.rms = torch.nn.RMSNorm(16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.fc(x)
        a = torch.softmax(y, -1)
        b = self.rms(self.ln(y))
        c = self.gn(y.transpose(1, 2)).sum(-1)
        return a, self.fc(b), c, y.var(-1)


@pytest.mark.parametrize("precision", HALF)
def test_sensitive_ops_run_in_float32(precision):
    torch.manual_seed(0)
    model = Sensitive().eval()
    x = torch.randn(2, 5, 16) * 4
    prog = pt2onnx.export(model, (x,), precision=precision,
                          dynamic_shapes=({0: Dim("b"), 1: Dim("s")},))
    sensitive = {"Softmax", "LayerNormalization", "GroupNormalization",
                 "InstanceNormalization", "ReduceSum", "ReduceMean", "Sqrt", "Reciprocal"}
    found = _ops_in_float32(prog.model, sensitive)
    assert found and all(found.values()), found
    # The matmuls stay in the target precision (bfloat16 computes in float32 only through
    # the legalization for onnxruntime's CPU kernels, which casts on both sides).
    if precision == "float16":
        matmuls = _ops_in_float32(prog.model, {"MatMul", "Gemm"})
        assert matmuls and not any(matmuls.values()), matmuls
    result = prog.verify()
    assert result.ok, str(result)


def test_bfloat16_nodes_keep_their_metadata():
    """The nodes widened for onnxruntime's CPU kernels, and the casts beside them and
    around the float32 ops, keep their place in the model (module, source line)."""
    prog = pt2onnx.export(_block(), (torch.randn(1, 3, 8, 8),), precision="bfloat16")
    nodes = list(prog.model.graph)
    convs = [n for n in nodes if n.op_type == "Conv"]
    assert convs and all(n.metadata_props.get("pt2onnx.fx_node") for n in convs)
    for conv in convs:  # (a cast two convs share, merged by CSE, is the first conv's)
        beside = [v.producer() for v in conv.inputs if v is not None and v.producer()]
        beside += [use.node for use in conv.outputs[0].uses()]
        assert beside and all(n.metadata_props.get("pt2onnx.module")
                              for n in beside if n.op_type == "Cast")


def test_keep_adds_nothing():
    model = _block()
    x = torch.randn(1, 3, 8, 8)
    plain = pt2onnx.export(model, (x,))
    kept = pt2onnx.export(model, (x,), precision="keep")
    assert [n.op_type for n in plain.model.graph] == [n.op_type for n in kept.model.graph]
    assert "Cast" not in plain.report.op_histogram


@pytest.mark.parametrize("spelling", ["bf16", torch.bfloat16, "bfloat16"])
def test_spellings(spelling):
    prog = pt2onnx.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),), precision=spelling)
    assert any(v.dtype == ir.DataType.BFLOAT16 for v in prog.model.graph.initializers.values())


def test_float32_from_a_half_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).half()
    x = torch.randn(3, 8, dtype=torch.float16)
    prog = pt2onnx.export(model, (x,), precision="float32")
    inits = {v.dtype for v in prog.model.graph.initializers.values()}
    assert inits == {ir.DataType.FLOAT}
    # keep: the file takes and returns float16, as the model did.
    assert prog.model.graph.inputs[0].dtype == ir.DataType.FLOAT16
    assert prog.model.graph.outputs[0].dtype == ir.DataType.FLOAT16
    assert next(model.parameters()).dtype == torch.float16
    assert prog.verify().ok


@pytest.mark.parametrize("kwargs, words", [
    ({"precision": "half"}, ["'keep'", "'float32'", "'float16'", "'bfloat16'", "'bf16'"]),
    ({"precision": "int4"}, ["'keep'", "'bfloat16'"]),
    ({"precision": "bf16", "precision_io": "float"}, ["'keep'", "'convert'"]),
])
def test_bad_values(kwargs, words):
    with pytest.raises(InvalidInputError) as info:
        pt2onnx.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),), **kwargs)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_exported_program_is_refused():
    ep = torch.export.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
    with pytest.raises(InvalidInputError, match="ExportedProgram"):
        pt2onnx.export(ep, (torch.randn(1, 2),), precision="float16")


def test_cli(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import torch\n"
                   "def make():\n"
                   "    torch.manual_seed(0)\n"
                   "    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))\n"
                   "    return m.eval(), (torch.randn(2, 8),)\n")
    out = tmp_path / "m.onnx"
    env_path = str(Path(pt2onnx.__file__).parents[1])
    proc = subprocess.run(
        [sys.executable, "-m", "pt2onnx", "export", f"{src}:make", "-o", str(out),
         "--precision", "bf16", "--precision-io", "convert", "--verify", "-q"],
        capture_output=True, text=True, env={"PYTHONPATH": env_path, "OMP_NUM_THREADS": "1",
                                             "PATH": "/usr/bin:/bin"}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import onnx

    graph = onnx.load(str(out)).graph
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16
    bad = subprocess.run(
        [sys.executable, "-m", "pt2onnx", "export", f"{src}:make", "-o", str(out),
         "--precision", "half"], capture_output=True, text=True,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}, timeout=300)
    assert bad.returncode != 0 and "bfloat16" in bad.stderr


def test_default_tolerance_scales():
    """verify's default tolerance follows the narrowest type the file computes in."""
    model = _block()
    x = torch.randn(1, 3, 8, 8)
    for precision, (atol, rtol) in TOLERANCES.items():
        result = pt2onnx.export(model, (x,), precision=precision).verify()
        assert result.ok, str(result)
        ref = float(_eager(model, DTYPE.get(precision, torch.float32), x).abs().max())
        assert result.outputs[0].tolerance == pytest.approx(atol + rtol * ref, rel=0.05)
    assert TOLERANCES["bfloat16"][1] > TOLERANCES["float16"][1] > TOLERANCES["float32"][1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", HALF)
def test_from_a_model_on_cuda(precision):
    """A model and example on CUDA, exported in float16 and bfloat16: the file loads in
    onnxruntime's CPU provider and matches the model run on CUDA in that precision, at
    the example and at batch 1 and 3."""
    model = _block().cuda()
    x = torch.randn(2, 3, 16, 16, device="cuda")
    prog = pt2onnx.export(model, (x,), precision=precision,
                          dynamic_shapes=({0: Dim("batch")},))
    assert next(model.parameters()).dtype == torch.float32
    result = prog.verify()
    assert result.ok, str(result)
    for batch in (1, 3):
        result = prog.verify(torch.randn(batch, 3, 16, 16, device="cuda"))
        assert result.ok, f"batch {batch}:\n{result}"


transformers = pytest.importorskip("transformers", reason="transformers is not installed")
TINY = dict(vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _bert() -> torch.nn.Module:
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=64, **TINY)
    return transformers.BertModel(cfg, add_pooling_layer=False)


def _llama() -> torch.nn.Module:
    cfg = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=64,
                                   max_position_embeddings=64, **TINY)
    return transformers.LlamaForCausalLM(cfg)


def _tokens(batch: int, seq: int) -> dict[str, torch.Tensor]:
    ids = torch.randint(3, 128, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[-1, : seq // 2] = 0  # the last sample left-padded
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("precision", HALF)
@pytest.mark.parametrize("factory", [_bert, _llama], ids=["bert", "llama"])
def test_transformers(factory, precision):
    """A BERT encoder and a Llama decoder with a padding mask, from float32 weights."""
    torch.manual_seed(0)
    model = factory().eval()
    b, s = Dim("batch"), Dim("seq", min=2)
    spec = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}}
    extra = {"use_cache": False} if factory is _llama else {}
    prog = pt2onnx.export(model, (), kwargs={**_tokens(2, 6), **extra}, dynamic_shapes={
        **spec, **{k: None for k in extra}}, precision=precision)
    assert next(model.parameters()).dtype == torch.float32
    assert prog.model.graph.outputs[0].dtype == ir.DataType.FLOAT
    softmax = _ops_in_float32(prog.model, {"Softmax"})
    assert softmax and all(softmax.values()), softmax
    for batch, seq in ((2, 6), (1, 5), (3, 9)):
        result = prog.verify(**_tokens(batch, seq), **extra)
        assert result.ok, f"batch {batch}, seq {seq}:\n{result}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", HALF)
def test_bert_on_cuda(precision):
    """BERT with a padding mask, on CUDA (issue 39 saw the mask fail there too)."""
    torch.manual_seed(0)
    model = _bert().eval().cuda()
    tokens = {k: v.cuda() for k, v in _tokens(2, 6).items()}
    b, s = Dim("batch"), Dim("seq", min=2)
    prog = pt2onnx.export(model, (), kwargs=tokens, precision=precision,
                          dynamic_shapes={"input_ids": {0: b, 1: s},
                                          "attention_mask": {0: b, 1: s}})
    for batch, seq in ((2, 6), (1, 5), (3, 9)):
        result = prog.verify(**{k: v.cuda() for k, v in _tokens(batch, seq).items()})
        assert result.ok, f"batch {batch}, seq {seq}:\n{result}"
