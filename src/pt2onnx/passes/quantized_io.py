"""Quantized tensors at the graph's boundary as (integer values, scale, zero point).

pt2onnx's default: a quantized input or output travels as its dequantized float. The
TorchScript exporter took and gave each one as three values instead (``int_repr()``,
``q_scale()``, ``q_zero_point()``), and its users' runtimes feed them that way. With
``export(..., quantized_io="triple")`` the written file does the same:

- a quantized input becomes three inputs, ``<name>`` (uint8 for quint8, int8 for qint8),
  ``<name>_scale`` (float64, 0-d, as the TorchScript exporter wrote it) and ``<name>_zero_point`` (int64, 0-d), dequantized in
  the graph as ``(x - zero_point) * scale``;
- a quantized output becomes three outputs: its QuantizeLinear with the output's own
  scale and zero point (those eager returned on the example), then the scale and the
  zero point themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

_INT = {"quint8": (ir.DataType.UINT8, np.uint8), "qint8": (ir.DataType.INT8, np.int8)}


@dataclass(frozen=True)
class QuantizedLeaf:
    """A quantized input or output: its torch dtype name, and for an output its qparams."""

    dtype: str  # "quint8" or "qint8"
    scale: float = 0.0
    zero_point: int = 0


def supported(dtype: str) -> bool:
    return dtype in _INT


def _scalar(graph: ir.Graph, name: str, value: np.ndarray) -> ir.Value:
    tensor = ir.tensor(value)
    out = ir.Value(name=name, type=ir.TensorType(tensor.dtype), shape=ir.Shape([]))
    graph.append(ir.Node("", "Constant", [], attributes=[ir.AttrTensor("value", tensor)],
                         outputs=[out]))
    return out


def apply(model: ir.Model, inputs: list[QuantizedLeaf | None],
          outputs: list[QuantizedLeaf | None]) -> ir.Model:
    """``model`` (float at its boundary) with the quantized inputs and outputs as
    triples; ``inputs`` and ``outputs`` follow the graph's own order."""
    graph = model.graph
    old_inputs = list(graph.inputs)
    graph.inputs.clear()
    front: list[ir.Node] = []
    for value, leaf in zip(old_inputs, inputs):
        if leaf is None:
            graph.inputs.append(value)
            continue
        onnx_int, _ = _INT[leaf.dtype]
        name = value.name or "input"
        ints = ir.Value(name=name, type=ir.TensorType(onnx_int), shape=value.shape)
        # The scale is a double, as the TorchScript exporter wrote it (its users feed
        # q_scale(), a Python float): cast to float32 inside the graph.
        scale = ir.Value(name=f"{name}_scale", type=ir.TensorType(ir.DataType.DOUBLE),
                         shape=ir.Shape([]))
        zero = ir.Value(name=f"{name}_zero_point", type=ir.TensorType(ir.DataType.INT64),
                        shape=ir.Shape([]))
        value.name = f"{name}_dequantized"
        graph.inputs.extend([ints, scale, zero])
        as_float = ir.Node("", "Cast", [ints], attributes=[ir.AttrInt64("to", 1)])
        zero_float = ir.Node("", "Cast", [zero], attributes=[ir.AttrInt64("to", 1)])
        shifted = ir.Node("", "Sub", [as_float.outputs[0], zero_float.outputs[0]])
        scale_float = ir.Node("", "Cast", [scale], attributes=[ir.AttrInt64("to", 1)])
        scaled = ir.Node("", "Mul", [shifted.outputs[0], scale_float.outputs[0]])
        front += [as_float, zero_float, shifted, scale_float, scaled]
        value.replace_all_uses_with(scaled.outputs[0])
        scaled.outputs[0].name, scaled.outputs[0].shape = value.name, value.shape
        scaled.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
    if front:  # they read only graph inputs: first in the graph
        first = next(iter(graph), None)
        if first is None:
            graph.extend(front)
        else:
            graph.insert_before(first, front)
    old_outputs = list(graph.outputs)
    graph.outputs.clear()
    for value, leaf in zip(old_outputs, outputs):
        if leaf is None:
            graph.outputs.append(value)
            continue
        _, np_int = _INT[leaf.dtype]
        name = value.name or "output"
        value.name = f"{name}_dequantized"
        scale = _scalar(graph, f"{name}_scale", np.array(leaf.scale, np.float64))
        float_scale = _scalar(graph, f"{name}_scale_float", np.array(leaf.scale, np.float32))
        zero = _scalar(graph, f"{name}_zero_point", np.array(leaf.zero_point, np.int64))
        zero_int = _scalar(graph, f"{name}_zero_point_{leaf.dtype}",
                           np.array(leaf.zero_point, np_int))
        quantize = ir.Node("", "QuantizeLinear", [value, float_scale, zero_int])
        graph.append(quantize)
        quantize.outputs[0].name, quantize.outputs[0].shape = name, value.shape
        quantize.outputs[0].type = ir.TensorType(_INT[leaf.dtype][0])
        graph.outputs.extend([quantize.outputs[0], scale, zero])
    return model
