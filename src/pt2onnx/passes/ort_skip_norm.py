"""A residual add and the LayerNormalization after it as onnxruntime's
com.microsoft ``SkipLayerNormalization`` (optimize="onnxruntime").

``LayerNormalization(Add(x, skip), gamma, beta)`` over the last axis of a ``[B, S, D]``
value, gamma and beta ``[D]`` constants, is ``SkipLayerNormalization(x, skip, gamma,
beta)``; where ``x`` is itself ``Add(y, bias)`` with a ``[D]`` constant bias (a Linear's),
the op takes ``y`` and the bias too. Left as it is: a sum that something else reads (a
pre-norm block's residual stream: ViT, Whisper's encoder), since onnxruntime's CPU
kernel with the sum as its fourth output ran slower than Add + LayerNormalization
(ViT-B/16: 17 ms against 3 ms for its 24 norms, one thread); an add that broadcasts; a
norm whose mean or inverse deviation is read; any other axis or dtype than float32 /
float16.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.passes._graphs import last_dim, rewrite_all

MS_DOMAIN = "com.microsoft"
_TYPES = (ir.DataType.FLOAT, ir.DataType.FLOAT16)


def _vector(v: ir.Value | None, size: int) -> bool:
    return v is not None and v.const_value is not None and v.shape is not None \
        and list(v.shape) == [size]


def _linear_bias(x: ir.Value, size: int) -> tuple[ir.Value, ir.Value, ir.Node] | None:
    """(y, bias, the Add) for ``x = Add(y, bias)``, bias a ``[size]`` constant, where
    only the norm's add reads x and only this Add reads the bias."""
    add = x.producer()
    if add is None or (add.domain, add.op_type) != ("", "Add") or len(x.uses()) != 1 \
            or x.is_graph_output():
        return None
    for i in (1, 0):
        y, bias = add.inputs[1 - i], add.inputs[i]
        if _vector(bias, size) and y is not None and last_dim(y) == size \
                and bias is not None:
            return y, bias, add
    return None


def _rewrite(graph: ir.Graph) -> int:
    count = 0
    for norm in list(graph):
        if (norm.domain, norm.op_type) != ("", "LayerNormalization") or len(norm.inputs) < 3:
            continue
        if norm.attributes.get_int("axis", -1) not in (-1, 2) \
                or norm.attributes.get_int("stash_type", 1) != 1:
            continue
        if any(o.uses() or o.is_graph_output() for o in norm.outputs[1:]):
            continue
        total, gamma, beta = norm.inputs[0], norm.inputs[1], norm.inputs[2]
        add = total.producer() if total is not None else None
        if total is None or add is None or (add.domain, add.op_type) != ("", "Add"):
            continue
        x, skip = add.inputs[0], add.inputs[1]
        shape = total.shape
        if x is None or skip is None or shape is None or len(shape) != 3 \
                or not isinstance(shape[2], int) or x.shape != shape or skip.shape != shape \
                or total.dtype not in _TYPES or x.dtype != total.dtype \
                or skip.dtype != total.dtype:
            continue
        size = shape[2]
        if not (_vector(gamma, size) and _vector(beta, size)):
            continue
        inputs: list[ir.Value | None] = [x, skip, gamma, beta]
        biased = _linear_bias(x, size)
        if biased is not None:
            inputs = [biased[0], skip, gamma, beta, biased[1]]
        if [u for u in total.uses() if u.node is not norm] or total.is_graph_output():
            continue  # the sum read again (pre-norm): see the module's docstring
        fused = ir.node("SkipLayerNormalization", inputs,
                        {"epsilon": norm.attributes.get_float("epsilon", 1e-5)},
                        domain=MS_DOMAIN, num_outputs=1, name=f"{norm.name or 'norm'}_skip")
        graph.insert_before(norm, fused)
        out = fused.outputs[0]
        out.dtype, out.shape = total.dtype, shape
        name = norm.outputs[0].name if norm.outputs[0].is_graph_output() else None
        ir.convenience.replace_all_uses_with(norm.outputs[0], out, replace_graph_outputs=True)
        if name is not None:
            norm.outputs[0].name, out.name = None, name
        graph.remove(norm, safe=True)
        graph.remove(add, safe=True)
        if biased is not None:
            graph.remove(biased[2], safe=True)
        count += 1
    return count


def apply(model: ir.Model) -> int:
    """Rewrites in place (subgraphs included); returns how many norms it fused."""
    return rewrite_all(model, _rewrite, MS_DOMAIN)
