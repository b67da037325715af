"""A matrix product over a contracted dim of 1 is written as ``Mul``.

Each output is then one product, ``a * b``, as torch computes it: eager's ``mm`` /
``linear`` over one term gives ``0 * -1.5 = -0.0``, where onnxruntime's ``MatMul`` and
``Gemm`` add the product to a zero accumulator and give ``+0.0``. The values are
equal, but a sign-sensitive op after it (``atan2``, a division, ``copysign``) turns the
zero's sign into pi or an infinity (fuzz seed 2613, program 15470: ``linear`` with one
input feature, then ``atan2``). ``Mul`` broadcasts ``(..., M, 1)`` against
``(..., 1, N)`` exactly as ``MatMul`` does, and costs less.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from pt2onnx.passes._graphs import rewrite_all


def _dim(value: ir.Value | None, axis: int) -> int | None:
    if value is None or value.shape is None or len(value.shape) < 2:
        return None
    d = value.shape[axis]
    return d if isinstance(d, int) else None


def _const(graph: ir.Graph, node: ir.Node, array: np.ndarray, what: str) -> ir.Value:
    tensor = ir.tensor(array)
    value = ir.Value(name=f"{node.name or 'product'}/{what}", const_value=tensor)
    value.dtype, value.shape = tensor.dtype, ir.Shape(array.shape)
    graph.register_initializer(value)
    return value


def _attr(node: ir.Node, name: str, default: float) -> float:
    attr = node.attributes.get(name)
    return default if attr is None else float(attr.value)


def _rewrite(graph: ir.Graph) -> int:
    count = 0
    for node in list(graph):
        if node.domain or node.op_type not in ("MatMul", "Gemm"):
            continue
        a, b = node.inputs[0], node.inputs[1]
        out = node.outputs[0]
        if a is None or b is None or out.dtype is None:
            continue
        new: list[ir.Node] = []
        if node.op_type == "MatMul":
            if _dim(a, -1) != 1 or _dim(b, -2) != 1:
                continue  # a rank-1 side or a contracted dim that is not a static 1
            result = ir.Node("", "Mul", [a, b], name=f"{node.name}/mul")
            new.append(result)
        else:
            trans_a, trans_b = _attr(node, "transA", 0), _attr(node, "transB", 0)
            if _dim(a, 0 if trans_a else 1) != 1 or _dim(b, 1 if trans_b else 0) != 1:
                continue
            try:
                dtype = out.dtype.numpy()
            except Exception:
                continue
            if not np.issubdtype(dtype, np.floating):
                continue
            left, right = a, b
            for flag, side, which in ((trans_a, a, "a"), (trans_b, b, "b")):
                if flag:
                    t = ir.Node("", "Transpose", [side], attributes=[ir.AttrInt64s("perm", [1, 0])],
                                name=f"{node.name}/transpose_{which}")
                    t.outputs[0].dtype = side.dtype or out.dtype
                    new.append(t)
                    if which == "a":
                        left = t.outputs[0]
                    else:
                        right = t.outputs[0]
            result = ir.Node("", "Mul", [left, right], name=f"{node.name}/mul")
            new.append(result)
            alpha, beta = _attr(node, "alpha", 1.0), _attr(node, "beta", 1.0)
            if alpha != 1.0:
                result.outputs[0].dtype = out.dtype
                result = ir.Node("", "Mul", [result.outputs[0], _const(
                    graph, node, np.array(alpha, dtype), "alpha")], name=f"{node.name}/alpha")
                new.append(result)
            c = node.inputs[2] if len(node.inputs) > 2 else None
            if c is not None and beta != 0.0:
                if beta != 1.0:
                    scaled = ir.Node("", "Mul", [c, _const(graph, node, np.array(beta, dtype),
                                                           "beta")], name=f"{node.name}/beta")
                    scaled.outputs[0].dtype = out.dtype
                    new.append(scaled)
                    c = scaled.outputs[0]
                result.outputs[0].dtype = out.dtype
                result = ir.Node("", "Add", [result.outputs[0], c], name=f"{node.name}/add")
                new.append(result)
        for n in new[:-1]:
            if n.outputs[0].dtype is None:
                n.outputs[0].dtype = out.dtype
        ir.convenience.replace_nodes_and_values(
            graph, node, [node], new, [out], [new[-1].outputs[0]])
        count += 1
    return count


def apply(model: ir.Model) -> int:
    """Rewrites the model in place (subgraphs included); returns how many products."""
    return rewrite_all(model, _rewrite)
