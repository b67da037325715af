"""RMSNorm as one onnxruntime ``SimplifiedLayerNormalization``.

transformers' RMSNorm (Llama, Mistral, Qwen, Phi3, Gemma, ...) computes, in float32,
``x * rsqrt(mean(x * x, -1) + eps) * w``; pt2onnx's rules write it as
``Mul(x, x) -> ReduceMean -> Add(eps) -> Sqrt -> Reciprocal -> Mul(x, .) -> Mul(w, .)``,
seven nodes onnxruntime does not fuse itself (its fusion looks for ``Pow`` and
``Div``). ``SimplifiedLayerNormalization(x, w, axis=-1, epsilon=eps)`` is the same
computation in one kernel (float32 accumulation), and onnxruntime fuses the residual
Add before it into ``SkipSimplifiedLayerNormalization`` at ORT_ENABLE_ALL.

Only float32 chains are rewritten, and only where every intermediate value has no
other reader.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

MS_DOMAIN = "com.microsoft"


def fuse_rms_norms(model: ir.Model) -> int:
    """Rewrites the RMSNorm chains in place; returns how many."""
    graph = model.graph
    found = []
    for node in graph:
        match = _match(node)
        if match is not None:
            found.append(match)
    for x, scale, eps, chain in found:
        last = chain[-1]
        out = last.outputs[0]
        norm = ir.node("SimplifiedLayerNormalization", [x, scale],
                       {"axis": -1, "epsilon": eps, "stash_type": 1},
                       name=f"{last.name or 'rms'}_norm")
        graph.insert_before(last, norm)
        new = norm.outputs[0]
        new.type, new.shape = out.type, out.shape
        name, out.name = out.name, None
        new.name = name
        ir.convenience.replace_all_uses_with(out, new, replace_graph_outputs=True)
        for n in reversed(chain):
            graph.remove(n, safe=True)
    return len(found)


def _only(value: ir.Value | None) -> ir.Node | None:
    """The one node reading ``value``, if it is read once and is not an output."""
    if value is None or value.is_graph_output():
        return None
    uses = value.uses()
    return next(iter(uses)).node if len(uses) == 1 else None


def _is(node: ir.Node | None, op: str) -> bool:
    return node is not None and node.op_type == op and not node.domain


def _other(node: ir.Node, value: ir.Value) -> ir.Value | None:
    a, b = node.inputs[0], node.inputs[1]
    if a is value:
        return b
    return a if b is value else None


def _scalar(value: ir.Value | None) -> float | None:
    if value is None:
        return None
    tensor = value.const_value
    if tensor is None and value.producer() is not None:
        prod = value.producer()
        if prod is not None and prod.op_type == "Constant" and not prod.domain:
            attr = prod.attributes.get("value")
            tensor = attr.as_tensor() if attr is not None else None
    if tensor is None:
        return None
    array = np.asarray(tensor.numpy())
    return float(array.reshape(-1)[0]) if array.size == 1 else None


def _match(square: ir.Node) -> tuple[ir.Value, ir.Value, float, list[ir.Node]] | None:
    """From the ``Mul(x, x)`` at the chain's start: (x, scale, eps, the chain's nodes)."""
    if not _is(square, "Mul") or square.inputs[0] is not square.inputs[1]:
        return None
    x = square.inputs[0]
    if x is None or x.dtype != ir.DataType.FLOAT or x.shape is None or len(x.shape) < 1:
        return None
    hidden = x.shape[-1]
    if not isinstance(hidden, int):
        return None
    mean = _only(square.outputs[0])
    if not _is(mean, "ReduceMean") or mean is None:
        return None
    if mean.attributes.get_int("keepdims", 1) != 1 or not _last_axis(mean, len(x.shape)):
        return None
    add = _only(mean.outputs[0])
    if not _is(add, "Add") or add is None:
        return None
    eps = _scalar(_other(add, mean.outputs[0]))
    sqrt = _only(add.outputs[0])
    if eps is None or not _is(sqrt, "Sqrt") or sqrt is None:
        return None
    recip = _only(sqrt.outputs[0])
    if not _is(recip, "Reciprocal") or recip is None:
        return None
    normed = _only(recip.outputs[0])
    if not _is(normed, "Mul") or normed is None or _other(normed, recip.outputs[0]) is not x:
        return None
    weigh = _only(normed.outputs[0])
    if not _is(weigh, "Mul") or weigh is None:
        return None
    scale = _other(weigh, normed.outputs[0])
    if scale is None or scale.dtype != ir.DataType.FLOAT or scale.shape is None \
            or list(scale.shape) != [hidden]:
        return None
    return x, scale, eps, [square, mean, add, sqrt, recip, normed, weigh]


def _last_axis(mean: ir.Node, rank: int) -> bool:
    axes: list[int] | None = None
    if len(mean.inputs) > 1 and mean.inputs[1] is not None:
        tensor = mean.inputs[1].const_value
        if tensor is None:
            return False
        axes = [int(a) for a in np.asarray(tensor.numpy()).reshape(-1)]
    else:
        attr = mean.attributes.get("axes")
        axes = list(attr.as_ints()) if attr is not None else None
    return axes is not None and len(axes) == 1 and axes[0] % rank == rank - 1


def fuse_skip_norms(model: ir.Model) -> int:
    """``SimplifiedLayerNormalization(Add(a, b), w)`` -> com.microsoft
    ``SkipSimplifiedLayerNormalization(a, b, w)``, whose fourth output is the sum (the
    residual the next layer adds to). onnxruntime fuses this itself only when it can
    prove the shapes equal; here they are the capture's. Returns how many."""
    graph = model.graph
    found = []
    for node in graph:
        if node.op_type != "SimplifiedLayerNormalization" or node.domain:
            continue
        x = node.inputs[0]
        add = x.producer() if x is not None else None
        if x is None or add is None or not _is(add, "Add") or x.is_graph_output():
            continue
        a, b = add.inputs[0], add.inputs[1]
        if a is None or b is None or a.shape is None or b.shape is None or x.shape is None:
            continue
        if len(x.shape) != 3 or a.shape != x.shape or b.shape != x.shape \
                or any(d is None for d in x.shape) or x.dtype != ir.DataType.FLOAT:
            continue
        if node.attributes.get_int("axis", -1) not in (-1, 2):
            continue
        found.append((node, add))
    for node, add in found:
        a, b = add.inputs[0], add.inputs[1]  # an earlier rewrite may have renewed them
        eps = node.attributes.get_float("epsilon", 1e-5)
        out, total = node.outputs[0], add.outputs[0]
        skip = ir.node("SkipSimplifiedLayerNormalization", [a, b, node.inputs[1]],
                       {"epsilon": eps}, domain=MS_DOMAIN, num_outputs=4,
                       name=f"{node.name or 'rms'}_skip")
        graph.insert_before(node, skip)
        y, mean, inv_std, summed = skip.outputs
        mean.name = inv_std.name = ""  # not computed
        for new, old in ((y, out), (summed, total)):
            new.type, new.shape = old.type, old.shape
            name, old.name = old.name, None
            new.name = name
        ir.convenience.replace_all_uses_with(out, y, replace_graph_outputs=True)
        graph.remove(node, safe=True)
        ir.convenience.replace_all_uses_with(total, summed, replace_graph_outputs=True)
        graph.remove(add, safe=True)
    if found:
        graph.opset_imports.setdefault(MS_DOMAIN, 1)
        model.opset_imports.setdefault(MS_DOMAIN, 1)
    return len(found)
