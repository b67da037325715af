"""A Linear's bias add and the Gelu after it as onnxruntime's com.microsoft ``BiasGelu``
(``Gelu``, exact) or ``FastGelu`` (``approximate="tanh"``) (optimize="onnxruntime").

``Gelu(Add(y, bias))``, bias a ``[D]`` constant over ``y``'s last axis
(a constant, shared or not), the sum read by the Gelu alone: the op takes ``y`` and the bias. A Gelu with no
such add is left as the standard op (opset 20 and later; earlier opsets write the
formula, which this pass does not read).
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.passes._graphs import last_dim, rewrite_all

MS_DOMAIN = "com.microsoft"
_TYPES = (ir.DataType.FLOAT, ir.DataType.FLOAT16)


def _rewrite(graph: ir.Graph) -> int:
    count = 0
    for gelu in list(graph):
        if (gelu.domain, gelu.op_type) != ("", "Gelu"):
            continue
        style = gelu.attributes.get_string("approximate", "none")
        x = gelu.inputs[0]
        add = x.producer() if x is not None else None
        if x is None or add is None or (add.domain, add.op_type) != ("", "Add") \
                or len(x.uses()) != 1 or x.is_graph_output() or x.dtype not in _TYPES \
                or x.shape is None or not len(x.shape) or not isinstance(x.shape[-1], int):
            continue
        found = None
        for i in (1, 0):
            y, bias = add.inputs[1 - i], add.inputs[i]
            # y's last dim must be the bias's (not 1, broadcast up to it).
            if bias is not None and y is not None and bias.const_value is not None \
                    and bias.shape is not None and list(bias.shape) == [x.shape[-1]] \
                    and last_dim(y) == x.shape[-1]:
                found = (y, bias)
                break
        if found is None or style not in ("none", "tanh"):
            continue
        op = "BiasGelu" if style == "none" else "FastGelu"
        fused = ir.node(op, list(found), domain=MS_DOMAIN, name=f"{gelu.name or 'gelu'}_bias")
        graph.insert_before(gelu, fused)
        out = fused.outputs[0]
        out.dtype, out.shape = x.dtype, x.shape
        name = gelu.outputs[0].name if gelu.outputs[0].is_graph_output() else None
        ir.convenience.replace_all_uses_with(gelu.outputs[0], out, replace_graph_outputs=True)
        if name is not None:
            gelu.outputs[0].name, out.name = None, name
        graph.remove(gelu, safe=True)
        graph.remove(add, safe=True)
        count += 1
    return count


def apply(model: ir.Model) -> int:
    """Rewrites in place (subgraphs included); returns how many Gelus it fused."""
    return rewrite_all(model, _rewrite, MS_DOMAIN)
