"""Every torch dtype that ONNX can represent maps to it (issue 28): float8 in its five
kinds, float4 (torch packs two per element, ONNX doubles the last dim), and the
sub-byte integers, at the graph's boundary and in weights, with their bytes intact.
onnxruntime's CPU build runs none of these in Identity, so the files are checked with
onnx.checker and read back with onnx's own numpy helpers."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

import pt2onnx
from pt2onnx.errors import TranslationError


class Returns(torch.nn.Module):
    """Returns its buffer and its input unchanged."""

    def __init__(self, w: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("w", w)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.w, x


def _export(model, args, opset):
    proto = pt2onnx.export(model, args, opset=opset, optimize=False).model_proto
    onnx.checker.check_model(proto, full_check=True)
    return proto


def _weight(proto):
    return next(iter(proto.graph.initializer))


FLOAT8 = [("float8_e4m3fn", "FLOAT8E4M3FN", 21), ("float8_e4m3fnuz", "FLOAT8E4M3FNUZ", 21),
          ("float8_e5m2", "FLOAT8E5M2", 21), ("float8_e5m2fnuz", "FLOAT8E5M2FNUZ", 21),
          ("float8_e8m0fnu", "FLOAT8E8M0", 24)]


@pytest.mark.parametrize("name, onnx_name, opset", FLOAT8, ids=[f[0] for f in FLOAT8])
def test_float8_weights_and_inputs_keep_their_values(name, onnx_name, opset):
    dtype = getattr(torch, name)
    w = torch.tensor([[0.5, 2.0, 4.0], [1.0, 8.0, 0.25]]).to(dtype)
    proto = _export(Returns(w), (w.clone(),), opset)
    for value in (proto.graph.input[0], proto.graph.output[0], proto.graph.output[1]):
        assert value.type.tensor_type.elem_type == getattr(onnx.TensorProto, onnx_name)
    got = numpy_helper.to_array(_weight(proto))
    np.testing.assert_array_equal(got.astype(np.float32), w.float().numpy())


def test_float4_x2_doubles_the_last_dim_and_keeps_the_packed_bytes():
    """torch.float4_e2m1fn_x2 (2, 3) holds 12 float4 values: ONNX FLOAT4E2M1 (2, 6),
    each byte's low four bits first, as both pack them."""
    raw = torch.tensor([[0x21, 0x43, 0x65], [0x87, 0xA9, 0xCB]], dtype=torch.uint8)
    w = raw.view(torch.float4_e2m1fn_x2)
    proto = _export(Returns(w), (w.clone(),), 23)
    assert proto.ir_version >= 11  # FLOAT4E2M1 is IR version 11
    for value in (proto.graph.input[0], proto.graph.output[0]):
        assert value.type.tensor_type.elem_type == onnx.TensorProto.FLOAT4E2M1
        assert [d.dim_value for d in value.type.tensor_type.shape.dim] == [2, 6]
    weight = _weight(proto)
    assert list(weight.dims) == [2, 6]
    assert weight.raw_data == raw.numpy().tobytes()
    nibbles = np.stack([raw.numpy() & 0xF, raw.numpy() >> 4], -1).reshape(2, 6)
    expected = nibbles.view(np.uint8).astype(np.uint8)
    got = numpy_helper.to_array(weight).view(np.uint8)
    np.testing.assert_array_equal(got & 0xF, expected)


def test_float4_as_the_torch_onnx_test_builds_it():
    """PyTorch's test_float4_support: an empty float4 tensor of shape (1,) is an output of
    FLOAT4E2M1 and shape (2,); below opset 23, where ONNX has no such type, a typed
    refusal that says which opset to use."""

    class Empty(torch.nn.Module):
        def forward(self):
            return torch.empty([1], dtype=torch.float4_e2m1fn_x2)

    proto = _export(Empty(), (), 23)
    out = proto.graph.output[0].type.tensor_type
    assert out.elem_type == onnx.TensorProto.FLOAT4E2M1
    assert [d.dim_value for d in out.shape.dim] == [2]
    with pytest.raises(TranslationError, match="opset=23"):
        pt2onnx.export(Empty(), (), opset=21)


@pytest.mark.parametrize("name, values, opset", [
    ("int4", [[-8, -1, 0, 7], [3, -5, 1, 2]], 21),
    ("uint4", [[0, 1, 15, 9], [4, 5, 6, 7]], 21),
    ("int2", [[-2, -1, 0, 1], [1, 0, -1, -2]], 25),
    ("uint2", [[0, 1, 2, 3], [3, 2, 1, 0]], 25),
], ids=["int4", "uint4", "int2", "uint2"])
def test_sub_byte_integers_keep_their_values(name, values, opset):
    dtype = getattr(torch, name)
    signed = name.startswith("int")
    w, x = (torch.tensor(values, dtype=torch.int8 if signed else torch.uint8).view(dtype)
            for _ in range(2))  # torch has no copy kernel for these: two tensors
    proto = _export(Returns(w), (x,), opset)
    for value in (proto.graph.input[0], proto.graph.output[0]):
        assert value.type.tensor_type.elem_type == getattr(onnx.TensorProto, name.upper())
    got = numpy_helper.to_array(_weight(proto))
    np.testing.assert_array_equal(got.astype(np.int16), np.array(values, dtype=np.int16))


class _Makes(torch.nn.Module):
    """Makes an empty tensor of ``dtype`` inside forward: only the captured program's
    node metadata holds the type, no input or weight."""

    def __init__(self, *dtypes: torch.dtype) -> None:
        super().__init__()
        self.dtypes = dtypes

    def forward(self):
        return tuple(torch.empty([1], dtype=d) for d in self.dtypes)


@pytest.mark.parametrize("names, opset", [
    (["float4_e2m1fn_x2"], 23), (["float8_e8m0fnu"], 24), (["int2"], 25),
    (["float4_e2m1fn_x2", "uint2"], 25),
], ids=["float4", "float8e8m0", "int2", "float4+uint2"])
def test_no_opset_named_exports_at_the_opset_the_types_need(names, opset):
    """PyTorch's test_float4_support names no opset: the export is at the lowest opset
    that takes every type of the model (never the default's refusal), and says so."""
    model = _Makes(*(getattr(torch, n) for n in names))
    with pytest.warns(UserWarning, match=f"opset {opset} chosen"):
        prog = pt2onnx.export(model, ())
    onnx.checker.check_model(prog.model_proto, full_check=True)
    assert prog.report.opset == opset
    assert {o.domain: o.version for o in prog.model_proto.opset_import}[""] == opset
    chosen = [w for w in prog.report.warnings if w.startswith(f"opset {opset} chosen")]
    assert len(chosen) == 1 and "pass opset=" in chosen[0]
    assert names[-1] in chosen[0]


def test_types_of_inputs_and_weights_choose_the_opset_too():
    w = torch.tensor([[0x21, 0x43]], dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    with pytest.warns(UserWarning, match="opset 23 chosen: float4_e2m1fn_x2 needs it"):
        prog = pt2onnx.export(Returns(w), (w.clone(),), optimize=False)
    assert prog.report.opset == 23


def test_a_named_opset_is_kept_and_refused():
    """opset= or torch.onnx's opset_version=: the caller chose, so the refusal stays."""
    for named in ({"opset": 21}, {"opset_version": 22}):
        with pytest.raises(TranslationError, match="opset=23"):
            pt2onnx.export(_Makes(torch.float4_e2m1fn_x2), (), **named)


def test_ordinary_types_keep_the_default_opset():
    prog = pt2onnx.export(_Makes(torch.float8_e4m3fn, torch.int4), ())
    assert prog.report.opset == 21
    assert not any("chosen" in w for w in prog.report.warnings)
