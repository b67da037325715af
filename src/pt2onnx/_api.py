"""``pt2onnx.export`` and ``OnnxProgram``."""

from __future__ import annotations

import gc
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx import _compat, _legacy, debug, passes
from pt2onnx._program import OnnxProgram as OnnxProgram
from pt2onnx.capture import _capture, _dynamic, _size_one
from pt2onnx.errors import (
    CaptureError,
    ExportError,
    InvalidInputError,
    OpsetError,
    TranslationError,
    UnsupportedOperatorError,
    VerificationError,
)
from pt2onnx.frontends import _quantized
from pt2onnx.report import ExportReport
from pt2onnx.save import _save
from pt2onnx.translate import _decomp
from pt2onnx.translate._registry import REGISTRY
from pt2onnx.translate._translate import Translator

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
    optimize: bool = True,
    verify: bool = False,
    report: bool | str | os.PathLike[str] = False,
    custom_translations: Mapping[Any, Callable[..., Any]] | None = None,
    weights: Any = None,
    dynamic: bool = False,
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
        opset: the target ONNX opset (17-26).
        external_data: write weights to ``<f>.data``; None decides by size.
        optimize: run the small ONNX pass pipeline.
        verify: compare onnxruntime with eager PyTorch on ``args``.
        report: write the Markdown export report (True: beside ``f``; or a path).
        custom_translations: ``{op: rule}`` used for this call only.
        weights: for a model on the meta device, where its weights are
            (safetensors file(s), a ``state_dict`` or a callable); they are
            streamed into ``<f>.data`` one tensor at a time.
        dynamic: make every axis of every tensor input dynamic where the model
            allows it; the report lists the axes the model fixed, and why.
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
        with _capture.preserved_state(model), _legacy.training_mode(model, legacy.training), \
                _compat.uint8_index_masks():
            prog = _export(
                model, args, f, kwargs=kwargs, dynamic_shapes=dynamic_shapes,
                input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes,
                opset=opset, external_data=external_data, optimize=optimize, verify=verify,
                report=report, custom_translations=custom_translations, weights=weights,
                dynamic=dynamic, legacy=legacy,
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
    output_names: Any, dynamic_axes: Any, opset: Any, external_data: Any, optimize: bool,
    verify: bool, report: Any, custom_translations: Any, weights: Any, dynamic: bool = False,
    legacy: _legacy.Options | None = None,
) -> OnnxProgram:
    legacy = legacy or _legacy.Options()
    target_opset = _check_opset(opset)
    args, kwargs = _capture.check_args(args, kwargs)
    args, kwargs = _capture.split_trailing_kwargs(model, args, kwargs)
    kwargs = kwargs or {}
    _capture.register_mappings((args, kwargs))  # dict subclasses among the inputs
    _check_leaves(args, kwargs)
    to_file_object = f is not None and hasattr(f, "write")
    if to_file_object:
        if external_data:
            raise InvalidInputError(
                "external_data=True needs a path to write <f>.data beside; f is a file "
                "object. Next step: pass a path, or leave external_data unset.")
    elif f is not None:
        _save.check_path(f)
    report_path = _report_path(report, f)
    if report_path is not None:
        _save.check_path(report_path)
    _check_custom(custom_translations)
    dynamic_shapes, spec_warnings = _dynamic_spec(
        model, args, kwargs, dynamic_shapes, dynamic_axes, dynamic, input_names, output_names)

    rep = ExportReport(opset=target_opset)
    registry = REGISTRY
    custom = custom_translations or {}
    keep = tuple(
        op for op in _decomp.KEEP
        if op in custom or registry.lookup(op, target_opset) is not None
    )

    def has_rule(op: Any) -> bool:
        return op in custom or any(
            registry.lookup(op, target_opset, complex=c) is not None for c in (False, True))

    def trace_decompositions() -> dict[Any, Any]:
        # A trace decomposes as it goes: only the ops that have no rule.
        return {op: fn for op, fn in _decomp.decomposition_table(keep).items() if not has_rule(op)}

    from pt2onnx.rules import moe as _moe_rules
    from pt2onnx.rules import torchvision as _torchvision_rules

    _torchvision_rules.register()  # torchvision's ops exist only once it is imported
    _moe_rules.register()  # so do transformers' (its grouped matmul)
    # A static recording sees composite ops already split by torch's dispatcher, so a
    # user's rule for one of them could never fire: such exports go to torch.export.
    record = not any(_capture.composite(op) for op in custom)

    user_spec = dynamic_shapes

    def capture(record: bool, inputs: tuple[tuple[Any, ...], dict[str, Any]] = (args, kwargs),
                spec: Any = user_spec) -> _capture.CaptureResult:
        args, kwargs = inputs

        def attempt(target: Any, cargs: tuple[Any, ...], ckwargs: dict[str, Any],
                    ) -> _capture.CaptureResult:
            return _capture.capture(target, cargs, ckwargs, spec,
                                    trace_decompositions, has_rule, record=record)

        with debug.preserving_meta(), _moe_rules.grouped_experts(model) as moe_notes:
            # Eager-mode quantized modules hold what torch.export cannot capture (quantized
            # tensors, packed weights): a copy with them in float + QDQ form is captured.
            source = None if isinstance(model, torch.export.ExportedProgram) else (
                _capture.as_module(model))
            quantized = source is not None and _quantized.needs_rewrite(source, args, kwargs)
            try:
                captured = attempt(*(_quantized.prepare(source, args, kwargs)
                                     if quantized and source is not None
                                     else (model, args, kwargs)))
            except CaptureError as exc:
                # torch.quantize_per_tensor (or a quantized op) in the model's own code.
                if quantized or source is None or "quantiz" not in str(exc):
                    raise
                try:
                    captured = attempt(*_quantized.prepare(source, args, kwargs))
                except CaptureError:
                    raise exc from None
                quantized = True
        captured.warnings[:0] = moe_notes
        if quantized:
            captured.strategy += (", after rewriting its eager-mode quantized tensors and "
                                  "modules into quantize/dequantize form")
        return captured

    def decompose(captured: _capture.CaptureResult) -> torch.export.ExportedProgram:
        why = None if captured.traced else _decomp.reason_to_decompose(captured.program, has_rule)
        if captured.traced:
            rep.decomposition = "done during the trace (make_fx), for ops without a rule"
            return captured.program
        if why is None:
            rep.decomposition = "skipped: every captured op has a rule"
            return captured.program
        rep.decomposition = f"run_decompositions: {why}"
        # Only the ops without a rule: torch's decomposition of an op we translate
        # can refuse what eager accepts (addcmul of ints with a float value).
        symbolic = _decomp.symbolic_input_dims(captured.program)  # before: the retrace rewrites them
        try:
            program = _compat.run_decompositions(captured.program, trace_decompositions())
        except ExportError:
            raise
        except Exception as exc:
            raise _decomp.functionalization_error(why, exc) from exc
        _decomp.check_still_dynamic(symbolic, program, why)
        return program

    def note_capture(captured: _capture.CaptureResult) -> None:
        rep.capture_strategy = captured.strategy
        rep.fallbacks.extend(captured.fallbacks)
        rep.dynamic_refinements, rep.fixed_axes = captured.refinements, captured.fixed_axes
        for message in captured.warnings:
            rep.warnings.append(message)
            warnings.warn(message, stacklevel=4)

    with rep.stage("capture"):
        captured = capture(record)
    if captured.dynamic_shapes is not None:
        dynamic_shapes = captured.dynamic_shapes
    for message in legacy.warnings + spec_warnings:
        rep.warnings.append(message)
        warnings.warn(message, stacklevel=3)
    note_capture(captured)

    with rep.stage("decompose"):
        program = decompose(captured)
    dim_names = _capture.user_dim_names(model, *_example_of(captured, args, kwargs),
                                        dynamic_shapes, captured.program)

    def translate(program: torch.export.ExportedProgram) -> tuple[Translator, ir.Model]:
        translator = Translator(
            program, registry, target_opset, dict(custom_translations or {}),
            list(input_names) if input_names else None,
            list(output_names) if output_names else None, dim_names,
        )
        return translator, translator.run()

    def translate_all(captured: _capture.CaptureResult, program: torch.export.ExportedProgram,
                      ) -> tuple[Translator, ir.Model, torch.export.ExportedProgram]:
        try:
            return (*translate(program), program)
        except UnsupportedOperatorError as first:
            if program is not captured.program or captured.traced or captured.recorded:
                raise
            # The last link of the chain: an op no table decomposes at its node
            # (a composite op such as cross_entropy_loss) may still decompose
            # through torch's dispatcher when the whole program is retraced.
            try:
                program = _compat.run_decompositions(
                    captured.program, _decomp.decomposition_table(keep))
            except Exception as retrace:  # the op stays unsupported
                # torch's own decomposition refuses it (addcmul of ints with a float
                # value): the typed error naming the op is the one to show.
                text = str(retrace).strip().splitlines()
                first.add_note("torch's decompositions could not retrace the program "
                               f"either: {type(retrace).__name__}: {text[0] if text else ''}")
                raise first from None
            rep.decomposition = ("run_decompositions: an op had no rule and no "
                                 "decomposition at its node")
            return (*translate(program), program)

    with rep.stage("translate"):
        try:
            try:
                translator, onnx_model, program = translate_all(captured, program)
            except (UnsupportedOperatorError, TranslationError) as exc:
                if not captured.recorded:
                    raise
                # The recording holds the ops torch's dispatcher ran; torch.export's
                # program may still translate (a composite op with a rule of its own).
                rep.fallbacks.append(
                    f"static recording did not translate ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:200]}); captured again with torch.export")
                captured = capture(False)
                note_capture(captured)
                program = decompose(captured)
                translator, onnx_model, program = translate_all(captured, program)
        except UnsupportedOperatorError as exc:
            rep.unsupported = list(exc.missing)
            if report_path is not None:
                report_path.write_text(rep.to_markdown())
            raise
    rep.fx_nodes = len(program.graph.nodes)
    rep.folded_nodes = translator.folded
    rep.decompositions = [(op, src, n) for (op, src), n in translator.decompositions.items()]
    if rep.decompositions:
        count = sum(n for _, _, n in rep.decompositions)
        per_node = (f"per node: {count} node(s) of {len(rep.decompositions)} op(s) without a "
                    f"rule, traced in {translator.trace_seconds:.2f}s during translate")
        if rep.decomposition.startswith("skipped"):
            rep.decomposition = per_node
        else:
            rep.decomposition += f"; then {per_node}"
    rep.dynamic_dims = _dynamic_dims(program, translator.sym_names)
    rep.warnings.extend(translator.warnings)

    with rep.stage("optimize"):
        onnx_model = passes.optimize(onnx_model) if optimize else passes.cleanup(onnx_model)
    missing = passes.ort_cpu_types.unloadable(onnx_model)
    if missing:
        message = (f"onnxruntime's CPU build has no kernel for {', '.join(missing)} in this "
                   "file, so it will not load there (other runtimes may run it). Next step: "
                   "compute that op in another dtype in the model, or report it as a "
                   "pt2onnx issue with the op and dtype.")
        rep.warnings.append(message)
        warnings.warn(message, stacklevel=3)
    _legacy.apply(onnx_model, legacy, set(program.state_dict))
    rep.op_histogram = _histogram(onnx_model)

    if isinstance(model, torch.export.ExportedProgram):
        eager: Callable[..., Any] | None = model.module()
    else:
        eager = _capture.as_module(model)
    prog = OnnxProgram(onnx_model, rep, eager, list(kwargs))
    prog._program, prog._fx_values = program, translator.fx_values
    prog._example, prog._extra_outputs = (args, kwargs), len(translator.extra_outputs)
    prog._sym_names, prog._traced = translator.sym_names, captured.traced
    prog._call_model = model
    if captured.size_one:
        def at_one(point: _size_one.Unproved) -> ir.Model:
            # The model captured again with the dim at 1 (the other dims still dynamic).
            spec = _dynamic.without_dims(user_spec, point.dim_names)
            cap = capture(True, (point.args, point.kwargs), spec)
            program1 = decompose(cap)
            names1 = _capture.user_dim_names(model, point.args, point.kwargs, spec,
                                             cap.program)
            translator1 = Translator(
                program1, registry, target_opset, dict(custom_translations or {}),
                list(input_names) if input_names else None,
                list(output_names) if output_names else None, names1)
            model1 = translator1.run()
            return passes.optimize(model1) if optimize else passes.cleanup(model1)

        with rep.stage("verify"):
            rep.warnings.extend(_size_one.settle(prog, captured, at_one))
    if verify:  # before saving: a file that does not match is never written
        with rep.stage("verify"):
            result = prog.verify(bisect=True)  # the example, a second size, and size 1
        if not result.ok:
            if report_path is not None:
                report_path.write_text(rep.to_markdown())
            raise VerificationError(
                "the exported model does not match eager PyTorch, so no file was written:\n"
                + str(result) + "\nNext step: the first divergence above names the rule and "
                "the model line; export with verify=False to keep the file for debugging.",
                result)
    if to_file_object:
        with rep.stage("save"):
            f.write(prog.model_proto.SerializeToString())
    elif f is not None:
        with rep.stage("save"):
            prog.save(f, external_data=external_data, weights=weights)
    if report_path is not None:
        report_path.write_text(rep.to_markdown())
    return prog


def _example_of(
    captured: _capture.CaptureResult, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The inputs the program was captured on: a doubled example, or the user's."""
    if captured.example is None:
        return args, kwargs
    return tuple(captured.example[0]), dict(captured.example[1])


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
        return _dynamic.named_dims(dynamic_shapes), []
    module = _capture.as_module(model)
    inputs = _dynamic.bound_inputs(module, args, kwargs)
    if dynamic:
        return _dynamic.all_dynamic(inputs), []
    return _dynamic.dynamic_axes_to_shapes(
        inputs, list(input_names or []) or None, list(output_names or []), dict(dynamic_axes),
        _dynamic.argument_names(module),
    )


def _report_path(report: bool | str | os.PathLike[str], f: Any) -> Path | None:
    """Where the Markdown report goes: a given path, or beside ``f`` for True."""
    if isinstance(report, bool):
        return Path(f).with_suffix(".report.md") if report and f is not None else None
    return Path(report) if report else None


def _check_leaves(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Every input leaf must be something torch.export and ONNX can represent."""
    import torch.utils._pytree as pytree

    from pt2onnx.translate._builder import exportable

    _capture.register_output_containers()  # a transformers cache is a container, not a leaf
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


def _dynamic_dims(program: torch.export.ExportedProgram, names: dict[Any, Any]) -> dict[str, str]:
    """Each symbolic dim with the range torch.export guarded it to."""
    dims = {}
    for sym, vr in program.range_constraints.items():
        # A derived dim (2*s44) shows in the user's names (2*half).
        shown = str(names[sym] if sym in names else sym.xreplace(names)
                    if hasattr(sym, "xreplace") else sym)
        dims[shown] = f"[{vr.lower}, {vr.upper}]"
    return dims


def _histogram(model: ir.Model) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in model.graph:
        key = node.op_type if not node.domain else f"{node.domain}::{node.op_type}"
        counts[key] = counts.get(key, 0) + 1
    return counts

