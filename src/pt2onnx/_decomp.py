"""The decomposition table: core ATen, minus the ops we translate directly.

Ops listed in ``KEEP`` map to a richer ONNX op (LayerNormalization, Gelu,
MatMul with broadcasting, Attention, Resize, ...) so decomposing them would
only make the graph bigger and slower.
"""

from __future__ import annotations

from typing import Any

import torch

from pt2onnx import _compat

aten = torch.ops.aten

KEEP: tuple[Any, ...] = (
    aten.scaled_dot_product_attention.default,
    aten.layer_norm.default,
    aten.group_norm.default,
    aten.instance_norm.default,
    aten.gelu.default,
    aten.silu.default,
    aten.hardswish.default,
    aten.hardsigmoid.default,
    aten.mish.default,
    aten.linear.default,
    aten.matmul.default,
    aten.rms_norm.default,
    aten.pixel_shuffle.default,
    aten.pixel_unshuffle.default,
    aten.upsample_nearest2d.vec,
    aten.upsample_bilinear2d.vec,
    aten.upsample_bicubic2d.vec,
    aten.upsample_linear1d.vec,
    aten.upsample_nearest1d.vec,
    aten.upsample_nearest3d.vec,
    aten.upsample_trilinear3d.vec,
    aten.softplus.default,
    aten.prelu.default,
    aten.celu.default,
    aten.selu.default,
    aten.elu.default,
)


def decomposition_table(keep: tuple[Any, ...] = KEEP) -> dict[Any, Any]:
    """The table passed to ``ExportedProgram.run_decompositions``."""
    table = _compat.default_decompositions()
    for op in keep:
        table.pop(op, None)
    return table


def reason_to_decompose(program: torch.export.ExportedProgram, has_rule: Any) -> str | None:
    """Why ``program`` must go through ``run_decompositions``; None when it need not.

    Decomposition retraces the whole program, which costs about as much as
    capturing it. It is needed only for ops without a rule and for in-place
    ops (which decomposition functionalizes).
    """
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op != "call_function":
                continue
            target = node.target
            if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
                functional = functional_variant(node)
                if functional is None:
                    return f"in-place op {target} needs functionalization"
                target = functional
            if not has_rule(target):
                return f"{target} has no rule"
    return None


def functional_variant(node: torch.fx.Node) -> Any:
    """``aten.add.Tensor`` for an ``aten.add_.Tensor`` node that is safe to rebind.

    Safe means the mutated tensor is a fresh result of a non-view op and no
    view of it exists, so replacing it by the functional result everywhere
    after this node is exactly what the mutation does. Anything else returns
    None, and the program is functionalized by run_decompositions instead.
    """
    op = node.target
    assert isinstance(op, torch._ops.OpOverload)
    schema = op._schema
    name = schema.name.split("::")[-1]
    if not name.endswith("_") or name.endswith("__") or not schema.arguments:
        return None
    first = schema.arguments[0].alias_info
    if first is None or not first.is_write:
        return None
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments[1:]):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    functional = getattr(packet, op._overloadname, None) if packet is not None else None
    mutated = node.args[0] if node.args else None
    if functional is None or not isinstance(mutated, torch.fx.Node):
        return None
    producer = mutated.target
    if mutated.op != "call_function" or not isinstance(producer, torch._ops.OpOverload):
        return None
    if producer.is_view or any(
        isinstance(u.target, torch._ops.OpOverload) and u.target.is_view for u in mutated.users
    ):
        return None
    return functional
