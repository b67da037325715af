"""Checks every node's types against its ONNX schema's type constraints.

A rule that mixes dtypes (a float32 constant beside a bfloat16 tensor) writes valid
protobuf that onnxruntime then refuses to load ("Type parameter (T) of Optype
(LessOrEqual) bound to different types"), and ``onnx.checker`` does not look at types.
This check runs after the passes, before the file is written, so such a node is an
export error that names the node, the rule that wrote it and the model line.

For each node of a default-domain (or other ONNX-domain) op, from
``onnx.defs.get_schema(op_type, opset, domain)``:

- every input and output bound to one type parameter (``T``) has one type;
- that type is in the parameter's allowed set, and a formal with a fixed type
  (``tensor(int64)``) gets that type;
- a ``Cast``'s typed output is the type its ``to`` names.

Types are the ones the values carry, and for the untyped intermediates rules leave,
the ones their producers' schemas give (an output bound to ``T`` has its inputs' type),
worked out in the same walk. A value whose type is not known is not checked. Ops
without an ONNX schema (``com.microsoft``, a user's custom domain) are skipped. One
walk over the nodes, schemas compiled once per (op, opset, domain): docs/compatibility.md
gives its cost on a 1B Llama.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import onnx
import onnx_ir as ir

D = ir.DataType
_VARIADIC = onnx.defs.OpSchema.FormalParameterOption.Variadic
# Ops whose output type an attribute names (the schema binds it to the output alone).
_TYPE_ATTRS = ("to", "dtype")


@dataclass(frozen=True)
class Violation:
    """One node whose types break its schema.

    ``types`` holds the types that collide (two) or the one not allowed (one)."""

    node: str
    op_type: str
    param: str
    types: tuple[str, ...]
    allowed: tuple[str, ...]
    rule: str
    aten: str
    source: str
    module: str

    def __str__(self) -> str:
        if len(self.types) == 2:
            what = (f"type parameter {self.param} bound to two types, "
                    f"{self.types[0]} and {self.types[1]}")
        else:
            what = (f"{self.param} is {self.types[0]}, which the schema does not allow "
                    f"(allowed: {', '.join(self.allowed)})")
        lines = [f"node '{self.node}' ({self.op_type}): {what}"]
        if self.rule or self.aten:
            rule = f"rule {self.rule}" if self.rule else "the rule"
            lines.append(f"    written by {rule}" + (f" for {self.aten}" if self.aten else ""))
        if self.source:
            lines.append(f"    at {self.source}")
        if self.module:
            lines.append(f"    in module '{self.module}'")
        return "\n".join(lines)


@dataclass(frozen=True)
class _Formal:
    """One formal input or output: the name it binds (a type parameter, or a fixed type
    string such as ``tensor(int64)`` made unique per position), and its allowed types."""

    param: str
    allowed: frozenset[str]
    variadic: bool
    shared: bool  # bound together with the other actuals of this name


@dataclass(frozen=True)
class _Signature:
    inputs: tuple[_Formal, ...]
    outputs: tuple[_Formal, ...]


@functools.cache
def _signature(op_type: str, opset: int, domain: str) -> _Signature | None:
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None
    constraints = {c.type_param_str: frozenset(c.allowed_type_strs)
                   for c in schema.type_constraints}

    def formals(params: list[onnx.defs.OpSchema.FormalParameter], side: str
                ) -> tuple[_Formal, ...]:
        out = []
        for i, p in enumerate(params):
            variadic = p.option == _VARIADIC
            if p.type_str in constraints:
                out.append(_Formal(p.type_str, constraints[p.type_str], variadic,
                                   not variadic or p.is_homogeneous))
            else:  # a fixed type: its own parameter, shared with nothing
                out.append(_Formal(f"{side} {i} ({p.name})", frozenset({p.type_str}),
                                   variadic, False))
        return tuple(out)

    return _Signature(formals(list(schema.inputs), "input"),
                      formals(list(schema.outputs), "output"))


def _formal_at(formals: tuple[_Formal, ...], i: int) -> _Formal | None:
    if not formals:
        return None
    if i < len(formals):
        return formals[i]
    last = formals[-1]
    return last if last.variadic else None


def _dtype_name(dtype: ir.DataType) -> str:
    return {D.FLOAT: "float", D.DOUBLE: "double", D.BOOL: "bool",
            D.STRING: "string"}.get(dtype, dtype.name.lower())


def _type_str(type_: ir.TypeProtocol) -> str | None:
    if isinstance(type_, ir.TensorType):
        return f"tensor({_dtype_name(type_.dtype)})" if type_.dtype != D.UNDEFINED else None
    if isinstance(type_, ir.SequenceType):
        inner = _type_str(type_.elem_type)
        return f"seq({inner})" if inner else None
    if isinstance(type_, ir.OptionalType):
        inner = _type_str(type_.elem_type)
        return f"optional({inner})" if inner else None
    return None


class _Checker:
    """One walk: each node checked, then its untyped outputs given the types its schema
    implies (so later nodes see them)."""

    def __init__(self, model: ir.Model) -> None:
        self.opsets = dict(model.opset_imports)
        self.opsets.setdefault("", 1)
        # By id, holding the value too (so that its id is not reused while this lives).
        self.known: dict[int, tuple[ir.Value, str]] = {}
        self.found: list[Violation] = []

    def type_of(self, value: ir.Value) -> str | None:
        if value.type is not None:
            return _type_str(value.type)
        entry = self.known.get(id(value))
        return entry[1] if entry is not None and entry[0] is value else None

    def walk(self, graph: ir.Graph, owner: ir.Node | None) -> None:
        for node in graph:
            where = owner or node  # a subgraph's nodes carry no metadata: its owner's
            self.check(node, where)
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    self.walk(attr.as_graph(), where)
                elif attr.type == ir.AttributeType.GRAPHS:
                    for sub in attr.as_graphs():
                        self.walk(sub, where)
            self.infer_control_flow(node)

    def check(self, node: ir.Node, where: ir.Node) -> None:
        domain = "" if node.domain == "ai.onnx" else node.domain
        opset = self.opsets.get(domain)
        sig = _signature(node.op_type, opset, domain) if opset is not None else None
        if sig is None:
            return
        bound: dict[str, str] = {}
        untyped: list[tuple[ir.Value, str]] = []
        for formals, values in ((sig.inputs, node.inputs), (sig.outputs, node.outputs)):
            for i, value in enumerate(values):
                formal = _formal_at(formals, i)
                if value is None or formal is None:
                    continue
                type_ = self.type_of(value)
                if type_ is None:
                    if formal.shared and values is node.outputs:
                        untyped.append((value, formal.param))
                    continue
                if type_ not in formal.allowed:
                    self.report(node, where, formal.param, (type_,), formal.allowed)
                    continue
                if not formal.shared:
                    continue
                first = bound.setdefault(formal.param, type_)
                if first != type_:
                    self.report(node, where, formal.param, (first, type_), formal.allowed)
        if node.op_type == "Cast" and not domain and "to" in node.attributes:
            wanted = f"tensor({_dtype_name(D(node.attributes['to'].value))})"
            type_ = self.type_of(node.outputs[0])
            if type_ is not None and type_ != wanted:
                self.report(node, where, "output 0 (to)", (wanted, type_), (wanted,))
        for value, param in untyped:
            type_ = bound.get(param) or self.from_attribute(node)
            if type_ is not None:
                self.known[id(value)] = (value, type_)
        for i, value in enumerate(node.outputs):  # a fixed output type (Shape's int64)
            formal = _formal_at(sig.outputs, i)
            if (formal is not None and not formal.shared and len(formal.allowed) == 1
                    and self.type_of(value) is None):
                self.known[id(value)] = (value, next(iter(formal.allowed)))

    @staticmethod
    def from_attribute(node: ir.Node) -> str | None:
        for name in _TYPE_ATTRS:
            attr = node.attributes.get(name)
            if attr is not None and attr.type == ir.AttributeType.INT:
                return f"tensor({_dtype_name(D(attr.value))})"
        value = node.attributes.get("value")  # Constant, ConstantOfShape
        if value is not None and value.type == ir.AttributeType.TENSOR:
            return f"tensor({_dtype_name(value.value.dtype)})"
        if node.op_type == "ConstantOfShape" and not node.domain:
            return "tensor(float)"
        return None

    def infer_control_flow(self, node: ir.Node) -> None:
        """If / Loop / Scan outputs: their bodies' output types."""
        if node.domain or node.op_type not in ("If", "Loop", "Scan"):
            return
        body = node.attributes.get("then_branch" if node.op_type == "If" else "body")
        if body is None or body.type != ir.AttributeType.GRAPH:
            return
        outs = list(body.as_graph().outputs)[1 if node.op_type == "Loop" else 0:]
        for value, inner in zip(node.outputs, outs):  # a Scan output stacks its body's
            type_ = self.type_of(inner)
            if value.type is None and type_ is not None:
                self.known[id(value)] = (value, type_)

    def report(self, node: ir.Node, where: ir.Node, param: str, types: tuple[str, ...],
               allowed: frozenset[str] | tuple[str, ...]) -> None:
        props = where.metadata_props
        rule = str(node.meta.get("pt2onnx.rule") or where.meta.get("pt2onnx.rule") or "")
        self.found.append(Violation(
            node=node.name or "<unnamed>", op_type=node.op_type, param=param, types=types,
            allowed=tuple(sorted(allowed)), rule=rule, aten=props.get("pt2onnx.aten", ""),
            source=props.get("pt2onnx.source", ""), module=props.get("pt2onnx.module", "")))


def violations(model: ir.Model) -> list[Violation]:
    """Every node of ``model`` (subgraphs included) whose types break its schema."""
    checker = _Checker(model)
    checker.walk(model.graph, None)
    return checker.found

