"""Computes the precision-sensitive ops of a float16 / bfloat16 graph in float32.

``export(..., precision="float16" | "bfloat16")`` converts the model's weights and
compute; as the usual half-precision converters do, the ops whose result loses most
from a narrow type compute in float32 between ``Cast`` nodes, and round once:

- every ONNX node written for one of :data:`ATEN_OPS` (softmax and log-softmax, the
  normalizations, the reductions and the losses), all the nodes of it together, so a
  normalization written as several ONNX ops (``rms_norm`` below opset 23: square,
  mean, root, divide) keeps its intermediates in float32 too;
- every node of one of :data:`ONNX_OPS` written for another op (the ``Softmax`` inside
  attention, a ``ReduceSum`` of a decomposition).

Torch's own CPU and CUDA kernels for these ops accumulate half types in float32 and
round the result, so the file computes them as eager does, or closer. Elementwise ops
(``Exp``, ``Pow``, ``Log``) outside them stay in the narrow type: one elementwise op in
float32 rounded back gives the narrow kernel's value. Values that leave such a group
are cast back to their narrow type, so the graph around it is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx_ir as ir

from pt2onnx.passes import type_check
from pt2onnx.passes.ort_cpu_types import place_of

D = ir.DataType
NARROW = frozenset({D.FLOAT16, D.BFLOAT16})

# The ATen ops (``pt2onnx.aten`` / ``pt2onnx.decomposed`` metadata, before the overload)
# whose nodes compute in float32 together.
ATEN_OPS = frozenset({
    # softmax
    "aten::_softmax", "aten::softmax", "aten::_log_softmax", "aten::log_softmax",
    "aten::_safe_softmax",
    # normalizations
    "aten::native_layer_norm", "aten::layer_norm", "aten::native_group_norm",
    "aten::group_norm", "aten::instance_norm", "aten::batch_norm", "aten::native_batch_norm",
    "aten::_native_batch_norm_legit_no_training", "aten::_native_batch_norm_legit",
    "aten::_native_batch_norm_legit_functional", "aten::rms_norm", "aten::_fused_rms_norm",
    "aten::cosine_similarity",
    # reductions
    "aten::sum", "aten::mean", "aten::nansum", "aten::nanmean", "aten::var",
    "aten::var_mean", "aten::std", "aten::std_mean", "aten::norm",
    "aten::linalg_vector_norm", "aten::logsumexp", "aten::cumsum", "aten::cumprod",
    "aten::prod", "aten::logcumsumexp",
    # losses
    "aten::cross_entropy_loss", "aten::nll_loss", "aten::nll_loss_forward",
    "aten::nll_loss2d_forward", "aten::mse_loss", "aten::l1_loss", "aten::smooth_l1_loss",
    "aten::huber_loss", "aten::binary_cross_entropy",
    "aten::binary_cross_entropy_with_logits", "aten::kl_div", "aten::soft_margin_loss",
})
# ONNX ops computed in float32 wherever they stand.
ONNX_OPS = frozenset({
    "Softmax", "LogSoftmax", "LayerNormalization", "GroupNormalization",
    "InstanceNormalization", "BatchNormalization", "RMSNormalization", "ReduceSum",
    "ReduceMean", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceProd", "CumSum", "LpNormalization",
    "MeanVarianceNormalization", "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss",
})
_TYPE_NAMES = {f"tensor({n})": d for n, d in (("float16", D.FLOAT16), ("bfloat16", D.BFLOAT16))}


def _aten_op(node: ir.Node) -> str:
    """The ATen op a node was written for (the decomposed op, inside a decomposition)."""
    props = node.metadata_props
    outer = props.get("pt2onnx.decomposed")
    op = outer.split(" ", 1)[0] if outer else props.get("pt2onnx.aten", "")
    return op.split(".", 1)[0]


def _has_subgraph(node: ir.Node) -> bool:
    return any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
               for a in node.attributes.values())


def _groups(graph: ir.Graph) -> Iterator[list[ir.Node]]:
    """The nodes to compute in float32, one list per group, in graph order."""
    groups: dict[object, list[ir.Node]] = {}
    for node in graph:
        if node.domain not in ("", "ai.onnx") or _has_subgraph(node):
            continue
        fx = node.metadata_props.get("pt2onnx.fx_node")
        key: object
        if fx and _aten_op(node) in ATEN_OPS:
            key = fx
        elif node.op_type in ONNX_OPS:
            key = id(node)
        else:
            continue
        groups.setdefault(key, []).append(node)
    yield from groups.values()


class _Types:
    """The dtypes of values, the untyped ones from their producers' schemas."""

    def __init__(self, model: ir.Model) -> None:
        self.checker = type_check._Checker(model)
        self.checker.walk(model.graph, None)

    def narrow(self, value: ir.Value) -> ir.DataType | None:
        if value.dtype is not None:
            return value.dtype if value.dtype in NARROW else None
        name = self.checker.type_of(value)
        return _TYPE_NAMES.get(name) if name else None


class _Names:
    """Value names not yet in the graph."""

    def __init__(self, graph: ir.Graph) -> None:
        self.taken = {v.name for n in graph for v in n.outputs if v.name}
        self.taken.update(v.name for v in graph.inputs if v.name)
        self.taken.update(graph.initializers)

    def __call__(self, base: str) -> str:
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name


def _cast(value: ir.Value, to: ir.DataType, beside: ir.Node, names: _Names) -> ir.Node:
    node = ir.Node("", "Cast", [value], attributes=[ir.AttrInt64("to", int(to))])
    # Where in the model (module, source line), not which FX node: a cast joins no group.
    node.metadata_props.update(place_of(beside))
    node.outputs[0].type = ir.TensorType(to)
    node.outputs[0].shape = value.shape
    node.outputs[0].name = names(f"{value.name or 'value'}_as_{to.name.lower()}")
    return node


def _retype_attributes(node: ir.Node) -> None:
    """Attributes that name a narrow dtype (``Cast``'s ``to``), or hold a narrow constant
    (``ConstantOfShape``'s ``value``), now in float32."""
    for name in ("to", "dtype"):
        attr = node.attributes.get(name)
        if attr is not None and attr.type == ir.AttributeType.INT and D(attr.value) in NARROW:
            node.attributes[name] = ir.AttrInt64(name, int(D.FLOAT))
    value = node.attributes.get("value")
    if value is not None and value.type == ir.AttributeType.TENSOR and (
            value.value.dtype in NARROW):
        wide = value.value.numpy().astype("float32")
        node.attributes["value"] = ir.AttrTensor("value", ir.tensor(wide))


def _convert(graph: ir.Graph, nodes: list[ir.Node], types: _Types, names: _Names) -> bool:
    members = set(nodes)
    narrow_in = [(n, i, v, t) for n in nodes for i, v in enumerate(n.inputs)
                 if v is not None and v.producer() not in members
                 and (t := types.narrow(v)) is not None]
    narrow_out = [(n, o, t) for n in nodes for o in n.outputs
                  if (t := types.narrow(o)) is not None]
    if not narrow_in and not narrow_out:
        return False
    widened: dict[int, ir.Value] = {}
    for node, i, value, _ in narrow_in:
        wide = widened.get(id(value))
        if wide is None:
            cast = _cast(value, D.FLOAT, node, names)
            graph.insert_before(node, cast)
            wide = widened[id(value)] = cast.outputs[0]
        node.replace_input_with(i, wide)
    for node in nodes:
        _retype_attributes(node)
    outputs = list(graph.outputs)
    for node, value, dtype in narrow_out:
        outside = [(user, i) for user, i in value.uses() if user not in members]
        value.type = ir.TensorType(D.FLOAT)
        if not outside and value not in outputs:
            continue
        back = _cast(value, dtype, node, names)
        graph.insert_after(node, back)
        for user, i in outside:
            user.replace_input_with(i, back.outputs[0])
        for j, out in enumerate(outputs):
            if out is value:
                name = value.name
                value.name, back.outputs[0].name = names(f"{name}_float"), name
                graph.outputs[j] = back.outputs[0]
    return True


def apply(model: ir.Model) -> int:
    """Computes the sensitive ops of ``model``'s main graph in float32; returns the number
    of groups converted."""
    types = _Types(model)
    graph = model.graph
    names = _Names(graph)
    return sum(_convert(graph, nodes, types, names) for nodes in list(_groups(graph)))
