"""Every difference between the supported torch releases lives here, and only here."""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator
from typing import Any

import torch

from pt2onnx._compat_build import (
    exported_program_from_graph as exported_program_from_graph,
)
from pt2onnx._compat_build import exporter_error_base as exporter_error_base
from pt2onnx._compat_build import lazy_graph_module as lazy_graph_module
from pt2onnx._compat_build import register_fake as register_fake

TORCH_VERSION_STRING: str = str(torch.__version__)
TORCH_VERSION: tuple[int, int] = tuple(  # type: ignore[assignment]
    int(p) for p in TORCH_VERSION_STRING.split("+")[0].split(".")[:2]
)

# torch 2.12 emits guards on declared-dynamic dims that 2.13 and later prove or never
# emit (a parity guard on a CNN's image size, min(8*s, 16*s) == 8*s in a llama), and
# torch.export refuses those dims. Kept as runtime asserts instead, the dims stay
# dynamic, as they are on 2.13+.
_EXPORT_OPTIONS: dict[str, Any] = (
    {"prefer_deferred_runtime_asserts_over_guards": True} if TORCH_VERSION < (2, 13) else {}
)
# Where guards are deferred, a size the graph depends on (a loop count) is no longer
# reported as a fixed dim: every dynamic capture gets the second-size check there
# (capture/_second_size.py).
DEFERRED_GUARDS: bool = bool(_EXPORT_OPTIONS)


# torch 2.12's FakeTensor device propagation refuses a meta parameter beside a CPU
# input ("Unhandled FakeTensor Device Propagation for aten.embedding.default, found two
# different devices meta, cpu"); 2.13 and later accept it. So export from the meta
# device (weights=...) needs torch 2.13 or later (docs/compatibility.md).
META_DEVICE_EXPORT: bool = TORCH_VERSION >= (2, 13)


_GLOBAL_HOOKS = ("_global_buffer_registration_hooks", "_global_module_registration_hooks",
                 "_global_parameter_registration_hooks", "_global_forward_hooks",
                 "_global_forward_pre_hooks", "_global_forward_hooks_always_called",
                 "_global_forward_hooks_with_kwargs", "_global_backward_hooks",
                 "_global_backward_pre_hooks")


@contextlib.contextmanager
def no_leaked_global_hooks() -> Iterator[None]:
    """Removes the process-wide module hooks a capture added and left behind, and sets
    aside, while the capture runs, the ones an earlier failed trace left.

    torch 2.12's non-strict trace registers a global buffer-assignment hook and removes
    it only when the trace succeeds; a trace that raised (a model that fails at size 1,
    say, in pt2onnx or in another exporter the process ran) left it installed, and every
    later strict capture in the process then failed on it ("Attempted to call function
    marked as skipped"). No trace is running when a capture starts, so such a hook is a
    leftover: it is taken out for the capture and put back after it, as the process had
    it. A hook the user installed stays throughout."""
    from torch.nn.modules import module as _module

    tables = [t for name in _GLOBAL_HOOKS
              if isinstance(t := getattr(_module, name, None), dict)]
    stale = [(t, {k: v for k, v in t.items() if _is_trace_leftover(v)}) for t in tables]
    for table, hooks in stale:
        for key in hooks:
            del table[key]
    before = [set(t) for t in tables]
    try:
        yield
    finally:
        for table, keys in zip(tables, before):
            for key in [k for k in table if k not in keys]:
                del table[key]
        for table, hooks in stale:
            table.update(hooks)


def _is_trace_leftover(hook: Any) -> bool:
    return getattr(hook, "__qualname__", "").startswith("register_buffer_assignment_hook.")


def export(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    dynamic_shapes: Any,
    strict: bool,
) -> torch.export.ExportedProgram:
    # On failure torch.export prints the partial FX graph to stderr (hundreds of KB
    # for a detection model) before raising. pt2onnx reports the error itself and may
    # go on to another capture strategy, so that dump is dropped; anything else
    # written to stderr meanwhile is passed on.
    import io

    if not META_DEVICE_EXPORT and any(
        t.is_meta for t in (*model.parameters(), *model.buffers())
    ):
        raise RuntimeError(
            f"exporting a model on the meta device needs torch 2.13 or later; torch "
            f"{TORCH_VERSION_STRING} cannot run meta weights beside real inputs. Upgrade "
            "torch, or load the weights and export the model from the CPU"
        )
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stderr(buffer), whole_rnn_ops(), no_leaked_global_hooks():
            try:
                return torch.export.export(
                    model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes,
                    strict=strict, **_EXPORT_OPTIONS,
                )
            except Exception as exc:
                if not (_EXPORT_OPTIONS and _deferred_assert_failed(exc)):
                    raise
            # torch 2.12 could not write a deferred guard as a graph assert (it fails on
            # ``round(B / 2)``: int_truediv of an FX proxy); the guard is left to torch's
            # own check instead, as on 2.13, which pt2onnx's guard checks then judge.
            return torch.export.export(
                model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
            )
    except BaseException as exc:
        partial = getattr(exc, "partial_fx_graph", None)
        text = buffer.getvalue()
        buffer = io.StringIO(text.replace(str(partial), "") if partial is not None else text)
        raise
    finally:
        rest = buffer.getvalue()
        if rest.strip():
            sys.stderr.write(rest)


def _deferred_assert_failed(exc: BaseException) -> bool:
    """Whether torch.export failed writing a deferred runtime assert into the graph."""
    text = str(exc)
    return (type(exc).__name__ == "TraceError"
            and "symbolically traced variables cannot be used as inputs to control flow"
            in text)


def _rnn_shapes(input: torch.Tensor, hx: Any, params: Any, has_biases: bool,
                num_layers: int, dropout: float, train: bool, bidirectional: bool,
                batch_first: bool) -> tuple[torch.Tensor, ...]:
    """What ``aten.lstm.input`` / ``gru.input`` / ``rnn_*.input`` return, without running
    them: the output [T, B, D * H_out] (a transposed view when batch_first, as eager's
    strides are) and the final states, shaped like the initial ones."""
    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    dirs = 2 if bidirectional else 1
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    out = input.new_empty(steps, batch, dirs * states[0].shape[-1])
    return (out.transpose(0, 1) if batch_first else out,
            *(h.new_empty(h.shape) for h in states))


def _whole_rnn_kernel(original: Any) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        from torch._subclasses.fake_tensor import is_fake

        if isinstance(args[0], torch.Tensor) and is_fake(args[0]):
            return _rnn_shapes(*args, **kwargs)
        return original(*args, **kwargs)
    return kernel


@contextlib.contextmanager
def whole_rnn_ops() -> Iterator[None]:
    """A context in which torch.export keeps ``aten.lstm.input``, ``gru.input``,
    ``rnn_tanh.input`` and ``rnn_relu.input`` whole, with symbolic steps and batch.

    torch registers Python kernels for these ops (``torch._decomp.decompositions.
    lstm_impl`` and its siblings) under the Autograd, CompositeImplicitAutograd and Meta
    keys, and in its decomposition table.
    torch.export records the op whole, then computes its output's shape by running that
    kernel on FakeTensors, which loops over ``input.unbind(0)``: the number of steps is
    fixed to the example's (and the batch guarded != 1). Here, on FakeTensors, the
    kernel only makes the outputs' shapes; on real tensors it is torch's, unchanged.
    The ops' rules (rules/rnn.py) write ONNX LSTM / GRU / RNN, which run at any size.
    Only the kernels a release registers are wrapped (checked on torch 2.13); where it
    has none, this changes nothing."""
    from torch._decomp import decomposition_table

    aten = torch.ops.aten
    ops = (aten.lstm.input, aten.gru.input, aten.rnn_tanh.input, aten.rnn_relu.input)
    saved = {op: dict(op.py_kernels) for op in ops}
    # FakeTensorMode runs the same kernel from torch's decomposition table (a retrace
    # by run_decompositions reaches the op there).
    table: dict[Any, Any] = {op: decomposition_table[op] for op in ops
                             if op in decomposition_table}
    try:
        for op in ops:
            for key, original in saved[op].items():
                del op.py_kernels[key]
                op.py_impl(key)(_whole_rnn_kernel(original))
            op._dispatch_cache.clear()
        for op, original in table.items():
            decomposition_table[op] = _whole_rnn_kernel(original)
        yield
    finally:
        decomposition_table.update(table)
        for op, kernels in saved.items():
            op.py_kernels.clear()
            op.py_kernels.update(kernels)
            op._dispatch_cache.clear()


def default_decompositions() -> dict[Any, Any]:
    """The core-ATen decomposition table as a mutable mapping."""
    if hasattr(torch.export, "default_decompositions"):
        return torch.export.default_decompositions()  # type: ignore[return-value, unused-ignore]
    from torch._decomp import core_aten_decompositions

    return dict(core_aten_decompositions())


def core_decompositions() -> dict[Any, Any]:
    """torch's core-ATen table without the composite-implicit ops, as a plain dict.

    ``default_decompositions()`` also lists every composite-implicit op, which
    costs about 0.4 s to build; the per-node path asks ``is_composite_implicit``
    for those instead.
    """
    import torch._decomp as decomp

    if hasattr(decomp, "_core_aten_decompositions_post_autograd"):
        return decomp._core_aten_decompositions_post_autograd()
    return dict(decomp.core_aten_decompositions())


def registered_decompositions() -> dict[Any, Any]:
    """Every decomposition torch registers (a superset of the core table)."""
    from torch._decomp import decomposition_table

    return decomposition_table


def is_composite_implicit(op: torch._ops.OpOverload) -> bool:
    """Whether ``op`` has a CompositeImplicitAutograd kernel (``op.decompose`` works)."""
    key = torch._C.DispatchKey.CompositeImplicitAutograd
    return bool(torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key)) or (
        key in op.py_kernels
    )


# run_decompositions retraces size-obliviously, as the capture ran: otherwise its
# functionalization can fix a dim the capture held dynamic (an in-place scatter_ into a
# view; fuzz seed 100, program 1124). A switch for the test of what happens without.
DECOMPOSE_SIZE_OBLIVIOUSLY = True


# Set for an export repeated because run_decompositions fixed a declared dim (see
# run_decompositions).
DEFER_DECOMPOSITION_GUARDS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "defer_decomposition_guards", default=False)


# A split whose piece size follows a dynamic size has as many pieces as that size asks
# for, but the captured program holds the example's number and reads piece i by its
# position: ``x.split(s)[-1]`` and ``x.split(s)[k - 1]`` are the same node. The rule
# translates piece i as the i-th and records each split whose last piece the graph
# reads; where that reading is refused or bounds a dim, the export runs again with that
# piece as the last one at every size (``_api._export``). The guards and runs against
# eager judge each reading alike.
SPLIT_LAST_FROM_END: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "split_last_from_end", default=False)
SPLIT_LAST_READ: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "split_last_read", default=None)


@contextlib.contextmanager
def split_reads(from_end: bool = False) -> Iterator[list[bool]]:
    """Record in the list yielded each split whose last piece the graph reads, with
    that piece read from the start (the default) or from the end."""
    seen: list[bool] = []
    tokens = (SPLIT_LAST_FROM_END.set(from_end), SPLIT_LAST_READ.set(seen))
    try:
        yield seen
    finally:
        SPLIT_LAST_READ.reset(tokens[1])
        SPLIT_LAST_FROM_END.reset(tokens[0])


@contextlib.contextmanager
def deferring_decomposition_guards() -> Iterator[None]:
    token = DEFER_DECOMPOSITION_GUARDS.set(True)
    try:
        yield
    finally:
        DEFER_DECOMPOSITION_GUARDS.reset(token)


def run_decompositions(
    ep: torch.export.ExportedProgram, table: dict[Any, Any]
) -> tuple[torch.export.ExportedProgram, list[Any]]:
    """The decomposed program, and the guards its retrace met on symbolic sizes (sympy
    expressions) and deferred instead of adding them. Guards are deferred only within
    ``deferring_decomposition_guards()``: the export repeated after the retrace fixed a
    declared dim where a decomposition branches on it (the view algorithm of
    ``reshape(12, -1)`` of a ``(B, 2, 6)`` tensor guards ``2*B == 12``; fuzz seed 7411,
    program 144), though the graph it writes holds at every size. A deferred guard is
    answered at the example, where the size-oblivious answer is the general one, so it
    is not the first try. The caller judges each guard met over the dims' ranges
    (``capture.judge_later_guards``), as it does the capture's."""
    envs = _shape_envs(ep) if DEFER_DECOMPOSITION_GUARDS.get() else []
    before = {id(a) for env in envs for found in env.deferred_runtime_asserts.values()
              for a in found}
    with size_oblivious() if DECOMPOSE_SIZE_OBLIVIOUSLY else contextlib.nullcontext(), \
            whole_rnn_ops(), _deferring_guards(envs):
        program = ep.run_decompositions(table)
    met = [a.expr for env in envs for found in env.deferred_runtime_asserts.values()
           for a in found if id(a) not in before]
    return program, met


def _shape_envs(ep: torch.export.ExportedProgram) -> list[Any]:
    """The shape environments of ``ep``'s symbolic input sizes."""
    envs: dict[int, Any] = {}
    for node in ep.graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(val, torch.Tensor):
            for d in val.shape:
                if isinstance(d, torch.SymInt):
                    envs.setdefault(id(d.node.shape_env), d.node.shape_env)
    return list(envs.values())


@contextlib.contextmanager
def _deferring_guards(envs: list[Any]) -> Iterator[None]:
    """Guards met in ``envs`` are deferred as run-time asserts (as torch.export's
    ``prefer_deferred_runtime_asserts_over_guards``) for the duration."""
    import dataclasses

    saved = []
    for env in envs:
        settings: Any = getattr(env, "settings", None)
        if dataclasses.is_dataclass(settings) and not isinstance(settings, type) and hasattr(
                settings, "prefer_deferred_runtime_asserts_over_guards"):
            saved.append((env, settings))
            env.settings = dataclasses.replace(
                settings, prefer_deferred_runtime_asserts_over_guards=True)
    try:
        yield
    finally:
        for env, settings in saved:
            env.settings = settings


def core_aten_ops() -> list[torch._ops.OpOverload]:
    """Every OpOverload tagged ``core`` in the installed torch.

    ``dir(torch.ops.aten)`` lists only the packets used so far in the process,
    so the registered schemas are enumerated instead.
    """
    ops = []
    for qualified in sorted(torch._C._dispatch_get_all_op_names()):
        if not qualified.startswith("aten::"):
            continue
        name, _, overload = qualified[len("aten::"):].partition(".")
        try:
            op = getattr(getattr(torch.ops.aten, name), overload or "default")
        except (AttributeError, RuntimeError):
            continue
        if torch.Tag.core in op.tags:
            ops.append(op)
    return ops


def size_oblivious() -> Any:
    """A context in which torch.export treats backed sizes size-obliviously.

    A dim the user declares dynamic then does not specialise on the example's
    value 0 or 1: branches on ``size == 1`` take the general path. The flag is
    ``torch.fx.experimental._config.backed_size_oblivious`` (torch 2.6 and later,
    unchanged through 2.15); without it this is a no-op.
    """
    import contextlib

    config = getattr(torch.fx.experimental, "_config", None)
    if config is None or not hasattr(config, "backed_size_oblivious"):
        return contextlib.nullcontext()
    return config.patch(backed_size_oblivious=True)


# The logger torch's ShapeEnv reports each guard on ("eval <expr> [guard added] ..."),
# and each new input symbol ("create_symbol s0 = 2 for L['x'].size()[0] ..."); the
# same name and message shapes in torch 2.12 through 2.15.
SHAPE_ENV_LOGGER = "torch.fx.experimental.symbolic_shapes"


def refine_dynamic_shapes(fixes: list[str], dynamic_shapes: Any) -> Any:
    """``dynamic_shapes`` with torch.export's suggested fixes (``seq = Dim('seq', max=512)``,
    ``b = a``) applied, through torch's own parser of those lines.

    torch's parser reads every leaf but an int or None as a ``Dim`` (its ``__name__``),
    and so fails on a spec holding a ``Dim.AUTO`` hint beside the dims it fixes (torch
    2.13): each hint stands aside as a ``Dim`` named so that no fix names it, while it
    runs."""
    import torch.utils._pytree as pytree
    from torch.export.dynamic_shapes import refine_dynamic_shapes_from_suggested_fixes

    hint_type = getattr(torch.export.dynamic_shapes, "_DimHint", None)
    hints: dict[str, Any] = {}

    def hide(leaf: Any) -> Any:
        if hint_type is None or not isinstance(leaf, hint_type):
            return leaf
        name = f"_pt2onnx_dim_hint_{len(hints)}"
        hints[name] = leaf
        return torch.export.Dim(name)

    refined = refine_dynamic_shapes_from_suggested_fixes(
        "Suggested fixes:\n" + "\n".join(f"  {f}" for f in fixes),
        pytree.tree_map(hide, dynamic_shapes),
    )
    def restore(leaf: Any) -> Any:
        name = getattr(leaf, "__name__", None)
        return hints[name] if isinstance(name, str) and name in hints else leaf

    return pytree.tree_map(restore, refined) if hints else refined


def linear_cross_entropy_ops() -> tuple[Any, Any] | None:
    """torch_nn's chunked linear_cross_entropy ops (reduced, unreduced); None before torch 2.13."""
    try:
        import torch.nn.modules.linear_cross_entropy  # registers the ops

        ns = torch.ops.torch_nn
        return (ns._linear_cross_entropy_batch_chunked.default,
                ns._linear_cross_entropy_batch_chunked_no_reduction.default)
    except (ImportError, AttributeError, RuntimeError):
        return None


def uint8_index_masks() -> Any:
    """A context in which FakeTensor (so torch.export) accepts a uint8 mask as an index.

    Eager treats a uint8 index as a boolean mask (with a deprecation warning), but
    torch's meta kernel for ``aten.index.Tensor`` (``meta_index_Tensor``, which
    FakeTensor imports at each call; torch 2.12 through 2.15) checks for int8 instead,
    so ``x[mask_u8]`` fails to capture. Inside the context the kernel sees the mask as
    bool, which gives eager's shapes; the graph keeps the uint8 mask, which the
    ``index`` rule reads as a mask. Without that function this is a no-op.
    """
    import contextlib

    meta = getattr(torch, "_meta_registrations", None)
    original = getattr(meta, "meta_index_Tensor", None)
    if original is None:
        return contextlib.nullcontext()

    def index_meta(self: Any, indices: Any) -> Any:
        masks = [i.bool() if isinstance(i, torch.Tensor) and i.dtype == torch.uint8 else i
                 for i in indices]
        return original(self, masks)

    @contextlib.contextmanager
    def patched() -> Any:
        meta.meta_index_Tensor = index_meta  # type: ignore[union-attr]
        try:
            yield
        finally:
            meta.meta_index_Tensor = original  # type: ignore[union-attr]

    return patched()


def quantized_decomposed_ops() -> Any:
    """The ``torch.ops.quantized_decomposed`` namespace (PT2E's quantize/dequantize ops),
    registered by importing ``torch.ao.quantization.fx._decomposed``; None where this
    torch no longer ships it (PT2E moved to torchao, which registers the same ops)."""
    try:
        import torch.ao.quantization.fx._decomposed  # registers the ops

        ns = torch.ops.quantized_decomposed
        ns.quantize_per_tensor.default  # noqa: B018  (raises if absent)
    except (ImportError, AttributeError, RuntimeError):
        return None
    return ns


def quantized_decomposed_kernels() -> dict[Any, Any]:
    """torch's Python implementations of the ``quantized_decomposed`` ops that pt2onnx
    has no rule for (per-token and per-group quantization, symmetric qparams), keyed by
    op: traced as decompositions, they become ATen ops with rules."""
    ns = quantized_decomposed_ops()
    if ns is None:
        return {}
    import torch.ao.quantization.fx._decomposed as impl

    names = {
        "quantize_per_token.default": "quantize_per_token",
        "dequantize_per_token.default": "dequantize_per_token",
        "choose_qparams_per_token.default": "choose_qparams_per_token",
        "choose_qparams_per_token_asymmetric.default": "choose_qparams_per_token_asymmetric",
        "quantize_per_channel_group.default": "quantize_per_channel_group",
        "dequantize_per_channel_group.default": "dequantize_per_channel_group",
        "choose_qparams_symmetric.tensor": "choose_qparams_symmetric_tensor",
        "convert_element_type.no_fuse": "convert_element_type",
    }
    found = {}
    for op_name, fn_name in names.items():
        packet, overload = op_name.split(".")
        op = getattr(getattr(ns, packet, None), overload, None)
        fn = getattr(impl, fn_name, None)
        if op is not None and callable(fn):
            found[op] = fn
    return found
