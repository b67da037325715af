"""Stamping: the decoder layers are captured once per kind, then copied for every layer.

torch.export's capture costs about the same for each decoder layer, and the layers of
one model are the same code with other weights. So export-llm captures a copy of the
model cut to ``M`` layers: two periods of its layer pattern (one for the families
whose layers are all alike; Gemma2's sliding/global pair has two) plus the remainder,
so that its last layer is of the same kind as the model's last. The ONNX graph of that
capture is then grown to every layer:

- each ONNX node knows its module (``pt2onnx.module`` metadata, from the FX node's
  ``nn_module_stack``), so the nodes of ``<layers>.<i>`` are layer i's;
- the last period's layers are the templates; each is checked against the layer one
  period before it, node by node (op, attributes, and where every input comes from),
  which also tells each input's role: the same layer, the layer before (the hidden
  states), the layer's own weights, its ``past_key_values.<i>``, or a value all
  layers share (mask, rotary tables, constants);
- layer ``i`` is the template of its kind with layer i's weights, past and present,
  fed by layer ``i - 1``'s copy; what read the last captured layer (the final norm)
  reads the last copy.

Anything that does not fit (a layer reading an earlier layer's tensor, per-layer
constants that differ, layers of different classes) raises :class:`Unstampable`;
export-llm then captures the whole model, and says why in ``LLMExport.warnings``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

ENV = "PT2ONNX_LLM_STAMP"  # "0" turns stamping off
# Module attributes that hold the layer's own index: equal in structure by design.
_INDEX_ATTRS = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "idx"})
_COUNT_ATTRS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_SCALARS = (bool, int, float, str, type(None))


class Unstampable(Exception):
    """The layers can't be stamped from one capture; the message says why."""


@dataclass(frozen=True)
class Plan:
    """Where the layers are and how many of them the capture holds."""

    list_path: str  # the layers' ModuleList in the transformers model, e.g. "model.layers"
    num_layers: int  # N
    period: int  # P: layer i has the structure of layer i - P
    captured: int  # M: layers in the captured copy; 2P <= M < 3P, M = N (mod P)
    per_layer_config: tuple[str, ...] = field(default=())  # config lists, one entry a layer


def plan(model: torch.nn.Module, config: Any) -> Plan | None:
    """The stamping plan; None when a capture of the whole model costs no more.

    Raises Unstampable when the layers can't be stamped.
    """
    path, layers = _layer_list(model, config)
    n = len(layers)
    for i, layer in enumerate(layers):
        for name, m in layer.named_modules():
            if m._forward_hooks or m._forward_pre_hooks:
                # A hook runs in the captured layers only; what it does is not compared.
                raise Unstampable(f"layer {i} ({name or 'itself'}) has forward hooks")
            for attr in _INDEX_ATTRS:
                value = vars(m).get(attr)
                if isinstance(value, int) and not isinstance(value, bool) and value != i:
                    # Its cache slot (past_key_values.<layer_idx>) is another layer's.
                    raise Unstampable(f"layer {i} ({name or 'itself'}) has {attr} = {value}")
    per_layer = tuple(k for k, v in vars(config).items()
                      if isinstance(v, (list, tuple)) and len(v) == n and not k.startswith("_"))
    sigs = [(_signature(layer), tuple(_freeze(getattr(config, k)[i]) for k in per_layer))
            for i, layer in enumerate(layers)]
    period = next(p for p in range(1, n + 1)
                  if all(sigs[i] == sigs[i - p] for i in range(p, n)))
    if period == n and n > 2:
        i = next(i for i in range(1, n) if sigs[i] != sigs[i - 1])
        raise Unstampable(f"the layers are not one repeating pattern: layer {i} differs from "
                          f"layer {i - 1} in {_difference(sigs[i], sigs[i - 1], per_layer)}")
    captured = 2 * period + n % period
    if captured >= n:
        return None
    for i in range(period, n):
        _same_small_buffers(layers[i], layers[i - period], i)
    return Plan(path, n, period, captured, per_layer)


def _difference(a: tuple[Any, ...], b: tuple[Any, ...], per_layer: tuple[str, ...]) -> str:
    for key, x, y in zip(per_layer, a[1], b[1]):
        if x != y:
            return f"config.{key} ({x!r} against {y!r})"
    (mods_a, tensors_a), (mods_b, tensors_b) = a[0], b[0]
    for x, y in zip(mods_a, mods_b):
        if x[:3] != y[:3]:
            return f"module {x[0] or '(the layer)'} ({x[2]} against {y[2]})"
        if x != y:
            attrs_y = dict(y[3])
            for key, value in x[3]:
                if attrs_y.get(key, object()) != value:
                    return (f"{x[0] + '.' if x[0] else ''}{key} ({value!r} against "
                            f"{attrs_y.get(key)!r})")
    return "its modules or weights" if (mods_a, tensors_a) != (mods_b, tensors_b) else "?"


def _layer_list(model: torch.nn.Module, config: Any) -> tuple[str, torch.nn.ModuleList]:
    n = next((getattr(config, k) for k in _COUNT_ATTRS
              if isinstance(getattr(config, k, None), int)), None)
    if n is None:
        raise Unstampable("the config names no layer count (num_hidden_layers)")
    found = [(name, m) for name, m in model.named_modules()
             if isinstance(m, torch.nn.ModuleList) and len(m) == n]
    # Lists nested in another candidate (a layer's experts) are not the layers.
    outer = [(name, m) for name, m in found
             if not any(name.startswith(other + ".") for other, _ in found if other != name)]
    if len(outer) != 1:
        raise Unstampable(f"{len(outer)} module lists of {n} entries, not one list of layers")
    return outer[0]


def _signature(layer: torch.nn.Module) -> tuple[Any, ...]:
    mods = tuple(
        (name, type(m).__module__, type(m).__qualname__,
         tuple(sorted((k, _freeze(v)) for k, v in vars(m).items()
                      if isinstance(v, _SCALARS) and not k.startswith("_")
                      and k not in _INDEX_ATTRS and k != "training")))
        for name, m in layer.named_modules())
    tensors = tuple((name, tuple(t.shape), t.dtype) for name, t in
                    [*layer.named_parameters(), *layer.named_buffers()])
    return mods, tensors


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value if isinstance(value, _SCALARS) else repr(value)


def _same_small_buffers(a: torch.nn.Module, b: torch.nn.Module, index: int) -> None:
    """Small buffers are folded into the graph as constants: they must be equal."""
    from pt2onnx.translate import FOLD_LIMIT

    for (name, x), (_, y) in zip(a.named_buffers(), b.named_buffers()):
        if x.numel() <= FOLD_LIMIT and not x.is_meta and not torch.equal(x, y):
            raise Unstampable(f"buffer {name} of layer {index} differs from its period's")


@contextlib.contextmanager
def reduced(model: torch.nn.Module, config: Any, p: Plan) -> Iterator[None]:
    """The model cut to its first ``p.captured`` layers (config included), restored after."""
    parent_path, _, attr = p.list_path.rpartition(".")
    parent = model.get_submodule(parent_path) if parent_path else model
    full = getattr(parent, attr)
    saved = {k: getattr(config, k) for k in p.per_layer_config}
    counts = {k: getattr(config, k) for k in _COUNT_ATTRS if k in vars(config)}
    setattr(parent, attr, torch.nn.ModuleList(list(full)[:p.captured]))
    try:
        for k in counts:
            setattr(config, k, p.captured)
        for k, v in saved.items():
            setattr(config, k, type(v)(v[:p.captured]))
        yield
    finally:
        setattr(parent, attr, full)
        for k, v in {**counts, **saved}.items():
            setattr(config, k, v)


# -- the graph -------------------------------------------------------------

_PAST = re.compile(r"^past_key_values\.(\d+)\.(key|value)$")
_PRESENT = re.compile(r"^present\.(\d+)\.(key|value)$")


@dataclass
class _Role:
    """Where one input of a template node comes from."""

    kind: str  # "none", "same" (this layer), "prev" (the layer before), "past", "weight", "shared"
    index: int = 0  # the producer's place in its layer
    output: int = 0  # which of the producer's outputs
    name: str = ""  # past: "key"/"value"; weight: the name after the layer prefix
    value: ir.Value | None = None  # shared: the value itself; weight: the template's


def stamp(model: ir.Model, p: Plan, prefix: str,
          weight: Callable[[str], torch.Tensor]) -> None:
    """Grows, in place, the graph captured with ``p.captured`` layers to
    ``p.num_layers``; ``prefix`` is the layers' module path in the captured module
    and ``weight(name)`` the full model's tensor of that state_dict name."""
    graph = model.graph
    m, per = p.captured, p.period
    layer_re = re.compile(rf"^{re.escape(prefix)}\.(\d+)(?:\.|$)")
    layer_of: dict[int, int | None] = {}
    nodes: list[list[ir.Node]] = [[] for _ in range(m)]
    own_weight = re.compile(rf"^{re.escape(prefix)}\.\d+\.")
    # Size arithmetic that reads no layer's data belongs to no layer: torch.export
    # computes such a size once, where first needed, and every later layer reads it.
    shared: set[int] = set()
    for node in graph:
        # Every past has the same dims, so the sizes of any one are the sizes of all.
        sizes = node.op_type in ("Shape", "Size")
        if node.outputs and all(_shape_like(v) for v in node.outputs) and all(
                v is None or (sizes and v.is_graph_input())
                or _independent(v, shared, own_weight) for v in node.inputs):
            shared.add(id(node))
            layer_of[id(node)] = None
            continue
        match = layer_re.match(node.metadata_props.get("pt2onnx.module", ""))
        at = int(match.group(1)) if match else None
        if at is not None and at >= m:
            raise Unstampable(f"a node of layer {at}, outside the {m} captured")
        layer_of[id(node)] = at
        if at is not None:
            nodes[at].append(node)
    place = {id(n): k for layer in nodes for k, n in enumerate(layer)}

    def where(v: ir.Value) -> tuple[int | None, int, int]:
        producer = v.producer()
        if producer is None:
            return None, 0, 0
        return layer_of[id(producer)], place.get(id(producer), 0), v.index() or 0

    roles: dict[int, list[list[_Role]]] = {}
    for t in range(m - per, m):
        roles[t] = _check_template(nodes, t, per, prefix, where)
    tail = _check_rest(graph, nodes, layer_of, m, where)

    # Copy. Layer i is stamped from the template t = i (mod P) of the last period.
    inputs = {v.name: v for v in graph.inputs}
    outputs = {v.name: v for v in graph.outputs}
    names = {v.name for n in graph for v in n.outputs} | set(inputs) | set(graph.initializers)
    made: dict[str, ir.Value] = {}
    layer_outs: dict[int, list[ir.Node]] = {i: nodes[i] for i in range(m)}
    anchor = nodes[m - 1][-1]
    new_nodes: list[ir.Node] = []
    for i in range(m, p.num_layers):
        t = m - per + (i - m) % per
        copies: list[ir.Node] = []
        for node, node_roles in zip(nodes[t], roles[t]):
            args: list[ir.Value | None] = []
            for r in node_roles:
                if r.kind == "none":
                    args.append(None)
                elif r.kind == "same":
                    args.append(copies[r.index].outputs[r.output])
                elif r.kind == "prev":
                    args.append(layer_outs[i - 1][r.index].outputs[r.output])
                elif r.kind == "past":
                    args.append(_graph_input(inputs, f"past_key_values.{i}.{r.name}",
                                             inputs[f"past_key_values.{t}.{r.name}"]))
                elif r.kind == "weight":
                    assert r.value is not None
                    args.append(_weight(graph, made, f"{prefix}.{i}.{r.name}", r.value,
                                        f"{prefix}.{t}.", f"{prefix}.{i}.", weight))
                else:
                    args.append(r.value)
            copy = ir.Node(
                node.domain, node.op_type, args, attributes=list(node.attributes.values()),
                overload=node.overload, num_outputs=len(node.outputs), version=node.version,
                name=_relayer(node.name or "", f"{prefix}.{t}", f"{prefix}.{i}"))
            for key, text in node.metadata_props.items():
                copy.metadata_props[key] = _relayer(text, f"{prefix}.{t}", f"{prefix}.{i}")
            for old, new in zip(node.outputs, copy.outputs):
                new.type, new.shape = old.type, old.shape
                new.meta.update(old.meta)
                present = _PRESENT.match(old.name or "")
                if present:
                    new.name = f"present.{i}.{present.group(2)}"
                    outputs[new.name] = new
                else:
                    new.name = _unique(f"{old.name}.layer{i}", names)
                names.add(new.name)
            copies.append(copy)
        layer_outs[i] = copies
        new_nodes += copies
    graph.insert_after(anchor, new_nodes)
    last = layer_outs[p.num_layers - 1]
    for user, slot, index, output in tail:
        user.replace_input_with(slot, last[index].outputs[output])
    # The genai order: the fixed inputs, then each layer's past; logits, then presents.
    fixed_in = [v for v in graph.inputs if not _PAST.match(v.name or "")]
    fixed_out = [v for v in graph.outputs if not _PRESENT.match(v.name or "")]
    graph.inputs.clear()
    graph.inputs.extend(fixed_in + [inputs[f"past_key_values.{i}.{kv}"]
                                    for i in range(p.num_layers) for kv in ("key", "value")])
    graph.outputs.clear()
    graph.outputs.extend(fixed_out + [outputs[f"present.{i}.{kv}"]
                                      for i in range(p.num_layers) for kv in ("key", "value")])
    if tail:  # the final norm must come after the last copy, where it usually is
        order = {id(n): k for k, n in enumerate(graph)}
        if any(order[id(user)] < order[id(new_nodes[-1])] for user, _, _, _ in tail):
            graph.sort()


def _check_template(nodes: list[list[ir.Node]], t: int, per: int, prefix: str,
                    where: Callable[[ir.Value], tuple[int | None, int, int]],
                    ) -> list[list[_Role]]:
    """The roles of template layer t's inputs, checked against layer t - P."""
    r = t - per
    if len(nodes[t]) != len(nodes[r]):
        raise Unstampable(f"layer {t} has {len(nodes[t])} nodes, layer {r} {len(nodes[r])}")
    out: list[list[_Role]] = []
    for k, (b, a) in enumerate(zip(nodes[t], nodes[r])):
        if (b.op_type, b.domain, b.overload, len(b.inputs), len(b.outputs)) != (
                a.op_type, a.domain, a.overload, len(a.inputs), len(a.outputs)):
            raise Unstampable(f"node {k} of layer {t} ({b.op_type}) differs from layer {r}'s "
                              f"({a.op_type})")
        if not _same_attributes(b, a):
            raise Unstampable(f"node {k} of layer {t} ({b.op_type}) has other attributes "
                              f"than layer {r}'s")
        node_roles = []
        for x, y in zip(b.inputs, a.inputs):
            node_roles.append(_role(x, y, t, r, prefix, where))
        for v, w in zip(b.outputs, a.outputs):
            if v.is_graph_output():
                pv, pw = _PRESENT.match(v.name or ""), _PRESENT.match(w.name or "")
                if not (pv and pw and int(pv.group(1)) == t and int(pw.group(1)) == r
                        and pv.group(2) == pw.group(2)):
                    raise Unstampable(f"layer {t} returns {v.name}, not only its presents")
        out.append(node_roles)
    return out


def _role(x: ir.Value | None, y: ir.Value | None, t: int, r: int, prefix: str,
          where: Callable[[ir.Value], tuple[int | None, int, int]]) -> _Role:
    if x is None or y is None:
        if x is not y:
            raise Unstampable(f"layer {t} and layer {r} differ in an omitted input")
        return _Role("none")
    at, index, output = where(x)
    at_y, index_y, output_y = where(y)
    if at == t:
        if (at_y, index_y, output_y) != (r, index, output):
            raise Unstampable(f"{x.name} of layer {t} is wired unlike {y.name} of layer {r}")
        return _Role("same", index, output)
    if at == t - 1:
        if r - 1 >= 0 and (at_y, index_y, output_y) != (r - 1, index, output):
            raise Unstampable(f"{x.name} of layer {t} is wired unlike {y.name} of layer {r}")
        return _Role("prev", index, output)
    if at is not None:
        if x is y and _shape_like(x):  # a size one layer computed and all reuse
            return _Role("shared", value=x)
        raise Unstampable(f"layer {t} reads {x.name} of layer {at}")
    past_x, past_y = _PAST.match(x.name or ""), _PAST.match(y.name or "")
    if x.is_graph_input() and past_x:
        if not (past_y and int(past_x.group(1)) == t and int(past_y.group(1)) == r
                and past_x.group(2) == past_y.group(2)):
            raise Unstampable(f"layer {t} reads {x.name}, layer {r} reads {y.name}")
        return _Role("past", name=past_x.group(2))
    own, own_y = f"{prefix}.{t}.", f"{prefix}.{r}."
    if x.is_initializer() and (x.name or "").startswith(own):
        rest = (x.name or "")[len(own):]
        if y.name != own_y + rest or not _derivable(x):
            raise Unstampable(f"weight {x.name} has no counterpart in layer {r}")
        return _Role("weight", name=rest, value=x)
    if _equivalent(x, y, {}):
        return _Role("shared", value=x)
    raise Unstampable(f"layer {t} reads {x.name} where layer {r} reads {y.name}")


def _check_rest(graph: ir.Graph, nodes: list[list[ir.Node]], layer_of: dict[int, int | None],
                m: int, where: Callable[[ir.Value], tuple[int | None, int, int]],
                ) -> list[tuple[ir.Node, int, int, int]]:
    """What outside the layers reads from them: only the last layer's outputs (the
    final norm's input). Returns (user, input slot, producer's place, output)."""
    tail = []
    for node in graph:
        if layer_of[id(node)] is not None:
            continue
        for slot, v in enumerate(node.inputs):
            if v is None:
                continue
            at, index, output = where(v)
            if at is None:
                continue
            if at != m - 1:
                raise Unstampable(f"{node.op_type} outside the layers reads layer {at}")
            tail.append((node, slot, index, output))
    for v in graph.outputs:
        at, _, _ = where(v)
        if at is not None and not _PRESENT.match(v.name or ""):
            raise Unstampable(f"graph output {v.name} comes from layer {at}")
    for i in range(m):  # each layer returns its own presents
        for node in nodes[i]:
            for v in node.outputs:
                match = _PRESENT.match(v.name or "")
                if match and int(match.group(1)) != i:
                    raise Unstampable(f"layer {i} returns {v.name}")
    return tail


def _same_attributes(a: ir.Node, b: ir.Node) -> bool:
    if a.attributes.keys() != b.attributes.keys():
        return False
    for name, x in a.attributes.items():
        y = b.attributes[name]
        if x.type != y.type:
            return False
        if x.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
            return False  # subgraphs are not compared: not stamped
        if x.type in (ir.AttributeType.TENSOR, ir.AttributeType.TENSORS):
            xs = x.value if isinstance(x.value, (list, tuple)) else [x.value]
            ys = y.value if isinstance(y.value, (list, tuple)) else [y.value]
            if len(xs) != len(ys) or not all(
                    np.array_equal(u.numpy(), v.numpy()) for u, v in zip(xs, ys)):
                return False
        elif x.value != y.value:
            return False
    return True


def _independent(v: ir.Value, shared: set[int], own_weight: re.Pattern[str]) -> bool:
    """Whether v is the same for every layer: not past, not a layer's weight, and not
    computed from either."""
    producer = v.producer()
    if producer is not None:
        return id(producer) in shared
    if v.is_graph_input():
        return not _PAST.match(v.name or "")
    return not own_weight.match(v.name or "")


def _equivalent(x: ir.Value, y: ir.Value, memo: dict[tuple[int, int], bool]) -> bool:
    """Whether x and y are computed alike from the same shared values."""
    if x is y:
        return True
    if x.is_initializer() and y.is_initializer():
        return _equal_constants(x, y)
    key = (id(x), id(y))
    if key in memo:
        return memo[key]
    a, b = x.producer(), y.producer()
    same = (a is not None and b is not None and x.index() == y.index()
            and (a.op_type, a.domain, a.overload, len(a.inputs)) == (
                b.op_type, b.domain, b.overload, len(b.inputs))
            and _same_attributes(a, b)
            and all((u is None and w is None) or (
                u is not None and w is not None and _equivalent(u, w, memo))
                for u, w in zip(a.inputs, b.inputs)))
    memo[key] = same
    return same


def _shape_like(v: ir.Value) -> bool:
    """An int64 (or bool) scalar or 1-D value: a size, as torch.export's SymInts become.
    A value left untyped inside a decomposition: a Shape's, or one computed from those."""
    if v.dtype is not None:
        return (v.dtype in (ir.DataType.INT64, ir.DataType.BOOL) and v.shape is not None
                and len(v.shape) <= 1)
    producer = v.producer()
    if producer is None:
        return False
    return producer.op_type in ("Shape", "Size") or all(
        u is None or _shape_like(u) for u in producer.inputs)


def _equal_constants(x: ir.Value, y: ir.Value) -> bool:
    a, b = x.const_value, y.const_value
    if a is None or b is None or a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.size > (1 << 16):
        return False
    return bool(np.array_equal(a.numpy(), b.numpy()))


def _derivable(v: ir.Value) -> bool:
    """A weight the stamp can make for another layer: the parameter itself, or its
    lazily transposed copy."""
    if "pt2onnx.transpose_src" in v.meta:
        return True
    return isinstance(getattr(v.const_value, "raw", None), torch.Tensor)


def _weight(graph: ir.Graph, made: dict[str, ir.Value], name: str, template: ir.Value,
            old: str, new: str, weight: Callable[[str], torch.Tensor]) -> ir.Value:
    """Layer i's counterpart of the template layer's weight ``template``."""
    if name in made:
        return made[name]
    if "pt2onnx.transpose_src" in template.meta:
        source = template.meta["pt2onnx.transpose_of"]
        src = weight(_relayer(str(source), old[:-1], new[:-1]))
        want = template.meta["pt2onnx.transpose_src"]
        _check_like(name, src, want)
        value = ir.Value(name=name, type=template.type, shape=template.shape,
                         const_value=_lazy_transpose(src, name, template))
        value.meta.update(template.meta)
        value.meta["pt2onnx.transpose_of"] = _relayer(str(source), old[:-1], new[:-1])
        value.meta["pt2onnx.transpose_src"] = src
    else:
        raw = getattr(template.const_value, "raw", None)
        key = template.meta.get("pt2onnx.weight", template.name)
        src = weight(_relayer(str(key), old[:-1], new[:-1]))
        _check_like(name, src, raw)
        value = ir.Value(name=name, type=template.type, shape=template.shape,
                         const_value=ir.tensor_adapters.TorchTensor(src.detach(), name=name))
        value.meta.update(template.meta)
        if "pt2onnx.weight" in template.meta:
            value.meta["pt2onnx.weight"] = _relayer(str(key), old[:-1], new[:-1])
    graph.register_initializer(value)
    made[name] = value
    return value


def _lazy_transpose(src: torch.Tensor, name: str, template: ir.Value) -> ir.LazyTensor:
    assert template.dtype is not None and template.shape is not None
    return ir.LazyTensor(
        lambda: ir.tensor_adapters.TorchTensor(src.detach().t().contiguous(), name=name),
        dtype=template.dtype, shape=template.shape, name=name)


def _check_like(name: str, got: torch.Tensor, want: Any) -> None:
    if isinstance(want, torch.Tensor) and (got.shape != want.shape or got.dtype != want.dtype):
        raise Unstampable(f"{name} is {got.dtype} {list(got.shape)}, its template's "
                          f"{want.dtype} {list(want.shape)}")


def _graph_input(inputs: dict[str | None, ir.Value], name: str, like: ir.Value) -> ir.Value:
    value = inputs.get(name)
    if value is None:
        value = ir.Value(name=name, type=like.type, shape=like.shape)
        inputs[name] = value
    return value


def _relayer(text: str, old: str, new: str) -> str:
    """``old`` (a layer's module path) replaced by ``new`` where it is a whole path part."""
    return re.sub(rf"(?<![\w.]){re.escape(old)}(?=$|[./])", new, text)


def _unique(name: str, taken: set[str | None]) -> str:
    if name not in taken:
        return name
    k = 1
    while f"{name}_{k}" in taken:
        k += 1
    return f"{name}_{k}"
