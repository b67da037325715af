"""The dtypes of a converted model's floating inputs and outputs (``precision_io``).

``export(..., precision=...)`` captures the model in the target precision, so the
translated graph takes and returns tensors in that dtype. With ``precision_io="keep"``
each floating input keeps the dtype the caller's example has and each output the
model's own dtype: the graph input gets that dtype and a ``Cast`` to the target dtype
right after it, and an output gets a ``Cast`` back before it leaves. The names stay the
graph's; the value inside the file is renamed.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir


def _cast(value: ir.Value, to: ir.DataType, output: ir.Value | None = None) -> ir.Node:
    return ir.Node("", "Cast", [value], attributes=[ir.AttrInt64("to", int(to))],
                   outputs=[output] if output is not None else None)


def apply(model: ir.Model, inputs: Sequence[ir.DataType | None],
          outputs: Sequence[ir.DataType | None]) -> int:
    """Retypes graph input ``i`` to ``inputs[i]`` and output ``i`` to ``outputs[i]``
    (None: as it is) through ``Cast`` nodes; returns the number of casts written."""
    graph = model.graph
    written = 0
    for i, want in enumerate(inputs):
        if i >= len(graph.inputs):
            break
        value = graph.inputs[i]
        if want is None or value.dtype is None or value.dtype == want:
            continue
        name = value.name
        value.name = f"{name}_as_{value.dtype.name.lower()}"
        outer = ir.Value(name=name, type=ir.TensorType(want), shape=value.shape)
        graph.inputs[i] = outer
        # The old input value, now the cast's output, keeps every use it had.
        cast = _cast(outer, value.dtype, value)
        if len(graph):
            graph.insert_before(graph[0], cast)
        else:
            graph.append(cast)
        written += 1
    for i, want in enumerate(outputs):
        if i >= len(graph.outputs):
            break
        value = graph.outputs[i]
        if want is None or value.dtype is None or value.dtype == want:
            continue
        node = _cast(value, want)
        graph.append(node)
        out = node.outputs[0]
        out.name, value.name = value.name, f"{value.name}_{value.dtype.name.lower()}"
        out.type, out.shape = ir.TensorType(want), value.shape
        graph.outputs[i] = out
        written += 1
    return written
