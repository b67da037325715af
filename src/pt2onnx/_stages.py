"""What ``_api._export`` calls between the stages: one normalized call (:class:`Call`) and
the glue that hands each stage's result to the next (:class:`Stages`), recording the
report as it goes.

- capture (``capture/``): the recording, torch.export or the trace; quantized models
  rewritten first (``frontends/``); a static recording that does not translate is
  captured again with torch.export;
- decompose and translate (``translate/``, ``rules/``);
- optimize (``passes/``);
- the program's size-1 check, verify, save (``save/``) and the report.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx import _compat, _legacy, debug, passes
from pt2onnx._program import OnnxProgram
from pt2onnx._stage_helpers import (
    dynamic_dims,
    example_of,
    histogram,
    precision_io,
    quantized_leaf,
    tie_names,
)
from pt2onnx.capture import (
    CaptureResult,
    Unproved,
    as_module,
    bounded_dim,
    capture,
    capture_by_residue,
    composite,
    judge_later_guards,
    settle,
    split_by_residue,
    user_dim_names,
    without_dims,
)
from pt2onnx.errors import (
    CaptureError,
    ExportError,
    TranslationError,
    TypeConstraintError,
    UnsupportedOperatorError,
    VerificationError,
)
from pt2onnx.frontends import (
    Converted,
    convert_precision,
    has_tensor_keys,
    keys_as_inputs,
    needs_rewrite,
    prepare,
    spec_as_pairs,
)
from pt2onnx.report import ExportReport
from pt2onnx.translate import (
    KEEP_WHOLE,
    REGISTRY,
    Translator,
    check_still_dynamic,
    decomposition_table,
    functionalization_error,
    reason_to_decompose,
    symbolic_input_dims,
    types_opset,
)


@dataclass
class Call:
    """An export call, checked and normalized (``_api._normalize``)."""

    model: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    f: Any
    to_file_object: bool
    report_path: Path | None
    spec: Any  # torch.export dynamic_shapes, from whichever form was given
    spec_warnings: list[str]
    opset: int
    custom: dict[Any, Callable[..., Any]]
    input_names: list[str] | None
    output_names: list[str] | None
    optimize: bool | str
    verify: bool
    external_data: bool | None
    weights: Any
    legacy: _legacy.Options = field(default_factory=_legacy.Options)
    quantized_io: str = "float"  # "triple": (integer values, scale, zero point)
    opset_named: bool = True  # False: the caller left the opset to pt2onnx
    precision: str = "keep"  # the target precision's name (frontends.PRECISIONS)
    precision_io: str = "keep"
    # export_modules_as_functions: which module types (qualified names) become functions
    functions: Callable[[str], bool] | None = None


class Stages:
    """The stages of one export, sharing its report, rules and options."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.rep = ExportReport(opset=call.opset)
        self.registry = REGISTRY
        # The built-in rules load here, before any capture: a rule module's import must
        # not run under the recording's dispatch modes.
        self.registry.load_builtins()
        self.keep = self._kept_whole(call.opset)
        self.dynamic_shapes = call.spec
        from pt2onnx.rules import moe as _moe_rules
        from pt2onnx.rules import torchvision as _torchvision_rules

        self._moe_rules = _moe_rules
        _torchvision_rules.register()  # torchvision's ops exist only once it is imported
        _moe_rules.register()  # so do transformers' (its grouped matmul)
        # A static recording sees composite ops already split by torch's dispatcher, so a
        # user's rule for one of them could never fire: such exports go to torch.export.
        self.record = not any(composite(op) for op in call.custom)
        self.dim_names: list[dict[int, str]] | None = None
        self.tie_sizes: dict[str, list[tuple[int, int]]] = {}
        self.converted: Converted | None = None  # precision=: the model's converted copy
        self.original: tuple[Any, tuple[Any, ...], dict[str, Any]] | None = None

    # -- precision ----------------------------------------------------------------------
    def convert_precision(self) -> None:
        """For ``precision=``: the model to capture is a converted copy, the example is
        cast to its dtype (the caller's model and example are kept for the I/O)."""
        call = self.call
        if call.precision == "keep":
            return
        self.original = (call.model, call.args, call.kwargs)
        self.converted = convert_precision(call.model, call.args, call.kwargs,
                                           call.precision, call.precision_io)
        call.model, call.args, call.kwargs = (
            self.converted.model, self.converted.args, self.converted.kwargs)

    # -- rules ------------------------------------------------------------------------
    def _kept_whole(self, opset: int) -> tuple[Any, ...]:
        """The ops never decomposed at ``opset``: those with a richer ONNX form there."""
        return tuple(op for op in KEEP_WHOLE
                     if op in self.call.custom or self.registry.lookup(op, opset) is not None)

    def has_rule(self, op: Any) -> bool:
        return op in self.call.custom or any(
            self.registry.lookup(op, self.call.opset, complex=c) is not None
            for c in (False, True))

    def trace_decompositions(self) -> dict[Any, Any]:
        # A trace decomposes as it goes: only the ops that have no rule.
        return {op: fn for op, fn in decomposition_table(self.keep).items()
                if not self.has_rule(op)}

    # -- capture ----------------------------------------------------------------------
    def capture(self, record: bool, inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
                spec: Any = None, *, user_spec: bool = True) -> CaptureResult:
        """The model captured on ``inputs`` (the example) with ``spec`` (the user's)."""
        call = self.call
        args, kwargs = inputs if inputs is not None else (call.args, call.kwargs)
        spec = call.spec if user_spec and spec is None else spec
        model = call.model

        def attempt(target: Any, cargs: tuple[Any, ...], ckwargs: dict[str, Any],
                    ) -> CaptureResult:
            cspec = spec
            if isinstance(target, torch.nn.Module) and has_tensor_keys((cargs, ckwargs)):
                # A dict keyed by tensors: each key is an input too (frontends).
                target, cargs, ckwargs = keys_as_inputs(target, cargs, ckwargs)
                cspec = spec_as_pairs(spec)
            return capture(target, cargs, ckwargs, cspec, self.trace_decompositions,
                           self.has_rule, record=record)

        with debug.preserving_meta(), self._moe_rules.grouped_experts(model) as moe_notes:
            # Eager-mode quantized modules hold what torch.export cannot capture (quantized
            # tensors, packed weights): a copy with them in float + QDQ form is captured.
            source = None if isinstance(model, torch.export.ExportedProgram) else (
                as_module(model))
            quantized = source is not None and needs_rewrite(source, args, kwargs)
            try:
                captured = attempt(*(prepare(source, args, kwargs)
                                     if quantized and source is not None
                                     else (model, args, kwargs)))
            except CaptureError as exc:
                # torch.quantize_per_tensor (or a quantized op) in the model's own code.
                if quantized or source is None or "quantiz" not in str(exc):
                    raise
                try:
                    captured = attempt(*prepare(source, args, kwargs))
                except CaptureError:
                    raise exc from None
                quantized = True
        captured.warnings[:0] = moe_notes
        if quantized:
            captured.strategy += (", after rewriting its eager-mode quantized tensors and "
                                  "modules into quantize/dequantize form")
        return captured

    def capture_first(self) -> CaptureResult:
        """The model captured on the example; where torch.export refuses a declared dim
        and suggests no fix, from the example's residue class of it (``capture/
        _residue.py``: the other classes are captured after translation)."""
        call = self.call
        try:
            return self.capture(self.record)
        except CaptureError as exc:
            def attempt(spec: Any, inputs: Any) -> CaptureResult:
                return self.capture(True, inputs, spec, user_spec=False)

            found = capture_by_residue(call.model, call.args, call.kwargs, call.spec, exc,
                                       attempt)
            if found is None:
                raise
            return found

    def note_capture(self, captured: CaptureResult) -> None:
        rep = self.rep
        rep.capture_strategy = captured.strategy
        rep.fallbacks.extend(captured.fallbacks)
        rep.dynamic_refinements, rep.fixed_axes = captured.refinements, captured.fixed_axes
        for message in captured.warnings:
            rep.warnings.append(message)
            warnings.warn(message, stacklevel=5)

    def captured_first(self, captured: CaptureResult) -> None:
        """The first capture's refinements of the spec, and the warnings so far."""
        call = self.call
        if captured.dynamic_shapes is not None:
            self.dynamic_shapes = captured.dynamic_shapes
        for message in call.legacy.warnings + call.spec_warnings:
            self.rep.warnings.append(message)
            warnings.warn(message, stacklevel=4)
        self.note_capture(captured)
        self.dim_names = user_dim_names(
            call.model, *example_of(captured, call.args, call.kwargs), self.dynamic_shapes,
            captured.program)
        self.tie_sizes.update(tie_names(self.dim_names, captured.ties))

    def choose_opset(self, captured: CaptureResult, highest: int) -> None:
        """Where the caller named no opset and the captured program holds a type ONNX has
        only from a later opset than the default (float4 23, float8e8m0 24, int2 25), the
        export is at the lowest opset that takes every such type, and the report says so.
        A named opset is kept: translation then refuses with the opset to use."""
        call = self.call
        if call.opset_named:
            return
        need, names = types_opset(captured.program)
        if need <= call.opset or need > highest:
            return
        call.opset = self.rep.opset = need
        self.keep = self._kept_whole(need)
        message = (f"opset {need} chosen: {' and '.join(names)} "
                   f"{'needs' if len(names) == 1 else 'need'} it (the default is lower); "
                   f"pass opset=... to choose")
        self.rep.warnings.append(message)
        warnings.warn(message, stacklevel=4)

    # -- decompose and translate ------------------------------------------------------
    def decompose(self, captured: CaptureResult) -> torch.export.ExportedProgram:
        rep = self.rep
        why = None if captured.traced else reason_to_decompose(captured.program,
                                                                        self.has_rule)
        if captured.traced:
            rep.decomposition = "done during the trace (make_fx), for ops without a rule"
            return captured.program
        if why is None:
            rep.decomposition = "skipped: every captured op has a rule"
            return captured.program
        rep.decomposition = f"run_decompositions: {why}"
        # Only the ops without a rule: torch's decomposition of an op we translate
        # can refuse what eager accepts (addcmul of ints with a float value).
        symbolic = symbolic_input_dims(captured.program)  # before: the retrace rewrites them
        try:
            program, met = _compat.run_decompositions(captured.program,
                                                      self.trace_decompositions())
        except ExportError:
            raise
        except Exception as exc:
            raise functionalization_error(why, exc) from exc
        check_still_dynamic(symbolic, program, why)
        if met and not captured.recorded:
            call = self.call
            notes = judge_later_guards(captured, call.model,
                                       *example_of(captured, call.args, call.kwargs),
                                       call.spec, met, f"run_decompositions ({why})")
            for note in notes:
                rep.warnings.append(note)
                warnings.warn(note, stacklevel=4)
        return program

    def _translator(self, program: torch.export.ExportedProgram,
                    dim_names: list[dict[int, str]] | None,
                    tie_sizes: dict[str, list[tuple[int, int]]] | None = None) -> Translator:
        call = self.call
        translator = Translator(program, self.registry, call.opset, dict(call.custom),
                                call.input_names, call.output_names, dim_names)
        translator.tie_sizes = tie_sizes or {}
        return translator

    def _translate_once(self, program: torch.export.ExportedProgram,
                        ) -> tuple[Translator, ir.Model]:
        translator = self._translator(program, self.dim_names, self.tie_sizes)
        return translator, translator.run()

    def _translate_all(self, captured: CaptureResult,
                       program: torch.export.ExportedProgram,
                       ) -> tuple[Translator, ir.Model, torch.export.ExportedProgram]:
        try:
            return (*self._translate_once(program), program)
        except UnsupportedOperatorError as first:
            if program is not captured.program or captured.traced or captured.recorded:
                raise
            # The last link of the chain: an op no table decomposes at its node
            # (a composite op such as cross_entropy_loss) may still decompose
            # through torch's dispatcher when the whole program is retraced.
            try:
                program, met = _compat.run_decompositions(
                    captured.program, decomposition_table(self.keep))
            except Exception as retrace:  # the op stays unsupported
                # torch's own decomposition refuses it (addcmul of ints with a float
                # value): the typed error naming the op is the one to show.
                text = str(retrace).strip().splitlines()
                first.add_note("torch's decompositions could not retrace the program "
                               f"either: {type(retrace).__name__}: {text[0] if text else ''}")
                raise first from None
            self.rep.decomposition = ("run_decompositions: an op had no rule and no "
                                      "decomposition at its node")
            if met:
                call = self.call
                self.rep.warnings.extend(judge_later_guards(
                    captured, call.model, *example_of(captured, call.args, call.kwargs),
                    call.spec, met, "run_decompositions"))
            return (*self._translate_once(program), program)

    def translate(self, captured: CaptureResult, program: torch.export.ExportedProgram,
                  ) -> tuple[Translator, ir.Model, torch.export.ExportedProgram,
                             CaptureResult]:
        """The program translated; a static recording that does not translate is
        captured again with torch.export (the capture it ends with is returned)."""
        rep = self.rep
        try:
            try:
                translator, onnx_model, program = self._translate_all(captured, program)
            except (UnsupportedOperatorError, TranslationError) as exc:
                if not captured.recorded:
                    raise
                # The recording holds the ops torch's dispatcher ran; torch.export's
                # program may still translate (a composite op with a rule of its own).
                rep.fallbacks.append(
                    f"static recording did not translate ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:200]}); captured again with torch.export")
                captured = self.capture(False)
                self.note_capture(captured)
                program = self.decompose(captured)
                translator, onnx_model, program = self._translate_all(captured, program)
        except UnsupportedOperatorError as exc:
            rep.unsupported = list(exc.missing)
            self.write_report()
            raise
        return translator, onnx_model, program, captured

    def translated(self, translator: Translator, program: torch.export.ExportedProgram) -> None:
        """The translation's numbers in the report."""
        rep = self.rep
        rep.fx_nodes = len(program.graph.nodes)
        rep.folded_nodes = translator.folded
        rep.decompositions = [(op, src, n) for (op, src), n in translator.decompositions.items()]
        if rep.decompositions:
            count = sum(n for _, _, n in rep.decompositions)
            per_node = (f"per node: {count} node(s) of {len(rep.decompositions)} op(s) without "
                        f"a rule, traced in {translator.trace_seconds:.2f}s during translate")
            if rep.decomposition.startswith("skipped"):
                rep.decomposition = per_node
            else:
                rep.decomposition += f"; then {per_node}"
        rep.dynamic_dims = dynamic_dims(program, translator.sym_names)
        rep.warnings.extend(translator.warnings)

    # -- optimize -------------------------------------------------------------------------
    def optimize(self, model: ir.Model) -> ir.Model:
        """The passes, then the type check: a node that breaks its schema's type
        constraints is an export error here, never a file that fails to load."""
        half = self.call.precision in ("float16", "bfloat16")
        model = (passes.optimize(model, float32=half,
                                 onnxruntime=self.call.optimize == "onnxruntime")
                 if self.call.optimize else passes.cleanup(model, float32=half))
        precision_io(model, self.converted, self.original)
        found = passes.type_check.violations(model)
        if found:
            self.write_report()
            shown = "\n".join(f"  - {v}" for v in found[:10])
            more = f"\n  ... and {len(found) - 10} more" if len(found) > 10 else ""
            raise TypeConstraintError(
                f"{len(found)} node(s) of the translated graph break their ONNX schema's "
                f"type constraints, so no runtime would load the file:\n{shown}{more}\n"
                "Next step: the rule named above writes mixed dtypes; fix or override it "
                "(custom_translations={op: fn}, docs/extending.md), or report it as a "
                "pt2onnx issue with the op and the dtypes.", found)
        return model

    def check_loads(self, model: ir.Model, program: torch.export.ExportedProgram) -> None:
        """Warns about ops onnxruntime's CPU build cannot load; applies torch.onnx's
        keywords; counts the ops."""
        missing = passes.ort_cpu_types.unloadable(model)
        if missing:
            message = (f"onnxruntime's CPU build has no kernel for {', '.join(missing)} in "
                       "this file, so it will not load there (other runtimes may run it). "
                       "Next step: compute that op in another dtype in the model, or report "
                       "it as a pt2onnx issue with the op and dtype.")
            self.rep.warnings.append(message)
            warnings.warn(message, stacklevel=4)
        _legacy.apply(model, self.call.legacy, set(program.state_dict))
        self.rep.op_histogram = histogram(model)

    # -- the program, size 1, verify, save ---------------------------------------------
    def program(self, model: ir.Model, translator: Translator,
                program: torch.export.ExportedProgram,
                captured: CaptureResult) -> OnnxProgram:
        call = self.call
        if isinstance(call.model, torch.export.ExportedProgram):
            eager: Callable[..., Any] | None = call.model.module()
        else:
            eager = as_module(call.model)
        prog = OnnxProgram(model, self.rep, eager, list(call.kwargs))
        prog._program, prog._fx_values = program, translator.fx_values
        prog._example, prog._extra_outputs = (call.args, call.kwargs), len(translator.extra_outputs)
        prog._sym_names, prog._traced = translator.sym_names, captured.traced
        prog._call_model = call.model
        if self.converted is not None and self.original is not None:
            # Compared with the model in the target precision; run as the caller calls it.
            prog._module = self.converted.eager
            prog._call_model, prog._example = self.original[0], self.original[1:]
            prog._precision = self.converted.dtype
        return prog

    def at_one(self, point: Unproved) -> ir.Model:
        """The model captured again with the dim at 1 (the other dims still dynamic),
        translated and optimized."""
        call = self.call
        spec = without_dims(call.spec, point.dim_names)
        for record in (True, False):  # a recording that does not translate: torch.export
            cap = self.capture(record, (point.args, point.kwargs), spec, user_spec=False)
            try:
                program1 = self.decompose(cap)
                names1 = user_dim_names(call.model, point.args, point.kwargs, spec,
                                        cap.program)
                return self.optimize(self._translator(program1, names1).run())
            except (UnsupportedOperatorError, TranslationError):
                if not cap.recorded:
                    raise
        raise AssertionError("unreachable: the torch.export capture returns or raises")

    def up_to(self, prog: OnnxProgram, name: str, top: int,
              ) -> tuple[OnnxProgram, CaptureResult] | None:
        """The model captured again with ``name`` bounded at ``top`` (the sizes a cache
        the model's state holds covers), translated and optimized, as a program run like
        ``prog``; None where the spec cannot be bounded so."""
        call = self.call
        spec = bounded_dim(call.spec, name, top)
        if spec is None:
            return None
        cap = self.capture(True, None, spec, user_spec=False)
        return self._translated_like(prog, cap, call.args, call.kwargs, spec), cap

    def capture_on(self, prog: OnnxProgram, inputs: tuple[tuple[Any, ...], dict[str, Any]],
                   spec: Any) -> tuple[OnnxProgram, CaptureResult]:
        """The model captured again on ``inputs`` with ``spec`` (one residue class of a
        dim, ``capture/_residue.py``), translated and optimized, as a program run like
        ``prog``."""
        for record in (True, False):  # a recording that does not translate: torch.export
            cap = self.capture(record, inputs, spec, user_spec=False)
            try:
                return self._translated_like(prog, cap, *inputs, spec), cap
            except (UnsupportedOperatorError, TranslationError):
                if not cap.recorded:
                    raise
        raise AssertionError("unreachable: the torch.export capture returns or raises")

    def by_residue(self, prog: OnnxProgram, captured: CaptureResult) -> list[str]:
        """Where the report holds a declared dim to one residue class, the other classes
        captured and joined under ``If(n % k == r)`` (``capture/_residue.py``)."""
        call = self.call
        if not isinstance(call.model, torch.nn.Module) or not any(
                " tied to other dims: " in n for n in self.rep.dynamic_refinements):
            return []
        notes = split_by_residue(
            prog, self.rep, call.model, *example_of(captured, call.args, call.kwargs),
            call.spec, self.dim_names or [], self.capture_on,
            lambda other, cap: settle(other, cap, self.at_one), self.at_one,
            (call.args, call.kwargs) if captured.example is not None else None)
        if captured.below_example is not None:
            # Captured above the example's own size 1: where the join did not bring it
            # back (the narrowing to the class stands), the file would exclude its
            # example, so the first refusal stands.
            name, refusal = captured.below_example
            if any(n.startswith(f"{name} tied to other dims: ")
                   for n in self.rep.dynamic_refinements):
                raise refusal
        return notes

    def _translated_like(self, prog: OnnxProgram, cap: CaptureResult, args: tuple[Any, ...],
                         kwargs: dict[str, Any], spec: Any) -> OnnxProgram:
        program = self.decompose(cap)
        names = user_dim_names(self.call.model, *example_of(cap, args, kwargs), spec,
                               cap.program)
        translator = self._translator(program, names, tie_names(names, cap.ties))
        other = copy.copy(prog)
        other.model, other._session = self.optimize(translator.run()), None
        other._program, other._fx_values = program, translator.fx_values
        other._extra_outputs = len(translator.extra_outputs)
        other._sym_names = translator.sym_names
        return other

    def verify(self, prog: OnnxProgram) -> None:
        result = prog.verify(bisect=True)  # the example, a second size, and size 1
        if not result.ok:
            self.write_report()
            raise VerificationError(
                "the exported model does not match eager PyTorch, so no file was written:\n"
                + str(result) + "\nNext step: the first divergence above names the rule and "
                "the model line; export with verify=False to keep the file for debugging.",
                result)

    def quantized_triples(self, prog: OnnxProgram) -> None:
        """The file's quantized inputs and outputs as (integer values, scale, zero point)
        (``passes/quantized_io.py``); the outputs' qparams are eager's on the example."""
        from pt2onnx.passes import quantized_io
        from pt2onnx.verify import flatten_outputs, flatten_tensors

        call = self.call
        args, kwargs = prog._split(call.args, call.kwargs)
        ordered = {k: kwargs[k] for k in prog._kwarg_order if k in kwargs}
        ordered.update({k: v for k, v in kwargs.items() if k not in ordered})
        inputs = [quantized_leaf(t, "input", False) for t in flatten_tensors((args, ordered))]
        eager = prog._module
        outputs: list[quantized_io.QuantizedLeaf | None] = []
        if eager is not None:
            with torch.no_grad():
                outputs = [quantized_leaf(t, "output", True) for t in flatten_outputs(
                    eager(*copy.deepcopy(args), **copy.deepcopy(kwargs)))]
        outputs += [None] * (len(prog.model.graph.outputs) - len(outputs))
        if not any(inputs) and not any(outputs):
            message = ("quantized_io='triple' changes nothing: the model takes and returns "
                       "no quantized tensors")
            self.rep.warnings.append(message)
            warnings.warn(message, stacklevel=4)
            return
        prog.model = quantized_io.apply(prog.model, inputs, outputs)
        prog._session = None
        prog._triples = (inputs, outputs)
        self.rep.warnings.append(
            "quantized inputs and outputs are (integer values, scale, zero point) triples "
            "(quantized_io='triple')")

    def functions(self, prog: OnnxProgram) -> None:
        """export_modules_as_functions: each call of a chosen module type becomes a call
        of an ONNX function (``passes/module_functions.py``), on the finished graph."""
        chosen = self.call.functions
        if chosen is None:
            return
        program = prog._program
        weights = set(program.state_dict) | set(program.constants) if program else set()
        result = passes.module_functions.apply(prog.model, chosen, weights)
        prog._session = None
        self.rep.functions = result.summary()
        notes = list(result.inlined)
        if not result.calls:
            notes.append("export_modules_as_functions: no module call became a function "
                         "(no node of the graph came from a chosen module type)")
        for note in notes:
            self.rep.warnings.append(note)
            warnings.warn(note, stacklevel=4)

    def save(self, prog: OnnxProgram) -> None:
        call = self.call
        if call.to_file_object:
            call.f.write(prog.model_proto.SerializeToString())
        else:
            prog.save(call.f, external_data=call.external_data, weights=call.weights)

    def write_report(self) -> None:
        if self.call.report_path is not None:
            self.call.report_path.write_text(self.rep.to_markdown())
