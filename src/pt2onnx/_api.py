"""``pt2onnx.export`` and ``OnnxProgram``."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from pt2onnx import _compat, _legacy, _stages
from pt2onnx._program import OnnxProgram as OnnxProgram
from pt2onnx.capture import (
    WrongAtSecondSize,
    WrongWhereGuardFails,
    all_dynamic,
    argument_names,
    as_module,
    bound_inputs,
    check_args,
    declared_min,
    dynamic_axes_to_shapes,
    edges_tracked,
    guards_bound_the_range,
    lift,
    materialize_lazy,
    named_dims,
    preserved_state,
    residue_moduli,
    settle,
    split_trailing_kwargs,
    split_up_to,
    strict_only,
    without_far_split,
)
from pt2onnx.errors import (
    CaptureError,
    ExportError,
    InvalidInputError,
    OpsetError,
)
from pt2onnx.frontends import (
    check_precision_io,
    precision_name,
    register_mappings,
    register_output_containers,
)
from pt2onnx.passes import module_functions
from pt2onnx.save import check_path
from pt2onnx.translate import FixedByDecomposition

MIN_OPSET = 17
MAX_OPSET = 26
# Chosen for the widest runtime support that still has Gelu (20) and
# GroupNormalization (21); see docs/compatibility.md.
DEFAULT_OPSET = 21


def _check_opset(opset: int | None) -> int:
    if opset is None:
        return DEFAULT_OPSET
    if not isinstance(opset, int) or isinstance(opset, bool):
        raise OpsetError(
            f"opset must be an int between {MIN_OPSET} and {MAX_OPSET}, got {opset!r}."
        )
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise OpsetError(
            f"opset {opset} is outside the range pt2onnx writes ({MIN_OPSET}-{MAX_OPSET}). "
            f"Next step: pass an opset between {MIN_OPSET} and {MAX_OPSET}, or leave it out "
            f"for the default ({DEFAULT_OPSET})."
        )
    return opset


def export(
    model: torch.nn.Module | Callable[..., Any] | torch.export.ExportedProgram,
    args: tuple[Any, ...] = (),
    f: str | os.PathLike[str] | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_axes: Mapping[str, Any] | None = None,
    opset: int | None = None,
    external_data: bool | None = None,
    optimize: bool | str = True,
    verify: bool = False,
    report: bool | str | os.PathLike[str] = False,
    custom_translations: Mapping[Any, Callable[..., Any]] | None = None,
    weights: Any = None,
    dynamic: bool = False,
    quantized_io: str = "float",
    precision: str | torch.dtype = "keep",
    precision_io: str = "keep",
    export_modules_as_functions: bool | Collection[type[torch.nn.Module] | str] = False,
    **torch_onnx_options: Any,
) -> OnnxProgram:
    """Exports a PyTorch model to ONNX.

    Args:
        model: an ``nn.Module``, a callable, or a ``torch.export.ExportedProgram``.
        args: example positional inputs, as a tuple.
        f: where to write the ``.onnx`` file (a path, or a binary file object such as
            ``io.BytesIO``, which gets the whole model inline); nothing is written when
            None.
        kwargs: example keyword inputs.
        dynamic_shapes: ``torch.export``-style dynamic shapes.
        input_names, output_names, dynamic_axes: ``torch.onnx``-style naming and
            dynamic axes (``{"x": {0: "batch"}}`` or ``{"x": [0]}``).
        opset: the target ONNX opset (17-26). None: 21, or the lowest opset that
            takes the model's types where one needs a later opset (float4 23,
            float8e8m0 24, int2/uint2 25); the report's warnings say which.
        external_data: write weights to ``<f>.data``; None decides by size.
        optimize: run the small ONNX pass pipeline (True); ``"onnxruntime"``: also
            write onnxruntime's fused ops where they compute what the standard ones do
            (MultiHeadAttention, SkipLayerNormalization; the file
            then runs only where com.microsoft ops do: docs/performance.md); False: only
            the rewrites every file needs.
        verify: compare onnxruntime with eager PyTorch on ``args``.
        report: write the Markdown export report (True: beside ``f``; or a path).
        custom_translations: ``{op: rule}`` used for this call only.
        weights: for a model on the meta device, where its weights are
            (safetensors file(s), a ``state_dict`` or a callable); they are
            streamed into ``<f>.data`` one tensor at a time.
        dynamic: make every axis of every tensor input dynamic where the model
            allows it; the report lists the axes the model fixed, and why.
        quantized_io: how quantized tensors (``quint8``, ``qint8``) cross the graph's
            boundary: ``"float"`` (default) as their dequantized values, ``"triple"``
            as (integer values, scale, zero point), as the TorchScript exporter did
            (docs/migration.md).
        precision: the dtype the file's weights and compute are in: ``"keep"`` (default:
            the model's own), ``"float32"``, ``"float16"`` or ``"bfloat16"`` (also
            ``"fp32"``, ``"fp16"``, ``"bf16"``, or the torch dtype). A copy of the model is
            converted (as ``model.to(dtype)`` would) and captured on the example cast to
            that dtype; the model passed in is left as it was. With float16 and bfloat16,
            softmax, the normalizations, the reductions and the losses compute in float32
            (docs/compatibility.md lists them).
        precision_io: with a ``precision``, the dtypes of the file's floating inputs and
            outputs: ``"keep"`` (default) those of the example inputs and of the model
            (cast to and from the target precision inside the file), ``"convert"`` the
            target precision.
        export_modules_as_functions: each call of a module becomes a node calling an ONNX
            local function, as torch.onnx's TorchScript exporter did: True, every module
            type; a set of ``nn.Module`` classes (or their names), those. Calls with
            equal bodies share one function (weights are its inputs); calls that differ
            get one function each. The numbers are unchanged (docs/migration.md).
        **torch_onnx_options: every other keyword of ``torch.onnx.export``
            (``opset_version``, ``export_params``, ``keep_initializers_as_inputs``,
            ``training``, ``custom_opsets``, ``verbose``, ``custom_translation_table``,
            ``do_constant_folding``, ...), with the meaning docs/migration.md gives; the
            ones that have no effect here say so in a warning.

    Returns:
        An :class:`OnnxProgram`.
    """
    # The export allocates many small objects that live until it ends; Python's
    # cyclic GC would rescan all of them again and again (quadratic in graph size).
    opset, custom_translations, legacy = _legacy.normalize(
        opset, custom_translations, torch_onnx_options)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with preserved_state(model), _legacy.training_mode(model, legacy.training), \
                _compat.uint8_index_masks():
            prog = _export(
                model, args, f, kwargs=kwargs, dynamic_shapes=dynamic_shapes,
                input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes,
                opset=opset, external_data=external_data, optimize=optimize, verify=verify,
                report=report, custom_translations=custom_translations, weights=weights,
                dynamic=dynamic, legacy=legacy, quantized_io=quantized_io,
                precision=precision, precision_io=precision_io,
                functions=export_modules_as_functions,
            )
    finally:
        if gc_was_enabled:
            gc.enable()
    if legacy.training is not None and prog._module is not None:
        # verify() and run()'s eager reference use the mode the model was exported in.
        prog._module = _legacy.in_mode(prog._module, model, legacy.training)
    if legacy.verbose:
        print(prog.report.to_markdown(), file=sys.stderr)
    return prog


def _export(
    model: Any, args: Any, f: Any, *, kwargs: Any, dynamic_shapes: Any, input_names: Any,
    output_names: Any, dynamic_axes: Any, opset: Any, external_data: Any, optimize: Any,
    verify: bool, report: Any, custom_translations: Any, weights: Any, dynamic: bool = False,
    legacy: _legacy.Options | None = None, quantized_io: str = "float",
    precision: Any = "keep", precision_io: str = "keep", functions: Any = False,
) -> OnnxProgram:
    """The pipeline: each step is one call into one stage (_stages.py holds the glue)."""
    def call() -> _stages.Call:
        return _normalize(
            model, args, f, kwargs=kwargs, dynamic_shapes=dynamic_shapes,
            input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes,
            opset=opset, external_data=external_data, optimize=optimize, verify=verify,
            report=report, custom_translations=custom_translations, weights=weights,
            dynamic=dynamic, legacy=legacy or _legacy.Options(), quantized_io=quantized_io,
            precision=precision, precision_io=precision_io, functions=functions)

    def run() -> _Done:
        # Each attempt starts from the model's state as the call found it: the runs
        # against eager of a failed attempt refill a cache keyed by shape at other sizes
        # (fuzz seed 7411, program 1136: the retry captured another graph and refused).
        try:
            with preserved_state(model):
                return _pipeline(call())
        except _FarSplitFailed:
            # A cache left far above the example was captured above it, and the capture
            # up to it could not be joined: the export runs again keeping the cache's bound.
            with without_far_split(), preserved_state(model):
                return _pipeline(call())

    def deferred_if_fixed() -> _Done:
        try:
            return run()
        except FixedByDecomposition as fixed:
            if _compat.DEFER_DECOMPOSITION_GUARDS.get():
                raise
            # torch's decomposition fixed a declared dim where it branches on it: the
            # export runs again with those guards deferred and judged over the range.
            try:
                with _compat.deferring_decomposition_guards():
                    return run()
            except WrongWhereGuardFails:
                raise  # wrong at an edge of a guard's run: repeated bounded, deferred again
            except Exception:
                raise fixed from None

    def bounded_if_wrong() -> _Done:
        with edges_tracked() as used:
            try:
                return deferred_if_fixed()
            except ExportError:
                # WrongWhereGuardFails: the file was wrong at an edge of the sizes where a
                # guard fails. Any refusal of an export that kept a range by such runs
                # (a SizeOneError of that capture, fuzz seed 7411 programs 1136, 1260):
                # the export runs again with the range bounded by the guard, as before.
                if not used:
                    raise
        with guards_bound_the_range():
            return deferred_if_fixed()

    def strict_if_wrong() -> _Done:
        try:
            return bounded_if_wrong()
        except WrongAtSecondSize as wrong:
            if not wrong.non_strict:
                raise
            # A non-strict capture held int() of a size at the example's value; dynamo
            # keeps it symbolic. The refusal stands if the strict capture fails too.
            try:
                with strict_only():
                    return bounded_if_wrong()
            except Exception:
                raise wrong from None

    prog, finish = _read_split_from_end_if_better(
        lambda: _another_class_if_refused(strict_if_wrong))
    finish()
    return prog


def _another_class_if_refused(export: Callable[[], _Done]) -> _Done:
    """The export, and where it captured from one residue class of a dim (``capture/
    _residue.py``) and was refused or left a dim narrowed, the export again with that
    class's modulus skipped. A capture mod 2 that torch.export proves is wrong at the
    class's second size, or cannot be joined with the other class, where the model also
    reads the size mod 3 (a slice step ``n % 3 + 1``); the capture mod 6 holds both. An
    export again is taken only where it narrows nothing; otherwise the first stands."""
    skipped: frozenset[int] = frozenset()
    refusal: ExportError | None = None
    narrowed: _Done | None = None
    while True:
        with residue_moduli(skipped) as chosen:
            try:
                done: _Done | None = export()
            except ExportError as refused:
                refusal, done = refusal or refused, None
        if done is not None and (not chosen or not _narrowed(done[0])):
            return done
        narrowed = narrowed or done
        if not chosen or set(chosen) <= skipped:
            break
        skipped |= set(chosen)
    if narrowed is not None:
        return narrowed
    assert refusal is not None
    raise refusal from None


def _narrowed(prog: OnnxProgram) -> bool:
    return bool(prog.report.fixed_axes or prog.report.dynamic_refinements)


def _read_split_from_end_if_better(export: Callable[[], _Done]) -> _Done:
    """The export, and where its graph reads the last piece of a split whose number of
    pieces follows a dynamic size (see ``_compat.split_reads``) and it was refused or
    bounded a dim, the export again with that piece read from the end, taken where it
    is not refused and bounds no dim. Each export's guards and runs against eager judge
    its own reading; only the one taken is saved."""
    refusal: ExportError | None = None
    first: _Done | None = None
    with _compat.split_reads() as reads:
        try:
            first = export()
        except ExportError as refused:
            if not reads:
                raise
            refusal = refused
    if first is not None and (not reads or not _narrowed(first[0])):
        return first
    try:
        with _compat.split_reads(from_end=True):
            second = export()
    except ExportError:
        if first is not None:
            return first
        assert refusal is not None
        raise refusal from None
    if first is not None and _narrowed(second[0]):
        return first
    return second


class _FarSplitFailed(Exception):
    """The capture above a cache far above the example needs one up to it, which failed."""


_Done = tuple[OnnxProgram, Callable[[], None]]


def _pipeline(call: _stages.Call) -> _Done:
    """One export of a normalized call, stage by stage, and the step that saves the
    file and the report (taken once the export is chosen)."""
    stages = _stages.Stages(call)
    rep = stages.rep

    with rep.stage("capture"):
        rep.warnings.extend(materialize_lazy(call.model, call.args, call.kwargs))
        stages.convert_precision()  # a converted copy of the model, for precision=
        captured = stages.capture_first()
    stages.choose_opset(captured, MAX_OPSET)
    stages.captured_first(captured)
    with rep.stage("decompose"):
        program = stages.decompose(captured)
    with rep.stage("translate"):
        translator, onnx_model, program, captured = stages.translate(captured, program)
    stages.translated(translator, program)
    with rep.stage("optimize"):
        onnx_model = stages.optimize(onnx_model)
    stages.check_loads(onnx_model, program)

    prog = stages.program(onnx_model, translator, program, captured)
    if captured.size_one:
        with rep.stage("verify"):
            rep.warnings.extend(settle(prog, captured, stages.at_one))
    split = captured.split[0] if captured.split is not None else None
    if captured.below_minimum:
        with rep.stage("verify"):
            rep.warnings.extend(lift(prog, captured.below_minimum, rep, defer=split))
    if split is not None:
        with rep.stage("verify"):
            rep.warnings.extend(split_up_to(
                prog, captured, rep, declared_min(call.spec, split), stages.dim_names or [],
                stages.up_to, lambda low, cap: settle(low, cap, stages.at_one)))
        if any(n.startswith(f"{split} bounded to [") for n in rep.dynamic_refinements):
            for b in captured.below_minimum:
                if b.excluded:
                    raise CaptureError(b.excluded)
            if not any(b.name == split for b in captured.below_minimum):
                raise _FarSplitFailed
    with rep.stage("verify"):
        rep.warnings.extend(stages.by_residue(prog, captured))
    if call.functions is not None:  # module calls as ONNX functions, on the finished graph
        with rep.stage("functions"):
            stages.functions(prog)
    if call.verify:  # before saving: a file that does not match is never written
        with rep.stage("verify"):
            stages.verify(prog)
    if call.quantized_io == "triple":
        stages.quantized_triples(prog)

    def finish() -> None:
        if call.f is not None:
            with rep.stage("save"):
                stages.save(prog)
        stages.write_report()

    return prog, finish


def _normalize(
    model: Any, args: Any, f: Any, *, kwargs: Any, dynamic_shapes: Any, input_names: Any,
    output_names: Any, dynamic_axes: Any, opset: Any, external_data: Any, optimize: Any,
    verify: bool, report: Any, custom_translations: Any, weights: Any, dynamic: bool,
    legacy: _legacy.Options, quantized_io: str = "float", precision: Any = "keep",
    precision_io: str = "keep", functions: Any = False,
) -> _stages.Call:
    """The call checked and in one form: opset, inputs (a trailing dict of keyword
    inputs split off), paths, rules, and the dynamic shapes of whichever kind was given."""
    if quantized_io not in ("float", "triple"):
        raise InvalidInputError(
            f"quantized_io={quantized_io!r} is not one of 'float' (quantized inputs and "
            "outputs as their dequantized values, the default) or 'triple' ((integer "
            "values, scale, zero point), as the TorchScript exporter wrote them). Next "
            "step: pass one of those.")
    if not isinstance(optimize, bool) and optimize != "onnxruntime":
        raise InvalidInputError(
            f"optimize={optimize!r} is not one of True (the standard ONNX passes, the "
            "default), 'onnxruntime' (onnxruntime's fused ops as well) or False. Next "
            "step: pass one of those.")
    precision = precision_name(precision)
    precision_io = check_precision_io(precision_io)
    target_opset = _check_opset(opset)
    args, kwargs = check_args(args, kwargs)
    args, kwargs = split_trailing_kwargs(model, args, kwargs)
    kwargs = kwargs or {}
    register_mappings((args, kwargs))  # dict subclasses among the inputs
    _check_leaves(args, kwargs)
    to_file_object = f is not None and hasattr(f, "write")
    if to_file_object:
        if external_data:
            raise InvalidInputError(
                "external_data=True needs a path to write <f>.data beside; f is a file "
                "object. Next step: pass a path, or leave external_data unset.")
    elif f is not None:
        check_path(f)
    report_path = _report_path(report, f)
    if report_path is not None:
        check_path(report_path)
    _check_custom(custom_translations)
    spec, spec_warnings = _dynamic_spec(
        model, args, kwargs, dynamic_shapes, dynamic_axes, dynamic, input_names, output_names)
    return _stages.Call(
        model=model, args=args, kwargs=kwargs, f=f, to_file_object=to_file_object,
        report_path=report_path, spec=spec, spec_warnings=spec_warnings, opset=target_opset,
        custom=dict(custom_translations or {}),
        input_names=list(input_names) if input_names else None,
        output_names=list(output_names) if output_names else None, optimize=optimize,
        verify=verify, external_data=external_data, weights=weights, legacy=legacy,
        quantized_io=quantized_io, opset_named=opset is not None, precision=precision,
        precision_io=precision_io, functions=module_functions.chooser(functions))


def _dynamic_spec(
    model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any,
    dynamic_axes: Any, dynamic: bool, input_names: Any, output_names: Any,
) -> tuple[Any, list[str]]:
    """The torch.export dynamic_shapes for whichever of the three ways the user chose."""
    given = [n for n, v in (("dynamic_shapes", dynamic_shapes is not None),
                            ("dynamic_axes", bool(dynamic_axes)), ("dynamic=True", dynamic)) if v]
    if len(given) > 1:
        raise InvalidInputError(
            f"pass one of dynamic_shapes (torch.export style), dynamic_axes (torch.onnx style) "
            f"or dynamic=True, not both ({' and '.join(given)} were given)."
        )
    if isinstance(model, torch.export.ExportedProgram) or not (dynamic_axes or dynamic):
        return named_dims(dynamic_shapes), []
    module = as_module(model)
    inputs = bound_inputs(module, args, kwargs)
    if dynamic:
        return all_dynamic(inputs), []
    return dynamic_axes_to_shapes(
        inputs, list(input_names or []) or None, list(output_names or []), dict(dynamic_axes),
        argument_names(module),
    )


def _report_path(report: bool | str | os.PathLike[str], f: Any) -> Path | None:
    """Where the Markdown report goes: a given path, or beside ``f`` for True."""
    if isinstance(report, bool):
        return Path(f).with_suffix(".report.md") if report and f is not None else None
    return Path(report) if report else None


def _check_leaves(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Every input leaf must be something torch.export and ONNX can represent."""
    import torch.utils._pytree as pytree

    from pt2onnx.translate import exportable

    register_output_containers()  # a transformers cache is a container, not a leaf
    for path, leaf in pytree.tree_flatten_with_path((args, kwargs))[0]:
        where = ("args" if getattr(path[0], "idx", 0) == 0 else "kwargs") + pytree.keystr(path[1:])
        if isinstance(leaf, torch.Tensor):
            if not exportable(leaf.dtype) and not leaf.is_quantized:  # see _quantized
                raise InvalidInputError(
                    f"input {where} has dtype {leaf.dtype}, which ONNX cannot represent. "
                    "Next step: cast it (e.g. to torch.float32 or torch.complex64) first."
                )
        elif not isinstance(leaf, (bool, int, float, str, type(None), torch.SymInt,
                                   torch.dtype, torch.device)):
            raise InvalidInputError(
                f"input {where} is a {type(leaf).__name__}, which torch.export cannot capture "
                "and ONNX cannot represent. Next step: pass tensors (in tuples, lists or "
                "dicts), or register the class with torch.utils._pytree.register_pytree_node."
            )


def _check_custom(custom: Any) -> None:
    if custom is None:
        return
    if not isinstance(custom, Mapping):
        raise InvalidInputError(
            f"custom_translations must be a dict {{op: rule}}, got {type(custom).__name__}. "
            "Next step: pass custom_translations={torch.ops.aten.relu.default: my_rule}."
        )
    for op, fn in custom.items():
        if not callable(fn):
            raise InvalidInputError(
                f"custom_translations[{op}] is {fn!r}, not a function. Next step: map the op "
                "to a rule such as `def rule(g, x): return g.op.Relu(x)`."
            )
