"""What the translator does to the finished graph: its IR version, and tied dims
left unnamed inside it."""

from __future__ import annotations

import re

import onnx_ir as ir
import torch

from pt2onnx.errors import TranslationError
from pt2onnx.translate import _builder


def ir_version(graph: ir.Graph, opset: int) -> int:
    """10, or the IR version of the opset where a newer dtype (float4, float8e8m0,
    int2) needs one; such a dtype below its first opset is refused."""
    values = [*graph.inputs, *graph.outputs, *graph.initializers.values(),
              *(v for node in graph for v in node.outputs)]
    found = {v.dtype for v in values if v.dtype is not None and v.dtype in _builder.DTYPE_OPSET}
    if not found:
        return 10
    need = max(_builder.DTYPE_OPSET[d] for d in found)
    if opset < need:
        names = ", ".join(sorted(d.name for d in found))
        raise TranslationError(
            f"the model holds {names} tensors, which ONNX has only from opset {need}; "
            f"this export is at opset {opset}. Next step: export with "
            f"opset={need} or higher.")
    import onnx.helper

    return max(10, int(onnx.helper.find_min_ir_version_for([
        onnx.helper.make_opsetid("", opset)])))


def types_opset(program: torch.export.ExportedProgram) -> tuple[int, list[str]]:
    """The first opset whose schemas take every tensor type of ``program`` (its inputs,
    weights, constants and each node's result, in every subgraph), and the torch dtypes
    that need it; ``(0, [])`` where no tensor needs a newer opset than any pt2onnx writes."""
    need: dict[str, int] = {}
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            for leaf in torch.utils._pytree.tree_leaves(node.meta.get("val")):
                dtype = getattr(leaf, "dtype", None)
                onnx_type = _builder.onnx_type_or_none(dtype)
                if onnx_type in _builder.DTYPE_OPSET:
                    need[str(dtype).removeprefix("torch.")] = _builder.DTYPE_OPSET[onnx_type]
    if not need:
        return 0, []
    top = max(need.values())
    return top, sorted(name for name, opset in need.items() if opset == top)


def unname_tied_dims(graph: ir.Graph, names: set[str]) -> None:
    """A tied symbol stands for dims that differ at run time (b against a 1): a value
    shape that names it would tell onnxruntime, which plans buffers by dim names,
    that they are equal. Inside the graph those dims stay unnamed."""
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b")
    inputs = {id(v) for v in graph.inputs}
    for node in ir.traversal.RecursiveGraphIterator(graph):
        for value in node.outputs:
            if id(value) in inputs or value.shape is None:
                continue
            if any(isinstance(d, ir.SymbolicDim) and d.value and pattern.search(d.value)
                   for d in value.shape):
                value.shape = ir.Shape([
                    ir.SymbolicDim(None) if isinstance(d, ir.SymbolicDim) and d.value
                    and pattern.search(d.value) else d for d in value.shape])
