"""Widens the types that onnxruntime's CPU build has no kernel for.

A rule writes each ONNX op in the dtype torch computes in. Some (op, dtype) pairs are
valid ONNX that onnxruntime's CPU build cannot load ("Could not find an implementation
for ReduceSum(13) node with name ..."): most ops in int8 / int16 / uint16 and in
bfloat16, and a few dtypes that ONNX's own schema does not allow for an op (``ReduceSum``
in int16, SAM's mask decoder). Such a node is written in a wider type that holds every
value of the narrow one, between ``Cast`` nodes:

- integers widen to int32 / int64 (unsigned ones to uint32 / uint64 first). Integer
  arithmetic wraps modulo 2^bits, and the cast back keeps the low bits, so sums,
  products, shifts and bitwise ops come out as in the narrow type;
- bfloat16 (and float16, where the schema lacks it) computes in float32, then rounds
  once: the result is as close to eager as the narrow kernel's, or closer;
- bool computes as 0 / 1 in uint8 or int32 (cast back, nonzero is True: torch's
  arithmetic on bools); uint64 travels as int64 only through ops that move values
  (``Where``, gathers, concatenation, reshapes);
- an op whose result is one of its inputs, an index or a bool (``MaxPool``,
  ``ArgMax``, comparisons, ``NonZero``) may also take a narrow integer as a float that
  holds every value exactly, where no integer type has a kernel.

Dtypes the rules left off intermediate values are worked out from ONNX's schemas
(an output bound to a type constraint has its inputs' dtype), never guessed.

float16 is left alone where the schema allows it: onnxruntime inserts the float32
casts itself for a float16 node that has only a float32 kernel, and other runtimes
have float16 kernels. What onnxruntime can do is read from its kernel registry into
``ort_cpu_kernels.json`` (tools/gen_ort_cpu_kernels.py). A node that still has no
kernel afterwards is named by :func:`unloadable` (the export warns).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from typing import Any

import onnx
import onnx_ir as ir

from pt2onnx.passes._graphs import rewrite_all
from pt2onnx.passes._ort_cpu_kernels import KERNELS

D = ir.DataType

# Wider types, in order of preference, that hold every value of the key exactly.
_WIDER: dict[ir.DataType, tuple[ir.DataType, ...]] = {
    D.INT8: (D.INT32, D.INT64),
    D.INT16: (D.INT32, D.INT64),
    D.UINT8: (D.UINT32, D.INT32, D.UINT64, D.INT64),
    D.UINT16: (D.UINT32, D.INT32, D.UINT64, D.INT64),
    D.UINT32: (D.UINT64, D.INT64),
    D.BFLOAT16: (D.FLOAT, D.DOUBLE),
    D.FLOAT16: (D.FLOAT, D.DOUBLE),
}
# bool computes as 0 / 1 in an integer type: a result cast back to bool is "nonzero",
# which is what torch's arithmetic on bools gives (True + True is True).
_BOOL_AS = (D.UINT8, D.INT32, D.INT64)
# uint64 only for ops that move values (the bit patterns survive in int64, the order and
# the arithmetic do not).
_BITS: dict[ir.DataType, tuple[ir.DataType, ...]] = {D.UINT64: (D.INT64,)}
_MOVES_VALUES = frozenset({
    "Where", "Gather", "GatherElements", "GatherND", "Concat", "Slice", "Transpose",
    "Reshape", "Expand", "Tile", "Pad", "Squeeze", "Unsqueeze", "Flatten", "Split",
    "Identity", "Compress", "DepthToSpace", "SpaceToDepth", "ReverseSequence", "Trilu",
    "ScatterND", "ScatterElements", "SplitToSequence", "ConcatFromSequence", "Shape", "Size",
})
# Ops whose result is one of their inputs' values, an index or a bool: a narrow integer
# may also travel as a float that holds it exactly (when no integer type has a kernel:
# MaxPool has none wider than int8).
_SELECTS = _MOVES_VALUES | {
    "MaxPool", "ArgMax", "ArgMin", "TopK", "Max", "Min", "ReduceMax", "ReduceMin", "Equal",
    "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "NonZero", "Unique",
}
_EXACT_FLOAT: dict[ir.DataType, tuple[ir.DataType, ...]] = {
    D.INT8: (D.FLOAT,), D.INT16: (D.FLOAT,), D.UINT8: (D.FLOAT,), D.UINT16: (D.FLOAT,),
    D.INT32: (D.DOUBLE,), D.UINT32: (D.DOUBLE,), D.BOOL: (D.FLOAT,),
}
# Ops whose value-carrying types are not the node's to change.
_SKIP = frozenset({"Cast", "CastLike", "Constant", "ConstantOfShape", "If", "Loop", "Scan",
                   "Optional", "OptionalGetElement", "OptionalHasElement"})


# The metadata a cast written for a node takes from it: where it is in the model, not
# which FX node or ATen op wrote it.
_PLACE = ("pt2onnx.module", "pt2onnx.module_type", "pt2onnx.source")


def place_of(node: ir.Node) -> dict[str, str]:
    """``node``'s place in the model (module path and type, source line), for the casts a
    pass writes beside it."""
    return {k: node.metadata_props[k] for k in _PLACE if k in node.metadata_props}


def _type_name(dtype: ir.DataType) -> str:
    return {D.FLOAT: "float", D.DOUBLE: "double", D.BOOL: "bool"}.get(dtype, dtype.name.lower())


_BY_NAME = {_type_name(d): d for d in D}
# The types nearly every onnxruntime CPU kernel has.
_COMMON = frozenset({"float", "double", "float16", "int32", "int64", "bool"})


@functools.cache
def _schema(op: str, opset: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        return None


def _is_function(schema: onnx.defs.OpSchema) -> bool:
    """Whether ONNX defines ``schema``'s op as a function of other ops."""
    return bool(getattr(schema, "has_function", False)
                or getattr(schema, "has_context_dependent_function", False))


def _ort_runs(op: str, since: int, binding: dict[str, str]) -> bool:
    """Whether onnxruntime's CPU build has a kernel for ``op`` (schema version
    ``since``) with these types; float16 also counts where float32 has one (onnxruntime
    casts such nodes itself)."""
    if op not in KERNELS:
        # No kernel of its own: onnxruntime expands the op's ONNX function (GroupNormalization
        # at opset 21) into ops whose kernels cover these types only.
        return all(t in _COMMON for t in binding.values())
    for alt in (binding, {k: "float" if v == "float16" else v for k, v in binding.items()}):
        for first, last, constraints in KERNELS.get(op, ()):
            if first <= since <= last and all(
                    alt[name] in constraints[name].split() for name in alt if name in constraints):
                return True
    return False


def _allowed(schema: onnx.defs.OpSchema, name: str) -> set[str]:
    for c in schema.type_constraints:
        if c.type_param_str == name:
            return {t.removeprefix("tensor(").removesuffix(")") for t in c.allowed_type_strs}
    return set()


def _params(schema: onnx.defs.OpSchema, formals: list[Any], count: int) -> list[str | None]:
    """The type constraint name bound to each of ``count`` actual inputs (or outputs)."""
    out: list[str | None] = []
    for i in range(count):
        if not formals:
            out.append(None)
            continue
        formal = formals[min(i, len(formals) - 1)]
        if i >= len(formals) and formal.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
            out.append(None)
            continue
        names = {c.type_param_str for c in schema.type_constraints}
        out.append(formal.type_str if formal.type_str in names else None)
    return out


def _formal_types(formals: list[Any], count: int) -> list[str | None]:
    """The ``type_str`` (a constraint name or a type such as ``tensor(int64)``) of each
    of ``count`` actual outputs."""
    out: list[str | None] = []
    for i in range(count):
        if not formals:
            out.append(None)
            continue
        formal = formals[min(i, len(formals) - 1)]
        variadic = formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
        out.append(formal.type_str if i < len(formals) or variadic else None)
    return out


class _Types:
    """Each value's dtype: its own, or worked out by ONNX's schemas from its producer
    (rules leave intermediate values untyped). Exact: an output bound to a type
    constraint has the dtype of the inputs bound to it."""

    def __init__(self, model: ir.Model, opset: int) -> None:
        # By id, holding the value too (so that its id is not reused while this lives).
        self.known: dict[int, tuple[ir.Value, ir.DataType]] = {}
        for node in ir.traversal.RecursiveGraphIterator(model.graph):
            if any(o.dtype is None for o in node.outputs) and not node.domain:
                self._infer(node, opset)

    def __call__(self, value: ir.Value) -> ir.DataType | None:
        if value.dtype is not None:
            return value.dtype
        entry = self.known.get(id(value))
        return entry[1] if entry is not None and entry[0] is value else None

    def _infer(self, node: ir.Node, opset: int) -> None:
        op, attrs = node.op_type, node.attributes
        found: list[ir.DataType | None] = [None] * len(node.outputs)
        if op == "Cast" and "to" in attrs:
            found = [ir.DataType(attrs["to"].value)]
        elif op in ("Constant", "ConstantOfShape"):
            value = attrs.get("value")
            found = [value.value.dtype if value is not None else
                     (D.FLOAT if op == "ConstantOfShape" else None)]
        elif op in ("If", "Loop", "Scan"):
            body = attrs.get("then_branch" if op == "If" else "body")
            if body is not None and body.type == ir.AttributeType.GRAPH:
                outs = list(body.as_graph().outputs)[1 if op == "Loop" else 0:]
                found = [o.dtype for o in outs][:len(node.outputs)]
        else:
            schema = _schema(op, opset)
            if schema is None:
                return
            ins = _params(schema, list(schema.inputs), len(node.inputs))
            binding = {name: self(v) for name, v in zip(ins, node.inputs)
                       if name is not None and v is not None and self(v) is not None}
            for i, t in enumerate(_formal_types(list(schema.outputs), len(node.outputs))):
                if t in binding:
                    found[i] = binding[t]
                elif t is not None and t.startswith("tensor("):
                    name = t.removeprefix("tensor(").removesuffix(")")
                    found[i] = _BY_NAME.get(name)
        for out, dtype in zip(node.outputs, found):
            if out.dtype is None and dtype is not None:
                self.known[id(out)] = (out, dtype)


def _binding(node: ir.Node, schema: onnx.defs.OpSchema, dtype_of: _Types
             ) -> tuple[dict[str, ir.DataType], list[str | None], list[str | None]] | None:
    """Each type constraint's dtype at this node, or None where a value bound to one is
    not a tensor."""
    ins = _params(schema, list(schema.inputs), len(node.inputs))
    outs = _params(schema, list(schema.outputs), len(node.outputs))
    binding: dict[str, ir.DataType] = {}
    for name, value in [*zip(ins, node.inputs), *zip(outs, node.outputs)]:
        if name is None or value is None:
            continue
        if value.type is not None and not isinstance(value.type, ir.TensorType):
            return None
        dtype = dtype_of(value)
        if dtype is None:
            continue
        if binding.setdefault(name, dtype) != dtype:
            return None
    return binding, ins, outs


def _fix(node: ir.Node, opset: int, dtype_of: _Types) -> dict[str, ir.DataType] | None:
    """The type constraints to widen and the types to widen them to: {} when the node
    runs as it is (or is not this pass's to judge), None when no widening makes it run."""
    if node.domain or node.op_type in _SKIP:
        return {}
    schema = _schema(node.op_type, opset)
    if schema is None or (node.op_type not in KERNELS and not _is_function(schema)):
        return {}
    bound = _binding(node, schema, dtype_of)
    if bound is None:
        return {}
    binding, ins, _ = bound
    names = {k: _type_name(v) for k, v in binding.items()}
    invalid = {k for k, v in names.items() if v not in _allowed(schema, k)}
    if not invalid and _ort_runs(node.op_type, schema.since_version, names):
        return {}

    def options(name: str) -> tuple[ir.DataType, ...]:
        if name not in ins:  # bound to outputs only: an attribute gives its type
            return ()
        dtype = binding[name]
        opts = _BOOL_AS if dtype == D.BOOL else _WIDER.get(dtype, ())
        if node.op_type in _MOVES_VALUES:
            opts = opts + _BITS.get(dtype, ())
        if node.op_type in _SELECTS:
            opts = opts + _EXACT_FLOAT.get(dtype, ())
        return tuple(w for w in opts if _type_name(w) in _allowed(schema, name))

    widenable = [k for k in names if options(k)]
    # The invalid constraints always, and as few of the others as will do.
    for size in range(len(invalid), len(widenable) + 1):
        for subset in itertools.combinations(widenable, size):
            if not invalid <= set(subset):
                continue
            for wides in itertools.product(*(options(k) for k in subset)):
                trial = dict(names, **{k: _type_name(w) for k, w in zip(subset, wides)})
                if _ort_runs(node.op_type, schema.since_version, trial):
                    return dict(zip(subset, wides))
    return None


def _rewrite_graph(graph: ir.Graph, opset: int, dtype_of: _Types,
                   names: Iterator[int]) -> int:
    """Rewrites ``graph``'s nodes. Each new value gets a name of its own: a subgraph's
    values share one namespace with the main graph's (SSA across graphs)."""
    count = 0
    for node in list(graph):
        choice = _fix(node, opset, dtype_of)
        if not choice:
            continue
        schema = _schema(node.op_type, opset)
        assert schema is not None
        bound = _binding(node, schema, dtype_of)
        assert bound is not None
        binding, ins, outs = bound
        new_nodes: list[ir.Node] = []
        inputs: list[ir.Value | None] = []
        for i, (name, value) in enumerate(zip(ins, node.inputs)):
            if value is not None and name in choice:
                cast = ir.Node("", "Cast", [value], [ir.AttrInt64("to", choice[name])],
                               name=f"{node.name}/widen_{i}")
                cast.outputs[0].dtype = choice[name]
                cast.outputs[0].shape = value.shape
                cast.outputs[0].name = f"ort_widened_{next(names)}"
                new_nodes.append(cast)
                value = cast.outputs[0]
            inputs.append(value)
        wide = ir.Node("", node.op_type, inputs, list(node.attributes.values()),
                       num_outputs=len(node.outputs), name=f"{node.name}/wide")
        new_nodes.append(wide)
        finals: list[ir.Value] = []
        for i, (name, out, wout) in enumerate(zip(outs, node.outputs, wide.outputs)):
            wout.name = f"ort_widened_{next(names)}"
            if name is not None and name in choice:
                wout.dtype = choice[name]
                wout.shape = out.shape
                back = ir.Node("", "Cast", [wout], [ir.AttrInt64("to", binding[name])],
                               name=f"{node.name}/narrow_{i}")
                back.outputs[0].dtype = binding[name]
                back.outputs[0].shape = out.shape
                new_nodes.append(back)
                finals.append(back.outputs[0])
            else:
                if out.type is not None:
                    wout.type, wout.shape = out.type, out.shape
                finals.append(wout)
        # The widened node is the node (its metadata and rule); its casts keep its place
        # in the model (module, source), which export-llm's stamping reads.
        wide.metadata_props.update(node.metadata_props)
        wide.meta.update(node.meta)
        for new in new_nodes:
            if new is not wide:
                new.metadata_props.update(place_of(node))
        ir.convenience.replace_nodes_and_values(graph, node, [node], new_nodes,
                                                list(node.outputs), finals)
        count += 1
    return count


def _opset(model: ir.Model) -> int:
    return model.opset_imports.get("", 1)


def apply(model: ir.Model) -> int:
    """Rewrites the model in place (subgraphs included); returns how many nodes it
    widened."""
    opset = _opset(model)
    dtype_of = _Types(model, opset)
    taken = {v.name for node in ir.traversal.RecursiveGraphIterator(model.graph)
             for v in node.outputs if v.name}
    names = (i for i in itertools.count() if f"ort_widened_{i}" not in taken)
    return rewrite_all(model, lambda graph: _rewrite_graph(graph, opset, dtype_of, names))


def unloadable(model: ir.Model) -> list[str]:
    """``op(dtype, ...)`` for each kind of node onnxruntime's CPU build has no kernel for,
    after :func:`apply` (sorted, each once)."""
    opset = _opset(model)
    dtype_of = _Types(model, opset)
    found: set[str] = set()
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if _fix(node, opset, dtype_of) is None:
            schema = _schema(node.op_type, opset)
            assert schema is not None
            bound = _binding(node, schema, dtype_of)
            types = ", ".join(f"{k}={_type_name(v)}" for k, v in (bound[0] if bound else {}).items())
            found.add(f"{node.op_type}({types})")
    return sorted(found)
