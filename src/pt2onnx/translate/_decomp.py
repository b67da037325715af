"""Decompositions: per node for an op without a rule, whole-program only to functionalize.

An op without a rule is decomposed where it stands (``Translator._decompose``):
the first of ``candidates(op)`` whose trace translates wins, in the order
torch default (core table or the op's composite kernel) → torch registry →
pt2onnx (``_decomp_extra``). ``run_decompositions`` retraces the whole program,
so it is kept for what per-node work cannot do: mutation through views
(``reason_to_decompose``).

Ops listed in ``KEEP`` map to a richer ONNX op (LayerNormalization, Gelu,
MatMul with broadcasting, Attention, Resize, ...) so decomposing them would
only make the graph bigger and slower.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from pt2onnx import _compat
from pt2onnx.errors import CaptureError
from pt2onnx.translate import _decomp_extra

# The names a decomposition's source has in the report.
TORCH_DEFAULT, TORCH_REGISTRY, PT2ONNX = "torch default", "torch registry", "pt2onnx"
# How deep a decomposition may nest (an op in a decomposition decomposed again).
MAX_DEPTH = 6

aten = torch.ops.aten

KEEP: tuple[Any, ...] = (
    aten.scaled_dot_product_attention.default,
    aten.layer_norm.default,
    aten.group_norm.default,
    aten.instance_norm.default,
    aten.gelu.default,
    aten.silu.default,
    aten.hardswish.default,
    aten.hardsigmoid.default,
    aten.mish.default,
    aten.linear.default,
    aten.matmul.default,
    aten.rms_norm.default,
    aten.pixel_shuffle.default,
    aten.pixel_unshuffle.default,
    aten.upsample_nearest2d.vec,
    aten.upsample_bilinear2d.vec,
    aten.upsample_bicubic2d.vec,
    aten.upsample_linear1d.vec,
    aten.upsample_nearest1d.vec,
    aten.upsample_nearest3d.vec,
    aten.upsample_trilinear3d.vec,
    aten.softplus.default,
    aten.prelu.default,
    aten.celu.default,
    aten.selu.default,
    aten.elu.default,
    # ONNX LSTM / GRU / RNN, at any number of steps; torch's decompositions unroll them.
    aten.lstm.input,
    aten.gru.input,
    aten.rnn_tanh.input,
    aten.rnn_relu.input,
)


def decomposition_table(keep: tuple[Any, ...] = KEEP) -> dict[Any, Any]:
    """The table passed to ``ExportedProgram.run_decompositions``."""
    table = _compat.default_decompositions()
    for op in keep:
        table.pop(op, None)
    for op in _decomp_extra.PREFERRED:
        if op not in keep:
            table[op] = _decomp_extra.TABLE[op]
    return table


def reason_to_decompose(program: torch.export.ExportedProgram, has_rule: Any) -> str | None:
    """Why ``program`` must go through ``run_decompositions``; None when it need not.

    Decomposition retraces the whole program, which costs about as much as
    capturing it. An ATen op without a rule is decomposed per node while
    translating, so this is needed only for in-place ops that cannot be
    rebound (which decomposition functionalizes) and for non-ATen targets
    (higher-order ops) without a rule.
    """
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op != "call_function":
                continue
            target = node.target
            if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
                functional = functional_variant(node)
                if functional is None:
                    return f"in-place op {target} needs functionalization"
                target = functional
            if not isinstance(target, torch._ops.OpOverload) and not has_rule(target):
                return f"{target} has no rule and is not an ATen op"
    return None


def functional_variant(node: torch.fx.Node) -> Any:
    """``aten.add.Tensor`` for an ``aten.add_.Tensor`` node that is safe to rebind.

    Safe means the mutated tensor is a fresh result of a non-view op and no
    view of it exists, so replacing it by the functional result everywhere
    after this node is exactly what the mutation does. Anything else returns
    None, and the program is functionalized by run_decompositions instead.
    """
    op = node.target
    assert isinstance(op, torch._ops.OpOverload)
    if op == torch.ops.aten.detach_.default:
        # It changes only autograd state; the value is its input's, whatever aliases it
        # (torch.tensor([], device="meta") is a lifted constant, then detach_).
        return torch.ops.aten.detach.default
    if op == torch.ops.aten.set_.source_Tensor:
        # x.set_(y) makes x y itself (storage, sizes and strides): the result never reads
        # x, and views of x taken before keep x's old storage, in eager too. So it is a
        # rebinding whatever x is (a graph input included).
        return torch.ops.aten.set.source_Tensor
    schema = op._schema
    name = schema.name.split("::")[-1]
    if not name.endswith("_") or name.endswith("__") or not schema.arguments:
        return None
    first = schema.arguments[0].alias_info
    if first is None or not first.is_write:
        return None
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments[1:]):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    functional = getattr(packet, op._overloadname, None) if packet is not None else None
    mutated = node.args[0] if node.args else None
    if functional is None or not isinstance(mutated, torch.fx.Node):
        return None
    producer = mutated.target
    if mutated.op != "call_function" or not isinstance(producer, torch._ops.OpOverload):
        return None
    if producer.is_view or any(
        isinstance(u.target, torch._ops.OpOverload) and u.target.is_view for u in mutated.users
    ):
        return None
    return functional


@functools.cache
def _core() -> dict[Any, Any]:
    return _compat.core_decompositions()


def candidates(op: torch._ops.OpOverload) -> list[tuple[str, Callable[..., Any]]]:
    """The decompositions of ``op`` to try, in order, each with its source's name."""
    found: list[tuple[str, Callable[..., Any]]] = []
    default = _core().get(op)
    if default is None and _compat.is_composite_implicit(op):
        # Called while tracing, the op runs its composite kernel through the Python
        # dispatcher, which keeps sizes symbolic (op.decompose would specialise them).
        default = op
    if default is not None:
        found.append((TORCH_DEFAULT, default))
    registered = _compat.registered_decompositions().get(op)
    if registered is not None and registered is not default:
        found.append((TORCH_REGISTRY, registered))
    ours = _decomp_extra.find(op)
    if ours is not None:
        found.insert(0 if op in _decomp_extra.PREFERRED else len(found), (PT2ONNX, ours))
    return found


def trace(fn: Callable[..., Any], node: torch.fx.Node) -> tuple[torch.fx.GraphModule, Any]:
    """Traces ``fn`` on ``node``'s arguments into an ATen graph.

    Returns the graph, whose placeholders are the FX nodes among the
    arguments (``pytree.tree_leaves`` order), and the pytree spec of its flat
    outputs. The inputs are the nodes' meta
    values, so a FakeTensor with symbolic dims traces in its own shape
    environment: the graph reads sizes with ``sym_size`` and stays
    shape-generic. Outputs of the node that nothing reads are left out, with
    what computes only them. Not functionalized (torch's prims refuse it); an in-place
    step inside ``fn`` is rebound by the translator where that is safe.
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    leaves, spec = pytree.tree_flatten((node.args, node.kwargs))
    positions = [i for i, a in enumerate(leaves) if isinstance(a, torch.fx.Node)]
    vals = [_on_cpu(leaves[i].meta["val"]) for i in positions]
    out_specs: list[Any] = []

    def run(*inputs: Any) -> list[Any]:
        filled = list(leaves)
        for i, v in zip(positions, inputs):
            filled[i] = v
        args, kwargs = _plain(pytree.tree_unflatten(filled, spec))
        out = fn(*args, **kwargs)
        if used is not None and isinstance(out, (tuple, list)):
            kept = [o if i in used else None for i, o in enumerate(out)]
            # A named tuple (torch.return_types) takes its fields as arguments.
            cls: Any = type(out)
            out = cls(*kept) if hasattr(out, "_fields") else cls(kept)
        flat, out_spec = pytree.tree_flatten(out)
        out_specs.append(out_spec)
        return flat

    used = used_outputs(node)
    dims = [(d, str(d.node.expr)) for d in _symbolic(vals)]
    gm = make_fx(run, tracing_mode="symbolic")(*vals)
    fixed = [(d, shown) for d, shown in dims if _now_a_number(d)]
    if fixed:
        # The decomposition guarded a declared size to its example's value (a 0 or 1
        # in an empty input: torch's repeat_interleave at B - 1 = 1, fuzz seed 7411
        # program 4143): its graph holds only there, and the shape environment now does
        # too, so no other candidate can be traced either.
        raise SpecializedTrace(
            f"the dynamic shapes do not survive decomposing "
            f"{getattr(node.target, '__name__', node.target)} (it has no rule): torch's "
            f"decomposition fixed the size {fixed[0][1]} to "
            f"{fixed[0][0].node.shape_env.replace(fixed[0][0].node.expr)}, the example's, so "
            "its graph would hold at that size only.\nNext step: export from an example "
            "where that size is 2 or more, or make that dim static.")
    gm.graph.eliminate_dead_code()  # what computed only the outputs nobody reads
    return gm, out_specs[-1]


class SpecializedTrace(CaptureError):
    """A per-node decomposition's trace fixed a symbolic size (``trace``)."""


def _symbolic(vals: list[Any]) -> list[Any]:
    """The symbolic sizes among ``vals`` (tensor dims and SymInts)."""
    found = []
    for v in vals:
        for d in (v.shape if isinstance(v, torch.Tensor) else [v]):
            if isinstance(d, torch.SymInt) and not d.node.expr.is_number:
                found.append(d)
    return found


def _now_a_number(d: Any) -> bool:
    env = getattr(d.node, "shape_env", None)
    try:
        return env is not None and bool(env.replace(d.node.expr).is_number)
    except Exception:
        return False


_META_FAKES: list[Any] = []


def _on_cpu(val: Any) -> Any:
    """A static recording's meta-device values as CPU FakeTensors, so that what a
    decomposition creates lands on the CPU as it would in the recorded run."""
    if not isinstance(val, torch.Tensor) or val.device.type != "meta":
        return val
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(val, FakeTensor):
        # torch.export's values of a model on the meta device: the same, on the CPU, in
        # their own mode (symbolic sizes stay symbolic).
        with val.fake_mode:
            return torch.empty_strided(val.shape, val.stride(), dtype=val.dtype,
                                       device="cpu")
    if not _META_FAKES:
        from torch._subclasses.fake_tensor import FakeTensorMode

        _META_FAKES.append(FakeTensorMode(allow_non_fake_inputs=True))
    with _META_FAKES[0]:
        return torch.empty_strided(tuple(val.shape), tuple(val.stride()), dtype=val.dtype,
                                   device="cpu")


def used_outputs(node: torch.fx.Node) -> frozenset[int] | None:
    """The indices of a multi-output node that are read; None when all may be."""
    if not isinstance(node.meta.get("val"), (tuple, list)):
        return None
    used = set()
    for user in node.users:
        if user.target is not operator.getitem or not isinstance(user.args[1], int):
            return None
        if user.users:
            used.add(user.args[1])
    return frozenset(used)


def trace_key(op: Any, node: torch.fx.Node) -> str:
    """Nodes with equal keys trace to the same graph (same op, metas and constants)."""

    def describe(a: Any) -> Any:
        if not isinstance(a, torch.fx.Node):
            return a
        val = a.meta.get("val")
        if isinstance(val, torch.Tensor):
            return ("T", tuple(val.shape), tuple(val.stride()), val.dtype, val.device)
        return ("V", str(val), type(val).__name__)

    leaves, spec = pytree.tree_flatten((node.args, node.kwargs))
    return repr((op, [describe(a) for a in leaves], spec, used_outputs(node)))


def _plain(x: Any) -> Any:
    """FX's immutable lists and dicts as plain ones: a decomposition may update its arguments."""
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_plain(v) for v in x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def functionalization_error(why: str, exc: Exception) -> CaptureError:
    """torch's run_decompositions failed (seen: a scatter_ into a transposed view, which
    torch's functionalization replays as an impossible view)."""
    text = str(exc)
    found = re.search(r"target=torch\.ops\.(aten\.\w+\.\w+)", text)
    where = f" at {found.group(1)}" if found else ""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return CaptureError(
        f"torch's functionalization failed{where} ({type(exc).__name__}: {first[:300]}). "
        f"The program needed it because {why}. Next step: write that in-place op on a view "
        "out of place (y = x.scatter(...) instead of x.transpose(0, 1).scatter_(...)), or "
        "apply it to a contiguous tensor (.contiguous() or .clone() first).")


def symbolic_input_dims(ep: torch.export.ExportedProgram) -> list[tuple[str, int]]:
    dims = [(n.name, axis, d) for n in ep.graph.nodes
            if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)
            for axis, d in enumerate(n.meta["val"].shape) if isinstance(d, torch.SymInt)]
    if not dims:  # a static program: no sympy import
        return []
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    return [(name, axis) for name, axis, d in dims if not is_concrete_int(d)]


class FixedByDecomposition(CaptureError):
    """run_decompositions fixed a declared dynamic dim (``check_still_dynamic``): the
    export is repeated with the retrace's guards deferred and judged
    (``_compat.deferring_decomposition_guards``)."""


def check_still_dynamic(symbolic: list[tuple[str, int]], after: torch.export.ExportedProgram,
                         why: str) -> None:
    """run_decompositions retraces the program; a guard met there can make a declared
    dynamic dim a constant, which would write a model that refuses every other size
    (found by the fuzzer: a scatter_ into a view of an input-shaped tensor)."""
    now = {n.name: tuple(n.meta["val"].shape) for n in after.graph.nodes
           if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)}
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    lost = [f"{name} axis {axis} fixed to {now[name][axis]}" for name, axis in symbolic
            if name in now and is_concrete_int(now[name][axis])]
    if lost:
        raise FixedByDecomposition(
            "the dynamic shapes do not survive functionalization: torch's run_decompositions "
            f"(needed because {why}) fixed {'; '.join(lost)}. Next step: write that in-place "
            "op out of place (or on a contiguous tensor), or export with those dims static.")
