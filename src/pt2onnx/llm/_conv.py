"""LFM2's short convolution as onnxruntime's ``CausalConvWithState`` (com.microsoft).

In export-llm's hybrid wrappers each convolution layer's cache records its past
(``_hybrid.new_cache``): the layer convolves the state (its last ``K - 1`` inputs)
joined with the new inputs, and the wrapper returns the last ``K - 1`` columns of that
join as the present state. transformers' ``causal_conv1d_fn`` pads the join by ``K - 1``
on both sides, convolves, keeps the first ``len`` outputs, and the layer then keeps the
last ``S`` (the new inputs' count). Those ``S`` are exactly the unpadded ("valid")
convolution of the join, which is ``S`` long when the state is ``K - 1`` long.

``valid_convolution`` swaps the function for the unpadded convolution while a wrapper
runs (the layer's slice of the last ``S`` then keeps all of it), and
``fuse_causal_convs`` rewrites the graph's ``Conv(Concat(past, x))`` with no padding and
one group per channel, together with the present state sliced from the same join, into
one ``CausalConvWithState(x, weight, bias, past)``, whose outputs are that convolution
and that state: the same values, one kernel instead of about nine ops per layer.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import onnx_ir as ir
import torch

MS_DOMAIN = "com.microsoft"
_FUNCTION = "causal_conv1d_fn"
_BIG = 2 ** 62


def _valid(original: Any) -> Any:
    def causal_conv1d_fn(hidden_states: torch.Tensor, weight: torch.Tensor,
                         bias: torch.Tensor | None = None, activation: str | None = None,
                         **kwargs: Any) -> torch.Tensor:
        if activation is not None or weight.dim() != 2:
            return original(hidden_states, weight, bias, activation=activation, **kwargs)
        out = torch.nn.functional.conv1d(hidden_states.to(weight.dtype), weight.unsqueeze(1),
                                         bias, groups=hidden_states.shape[1])
        return out.to(hidden_states.dtype)

    return causal_conv1d_fn


@contextlib.contextmanager
def valid_convolution(model: torch.nn.Module) -> Iterator[None]:
    """The modeling modules' ``causal_conv1d_fn`` (LFM2's) as the unpadded convolution,
    for the forward of a wrapper whose cache records the convolution layers' past."""
    modules = {sys.modules.get(type(m).__module__) for m in model.modules()
               if type(m).__name__.endswith("ShortConv")}
    patched = [(m, getattr(m, _FUNCTION)) for m in modules
               if m is not None and callable(getattr(m, _FUNCTION, None))]
    for module, original in patched:
        setattr(module, _FUNCTION, _valid(original))
    try:
        yield
    finally:
        for module, original in patched:
            setattr(module, _FUNCTION, original)


def _ints(value: ir.Value | None) -> list[int] | None:
    if value is None or value.const_value is None:
        return None
    return [int(v) for v in value.const_value.numpy().reshape(-1)]


def _last_axis(axis: int, rank: int) -> bool:
    return axis in (-1, rank - 1)


def _plain_depthwise(node: ir.Node, channels: int) -> bool:
    attrs = {k: v.value for k, v in node.attributes.items()}
    return (attrs.get("group") == channels
            and all(p == 0 for p in attrs.get("pads", [0]))
            and all(s == 1 for s in attrs.get("strides", [1]))
            and all(d == 1 for d in attrs.get("dilations", [1]))
            and attrs.get("auto_pad", "NOTSET") in ("NOTSET", b"NOTSET"))


def _state_slice(node: ir.Node, join: ir.Value, width: int) -> bool:
    """Whether ``node`` is ``join[..., -width:]``."""
    if node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or node.inputs[0] is not join:
        return False
    starts, ends = _ints(node.inputs[1]), _ints(node.inputs[2])
    axes = _ints(node.inputs[3]) if len(node.inputs) > 3 else [0]
    steps = _ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else [1]
    return (starts == [-width] and ends is not None and len(ends) == 1 and ends[0] >= _BIG // 2
            and axes is not None and len(axes) == 1 and _last_axis(axes[0], 3) and steps == [1])


def fuse_causal_convs(model: ir.Model) -> int:
    """Rewrites each ``Conv(Concat(past.{i}.conv, x))`` (one group per channel, no
    padding, the past ``K - 1`` long) whose join's last ``K - 1`` columns are the graph's
    present state into one com.microsoft ``CausalConvWithState``; the count rewritten."""
    graph = model.graph
    pasts = {v for v in graph.inputs if v.name and v.name.endswith(".conv")}
    done = 0
    for node in list(graph):
        if node.op_type != "Conv" or node.domain not in ("", "ai.onnx"):
            continue
        join = node.inputs[0]
        concat = join.producer() if join is not None else None
        if join is None or concat is None or concat.op_type != "Concat" \
                or len(concat.inputs) != 2:
            continue
        past, new = concat.inputs
        axis = concat.attributes.get("axis")
        if past not in pasts or new is None or axis is None or not _last_axis(axis.value, 3):
            continue
        weight = node.inputs[1]
        shape = weight.shape if weight is not None else None
        state = past.shape
        if shape is None or len(shape) != 3 or state is None or len(state) != 3:
            continue
        channels, one, width = shape
        if not (isinstance(channels, int) and one == 1 and isinstance(width, int)
                and state[1] == channels and state[2] == width - 1
                and _plain_depthwise(node, channels)):
            continue
        presents = [use.node for use in join.uses()
                    if use.node is not node and _state_slice(use.node, join, width - 1)]
        present = next((p.outputs[0] for p in presents if p.outputs[0].is_graph_output()), None)
        if present is None or len(join.uses()) != 1 + len(presents):
            continue
        bias = node.inputs[2] if len(node.inputs) > 2 else None
        fused = ir.node("CausalConvWithState", [new, weight, bias, past], domain=MS_DOMAIN,
                        attributes={"ndim": 1, "activation": "none"}, num_outputs=2,
                        name=(node.name or "conv") + "_with_state")
        graph.insert_before(node, fused)
        out, state_out = fused.outputs
        out.shape, out.type = node.outputs[0].shape, node.outputs[0].type
        ir.convenience.replace_all_uses_with(node.outputs[0], out)
        # The present output takes the op's state; the graph keeps its name.
        index = list(graph.outputs).index(present)
        state_out.shape, state_out.type = present.shape, present.type
        name = present.name
        present.name = f"{name}_unfused"
        state_out.name = name
        graph.outputs[index] = state_out
        done += 1
    if done:
        model.opset_imports.setdefault(MS_DOMAIN, 1)
        ir.passes.common.RemoveUnusedNodesPass()(model)
    return done
