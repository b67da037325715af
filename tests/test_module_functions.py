"""export_modules_as_functions (issue 41): each call of a chosen module type becomes a call
of an ONNX local function; the file computes what eager computes (onnxruntime, a dynamic
batch at 1 and at 3), passes onnx's full check, and is smaller than the flat export."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch

import pt2onnx
from pt2onnx.passes import module_functions

ort = pytest.importorskip("onnxruntime")


def _encoder() -> torch.nn.Module:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False).eval()


class Block(torch.nn.Module):
    def __init__(self, d_in: int, d_out: int, scale: float) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(d_in, d_out)
        self.norm = torch.nn.LayerNorm(d_out)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.lin(x))) * self.scale


class Sizes(torch.nn.Module):
    """Three Blocks: two of one body at other sizes, one whose constant differs."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = Block(8, 16, 2.0), Block(16, 12, 2.0), Block(12, 8, 3.0)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.b(self.a(x))
        return self.c(h), h


def _export(model: torch.nn.Module, x: torch.Tensor, **kw: object) -> onnx.ModelProto:
    buf = io.BytesIO()
    pt2onnx.export(model, (x,), buf, input_names=["x"], dynamic_axes={"x": {0: "batch"}},
                   **kw)  # type: ignore[arg-type]
    return onnx.load_from_string(buf.getvalue())


def _matches(proto: onnx.ModelProto, model: torch.nn.Module, shape: tuple[int, ...]) -> None:
    session = ort.InferenceSession(proto.SerializeToString())
    for batch in (1, 3):
        x = torch.randn(batch, *shape)
        got = session.run(None, {"x": x.numpy()})
        with torch.no_grad():
            want = model(x)
        want = want if isinstance(want, tuple) else (want,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


def _calls(proto: onnx.ModelProto) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in proto.graph.node:
        if node.domain.startswith(("torch.", Block.__module__)):
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def test_repeated_layers_share_one_function() -> None:
    model, x = _encoder(), torch.randn(2, 5, 16)
    flat = _export(model, x)
    proto = _export(model, x, export_modules_as_functions={torch.nn.TransformerEncoderLayer})
    onnx.checker.check_model(proto, full_check=True)
    assert [(f.domain, f.name) for f in proto.functions] == [
        ("torch.nn.modules.transformer", "TransformerEncoderLayer")]
    assert _calls(proto) == {"TransformerEncoderLayer": 3}
    assert not proto.functions[0].value_info  # one body for every size
    _matches(proto, model, (5, 16))
    assert len(proto.SerializeToString()) < 0.8 * len(flat.SerializeToString())


def test_true_means_every_module_type_nested() -> None:
    model, x = _encoder(), torch.randn(2, 5, 16)
    proto = _export(model, x, export_modules_as_functions=True)
    onnx.checker.check_model(proto, full_check=True)
    names = {f.name for f in proto.functions}
    assert {"TransformerEncoderLayer", "MultiheadAttention", "LayerNorm", "Linear"} <= names
    assert _calls(proto) == {"TransformerEncoderLayer": 3}  # the others are inside it
    layer = next(f for f in proto.functions if f.name == "TransformerEncoderLayer")
    assert {n.op_type for n in layer.node} >= {"MultiheadAttention", "LayerNorm", "Linear"}
    _matches(proto, model, (5, 16))


def test_half_precision_layers_keep_one_body() -> None:
    """The casts float32_ops writes beside softmax and the norms (nodes a pass wrote)
    join their layer's call; precision_io's casts at the boundary stay outside."""
    model, x = _encoder(), torch.randn(2, 5, 16)
    prog = pt2onnx.export(model, (x,), input_names=["x"], dynamic_axes={"x": {0: "batch"}},
                          export_modules_as_functions={torch.nn.TransformerEncoderLayer},
                          precision="float16", verify=True)
    proto = prog.model_proto
    onnx.checker.check_model(proto, full_check=True)
    assert _calls(proto) == {"TransformerEncoderLayer": 3}
    assert [n.op_type for n in proto.graph.node][-1] == "Cast"


def test_instances_of_other_sizes_and_bodies() -> None:
    model = Sizes().eval()
    # torch.onnx's spelling of the call: opset 17 (IR version 8) has local functions too.
    proto = _export(model, torch.randn(2, 8), export_modules_as_functions={Block},
                    opset_version=17)
    assert {o.domain: o.version for o in proto.opset_import}[""] == 17
    onnx.checker.check_model(proto, full_check=True)
    # a and b differ only in their weights' sizes: one body; c's scale is another constant.
    assert sorted(f.name for f in proto.functions) == ["Block", "Block_1"]
    calls = [n.op_type for n in proto.graph.node if n.op_type.startswith("Block")]
    assert calls == ["Block", "Block", "Block_1"]
    _matches(proto, model, (8,))


def test_names_verify_size_one_and_precision() -> None:
    """A class name picks the type; verify (the example, size 1 and another size) runs on
    the file with functions; a float16 export (its float32 casts) still matches."""
    model = Sizes().eval()
    prog = pt2onnx.export(model, (torch.randn(1, 8),), dynamic_axes={"x": {0: "batch"}},
                          input_names=["x"], export_modules_as_functions={"Block"},
                          verify=True)
    domain = Block.__module__
    assert prog.report.functions == [f"{domain}::Block: 2 call(s)",
                                     f"{domain}::Block_1: 1 call(s)"]
    assert "Functions (module calls)" in prog.report.to_markdown()
    half = pt2onnx.export(model, (torch.randn(2, 8),), dynamic_axes={"x": {0: "batch"}},
                          input_names=["x"], export_modules_as_functions={Block},
                          precision="float16", verify=True)
    assert half.model.functions
    onnx.checker.check_model(half.model_proto, full_check=True)


def test_off_and_bad_values() -> None:
    model, x = Sizes().eval(), torch.randn(2, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # False is the default and says nothing
        assert not _export(model, x, export_modules_as_functions=False).functions
    with pytest.raises(pt2onnx.InvalidInputError, match="export_modules_as_functions"):
        pt2onnx.export(model, (x,), export_modules_as_functions={3})
    with pytest.warns(UserWarning, match="no module call became a function"):
        pt2onnx.export(model, (x,), export_modules_as_functions={torch.nn.Conv2d})


def test_a_call_that_a_node_outside_feeds_stays_inline() -> None:
    """Nodes a and c of one call, b outside between them (a -> b -> c): no single node
    can hold the call, so it stays inline and the result says so."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))
    a = ir.Node("", "Relu", [x], name="a")
    b = ir.Node("", "Neg", [a.outputs[0]], name="b")
    c = ir.Node("", "Add", [a.outputs[0], b.outputs[0]], name="c")
    call = (("m", "m", "pkg.M"),)
    a.meta["pt2onnx.modules"] = c.meta["pt2onnx.modules"] = call
    b.meta["pt2onnx.modules"] = ()
    graph = ir.Graph([x], [c.outputs[0]], nodes=[a, b, c], opset_imports={"": 21})
    model = ir.Model(graph, ir_version=10)
    result = module_functions.apply(model, lambda _name: True)
    assert not result.calls and not model.functions
    assert result.inlined and "m (pkg.M)" in result.inlined[0]
    assert [n.name for n in model.graph] == ["a", "b", "c"]


class Squeezed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = Block(4, 4, 2.0), Block(4, 4, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x)).squeeze(0).sum(-1)


def test_calls_inside_the_size_one_branches() -> None:
    """squeeze(0) of the dynamic dim: the file holds a graph for each side of 1 under an
    If; the calls in both branches become functions, and both sides match eager."""
    model = Squeezed().eval()
    prog = pt2onnx.export(model, (torch.randn(1, 3, 4),), input_names=["x"],
                          dynamic_axes={"x": {0: "b"}}, export_modules_as_functions={Block})
    proto = prog.model_proto
    onnx.checker.check_model(proto, full_check=True)
    assert [n.op_type for n in proto.graph.node][-1] == "If"
    branches = [a.g for a in proto.graph.node[-1].attribute]
    assert all(sum(n.op_type.startswith("Block") for n in g.node) == 2 for g in branches)
    session = ort.InferenceSession(proto.SerializeToString())
    for batch in (1, 2):
        x = torch.randn(batch, 3, 4)
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0].reshape(want.shape),
                                   want, rtol=1e-4, atol=1e-5)


class Tied(torch.nn.Module):
    """One layer called three times (weights tied): three calls, keyed path, path@1, ..."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = _encoder().layers[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = self.layer(x)
        return x


@pytest.mark.parametrize(("dynamic", "precision"), [
    (False, "keep"), (True, "keep"), (True, "float16")],
    ids=["recorded", "torch.export", "torch.export-float16"])
def test_a_module_called_three_times(dynamic: bool, precision: str) -> None:
    """Each call is its own call node; the weights' transposes (and float16's casts) CSE
    left in the first call are computed before the calls, and the nodes passes wrote
    join the call they belong to, so the three share one body."""
    model, x = Tied().eval(), torch.randn(2, 5, 16)
    axes = {"x": {0: "batch"}} if dynamic else None
    prog = pt2onnx.export(model, (x,), input_names=["x"], dynamic_axes=axes,
                          export_modules_as_functions={torch.nn.TransformerEncoderLayer},
                          precision=precision, verify=True)
    assert prog.report.capture_strategy.startswith("recorded") != dynamic
    assert not [w for w in prog.report.warnings if "inline" in w]
    proto = prog.model_proto
    onnx.checker.check_model(proto, full_check=True)
    assert _calls(proto) == {"TransformerEncoderLayer": 3}
    assert [n.name for n in proto.graph.node if n.op_type == "TransformerEncoderLayer"] == [
        "layer", "layer@1", "layer@2"]


def test_weights_as_graph_inputs() -> None:
    """torch.onnx's export_params=False: the weights are graph inputs the caller feeds,
    and the calls take them as they take initializers."""
    model, x = Sizes().eval(), torch.randn(2, 8)
    proto = _export(model, x, export_modules_as_functions={Block}, export_params=False)
    onnx.checker.check_model(proto, full_check=True)
    assert not proto.graph.initializer or all(
        i.name not in dict(model.named_parameters()) for i in proto.graph.initializer)
    assert _calls(proto) == {"Block": 2, "Block_1": 1}
    session = ort.InferenceSession(proto.SerializeToString())
    params = {k: v.detach().numpy() for k, v in model.named_parameters()}
    feeds = {i.name: params[i.name] for i in session.get_inputs() if i.name in params}
    got = session.run(None, {"x": x.numpy(), **feeds})
    with torch.no_grad():
        want = model(x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


class MaskedLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        return x + torch.nn.functional.scaled_dot_product_attention(h, h, h, attn_mask=keep)


class MaskedStack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList(MaskedLayer() for _ in range(3))

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, keep)
        return x


@pytest.mark.parametrize("additive", [False, True], ids=["bool", "float"])
def test_layers_sharing_an_attention_mask_keep_one_body(additive: bool) -> None:
    """sdpa's fully-masked-row check reads the mask alone, so CSE computes it in the first
    layer for all three: it moves out of the call, as shared shape arithmetic does."""
    model = MaskedStack()
    keep = torch.rand(2, 1, 5, 5) > 0.3
    keep[:, :, 0] = False  # a query that sees no key
    mask = torch.zeros(keep.shape).masked_fill(~keep, float("-inf")) if additive else keep
    x = torch.randn(2, 2, 5, 16)  # [batch, heads, sequence, head size]
    buf = io.BytesIO()
    pt2onnx.export(model, (x, mask), buf, export_modules_as_functions={MaskedLayer})
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    assert _calls(proto) == {"MaskedLayer": 3}
    assert [f.name for f in proto.functions] == ["MaskedLayer"]
    assert sum(n.op_type == "ArgMax" for n in proto.graph.node) == 1
    got = ort.InferenceSession(proto.SerializeToString()).run(
        None, {i.name: t.numpy() for i, t in zip(proto.graph.input, (x, mask))})[0]
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x, mask).numpy(), rtol=1e-4, atol=1e-5)
