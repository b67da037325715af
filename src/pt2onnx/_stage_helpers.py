"""Small helpers of ``_stages``: the inputs a program was captured on, the names of
tied dims, the report's dim ranges and op counts, quantized boundary leaves, and the
I/O types of ``precision=``."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.capture import CaptureResult
from pt2onnx.errors import InvalidInputError


def quantized_leaf(t: torch.Tensor, where: str, with_qparams: bool) -> Any:
    """A quantized tensor's boundary form for passes/quantized_io.py; None for others."""
    from pt2onnx.passes import quantized_io

    if not t.is_quantized:
        return None
    name = str(t.dtype).removeprefix("torch.")
    if not quantized_io.supported(name) or t.qscheme() not in (
            torch.per_tensor_affine, torch.per_tensor_symmetric):
        raise InvalidInputError(
            f"an {where} is a {name} {t.qscheme()} tensor; quantized_io='triple' takes "
            "per-tensor quint8 and qint8 tensors. Next step: leave quantized_io at its "
            "default ('float'), where it travels as its dequantized values.")
    if not with_qparams:
        return quantized_io.QuantizedLeaf(name)
    return quantized_io.QuantizedLeaf(name, float(t.q_scale()), int(t.q_zero_point()))


def tie_names(dim_names: list[dict[int, str]], ties: list[Any],
               ) -> dict[str, list[tuple[int, int]]]:
    """Dims that broadcast against each other (``ties``): each input keeps its own name
    in ``dim_names`` (changed in place); returns the tie's symbol -> its positions."""
    sizes = {}
    for tie in ties:
        for name, positions in tie.names.items():
            for i, axis in positions:
                if i < len(dim_names):
                    dim_names[i][axis] = name
        sizes[str(tie.symbol)] = [p for ps in tie.names.values() for p in ps]
    return sizes


def example_of(
    captured: CaptureResult, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The inputs the program was captured on: a doubled example, or the user's."""
    if captured.example is None:
        return args, kwargs
    return tuple(captured.example[0]), dict(captured.example[1])


def dynamic_dims(program: torch.export.ExportedProgram, names: dict[Any, Any]) -> dict[str, str]:
    """Each symbolic dim with the range torch.export guarded it to."""
    dims = {}
    for sym, vr in program.range_constraints.items():
        # A derived dim (2*s44) shows in the user's names (2*half).
        shown = str(names[sym] if sym in names else sym.xreplace(names)
                    if hasattr(sym, "xreplace") else sym)
        dims[shown] = f"[{vr.lower}, {vr.upper}]"
    return dims


def histogram(model: ir.Model) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in model.graph:
        key = node.op_type if not node.domain else f"{node.domain}::{node.op_type}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def precision_io(model: ir.Model, conv: Any, original: Any) -> None:
    """The converted graph's floating inputs and outputs typed as ``precision_io``
    says (``passes/precision_io.py``); ``conv`` is the ``Converted`` copy, ``original``
    the caller's (model, args, kwargs). Nothing without ``precision=``."""
    if conv is None or original is None:
        return
    from pt2onnx import passes
    from pt2onnx.translate import onnx_dtype
    from pt2onnx.verify import flatten_tensors

    target = onnx_dtype(conv.dtype)
    floating = {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16,
                ir.DataType.BFLOAT16}
    graph = model.graph
    if conv.io == "convert":
        outs = [target if v.dtype in floating else None for v in graph.outputs]
        passes.precision_io.apply(model, [], outs)
        return
    source = onnx_dtype(conv.source)
    leaves = flatten_tensors((original[1], original[2]))
    if len(leaves) == len(graph.inputs):
        ins = [onnx_dtype(t.dtype) if t.dtype.is_floating_point else None for t in leaves]
    else:
        ins = [source if v.dtype == target else None for v in graph.inputs]
    outs = [source if v.dtype == target else None for v in graph.outputs]
    passes.precision_io.apply(model, ins, outs)
