"""One MatMul for projections that read the same activations (q/k/v).

``x @ Wq``, ``x @ Wk``, ``x @ Wv`` become ``Split(x @ [Wq | Wk | Wv])``: each output
column is the same dot product as before. export-llm joins only the groups that
GroupQueryAttention then reads packed (the Split goes away, see
``_attention.pack_qkv``). A join that keeps its Split is not faster: gate/up joined
decoded 1.14x slower per token in fp32 (median over 8 processes, 124.7M Llama, see
docs/llm.md), and int4 was the same either way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir
import torch


def fuse_shared_input_matmuls(
        model: ir.Model, accept: Callable[[list[ir.Node]], bool] | None = None) -> int:
    """Fuses, in place, MatMuls that share input A and take constant ``[K, N_i]`` float
    weights used nowhere else, for each such group (in graph order) that ``accept``
    takes (default: all); returns how many groups were fused."""
    graph = model.graph
    groups: dict[int, list[ir.Node]] = {}
    for node in graph:
        if node.op_type != "MatMul" or node.domain:
            continue
        a, b = node.inputs
        if a is None or b is None or b.const_value is None or b.shape is None:
            continue
        if len(b.shape) != 2 or len(b.uses()) != 1 or b.dtype not in (
                ir.DataType.FLOAT, ir.DataType.FLOAT16):
            continue
        groups.setdefault(id(a), []).append(node)
    fused = 0
    for nodes in groups.values():
        if len(nodes) < 2 or (accept is not None and not accept(nodes)):
            continue
        weights: list[ir.Value] = []
        for n in nodes:
            w = n.inputs[1]
            assert w is not None and w.const_value is not None
            weights.append(w)
        shapes = [w.const_value.shape.numpy() for w in weights]  # type: ignore[union-attr]
        dtype = weights[0].dtype
        if len({s[0] for s in shapes}) != 1 or dtype is None or any(
                w.dtype != dtype for w in weights):
            continue
        # Insert after the last of them, where every consumer order still holds:
        # all read the same A, and the fused node replaces each at the first's place.
        first = nodes[0]
        name = f"{weights[0].name or 'w'}.fused{len(nodes)}"
        shape = ir.Shape([shapes[0][0], sum(int(s[1]) for s in shapes)])
        # Joined when saved (in the writer's thread), from the parameters themselves.
        value = ir.Value(name=name, const_value=ir.LazyTensor(
            _joiner([_source(w) for w in weights], name), dtype=dtype, shape=shape, name=name))
        value.dtype, value.shape = dtype, shape
        # Linear's [N, K] layout of the same weight, for the int4 quantizer.
        value.meta["pt2onnx.rows"] = _joiner_rows([_source(w) for w in weights])
        graph.register_initializer(value)
        a = first.inputs[0]
        matmul = ir.node("MatMul", [a, value], name=f"{first.name or name}_fused")
        sizes = ir.Value(name=f"{name}.split", const_value=ir.tensor(
            np.array([s[1] for s in shapes], dtype=np.int64), name=f"{name}.split"))
        sizes.dtype, sizes.shape = ir.DataType.INT64, ir.Shape([len(nodes)])
        graph.register_initializer(sizes)
        split = ir.node("Split", [matmul.outputs[0], sizes], {"axis": -1},
                        num_outputs=len(nodes), name=f"{first.name or name}_split")
        matmul.outputs[0].dtype = dtype
        if a is not None and a.shape is not None:
            matmul.outputs[0].shape = ir.Shape([*a.shape[:-1], shape[1]])
        graph.insert_before(first, [matmul, split])
        for node, out in zip(nodes, split.outputs):
            old = node.outputs[0]
            out.name, out.dtype, out.shape = old.name, dtype, old.shape
            old.name = None
            ir.convenience.replace_all_uses_with(old, out, replace_graph_outputs=True)
        for node, w in zip(nodes, weights):
            graph.remove(node, safe=True)
            if w.name is not None and not w.uses():
                del graph.initializers[w.name]
        fused += 1
    return fused


def _source(w: ir.Value) -> Callable[[], torch.Tensor]:
    """The ``[K, N]`` weight as a torch tensor, without copying it where it can be a view."""
    src = w.meta.get("pt2onnx.transpose_src")
    if isinstance(src, torch.Tensor):  # a lazily transposed parameter
        return lambda: src.detach().t()
    rows = w.meta.get("pt2onnx.rows")
    if callable(rows):  # Linear's [N, K], read when written (export-llm's streamed weights)
        return lambda: rows().t()
    raw = getattr(w.const_value, "raw", None)
    if isinstance(raw, torch.Tensor):
        return lambda: raw.detach()
    tensor = w.const_value
    assert tensor is not None
    return lambda: torch.from_numpy(np.asarray(tensor.numpy()))


def _joiner(parts: list[Callable[[], torch.Tensor]], name: str) -> Callable[[], ir.TensorProtocol]:
    return lambda: ir.tensor_adapters.TorchTensor(
        torch.cat([part() for part in parts], dim=1), name=name)


def _joiner_rows(parts: list[Callable[[], torch.Tensor]]) -> Callable[[], torch.Tensor]:
    return lambda: torch.cat([part().t() for part in parts], dim=0)
