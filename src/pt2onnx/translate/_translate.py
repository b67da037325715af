"""Walks an ExportedProgram's FX graph once and builds the ONNX graph."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

from pt2onnx.errors import (
    MissingOp,
    TranslationError,
    UnsupportedOperatorError,
)
from pt2onnx.translate import _builder, _decomp
from pt2onnx.translate._baked_sizes import no_baked_sizes
from pt2onnx.translate._checks import _check_output, _check_result, touches_complex
from pt2onnx.translate._finish import ir_version, unname_tied_dims
from pt2onnx.translate._fold import FOLD_LIMIT, Const, empty_result, fold, foldable, get_attr
from pt2onnx.translate._fx_meta import (
    Source,
    cache_depths,
    output_names_from_spec,
    path_parts,
    shape_of,
    source_of,
    spec_paths,
    type_of,
)
from pt2onnx.translate._registry import Registry, RuleEntry, op_name

# Keyword arguments that carry no meaning in an ONNX graph.
_IGNORED_KWARGS = frozenset({"layout", "device", "pin_memory", "memory_format", "non_blocking"})
_WRAPPER_HOPS = frozenset(
    getattr(torch.ops.higher_order, name)
    for name in ("wrap_with_set_grad_enabled", "wrap_with_autocast")
    if hasattr(torch.ops.higher_order, name)
)


class Translator:
    """One use: ``Translator(ep, registry, opset).run()`` returns an ``ir.Model``."""

    def __init__(
        self,
        ep: torch.export.ExportedProgram,
        registry: Registry,
        opset: int,
        custom: dict[Any, Callable[..., Any]] | None = None,
        input_names: list[str] | None = None,
        output_names: list[str] | None = None,
        dim_names: list[dict[int, str]] | None = None,
    ) -> None:
        self.ep = ep
        self.registry = registry
        self.opset = opset
        self.custom = {k: RuleEntry(1, v, None) for k, v in (custom or {}).items()}
        self.input_names = input_names
        self.output_names = output_names
        self.graph = ir.Graph([], [], nodes=[], opset_imports={"": opset}, name="main_graph")
        self.g = _builder.RuleContext(self.graph, opset)
        self.g.inline = self.inline
        self.g._value_of = lambda n: self._materialize(self.env[n])
        self.env: dict[torch.fx.Node, Any] = {}
        self.missing: list[MissingOp] = []
        self.histogram: dict[str, int] = {}
        self.folded = 0
        self.warnings: list[str] = []
        self._names: set[str] = set()
        self._source_cache: dict[Any, Source] = {}
        # id(Const) -> (the Const, its initializer). The Const is kept alive with it: a
        # folded Const freed after its last use would leave its id to the next Const, and
        # that one would get the wrong initializer (found by the fuzzer: an index_put
        # whose index constant read the values' constant).
        self._const_values: dict[int, tuple[Const, ir.Value]] = {}
        # User-facing names of symbolic dims: sympy symbol -> sympy symbol named by the user.
        self._dim_names = dim_names or []
        self.sym_names: dict[Any, Any] = {}
        # str(symbol) -> the input dims (tensor input index, axis) that torch.export tied
        # into it and the model runs apart (a broadcast, one side 1): the symbol's value
        # is their largest, as eager's broadcast result has.
        self.tie_sizes: dict[str, list[tuple[int, int]]] = {}
        # Debugging hooks: rules append (name, value) to g.extra_outputs (pt2onnx.as_output);
        # fx_values maps each FX node name to its ONNX value and rule (verify(bisect=True)).
        self.extra_outputs: list[tuple[str, ir.Value]] = []
        self.g.extra_outputs = self.extra_outputs  # type: ignore[attr-defined]
        self.fx_values: dict[str, tuple[ir.Value, str]] = {}
        # Per-node decomposition: the (node, op, source) being decomposed, outermost
        # first; traces reused by nodes with equal keys; (op, source) -> count.
        self._outer: list[tuple[torch.fx.Node, Any, str]] = []
        self._traces: dict[str, tuple[torch.fx.GraphModule, Any]] = {}
        self.decompositions: dict[tuple[str, str], int] = {}
        self.trace_seconds = 0.0

    # -- entry point ----------------------------------------------------
    def run(self) -> ir.Model:
        graph_module = self.ep.graph_module
        self._bind_inputs(graph_module.graph)
        for node in graph_module.graph.nodes:
            if node.op == "call_function":
                self._call(node)
            elif node.op == "output":
                self._bind_outputs(node)
            elif node.op == "get_attr":
                self.env[node] = get_attr(graph_module, node.target)
        if self.missing:
            raise UnsupportedOperatorError(self.missing, self.opset)
        seen: set[str] = set()
        for node in self.g.nodes:
            # Nodes from one decomposed FX node share its name; onnxruntime wants each once.
            if node.name in seen:
                base, i = node.name, 1
                while f"{base}_{i}" in seen:
                    i += 1
                node.name = f"{base}_{i}"
            if node.name:
                seen.add(node.name)
            self.graph.append(node)
        for domain, version in self.g.domains.items():
            self.graph.opset_imports.setdefault(domain, version)
        if self.tie_sizes:
            names = {str(self.sym_names.get(k, k)) for k in self.sym_names
                     if str(k) in self.tie_sizes}
            unname_tied_dims(self.graph, names | set(self.tie_sizes))
        return ir.Model(self.graph, ir_version=ir_version(self.graph, self.opset),
                        producer_name="pt2onnx")

    def inline(self, gm: torch.fx.GraphModule, inputs: list[Any],
               materialize: bool = True) -> list[Any]:
        """Translates a subgraph (a cond branch, a loop body) into the current node list.

        ``inputs`` bind the subgraph's placeholders in order; the returned list
        holds one value per subgraph output. Rules emit into a fresh list with
        ``g.scope()`` to build an ONNX subgraph from it.
        """
        saved = (self.env, self.g.node, self.g.meta)
        self.env = {}
        try:
            placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
            if len(placeholders) != len(inputs):
                raise TranslationError(
                    f"subgraph expects {len(placeholders)} inputs but got {len(inputs)}"
                )
            self.env.update(zip(placeholders, inputs))
            outputs: list[Any] = []
            for node in gm.graph.nodes:
                if node.op == "call_function":
                    self._call(node)
                elif node.op == "get_attr":
                    self.env[node] = get_attr(gm, node.target)
                elif node.op == "output":
                    out = node.args[0]
                    outs = list(out) if isinstance(out, (list, tuple)) else [out]
                    outputs = [self._value_of(o) for o in outs]
            if not materialize:
                return outputs
            return [self._as_value(o) if not isinstance(o, ir.Value) else o for o in outputs]
        finally:
            self.env, self.g.node, self.g.meta = saved

    # -- inputs and outputs -------------------------------------------
    def _cache_input_names(self) -> list[str | None]:
        """Per user input leaf: ``past_key_values_...`` where the leaf is in a transformers
        Cache passed as an argument of its own (whatever that argument is called; see
        ``_fx_meta.path_parts``), else None."""
        try:
            spec = self.ep.call_spec.in_spec
            paths = spec_paths(spec)
        except Exception:
            return []
        names: list[str | None] = []
        for path, depth in zip(paths, cache_depths(spec)):
            # (args, kwargs) -> the argument -> inside it: a Cache argument is at depth 2.
            parts, raw = path_parts(path, depth), path_parts(path)
            names.append("_".join(parts[1:]) if depth == 2 and parts != raw else None)
        return names

    def _bind_inputs(self, fx_graph: torch.fx.Graph) -> None:
        specs = {s.arg.name: s for s in self.ep.graph_signature.input_specs if hasattr(s.arg, "name")}
        user_index = 0
        leaf_index = 0
        cache_names = self._cache_input_names()
        for node in fx_graph.nodes:
            if node.op != "placeholder":
                continue
            spec = specs.get(node.name)
            val = node.meta.get("val")
            if spec is None or spec.kind == InputKind.USER_INPUT:
                leaf_index += 1
                if not isinstance(val, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
                    # Non-tensor user inputs (ints, None, strings) were specialised.
                    self.env[node] = val
                    continue
                canonical = cache_names[leaf_index - 1] if leaf_index <= len(cache_names) \
                    else None
                name = canonical or node.name
                if self.input_names and user_index < len(self.input_names):
                    name = self.input_names[user_index]
                self._name_dims(val, name, user_index)
                shape = self._declared_shape(shape_of(val, self.sym_names), user_index)
                user_index += 1
                value = ir.Value(name=self._unique(name), type=type_of(val), shape=shape)
                if isinstance(val, torch.Tensor) and val.is_complex():
                    _builder.mark_complex(value)  # fed as torch.view_as_real(x)
                self.graph.inputs.append(value)
                self.env[node] = value
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                tensor = self._lookup_state(spec)
                name = spec.target or node.name
                if spec.kind != InputKind.PARAMETER and tensor.numel() <= FOLD_LIMIT:
                    self.env[node] = Const(tensor, name)
                else:
                    value = self.g.tensor_initializer(tensor, self._unique(name))
                    value.meta["pt2onnx.weight"] = name
                    self.env[node] = value
            elif spec.kind == InputKind.TOKEN:
                self.env[node] = None
            elif spec.kind == InputKind.CUSTOM_OBJ and isinstance(
                self.ep.constants.get(spec.target or ""), torch.Generator
            ):
                # A generator only reaches the random rules, which warn that it is not kept.
                self.env[node] = self.ep.constants[spec.target or ""]
            else:
                raise TranslationError(
                    f"input {node.name} of kind {spec.kind.name} is not supported; "
                    "script objects cannot be exported to ONNX"
                )

    def _broadcast_size(self, where: list[tuple[int, int]]) -> ir.Value:
        """The largest of these input dims: a tied symbol's size where one side is 1."""
        op = self.g.op
        sizes = [op.Shape(self.graph.inputs[i], start=axis, end=axis + 1) for i, axis in where]
        size = op.Squeeze(op.Max(*sizes) if len(sizes) > 1 else sizes[0], self.g.const([0]))
        # A size, as any sym_size is: rules that read its dtype (ge.Scalar against it,
        # fuzz seed 5227, program 3085) find int64.
        size.dtype, size.shape = ir.DataType.INT64, ir.Shape([])
        return size

    def _declared_shape(self, shape: ir.Shape | None, index: int) -> ir.Shape | None:
        """``shape`` with each symbolic dim under the name the user declared for that
        input axis: two declared dims that torch.export tied (a broadcast) and the model
        runs apart keep their own names."""
        given = self._dim_names[index] if index < len(self._dim_names) else {}
        if shape is None or not given:
            return shape
        dims = [ir.SymbolicDim(given[axis]) if axis in given and isinstance(d, ir.SymbolicDim)
                and d.value is not None and not d.value[:1].isdigit() and d.value != given[axis]
                and d.value.isidentifier() else d for axis, d in enumerate(shape)]
        return ir.Shape(dims)

    def _name_dims(self, val: Any, input_name: str, index: int) -> None:
        """Gives each symbolic input dim the user's name, or ``<input>_dim<axis>``."""
        if not isinstance(val, torch.Tensor):
            return
        import sympy

        given = self._dim_names[index] if index < len(self._dim_names) else {}
        for axis, d in enumerate(val.shape):
            if isinstance(d, torch.SymInt) and isinstance(d.node.expr, sympy.Symbol):
                if d.node.expr not in self.sym_names:
                    name = given.get(axis) or f"{input_name}_dim{axis}"
                    self.sym_names[d.node.expr] = sympy.Symbol(name)
            elif isinstance(d, torch.SymInt) and axis in given:
                # A derived dim (2 * half): its one free symbol is the root the user named.
                free = list(d.node.expr.free_symbols)
                if len(free) == 1 and free[0] not in self.sym_names:
                    self.sym_names[free[0]] = sympy.Symbol(given[axis])

    def _lookup_state(self, spec: Any) -> torch.Tensor:
        target = spec.target
        if target in self.ep.state_dict:
            return self.ep.state_dict[target]
        return self.ep.constants[target]

    def _bind_outputs(self, node: torch.fx.Node) -> None:
        specs = self.ep.graph_signature.output_specs
        results = node.args[0]
        assert isinstance(results, (list, tuple))
        user = [r for r, s in zip(results, specs) if s.kind in (OutputKind.USER_OUTPUT,)]
        dropped = [s for s in specs if s.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION)]
        if dropped:
            self.warnings.append(
                f"{len(dropped)} in-place update(s) of buffers or inputs are not part of the "
                "ONNX graph: " + ", ".join(str(s.target) for s in dropped[:5])
            )
        seen: set[int] = set()
        defaults = output_names_from_spec(self.ep, len(user))
        for i, fx_out in enumerate(user):
            value = self._value_of(fx_out)
            if not isinstance(value, ir.Value):
                if value is None:
                    continue
                _check_output(i, value)
                value = self._as_value(value)
            wanted = self.output_names[i] if self.output_names and i < len(self.output_names) else None
            wanted = wanted or defaults[i]
            if (
                id(value) in seen
                or value.is_graph_input()
                or value.is_initializer()
                or value.producer() is None
            ):
                source, value = value, self.g.op.Identity(value)
                self._type_value(value, getattr(fx_out, "meta", {}).get("val"))
                if value.type is None:  # a constant output (an int the model returns)
                    value.type, value.shape = source.type, source.shape
            elif value.type is None:  # named inside a decomposition, before it was typed
                self._type_value(value, getattr(fx_out, "meta", {}).get("val"))
            seen.add(id(value))
            if wanted is not None:
                self._names.discard(value.name or "")
                value.name = self._unique(wanted)
            self.graph.outputs.append(value)
        for name, value in self.extra_outputs:
            if value.name in {o.name for o in self.graph.outputs} or value.producer() is None:
                # Left in g.nodes: run() appends it after the nodes it reads.
                source, value = value, self.g.op.Identity(value)
                value.type, value.shape = source.type, source.shape
            self._names.discard(value.name or "")
            value.name = self._unique(name)
            self.graph.outputs.append(value)

    def _value_of(self, arg: Any) -> Any:
        if isinstance(arg, torch.fx.Node):
            return self.env[arg]
        return arg

    # -- nodes ----------------------------------------------------------
    def _call(self, node: torch.fx.Node) -> None:
        target = node.target
        if target is torch.ops.aten.sym_size.int and self.tie_sizes:
            val = node.meta.get("val")
            tied = self.tie_sizes.get(str(val.node.expr)) if isinstance(
                val, torch.SymInt) else None
            if tied:
                self.env[node] = self._broadcast_size(tied)
                return
        args = [self._arg(a) for a in node.args]
        kwargs = {k: self._arg(v) for k, v in node.kwargs.items()}
        if foldable(target, args, kwargs):
            result = fold(node, args, kwargs)
            if result is not None:
                self.env[node] = result
                self.folded += 1
                return
        empty = empty_result(node, target)
        if empty is not None:
            # A static empty result is a constant: onnxruntime refuses some kernels on
            # 0-size inputs (MatMul broadcasting a 0 batch, LayerNormalization over 0
            # elements, Reshape of a 0-size diagonal) that eager accepts.
            self.env[node] = empty
            return
        if target in _WRAPPER_HOPS:
            # A region wrapper (grad mode, autocast): its body is just more graph.
            # Inlined with constants unmaterialised, so folding goes on inside it.
            k = next(i for i, a in enumerate(args) if isinstance(a, torch.fx.GraphModule))
            saved = (self.g.node, self.g.meta)
            self.env[node] = tuple(self.inline(args[k], list(args[k + 1:]), materialize=False))
            self.g.node, self.g.meta = saved
            return
        mutated = None
        if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            functional = _decomp.functional_variant(node)
            if functional is not None:
                # Functionalize by rebinding: later readers of the tensor see the result.
                mutated, target = node.args[0], functional
        # A node that reads or writes complex tensors sees them as (real, imag) pairs:
        # only rules written for that layout apply (Registry's complex table).
        is_complex = touches_complex(node)
        entry = self.custom.get(target) or (
            self.registry.lookup(target, self.opset, complex=True) if is_complex
            else self.registry.lookup(target, self.opset))
        if entry is None and self._decompose(node, target):
            if isinstance(mutated, torch.fx.Node):
                self.env[mutated] = self.env[node]
            return
        if entry is None:
            src = source_of(node, self._source_cache)
            name = op_name(target) + (" on complex tensors" if is_complex else "")
            self.missing.append(MissingOp(name, src.source, src.module, node.name))
            self.env[node] = self._placeholder(node)
            return
        if isinstance(target, torch._ops.OpOverload):
            args, kwargs = self._fill_from_schema(target, args, kwargs, entry)
        args = [self._materialize(a) for a in args]
        kwargs = {k: self._materialize(v) for k, v in kwargs.items()}
        self.g.node = node
        self.g.meta = node.meta.get("val")
        start = len(self.g.nodes)
        try:
            with no_baked_sizes():
                result = entry.fn(self.g, *args, **kwargs)
        except Exception as exc:
            if self.missing:
                self.env[node] = self._placeholder(node)
                return
            src = source_of(node, self._source_cache)
            where = f"\n  at {src.source}" if src.source else ""
            module = f"\n  in module '{src.module}' ({src.module_type})" if src.module else ""
            raise TranslationError(
                f"the rule {getattr(entry.fn, '__qualname__', entry.fn)} for {op_name(target)} "
                f"failed on node {node.name}: {type(exc).__name__}: {exc}{where}{module}\n"
                "Next step: check the rule against the op's schema, or override it with "
                "custom_translations={op: fn}."
            ) from exc
        _check_result(node, result, entry.fn, source_of(node, self._source_cache))
        if isinstance(result, ir.Value) and not self._outer:
            self.fx_values[node.name] = (result, getattr(entry.fn, "__qualname__", str(entry.fn)))
        self._finish(node, result, start, entry.fn)
        if isinstance(mutated, torch.fx.Node):
            self.env[mutated] = result

    def _decompose(self, node: torch.fx.Node, op: Any) -> bool:
        """Translates ``node`` through the first decomposition of ``op`` that translates.

        Each candidate (``_decomp.candidates``) is traced on the node's meta
        values and its graph translated in place; an op in it without a rule is
        decomposed again, up to ``_decomp.MAX_DEPTH`` deep. A candidate that
        leaves an op untranslated is rolled back and the next one tried.
        """
        if not isinstance(op, torch._ops.OpOverload) or len(self._outer) >= _decomp.MAX_DEPTH:
            return False
        inputs = [a for a in pytree.tree_leaves((node.args, node.kwargs))
                  if isinstance(a, torch.fx.Node)]
        failure: Exception | None = None
        for source, fn in _decomp.candidates(op):
            key = f"{source}:{_decomp.trace_key(op, node)}"
            if key not in self._traces:
                began = time.perf_counter()
                try:
                    self._traces[key] = _decomp.trace(fn, node)
                except _decomp.SpecializedTrace:
                    raise
                except Exception:  # not traceable on these inputs: try the next source
                    continue
                finally:
                    self.trace_seconds += time.perf_counter() - began
            gm, out_spec = self._traces[key]
            missing, start = len(self.missing), len(self.g.nodes)
            self._outer.append((node, op, source))
            try:
                outs: list[Any] | None = self.inline(
                    gm, [self.env[n] for n in inputs], materialize=False)
            except TranslationError as exc:
                failure, outs = exc, None
            finally:
                self._outer.pop()
            if outs is None or len(self.missing) > missing:
                del self.missing[missing:], self.g.nodes[start:]
                continue
            self.env[node] = result = pytree.tree_unflatten(outs, out_spec)
            if isinstance(result, ir.Value) and not self._outer:
                self.fx_values[node.name] = (result, f"{op_name(op)} ({source})")
            counted = (op_name(op), source)
            self.decompositions[counted] = self.decompositions.get(counted, 0) + 1
            return True
        if failure is not None:
            raise failure
        return False

    def _arg(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(x) for x in a)
        return a

    def _fill_from_schema(
        self, op: torch._ops.OpOverload, args: list[Any], kwargs: dict[str, Any], entry: RuleEntry
    ) -> tuple[list[Any], dict[str, Any]]:
        """Positional arguments, then keywords, then defaults, as the schema says."""
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        accepted = entry.kwarg_names
        for i, arg in enumerate(op._schema.arguments):
            if i < len(args):
                value = args[i]
            elif arg.name in kwargs:
                value = kwargs[arg.name]
            elif arg.has_default_value():
                value = arg.default_value
            else:
                value = None
            if arg.kwarg_only:
                if arg.name in _IGNORED_KWARGS and (accepted is not None and arg.name not in accepted):
                    continue
                keywords[arg.name] = value
            else:
                positional.append(value)
        return positional, keywords

    def _materialize(self, a: Any) -> Any:
        if isinstance(a, Const):
            return self._as_value(a)
        if isinstance(a, (list, tuple)) and any(isinstance(x, Const) for x in a):
            return type(a)(self._materialize(x) for x in a)
        return a

    def _as_value(self, a: Any) -> ir.Value:
        if isinstance(a, Const):
            entry = self._const_values.get(id(a))
            if entry is not None and entry[0] is a:
                return entry[1]
            name = self._unique(a.name) if a.name else None
            cached = self.g.tensor_initializer(a.tensor, name)
            if name:
                self._names.add(cached.name or "")
            self._const_values[id(a)] = (a, cached)
            return cached
        if isinstance(a, torch.Tensor):
            return self._as_value(Const(a))
        return self.g.const(a)

    def _finish(self, node: torch.fx.Node, result: Any, start: int, rule: Any = None) -> None:
        self.env[node] = result
        val = node.meta.get("val")
        # Inside a decomposition, names, source and annotations are the decomposed node's.
        top = self._outer[0][0] if self._outer else node
        label = f"{top.name}_{node.name}" if self._outer else node.name
        if isinstance(result, ir.Value):
            self._name_value(result, label, val)
        elif isinstance(result, (tuple, list)):
            for i, r in enumerate(result):
                if isinstance(r, ir.Value):
                    sub = val[i] if isinstance(val, (tuple, list)) and i < len(val) else None
                    self._name_value(r, f"{label}_{i}" if i else label, sub)
        new_nodes = self.g.nodes[start:]
        if not new_nodes:
            return
        src = source_of(top, self._source_cache)
        op = op_name(node.target)
        props = {"pt2onnx.fx_node": top.name, "pt2onnx.aten": op}
        if self._outer:
            _, outer_op, source = self._outer[0]
            props["pt2onnx.decomposed"] = f"{op_name(outer_op)} ({source})"
        if src.source:
            props["pt2onnx.source"] = src.source
        if src.module:
            props["pt2onnx.module"] = src.module
            props["pt2onnx.module_type"] = src.module_type
        custom = top.meta.get("custom")
        if custom and isinstance(custom.get("pt2onnx.annotate"), dict):
            props.update({k: str(v) for k, v in custom["pt2onnx.annotate"].items()})
        prefix = f"{src.module}/" if src.module else ""
        # The rule that wrote each node, in memory only (the type check names it).
        written_by = _rule_name(rule) if rule is not None else None
        for i, onnx_node in enumerate(new_nodes):
            onnx_node.metadata_props.update(props)
            if written_by:
                onnx_node.meta["pt2onnx.rule"] = written_by
            # In memory only: passes/module_functions.py reads it (a node a pass writes
            # later has none, and joins the module calls of its neighbours).
            onnx_node.meta["pt2onnx.modules"] = src.stack
            onnx_node.name = f"{prefix}{label}" + (f"#{i}" if i else "")
            self.histogram[onnx_node.op_type] = self.histogram.get(onnx_node.op_type, 0) + 1

    def _name_value(self, value: ir.Value, name: str, val: Any) -> None:
        producer = value.producer()
        if producer is None or value.name is not None:
            return
        value.name = self._unique(name)
        self._type_value(value, val)

    def _type_value(self, value: ir.Value, val: Any) -> None:
        if val is not None:
            value.type = type_of(val)
            value.shape = shape_of(val, self.sym_names)
            if isinstance(val, torch.Tensor) and val.is_complex():
                _builder.mark_complex(value)

    def _unique(self, name: str) -> str:
        base, k = name, 0
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name

    def _placeholder(self, node: torch.fx.Node) -> Any:
        val = node.meta.get("val")
        if isinstance(val, (tuple, list)):
            return tuple(ir.Value(name=f"{node.name}_{i}") for i in range(len(val)))
        value = ir.Value(name=node.name)
        self._type_value(value, val)
        return value


def _rule_name(fn: Any) -> str:
    """``module.qualname`` of a rule function (``pt2onnx.rules.attention.sdpa``)."""
    qualname = getattr(fn, "__qualname__", None) or str(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}.{qualname}" if module else qualname
