"""One MatMul for projections that read the same activations (q/k/v).

``x @ Wq``, ``x @ Wk``, ``x @ Wv`` become ``Split(x @ [Wq | Wk | Wv])``: each output
column is the same dot product as before. export-llm joins only the groups that
GroupQueryAttention then reads packed (the Split goes away, see
``_attention.pack_qkv``). A join that keeps its Split is not faster: gate/up joined
decoded 1.14x slower per token in fp32 (median over 8 processes, 124.7M Llama, see
docs/llm.md), and int4 was the same either way.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import onnx_ir as ir
import torch


def fuse_shared_input_matmuls(
        model: ir.Model, accept: Callable[[list[ir.Value]], bool] | None = None) -> int:
    """Fuses, in place, MatMuls that share input A and take constant ``[K, N_i]`` float
    weights used nowhere else, for each such group (in graph order) that ``accept``
    takes (default: all); returns how many groups were fused.

    When each MatMul's only reader is an ``Add`` of a constant ``[N_i]`` bias (Qwen2's
    q/k/v), the biases are joined too: ``Split(x @ W + b)``. ``accept`` sees what the
    group computes: the biased sums where the biases join, else the products."""
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
    for group in groups.values():
        if len(group) < 2:
            continue
        subsets = [group]
        if accept is not None and len(group) > 3:
            # Phi's q/k/v and its MLP read one norm's output: the three that
            # GroupQueryAttention reads are joined, the rest left as they are.
            subsets += [list(c) for c in itertools.combinations(group, 3)]
        for nodes in subsets:
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
            found = [_bias_add(n, int(s[1]), dtype) for n, s in zip(nodes, shapes)]
            adds = [f for f in found if f is not None]
            if len(adds) != len(nodes):
                adds = []
            ends = [add.outputs[0] for add, _ in adds] if adds else [n.outputs[0] for n in nodes]
            if accept is not None and not accept(ends):
                continue
            # Insert after the last of them, where every consumer order still holds:
            # all read the same A, and the fused node replaces each at the first's place.
            first = nodes[0]
            name = f"{weights[0].name or 'w'}.fused{len(nodes)}"
            shape = ir.Shape([shapes[0][0], sum(int(s[1]) for s in shapes)])
            # Joined when saved (in the writer's thread), from the parameters themselves.
            value = _lazy(graph, name, _joiner([_source(w) for w in weights], name, dim=1),
                          dtype, shape)
            # Linear's [N, K] layout of the same weight, for the int4 quantizer.
            value.meta["pt2onnx.rows"] = _joiner_rows([_source(w) for w in weights])
            a = first.inputs[0]
            matmul = ir.node("MatMul", [a, value], name=f"{first.name or name}_fused")
            matmul.outputs[0].dtype = dtype
            if a is not None and a.shape is not None:
                matmul.outputs[0].shape = ir.Shape([*a.shape[:-1], shape[1]])
            joined: list[ir.Node] = [matmul]
            if adds:
                bias = _lazy(graph, f"{name}.bias", _joiner([_source(b) for _, b in adds],
                                                              f"{name}.bias", dim=0),
                             dtype, ir.Shape([shape[1]]))
                add = ir.node("Add", [matmul.outputs[0], bias], name=f"{first.name or name}_bias")
                add.outputs[0].dtype, add.outputs[0].shape = dtype, matmul.outputs[0].shape
                joined.append(add)
            sizes = ir.Value(name=f"{name}.split", const_value=ir.tensor(
                np.array([s[1] for s in shapes], dtype=np.int64), name=f"{name}.split"))
            sizes.dtype, sizes.shape = ir.DataType.INT64, ir.Shape([len(nodes)])
            graph.register_initializer(sizes)
            split = ir.node("Split", [joined[-1].outputs[0], sizes], {"axis": -1},
                            num_outputs=len(nodes), name=f"{first.name or name}_split")
            graph.insert_before(first, [*joined, split])
            for old, out in zip(ends, split.outputs):
                out.name, out.dtype, out.shape = old.name, dtype, old.shape
                old.name = None
                ir.convenience.replace_all_uses_with(old, out, replace_graph_outputs=True)
            for add_node, b in adds:
                graph.remove(add_node, safe=True)
                if b.name is not None and not b.uses():
                    del graph.initializers[b.name]
            for node, w in zip(nodes, weights):
                graph.remove(node, safe=True)
                if w.name is not None and not w.uses():
                    del graph.initializers[w.name]
            fused += 1
            break
    return fused


def _bias_add(node: ir.Node, n: int, dtype: ir.DataType) -> tuple[ir.Node, ir.Value] | None:
    """(the Add, its bias) when the only reader of ``node``'s product adds a constant
    ``[n]`` bias of ``dtype`` that nothing else reads."""
    out = node.outputs[0]
    uses = list(out.uses())
    if len(uses) != 1 or out.is_graph_output():
        return None
    add, index = uses[0].node, uses[0].idx
    if (add.domain, add.op_type) != ("", "Add"):
        return None
    bias = add.inputs[1 - index]
    if bias is None or bias.const_value is None or bias.dtype != dtype \
            or len(bias.uses()) != 1 or bias.is_graph_output():
        return None
    if tuple(bias.const_value.shape.numpy()) != (n,):
        return None
    return add, bias


def _lazy(graph: ir.Graph, name: str, make: Callable[[], ir.TensorProtocol],
          dtype: ir.DataType, shape: ir.Shape) -> ir.Value:
    value = ir.Value(name=name, const_value=ir.LazyTensor(make, dtype=dtype, shape=shape,
                                                          name=name))
    value.dtype, value.shape = dtype, shape
    graph.register_initializer(value)
    return value


def _source(w: ir.Value) -> Callable[[], torch.Tensor]:
    """The ``[K, N]`` weight (or ``[N]`` bias) as a torch tensor, without copying it
    where it can be a view."""
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


def _joiner(parts: list[Callable[[], torch.Tensor]], name: str,
            dim: int) -> Callable[[], ir.TensorProtocol]:
    return lambda: ir.tensor_adapters.TorchTensor(
        torch.cat([part() for part in parts], dim=dim), name=name)


def _joiner_rows(parts: list[Callable[[], torch.Tensor]]) -> Callable[[], torch.Tensor]:
    return lambda: torch.cat([part().t() for part in parts], dim=0)
