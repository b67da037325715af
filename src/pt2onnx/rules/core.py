"""Graph plumbing: tuple access, symbolic sizes and runtime asserts."""

from __future__ import annotations

import operator
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten, normalize_dim, rank


@translation(operator.getitem)
def getitem(g: RuleContext, seq: Any, index: int) -> Any:
    """operator.getitem(seq, index): picks one output of a multi-output op."""
    return seq[index]


@translation(aten.sym_size.int)
def sym_size(g: RuleContext, x: ir.Value, dim: int) -> ir.Value:
    """sym_size.int(Tensor self, int dim) -> SymInt"""
    d = normalize_dim(dim, rank(x))
    return g.op.Squeeze(g.op.Shape(x, start=d, end=d + 1), g.const([0]))


@translation(aten.sym_numel.default)
def sym_numel(g: RuleContext, x: ir.Value) -> ir.Value:
    """sym_numel(Tensor self) -> SymInt"""
    return g.op.Size(x)


def _noop(g: RuleContext, *args: Any, **kwargs: Any) -> None:
    """Runtime checks that torch.export inserts; ONNX has nothing to check them with."""
    return None


for _name in ("_assert_async", "_assert_scalar", "sym_constrain_range",
              "sym_constrain_range_for_size", "_assert_tensor_metadata"):
    _packet = getattr(aten, _name, None)
    if _packet is not None:
        translation(_packet)(_noop)
translation(torch._check if hasattr(torch, "_check") else _noop)(_noop)


@translation(aten._local_scalar_dense.default)
def local_scalar_dense(g: RuleContext, x: ir.Value) -> ir.Value:
    """_local_scalar_dense(Tensor self) -> Scalar"""
    # A Scalar is a 0-d value: int64 for integers (as SymInts are), float for floats.
    if x.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE):
        x = g.cast(x, ir.DataType.FLOAT)
    elif x.dtype not in (ir.DataType.FLOAT, ir.DataType.BOOL):
        x = g.cast(x, ir.DataType.INT64)
    return g.op.Reshape(x, g.const([], ir.DataType.INT64))


def _input_meta(g: RuleContext) -> Any:
    arg = g.node.args[0] if g.node is not None else None
    return getattr(arg, "meta", {}).get("val")


@translation(aten.sym_stride.int)
def sym_stride(g: RuleContext, x: ir.Value, dim: int) -> ir.Value:
    """sym_stride.int(Tensor self, int dim) -> SymInt"""
    val = _input_meta(g)
    d = normalize_dim(dim, rank(x))
    stride = val.stride(d) if val is not None else None
    if isinstance(stride, int):
        return g.const(stride)
    if val is None or not val.is_contiguous():
        raise NotImplementedError("symbolic stride of a tensor that is not contiguous")
    # Contiguous: the product of the sizes after dim.
    if d == rank(x) - 1:
        return g.const(1)
    tail = g.op.Shape(x, start=d + 1)
    return g.op.ReduceProd(tail, keepdims=0) if g.opset >= 18 else g.op.ReduceProd(
        tail, keepdims=0, axes=[0])


@translation(aten.sym_storage_offset.default)
def sym_storage_offset(g: RuleContext, x: ir.Value) -> ir.Value:
    """sym_storage_offset(Tensor self) -> SymInt"""
    val = _input_meta(g)
    offset = val.storage_offset() if val is not None else None
    if isinstance(offset, int):
        return g.const(offset)
    return _replayed_offset(g)


def _is_view(node: Any) -> bool:
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return _is_view(node.args[0])
    return isinstance(node.target, torch._ops.OpOverload) and node.target.is_view


def _replayed_offset(g: RuleContext) -> ir.Value:
    """A view at a data-dependent position (tensor_split by a tensor, say): the offset
    is where its first element sits in its base, so the chain of view ops from the
    base is replayed on the positions 0..n-1 of the base's elements. An empty view
    has no first element; it reports the base's size, where torch's offset is at most that.
    """
    assert g.node is not None
    arg: Any = g.node.args[0]
    chain = []
    root = arg
    while _is_view(root):
        chain.append(root)
        root = root.args[0]
    root_val = getattr(root, "meta", {}).get("val")
    if not chain or not isinstance(root_val, torch.Tensor) or not root_val.is_contiguous() or \
            root_val.storage_offset() != 0:
        raise NotImplementedError("symbolic storage offset of a tensor that is not a view of "
                                  "a contiguous tensor")
    graph = torch.fx.Graph()
    env: dict[Any, Any] = {root: graph.placeholder("base")}
    env[root].meta = dict(root.meta)
    outside: list[Any] = []

    def lookup(n: torch.fx.Node) -> torch.fx.Node:
        if n not in env:
            env[n] = graph.placeholder(f"arg_{len(outside)}")
            env[n].meta = dict(n.meta)
            outside.append(n)
        return env[n]

    for n in reversed(chain):
        env[n] = graph.node_copy(n, lookup)
    graph.output(env[arg])
    base = g._value_of(root)
    positions = g.op.Reshape(g.op.Range(g.const(0), g.op.Size(base), g.const(1)),
                             g.op.Shape(base))
    positions.dtype, positions.shape = ir.DataType.INT64, base.shape
    (view,) = g.inline(torch.fx.GraphModule({}, graph),
                       [positions, *(g._value_of(n) for n in outside)])
    flat = g.op.Reshape(g.cast(view, ir.DataType.INT64), g.const([-1]))
    first = g.op.Concat(flat, g.op.Reshape(g.op.Size(base), g.const([1])), axis=0)
    return g.op.ReduceMin(first, keepdims=0)


@translation(aten.sym_is_contiguous.default)
def sym_is_contiguous(g: RuleContext, x: ir.Value, memory_format: Any = None) -> ir.Value:
    """sym_is_contiguous(Tensor self, MemoryFormat memory_format=contiguous_format) -> SymBool"""
    # ONNX tensors have no strides: every tensor is contiguous.
    return g.const(True)
