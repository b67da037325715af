"""The fast capture for static shapes: one eager run, recorded op by op.

With no dynamic dims, torch.export specialises every shape on the example, so what
it adds over a plain eager run is its checks that no Python decision depends on a
tensor's *values*, and functionalization. This module gets the same graph from a
single eager forward on the real example, recorded at the ATen dispatcher (a
``TorchDispatchMode``), without importing or running Dynamo, fake tensors or AOT
autograd. On YOLO11n that is the difference between the TorchScript exporter's speed
and several times it: importing torch.export's tracer alone costs more than the
TorchScript exporter's whole export.

A recording is used only when it provably equals what torch.export would capture.
It gives up (and the capture goes on to torch.export, which says nothing was lost)
when the run:

- reads a value out of a tensor that depends on the inputs or on a random op
  (``.item()``, ``bool(t)``, ``.tolist()``, ``.numpy()``: data-dependent control
  flow), or runs an op whose output *shape* depends on such values (``nonzero``,
  boolean masks, ``unique``);
- mutates a model input, a parameter or a buffer, or mutates a tensor through a
  view or while a view of it exists (these need functionalization), unless the
  value written is a constant (``_constant_writes``: swin's mask, filled slice by
  slice); an in-place op on a fresh intermediate (``relu_``, ``add_``) is recorded as
  its functional form;
- sees a tensor subclass, an ``out=`` op, or anything else it cannot map.

Ops that have a richer ONNX form (linear, scaled_dot_product_attention, layer_norm,
group_norm, rms_norm) are recorded whole, at the ``torch.nn.functional`` call,
where they have a rule; every other op is recorded as the dispatcher sees it.
"""

from __future__ import annotations

import contextlib
import operator
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.fx import traceback as fx_traceback
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from pt2onnx.capture import _aliases, _constant_writes, _frames
from pt2onnx.capture import _shape_only as _so
from pt2onnx.capture._heap import Trimmer, lean_limit, step_for
from pt2onnx.capture._op_tensors import _bind_schema, _map_tensors, _tensors

aten = torch.ops.aten


class Unrecordable(Exception):
    """The run did something a static recording cannot capture exactly."""


# torch.nn.functional calls recorded as one ATen op (when that op has a rule). Their
# parameters have the same names, in the same order, as the ATen schema's.
_WHOLE: dict[Any, Any] = {
    torch.nn.functional.linear: aten.linear.default,
    torch.nn.functional.layer_norm: aten.layer_norm.default,
    torch.nn.functional.group_norm: aten.group_norm.default,
    torch.nn.functional.scaled_dot_product_attention: aten.scaled_dot_product_attention.default,
}
if hasattr(torch.nn.functional, "rms_norm") and hasattr(aten, "rms_norm"):
    _WHOLE[torch.nn.functional.rms_norm] = aten.rms_norm.default

# Ways a Python value leaves a tensor without a dispatcher call.
_ESCAPES = {
    torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__array__, torch.Tensor.data_ptr,
    torch.Tensor.__dlpack__, torch.Tensor.untyped_storage,
}
_DATA = torch.Tensor.data  # its __get__ (a fresh method-wrapper each time) is what's seen
_VALUE_OPS = {aten.is_nonzero.default, aten._local_scalar_dense.default}
# Ops whose output shape comes from their inputs' values without the dynamic_output_shape
# tag saying so (torchvision's custom ops carry no tags).
_SHAPE_FROM_VALUES = {"aten::_pack_padded_sequence", "pt2onnx::packed_rnn",
                      "torchvision::nms", "pt2onnx::batched_nms"}
_STATIC_NAMESPACES = {"aten", "prims", "quantized_decomposed"}
_STATIC_OPS = {"pt2onnx::as_output"}
_MASK_INDEX_OPS = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default}

def _is_plain(t: torch.Tensor) -> bool:
    return type(t) in (torch.Tensor, torch.nn.Parameter)


class _Recording:
    """The graph being built and the map from live tensors to its nodes."""

    def __init__(self, module: torch.nn.Module, has_rule: Callable[[Any], bool]) -> None:
        from torch.utils.weak import WeakIdKeyDictionary

        self.graph = torch.fx.Graph()
        self.env: Any = WeakIdKeyDictionary()  # tensor -> fx.Node
        self.tainted: set[torch.fx.Node] = set()
        # ids of tensors that share memory with another tensor (a view, its base, an
        # aliasing op's input and output): mutating one needs functionalization.
        self.viewed: set[int] = set()
        self.state: dict[int, tuple[str, bool, torch.Tensor]] = {}
        for name, p in module.named_parameters():
            self.state.setdefault(id(p), (name, True, p))
        for name, b in module.named_buffers():
            self.state.setdefault(id(b), (name, False, b))
        self.state_nodes: list[tuple[torch.fx.Node, str, bool]] = []
        self.constants: dict[str, torch.Tensor] = {}
        self.constant_nodes: list[torch.fx.Node] = []
        self.anchor: torch.fx.Node | None = None  # the first user input placeholder
        self.has_rule = has_rule
        self.paused = 0
        # (key, path, type) of each module whose forward is running; a second call of
        # one module gets the key path@1, as torch.export's nn_module_stack keys it.
        self.module_stack: list[tuple[str, str, type]] = []
        self.module_calls: dict[str, int] = {}
        self.shape_only_ops = 0  # heavy ops whose output the recording did not compute
        self.computed_work = 0  # multiply-adds of the heavy ops it did compute
        # frees the heap pages of dropped intermediates (_heap.py), a step per weights
        weights = sum(t.numel() * t.element_size() for _, _, t in self.state.values())
        self.heap = Trimmer(step_for(weights), lean_limit(weights))
        self.heap.over = _so.lean_from_start()
        self.lean_ops = 0  # ops whose output it did not compute once lean (_so.lean)
        # ids of tensors an in-place op wrote as a constant (constant_again): their
        # constant is a copy, whatever its size.
        self.forced_clones: set[int] = set()
        self.refreshed: set[torch.fx.Node] = set()  # the constants made so, writable again
        self.written: list[torch.Tensor] = []
        self.constant_of: dict[torch.fx.Node, bool] = {}  # _from_constants, per node

    # -- values ------------------------------------------------------------------

    def fake(self, value: Any) -> Any:
        """Shape, stride and dtype of each tensor in ``value``, as a meta tensor.

        Not a FakeTensor: creating a FakeTensorMode imports Dynamo, which costs more
        than the recording. What needs a FakeTensor later (a per-node decomposition's
        trace) makes one from these (``_decomp.trace``)."""
        def one(t: Any) -> Any:
            if not isinstance(t, torch.Tensor):
                return t
            return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                                       device="meta")

        return _map_tensors(one, value)

    def _placeholder(self, name: str, value: torch.Tensor) -> torch.fx.Node:
        ctx = (self.graph.inserting_before(self.anchor) if self.anchor is not None
               else contextlib.nullcontext())
        with ctx:
            node = self.graph.placeholder(name)
        node.meta["val"] = self.fake(value)
        return node

    def node_of(self, t: torch.Tensor) -> torch.fx.Node:
        node = self.env.get(t)
        if node is not None:
            return node
        if not _is_plain(t):
            raise Unrecordable(f"a tensor subclass ({type(t).__name__}) reached the dispatcher")
        entry = self.state.get(id(t))
        if entry is not None and entry[2] is t:
            name, is_param, _ = entry
            node = self._placeholder(_safe(("p_" if is_param else "b_") + name), t)
            self.state_nodes.append((node, name, is_param))
        else:
            name = f"c_lifted_tensor_{len(self.constants)}"
            value = t.detach()
            forced = id(t) in self.forced_clones
            self.constants[name] = value.clone() if value.numel() <= 1 << 16 or forced \
                else value
            node = self._placeholder(name, t)
            self.constant_nodes.append(node)
            if forced:
                self.refreshed.add(node)
        self.env[t] = node
        return node

    def to_nodes(self, value: Any) -> Any:
        return _map_tensors(self.node_of, value)

    # -- ops -----------------------------------------------------------------------

    def record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
               inputs: list[torch.fx.Node]) -> None:
        node_args, node_kwargs = self.to_nodes((args, kwargs))
        node = self.graph.call_function(func, tuple(node_args), dict(node_kwargs))
        node.meta["stack_trace"] = _user_frame()
        custom = fx_traceback.current_meta.get("custom")
        if custom:  # pt2onnx.annotate blocks
            node.meta["custom"] = dict(custom)
        if self.module_stack:
            node.meta["nn_module_stack"] = {
                key: (path, mtype) for key, path, mtype in self.module_stack}
        tainted = (any(n in self.tainted for n in inputs) and func not in _constant_writes.SHAPE_FACTORIES) or (
            torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()))
        node.meta["val"] = self.fake(out)
        self.heap.made(out)
        if tainted:
            self.tainted.add(node)
        if isinstance(out, torch.Tensor):
            self._bind(out, node)
        elif isinstance(out, (tuple, list)):
            for i, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    getter = self.graph.call_function(operator.getitem, (node, i))
                    getter.meta["val"] = node.meta["val"][i]
                    if tainted:
                        self.tainted.add(getter)
                    self._bind(item, getter)

    def shape_only(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                   tensors: list[torch.Tensor], op: Any = None) -> Any:
        """A tensor shaped like ``func``'s output, from its meta kernel, when computing it
        would cost more than _so._SHAPE_ONLY_ABOVE multiply-adds; None: compute it."""
        if _so._compute_real() or any(t.device.type != "cpu" for t in tensors):
            return None
        work = _so._work(op or func, tensors, tuple(args))
        if work < _so._SHAPE_ONLY_ABOVE:
            return None
        own = _so._own_output(op or func, args)
        if own is not None:
            self.shape_only_ops += 1
            return own
        if self.computed_work + work <= _so._COMPUTE_BUDGET:
            self.computed_work += work
            return None
        try:
            meta = func(*self.fake(args), **self.fake(kwargs))
        except Exception:  # no meta kernel: compute it
            return None
        self.shape_only_ops += 1
        return _so._zeros_like_meta(meta)

    def lean(self, func: Any, args: Any, kwargs: Any, tensors: list[torch.Tensor]) -> Any:
        """Once the recording's resident set has grown past its limit (``heap.over``): a
        tainted op's large floating output as a tensor of its shape, not its value
        (``_so.lean_output``); None: compute it."""
        if not self.heap.over:
            return None
        out = _so.lean_output(func, args, kwargs, tensors, self.fake)
        if out is not None:
            self.lean_ops += 1
        return out

    def _bind(self, t: torch.Tensor, node: torch.fx.Node) -> None:
        base = t._base
        if base is not None:
            self.viewed.add(id(base))
        self.env[t] = node


def _dead_code(graph: torch.fx.Graph) -> None:
    """Drops unused ops, keeping the ones that exist for their effect on the export
    (``pt2onnx::as_output`` adds a graph output)."""
    keep = ("pt2onnx::as_output",)
    for node in reversed(list(graph.nodes)):
        if node.op != "call_function" or node.users:
            continue
        if getattr(node.target, "name", lambda: "")() in keep:
            continue
        graph.erase_node(node)


_SKIP_DIRS = tuple(os.path.dirname(m.__file__ or "") + os.sep for m in (torch, contextlib))
# This file, and the capture-time rewrites whose mode sees every call (frontends/_rewrites.py).
_OWN_FILES = frozenset({__file__, os.path.join(os.path.dirname(os.path.dirname(__file__)),
                                               "frontends", "_rewrites.py")})


def _user_frame() -> str:
    """The innermost frame of the model's code, as torch.export writes stack traces."""
    return _frames.stack_trace(_frames.user_frame(3, _SKIP_DIRS, _OWN_FILES, _RUN_CODE))


def _run(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return module(*args, **kwargs)


_RUN_CODE = _run.__code__


def _safe(name: str) -> str:
    """A Python identifier for a state name: torchvision's regnet names its blocks
    ``block1-0``, which the graph's generated code would read as a subtraction."""
    return re.sub(r"\W", "_", name)


def _functional(func: Any) -> Any:
    """``aten.add_.Tensor`` -> ``aten.add.Tensor``; None when there is no such op."""
    packet = func.overloadpacket.__name__
    if not packet.endswith("_") or packet.startswith("_"):
        return None
    target = getattr(aten, packet[:-1], None)
    if target is None:
        return None
    return getattr(target, func._overloadname, None)


# Functional ops whose result has their arguments' dtype when every argument is a tensor
# of that dtype (no scalars, no keywords: ``alpha`` and Python numbers promote). For them
# an in-place op needs no meta run of its functional form to know that no cast follows:
# resnet50's 65 in-place relu / add took a fifth of its recording that way.
_KEEPS_DTYPE = frozenset({aten.relu.default, aten.add.Tensor, aten.sub.Tensor,
                          aten.mul.Tensor})


def _same_dtype(functional: Any, args: Any, kwargs: Any, out: Any) -> bool:
    return (functional in _KEEPS_DTYPE and not kwargs and isinstance(out, torch.Tensor)
            and all(isinstance(a, torch.Tensor) and a.dtype == out.dtype for a in args))


class _Dispatch(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ in torch._disable_dynamo, whose first
        # call imports Dynamo; nothing here runs under torch.compile.
        return False

    def __init__(self, rec: _Recording) -> None:
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        rec = self.rec
        if rec.paused:
            return func(*args, **kwargs)
        tensors = _tensors((args, kwargs))
        for t in tensors:
            if not _is_plain(t):
                raise Unrecordable(f"{func} got a tensor subclass ({type(t).__name__})")
        inputs = [rec.node_of(t) for t in tensors]
        tainted = any(n in rec.tainted for n in inputs)
        tags = getattr(func, "tags", ())
        if func in _VALUE_OPS or torch.Tag.data_dependent_output in tags:
            if tainted:
                raise Unrecordable(
                    f"{func} reads a value that depends on the inputs (data-dependent "
                    "control flow)")
            # A value of a constant or a weight: the Python value is what the graph uses.
            return func(*args, **kwargs)
        name = func.name()
        if tainted and name in _SHAPE_FROM_VALUES:
            raise Unrecordable(f"{func}'s output shape depends on the inputs' values")
        if tainted and name.split("::", 1)[0] not in _STATIC_NAMESPACES and \
                name not in _STATIC_OPS:
            # A library's custom op: only its fake kernel (torch.export) knows whether
            # its output shape depends on values, as torchvision::nms's does.
            raise Unrecordable(f"{func} is a custom op; torch.export captures it with its "
                               "fake kernel")
        if tainted and torch.Tag.dynamic_output_shape in tags and not (
                func in _MASK_INDEX_OPS and not any(
                    t.dtype in (torch.bool, torch.uint8) for t in tensors[1:])):
            raise Unrecordable(f"{func}'s output shape depends on the inputs' values")
        schema = func._schema
        if schema.is_mutable:
            return self._inplace(func, args, kwargs, inputs)
        out = rec.shape_only(func, args, kwargs, tensors) if tainted and func in _so._HEAVY \
            else None
        if out is None and tainted:
            out = rec.lean(func, args, kwargs, tensors)
        if out is None:
            out = func(*args, **kwargs)
        rec.record(func, args, kwargs, out, inputs)
        if any(r.alias_info is not None for r in schema.returns):
            # A view (or alias) of its input: neither may be mutated later.
            rec.viewed.update(id(t) for t in tensors)
            rec.viewed.update(id(t) for t in _tensors(out))
        return out

    def _inplace(self, func: Any, args: Any, kwargs: Any, inputs: list[torch.fx.Node]) -> Any:
        rec = self.rec
        written = [a for a in func._schema.arguments if a.alias_info is not None
                   and a.alias_info.is_write]
        functional = _functional(func)
        if functional is None or len(written) != 1 or written[0].kwarg_only:
            raise Unrecordable(f"{func} mutates its arguments in a way that needs "
                               "functionalization")
        index = func._schema.arguments.index(written[0])
        target = args[index] if index < len(args) else kwargs.get(written[0].name)
        node = rec.env.get(target) if isinstance(target, torch.Tensor) else None
        if node is None or (node.op != "call_function" and node not in rec.refreshed):
            raise Unrecordable(f"{func} mutates a model input, parameter, buffer or constant")
        plan = None
        if target._base is not None or id(target) in rec.viewed or node in rec.refreshed:
            if _constant_writes.constant_again(rec, target, inputs):
                return func(*args, **kwargs)
            plan = _aliases.write_plan(rec, target) if node not in rec.refreshed else None
            if plan is None:
                raise Unrecordable(f"{func} mutates a tensor that has views")
        lean = (rec.heap.over and any(n in rec.tainted for n in inputs)
                and _so.lean_write(func, target))
        out = self._functional_write(func, functional, args, kwargs, inputs,
                                     target if lean else None)
        if plan is not None:
            plan.apply(rec, target)  # what shares target's memory reads the write
        return out

    def _functional_write(self, func: Any, functional: Any, args: Any, kwargs: Any,
                          inputs: list[torch.fx.Node], skipped: Any = None) -> Any:
        rec = self.rec
        # skipped: a lean recording's large tainted write, whose values nothing reads (an
        # in-place op returns the tensor it writes).
        out = skipped if skipped is not None else func(*args, **kwargs)
        # The functional op's node now stands for the mutated tensor; earlier users keep
        # the node of its old value. An in-place op keeps its target's dtype, where the
        # functional one promotes (a float16 ``v += float32_buffer``): then a cast follows.
        if _same_dtype(functional, args, kwargs, out):
            rec.record(functional, args, kwargs, out, inputs)
            return out
        margs, mkwargs = rec.fake((args, kwargs))
        try:
            natural = functional(*margs, **mkwargs)
        except Exception:
            natural = None
        if isinstance(natural, torch.Tensor) and isinstance(out, torch.Tensor) and (
                natural.dtype != out.dtype):
            rec.record(functional, args, kwargs, natural, inputs)
            rec.record(aten._to_copy.default, (natural,), {"dtype": out.dtype}, out,
                       [rec.node_of(natural)])
            return out
        rec.record(functional, args, kwargs, out, inputs)
        return out


class _Functions(TorchFunctionMode):
    def __init__(self, rec: _Recording) -> None:
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        rec = self.rec
        if rec.paused:
            return func(*args, **kwargs)
        if func in _ESCAPES:
            t = args[0] if args else None
            if isinstance(t, torch.Tensor):
                if rec.env.get(t) in rec.tainted:
                    raise Unrecordable(
                        f"Tensor.{func.__name__} reads values that depend on the inputs")
        if getattr(func, "__self__", None) is _DATA and func.__name__ == "__get__":
            # x.data: an alias made outside the dispatcher; it stands for x's node.
            out = func(*args, **kwargs)
            node = rec.env.get(args[0])
            if node is not None:
                rec.env[out] = node
            rec.viewed.update((id(args[0]), id(out)))
            return out
        op = _WHOLE.get(func)
        if op is not None and rec.has_rule(op):
            bound = _bind_schema(op, args, kwargs)
            if bound is not None:
                tensors = _tensors(bound)
                if all(_is_plain(t) for t in tensors):
                    inputs = [rec.node_of(t) for t in tensors]
                    rec.paused += 1
                    try:
                        tainted = any(n in rec.tainted for n in inputs)
                        out = rec.shape_only(func, args, kwargs, tensors, op) if op in _so._HEAVY \
                            and tainted else None
                        if out is None and tainted:
                            out = rec.lean(op, bound, {}, tensors)
                        if out is None:
                            out = func(*args, **kwargs)
                    finally:
                        rec.paused -= 1
                    rec.record(op, bound, {}, out, inputs)
                    return out
        return func(*args, **kwargs)


@contextlib.contextmanager
def _module_paths(rec: _Recording, module: torch.nn.Module) -> Iterator[None]:
    names = {id(m): name for name, m in module.named_modules()}
    from torch.nn.modules import module as nn_module

    def pre(m: torch.nn.Module, _args: Any) -> None:
        name = names.get(id(m))
        if name is not None:
            calls = rec.module_calls[name] = rec.module_calls.get(name, -1) + 1
            rec.module_stack.append((f"{name}@{calls}" if calls else name, name, type(m)))

    def post(m: torch.nn.Module, _args: Any, _out: Any) -> None:
        if id(m) in names and rec.module_stack:
            rec.module_stack.pop()

    handles = [nn_module.register_module_forward_pre_hook(pre),
               nn_module.register_module_forward_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def record(
    module: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    has_rule: Callable[[Any], bool],
    input_names: list[str],
    substitutions: Callable[[list[str]], Any],
) -> tuple[torch.export.ExportedProgram, list[str]]:
    """Records ``module(*args, **kwargs)``; raises Unrecordable when it must not be used."""
    from torch.export.graph_signature import (
        ConstantArgument,
        InputKind,
        InputSpec,
        OutputKind,
        OutputSpec,
        TensorArgument,
    )

    from pt2onnx import _compat

    rec = _Recording(module, has_rule)
    flat, in_spec = pytree.tree_flatten((args, kwargs))
    user_nodes = []
    for value, name in zip(flat, input_names):
        node = rec.graph.placeholder(name)
        node.meta["val"] = rec.fake(value) if isinstance(value, torch.Tensor) else value
        if isinstance(value, torch.Tensor):
            if not _is_plain(value):
                raise Unrecordable(f"input {name} is a tensor subclass")
            if value not in rec.env:
                rec.env[value] = node
            rec.tainted.add(node)
        rec.anchor = rec.anchor or node
        user_nodes.append((node, value))
    notes: list[str] = []
    with torch.no_grad(), substitutions(notes), _module_paths(rec, module), \
            _Functions(rec), _Dispatch(rec):
        try:
            out = _run(module, args, kwargs)
        finally:  # a recording given up frees its heap pages too
            rec.heap.done()
    from pt2onnx.frontends import register_mappings

    register_mappings(out)  # dict subclasses (class Output(OrderedDict)) are named by key
    leaves, out_spec = pytree.tree_flatten(out)
    for leaf in leaves:
        if not isinstance(leaf, (torch.Tensor, int, float, bool, str, type(None))):
            raise Unrecordable(f"the model returns a {type(leaf).__name__}, which is not a "
                               "tensor or a known container of tensors")
    outputs: list[Any] = []
    output_specs = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            node = rec.node_of(leaf)
            outputs.append(node)
            output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(node.name),
                                           target=None))
        else:
            outputs.append(leaf)
            output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, ConstantArgument("", leaf),
                                           target=None))
    rec.graph.output(tuple(outputs))
    _dead_code(rec.graph)
    # Weights and constants only something dropped as dead code read are left out.
    for node in [*(n for n, _, _ in rec.state_nodes), *rec.constant_nodes]:
        if not node.users:
            rec.graph.erase_node(node)
    live = {n for n in rec.graph.nodes if n.op == "placeholder"}
    input_specs: list[Any] = []
    for node, name, is_param in rec.state_nodes:
        if node in live:
            kind = InputKind.PARAMETER if is_param else InputKind.BUFFER
            input_specs.append(InputSpec(kind, TensorArgument(node.name), target=name,
                                         persistent=None if is_param else True))
    for node in rec.constant_nodes:
        if node in live:
            input_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(node.name),
                                         target=node.name))
    for node, value in user_nodes:
        arg: Any = (TensorArgument(node.name) if isinstance(value, torch.Tensor)
                    else ConstantArgument(node.name, value))
        input_specs.append(InputSpec(InputKind.USER_INPUT, arg, target=None))
    # Placeholders in the order of the specs, as ExportedProgram expects.
    by_name = {n.name: n for n in rec.graph.nodes if n.op == "placeholder"}
    first_other = next(n for n in rec.graph.nodes if n.op != "placeholder")
    for spec in input_specs:
        first_other.prepend(by_name[spec.arg.name])
    gm = _compat.lazy_graph_module(torch.nn.Module(), rec.graph)
    state_dict = {name: t for name, _is_param, t in rec.state.values()}
    constants = {name: rec.constants[name] for name in
                 (n.name for n in rec.constant_nodes if n in live)}
    program = _compat.exported_program_from_graph(
        gm, input_specs, output_specs, state_dict, constants, in_spec, out_spec)
    return program, notes
