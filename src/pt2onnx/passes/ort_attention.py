"""Attention as onnxruntime's com.microsoft ``MultiHeadAttention`` (optimize="onnxruntime").

The sdpa rule (``rules/attention.py``) writes attention in standard ops and notes on
its output's ``meta["pt2onnx.sdpa"]`` the call it came from: query ``[B, N, S, H]``,
key ``[B, N, L, H]``, value ``[B, N, L, Hv]``, the mask, the scale (only for a call
without dropout or grouped heads, and causal only without a mask where the queries are
as many as the keys). This pass replaces that output with
one ``MultiHeadAttention`` where the op computes the same thing:

- query, key and value go in as ``[B, S, N * H]`` (``unsplit_heads`` then reads the
  model's own projections, from before its split into heads);
- a mask becomes the op's ``attention_bias`` ``[B or 1, N or 1, S, L]``: a bool mask as 0
  where a key is seen and the dtype's lowest value where it is hidden (the standard
  graph's choice), a float mask as it is; the op adds it to the scaled scores;
- a query whose every key is hidden: the rule's own ``Where`` that returns 0 for
  those rows (eager's answer) stays, and now reads the op's output.

Left as it is: float32 and float16 only (onnxruntime's CPU kernels), static head
count and sizes, key and value heads equal to the query's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

SDPA_META = "pt2onnx.sdpa"  # rules/attention.py's key
MS_DOMAIN = "com.microsoft"
_TYPES = (ir.DataType.FLOAT, ir.DataType.FLOAT16)


def _alive(graph: ir.Graph, v: ir.Value | None) -> bool:
    if v is None:
        return False
    node = v.producer()
    if node is None:
        return v in graph.inputs or v.name in graph.initializers
    return node.graph is graph


def _ints(graph: ir.Graph, name: str, values: list[int]) -> ir.Value:
    value = ir.Value(name=name, const_value=ir.tensor(np.array(values, dtype=np.int64),
                                                       name=name))
    value.dtype, value.shape = ir.DataType.INT64, ir.Shape([len(values)])
    graph.register_initializer(value)
    return value


class _Writer:
    """Nodes inserted before ``anchor``, each with a unique name."""

    def __init__(self, graph: ir.Graph, anchor: ir.Node, tag: str) -> None:
        self.graph, self.anchor, self.tag, self.n = graph, anchor, tag, 0

    def node(self, op: str, inputs: list[ir.Value | None], attrs: dict[str, Any] | None = None,
             domain: str = "", dtype: ir.DataType | None = None,
             shape: list[Any] | None = None) -> ir.Value:
        self.n += 1
        node = ir.node(op, inputs, attrs or {}, domain=domain, name=f"{self.tag}_{op}{self.n}")
        self.graph.insert_before(self.anchor, node)
        out = node.outputs[0]
        if dtype is not None:
            out.dtype = dtype
        out.shape = ir.Shape(shape) if shape is not None else None
        return out

    def const(self, values: list[int]) -> ir.Value:
        """An int64 constant, one per value in the graph (so CSE shares what reads it)."""
        name = "ort_fusion_i64_" + "_".join(str(i).replace("-", "m") for i in values)
        found = self.graph.initializers.get(name)
        return found if found is not None else _ints(self.graph, name, values)

    def scalar(self, value: float, dtype: ir.DataType) -> ir.Value:
        array = np.array(value, dtype=dtype.numpy())
        name = f"ort_fusion_{dtype.name.lower()}_{'lowest' if value < -1e4 else value}"
        found = self.graph.initializers.get(name)
        if found is not None:
            return found
        v = ir.Value(name=name, const_value=ir.tensor(array, name=name))
        v.dtype, v.shape = dtype, ir.Shape([])
        self.graph.register_initializer(v)
        return v


def _merged(w: _Writer, x: ir.Value, dtype: ir.DataType) -> ir.Value:
    """``[B, N, S, H]`` -> ``[B, S, N * H]``."""
    assert x.shape is not None
    b, n, s, h = x.shape
    t = w.node("Transpose", [x], {"perm": [0, 2, 1, 3]}, dtype=dtype, shape=[b, s, n, h])
    return w.node("Reshape", [t, w.const([0, 0, -1])], dtype=dtype, shape=[b, s, n * h])


def _bias(w: _Writer, mask: ir.Value, q: ir.Value, k: ir.Value,
          dtype: ir.DataType, heads: int) -> ir.Value | None:
    """The mask as the op's ``attention_bias`` ``[B or 1, N or 1, S, L]`` (T5's relative
    position bias has every head), or None where it can't be one."""
    assert q.shape is not None and k.shape is not None
    shape = mask.shape
    if shape is None or len(shape) != 4 or shape[1] not in (1, heads):
        return None
    if mask.dtype == ir.DataType.BOOL:
        lowest = float(np.finfo(dtype.numpy()).min)
        bias = w.node("Where", [mask, w.scalar(0.0, dtype), w.scalar(lowest, dtype)],
                      dtype=dtype, shape=list(shape))
    elif mask.dtype in _TYPES:
        bias = mask if mask.dtype == dtype else w.node(
            "Cast", [mask], {"to": dtype}, dtype=dtype, shape=list(shape))
    else:
        return None
    s, total = q.shape[2], k.shape[2]
    if shape[2] == s and shape[3] == total:
        return bias
    # The op broadcasts the batch and head dims only: the rows and keys are expanded.
    rows = w.node("Shape", [q], {"start": 2, "end": 3}, dtype=ir.DataType.INT64, shape=[1])
    keys = w.node("Shape", [k], {"start": 2, "end": 3}, dtype=ir.DataType.INT64, shape=[1])
    lead = w.node("Shape", [mask], {"start": 0, "end": 2}, dtype=ir.DataType.INT64, shape=[2])
    target = w.node("Concat", [lead, rows, keys], {"axis": 0}, dtype=ir.DataType.INT64,
                    shape=[4])
    return w.node("Expand", [bias, target], dtype=dtype, shape=[shape[0], shape[1], s, total])


def _fuse(graph: ir.Graph, node: ir.Node, out: ir.Value, call: dict[str, Any]) -> bool:
    q, k, v, mask, scale = call["q"], call["k"], call["v"], call["mask"], call["scale"]
    if not all(_alive(graph, x) for x in (q, k, v)) or (mask is not None
                                                        and not _alive(graph, mask)):
        return False
    dtype = q.dtype
    if dtype not in _TYPES or k.dtype != dtype or v.dtype != dtype or out.dtype != dtype:
        return False
    shapes = [x.shape for x in (q, k, v)]
    if any(s is None or len(s) != 4 for s in shapes):
        return False
    (batch, heads, _, size), (k_batch, k_heads, _, k_size), (v_batch, v_heads, _, v_size) = \
        shapes
    if not all(isinstance(d, int) for d in (heads, size, v_size)) or k_heads != heads \
            or v_heads != heads or k_size != size or not scale > 0:
        return False
    if batch is None or k_batch != batch or v_batch != batch:
        return False  # sdpa broadcasts a batch of 1 against the query's; the op does not
    if mask is not None and (node.op_type != "Where" or node.domain or node.outputs[0] is not out):
        return False  # the rule's masked-row Where is what carries the note
    w = _Writer(graph, node, f"{node.name or 'sdpa'}_mha")
    bias = _bias(w, mask, q, k, dtype, heads) if mask is not None else None
    if mask is not None and bias is None:
        return False
    b, _, s, _ = q.shape
    inputs: list[ir.Value | None] = [_merged(w, q, dtype), _merged(w, k, dtype),
                                     _merged(w, v, dtype)]
    if bias is not None:
        inputs += [None, None, bias]
    attrs: dict[str, Any] = {"num_heads": heads, "scale": scale}
    if call.get("causal"):
        attrs["unidirectional"] = 1  # the rule noted it only where queries = keys
    attended = w.node("MultiHeadAttention", inputs, attrs, domain=MS_DOMAIN, dtype=dtype,
                      shape=[b, s, heads * v_size])
    split = w.node("Reshape", [attended, w.const([0, 0, heads, v_size])], dtype=dtype,
                   shape=[b, s, heads, v_size])
    heads_first = w.node("Transpose", [split], {"perm": [0, 2, 1, 3]}, dtype=dtype,
                         shape=[b, heads, s, v_size])
    if mask is not None:
        node.replace_input_with(2, heads_first)  # Where(hidden row, 0, attention)
    else:
        name = out.name if out.is_graph_output() else None
        ir.convenience.replace_all_uses_with(out, heads_first, replace_graph_outputs=True)
        if name is not None:
            out.name = None
            heads_first.name = name
    return True


def apply(model: ir.Model) -> int:
    """Rewrites the main graph in place; returns how many attentions became the op."""
    graph = model.graph
    fused = 0
    for node in list(graph):
        for out in node.outputs:
            call = out.meta.get(SDPA_META)
            if isinstance(call, dict) and _fuse(graph, node, out, call):
                fused += 1
    if fused:
        model.opset_imports.setdefault(MS_DOMAIN, 1)
        ir.passes.common.RemoveUnusedNodesPass()(model)
    return fused
