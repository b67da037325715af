"""The type check at export (issue 39): a node that breaks its ONNX schema's type
constraints fails the export with a TypeConstraintError naming the node, the rule that
wrote it and the model line, never a file that onnxruntime refuses to load; normal
exports pass it."""

from __future__ import annotations

import onnx_ir as ir
import pytest
import torch

import pt2onnx
from pt2onnx.passes import type_check
from pt2onnx.rule_api import RuleContext, translation


@torch.library.custom_op("pt2onnx_typecheck::shift", mutates_args=())
def shift(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@shift.register_fake
def _(x):
    return torch.empty_like(x)


@translation(torch.ops.pt2onnx_typecheck.shift.default)
def planted_shift(g: RuleContext, x: ir.Value) -> ir.Value:
    """A user's rule with a planted type error: a float32 constant beside x, whatever
    x's dtype."""
    return g.op.Add(x, g.const(1.0, ir.DataType.FLOAT))


class Shifts(torch.nn.Module):
    def forward(self, x):
        return torch.ops.pt2onnx_typecheck.shift(x) * 2


def test_a_planted_type_error_fails_the_export_naming_the_rule_and_the_line():
    x = torch.randn(2, 3, dtype=torch.float16)
    with pytest.raises(pt2onnx.TypeConstraintError) as info:
        pt2onnx.export(Shifts(), (x,))
    message = str(info.value)
    assert "test_type_check.planted_shift" in message  # the rule, by module and name
    assert "pt2onnx_typecheck::shift" in message  # the op it translated
    assert "return torch.ops.pt2onnx_typecheck.shift(x) * 2" in message  # the model line
    assert "tensor(float16)" in message and "tensor(float)" in message
    (found,) = info.value.violations
    assert found.op_type == "Add" and found.param == "T"
    assert isinstance(info.value, pt2onnx.TranslationError)


def test_the_planted_rule_is_right_where_the_types_agree():
    """The same rule on float32 writes a valid file, which matches eager."""
    x = torch.randn(2, 3)
    prog = pt2onnx.export(Shifts(), (x,), dynamic_shapes=({0: torch.export.Dim("b")},))
    for batch in (2, 1, 5):
        xb = torch.randn(batch, 3)
        torch.testing.assert_close(torch.from_numpy(prog.run(xb)[0]), Shifts()(xb))


def test_a_user_rule_per_call_with_a_disallowed_type_fails_the_export():
    """A type the op does not take at all (Sqrt of int64), from custom_translations."""

    def sqrt_of_ints(g: RuleContext, x: ir.Value) -> ir.Value:
        return g.op.Sqrt(g.cast(x, ir.DataType.INT64))

    class Root(torch.nn.Module):
        def forward(self, x):
            return torch.sqrt(x)

    with pytest.raises(pt2onnx.TypeConstraintError, match="sqrt_of_ints") as info:
        pt2onnx.export(Root(), (torch.rand(3),),
                       custom_translations={torch.ops.aten.sqrt.default: sqrt_of_ints})
    assert "tensor(int64), which the schema does not allow" in str(info.value)


def _model(nodes: list[ir.Node], inputs: list[ir.Value], outputs: list[ir.Value],
           opsets: dict[str, int]) -> ir.Model:
    graph = ir.Graph(inputs, outputs, nodes=nodes, opset_imports=opsets)
    return ir.Model(graph, ir_version=10)


def test_custom_domains_without_a_schema_are_skipped():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))
    y = ir.Value(name="y", type=ir.TensorType(ir.DataType.BFLOAT16), shape=ir.Shape([2]))
    custom = ir.Node("com.microsoft", "FusedMatMul", [x, y])
    mine = ir.Node("com.example", "Anything", [x, y])
    model = _model([custom, mine], [x, y], [custom.outputs[0], mine.outputs[0]],
                   {"": 21, "com.microsoft": 1, "com.example": 1})
    assert type_check.violations(model) == []


def test_untyped_intermediates_get_their_types_from_the_schema():
    """Relu's untyped output carries x's float16 into the Add beside a float32 value."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT16), shape=ir.Shape([2]))
    w = ir.Value(name="w", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))
    relu = ir.Node("", "Relu", [x])
    add = ir.Node("", "Add", [relu.outputs[0], w], name="the_add")
    model = _model([relu, add], [x, w], [add.outputs[0]], {"": 21})
    (found,) = type_check.violations(model)
    assert found.node == "the_add" and found.types == ("tensor(float16)", "tensor(float)")


def test_a_subgraph_is_checked_too():
    cond = ir.Value(name="c", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([]))
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT16), shape=ir.Shape([2]))
    w = ir.Value(name="w", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))
    inner = ir.Node("", "Mul", [x, w], name="inner_mul")
    then = ir.Graph([], [inner.outputs[0]], nodes=[inner], name="then")
    other = ir.Node("", "Identity", [x])
    else_ = ir.Graph([], [other.outputs[0]], nodes=[other], name="else")
    branch = ir.Node("", "If", [cond], [ir.AttrGraph("then_branch", then),
                                        ir.AttrGraph("else_branch", else_)])
    model = _model([branch], [cond, x, w], [branch.outputs[0]], {"": 21})
    assert [v.node for v in type_check.violations(model)] == ["inner_mul"]


class Block(torch.nn.Module):
    """Attention with a padding mask, layer norm, softmax and a masked fill: the rules
    that make constants and masks, in the model's own dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 48)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x, mask):
        q, k, v = self.proj(self.norm(x)).view(x.shape[0], -1, 2, 24).transpose(1, 2).split(8, -1)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        out = out.transpose(1, 2).reshape(x.shape[0], -1, 16)
        return out.masked_fill(~mask[:, 0, 0, :, None], -1.0).softmax(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_normal_exports_pass_the_check_and_match_eager(dtype):
    model = Block().to(dtype).eval()
    x = torch.randn(2, 5, 16, dtype=dtype)
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    mask[1, ..., 3:] = False
    prog = pt2onnx.export(model, (x, mask))
    assert type_check.violations(prog.model) == []
    assert prog.verify(x, mask).ok
