"""The torch.export front end: argument checks, capture with fallbacks."""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from pt2onnx import _compat
from pt2onnx.capture import (
    _below_minimum,
    _dynamic,
    _failures,
    _fixed_dims,
    _heap,
    _refine,
    _second_size,
    _size_one,
)
from pt2onnx.capture._arguments import as_module, named_var_kwargs
from pt2onnx.capture._importable import importable_code
from pt2onnx.capture._model_state import no_leaked_fake_tensors
from pt2onnx.capture._model_state import preserved_state as preserved_state
from pt2onnx.capture._spec import _complete_dynamic_shapes
from pt2onnx.capture._spec import user_dim_names as user_dim_names
from pt2onnx.capture._stateful import drop_resized_buffer_writes, with_state_retries
from pt2onnx.capture._trace import trace
from pt2onnx.errors import CaptureError, InvalidInputError
from pt2onnx.frontends import (
    holds_hidden_rnn,
    packed_rnn_substitutions,
    register_mappings,
    register_output_containers,
)


@dataclass
class CaptureResult:
    program: torch.export.ExportedProgram
    strategy: str
    fallbacks: list[str] = field(default_factory=list)
    # True when torch.export failed and the program comes from a make_fx trace:
    # decomposition already happened during the trace, and shapes are specialised.
    traced: bool = False
    warnings: list[str] = field(default_factory=list)
    # The dynamic_shapes torch.export accepted (with its suggested fixes applied),
    # the fixes applied, and the Dim.AUTO axes the model fixed.
    dynamic_shapes: Any = None
    example: Any = None  # (args, kwargs) it was captured on, when not the user's
    refinements: list[str] = field(default_factory=list)
    fixed_axes: list[str] = field(default_factory=list)
    # True when the program is a static recording of one eager run (capture/_record.py).
    recorded: bool = False
    # Size-1 points where a static capture differs from the dynamic one (capture/_size_one.py):
    # the written graph is run there before it is saved.
    size_one: list[Any] = field(default_factory=list)
    # Declared dims torch.export tied that the model runs apart (one of them 1): the
    # file keeps their names (capture/_size_one.py's Tie).
    ties: list[Any] = field(default_factory=list)
    # Dims narrowed below their declared minimum, with the sizes cut off where the model
    # runs: the written graph is run there, and the range given back where it matches
    # (capture/_below_minimum.py).
    below_minimum: list[Any] = field(default_factory=list)
    # (dim, n): captured above a bound n that the model's state set; where the run below
    # the new minimum does not reach the declared one, the sizes up to n take a capture
    # of their own (_api's _split_below)
    split: tuple[str, int] | None = None
    # (dim, refusal): captured from the example's residue class above the example's own
    # size 1 (capture/_residue.py's capture_by_residue); the join must bring that size
    # back into the range, or the refusal stands.
    below_example: tuple[str, Exception] | None = None


def capture(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any = None,
    decompositions: Callable[[], dict[Any, Any]] | None = None,
    has_rule: Callable[[Any], bool] | None = None,
    record: bool = True,
) -> CaptureResult:
    """A recorded eager run (static shapes only, when it is provably exact), then
    torch.export with strict=False, then strict=True, then a make_fx trace.

    ``decompositions`` builds the table the trace applies (ops without a rule);
    the torch.export paths decompose later, in the decompose stage. ``has_rule``
    tells the recording which composite ops to keep whole.
    """
    if isinstance(model, torch.export.ExportedProgram):
        return CaptureResult(model, "given ExportedProgram")
    module = as_module(model)
    notes: list[str] = []
    # Only a model with an RNN module can pack sequences into one. One the model holds
    # out of modules()' sight (a plain list, a closure) keeps its plain calls: torch.export
    # sees aten.lstm.input there, which capture keeps whole (_compat.whole_rnn_ops).
    has_rnn = any(isinstance(m, torch.nn.RNNBase) for m in module.modules())
    packed = packed_rnn_substitutions(notes, plain=True) if has_rnn \
        else packed_rnn_substitutions(notes) if holds_hidden_rnn(module) \
        else contextlib.nullcontext()
    with no_leaked_fake_tensors(module), named_var_kwargs(module, kwargs), \
            importable_code(module), _heap.attempts():
        recorded: CaptureResult | str | None = None
        if record and dynamic_shapes is None and _record_enabled():
            # A packed sequence is never recorded: its shapes come from the lengths.
            recorded = _try_record(module, args, kwargs, has_rule or (lambda op: False))
        if isinstance(recorded, CaptureResult):
            return recorded
        if recorded is not None:
            _heap.release()  # the recording given up: its graph and values
        with packed:
            result = with_state_retries(
                module, args, kwargs, dynamic_shapes is not None,
                lambda: _capture_module(module, args, kwargs, dynamic_shapes, decompositions),
                notes)
        if not result.traced and (dropped := drop_resized_buffer_writes(result.program)):
            notes.append(f"the forward replaces buffers ({', '.join(dropped[:4])}) with "
                         "tensors of another shape; the file holds no state, so their "
                         "write-back was dropped")
        if recorded is not None:
            result.fallbacks.insert(0, recorded)
    if notes:  # pack -> RNN -> unpack became pt2onnx::packed_rnn
        result.strategy += "; " + " ".join(notes)
    return result


def _record_enabled() -> bool:
    """PT2ONNX_CAPTURE=export turns the recording off (every capture uses torch.export)."""
    import os

    return os.environ.get("PT2ONNX_CAPTURE", "").strip().lower() != "export"


def _try_record(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                has_rule: Callable[[Any], bool]) -> CaptureResult | str:
    """The recorded program, or why the recording was not used."""
    from pt2onnx.capture import _record
    from pt2onnx.capture._trace import _input_names, _substitutions

    register_output_containers()
    try:
        with no_leaked_fake_tensors(module, everything=True):
            program, notes = _record.record(module, args, kwargs, has_rule,
                                            _input_names(module, args, kwargs),
                                            _substitutions)
    except (CaptureError, InvalidInputError):
        raise
    except _record.Unrecordable as exc:
        return f"static recording not used: {exc}"
    except Exception as exc:  # the model's own error comes again from torch.export
        return f"static recording not used: {_failures.short(exc, 300)}"
    return CaptureResult(program, RECORDED, warnings=notes, recorded=True)


RECORDED = "recorded (static shapes)"


def composite(op: Any) -> bool:
    """Whether ``op`` is split into other ops before the dispatcher's Python key."""
    try:
        name = op.name()
    except (AttributeError, TypeError):
        return False
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(
            name, "CompositeImplicitAutograd"))
    except RuntimeError:
        return False


@contextlib.contextmanager
def _quiet_guard_errors() -> Iterator[None]:
    """torch logs each capture that fails on its guards at ERROR level, with a traceback
    ("Error while creating guard"), and each strict capture's "always_classified is
    unsupported". pt2onnx tries several captures and reports why the last one failed
    itself, so those logs are kept off the user's stderr while it tries."""
    import logging

    loggers = [logging.getLogger(name) for name in (
        "torch._guards", "torch.export._trace", "torch._subclasses.fake_tensor")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _capture_module(
    module: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any,
    decompositions: Callable[[], dict[Any, Any]] | None,
) -> CaptureResult:
    """torch.export (a Python branch on a data-dependent size takes torch's general side:
    ``_data_dependent``), refined for dynamic shapes; a trace where nothing else works."""
    from pt2onnx.capture import _data_dependent
    from pt2onnx.capture._out_factories import functional_out_factories

    branches: list[str] = []
    with _data_dependent.general_branches(branches), _quiet_guard_errors():
        try:
            result = _capture_exported(module, args, kwargs, dynamic_shapes, decompositions)
        except CaptureError as exc:
            failed: CaptureError | None = exc
        else:
            failed = None
        if failed is not None or result.traced:
            # factory(..., out=t) stops torch.export (a data-dependent resize of t), and
            # the trace left bakes the example's length: captured again with the
            # factories made functional. Only then: the TorchFunctionMode it needs breaks
            # torch.cond and while_loop (they compile their branches with dynamo, and a
            # failed compile stays cached for the process's later eager calls).
            branches.clear()
            try:
                with functional_out_factories():
                    retried = _capture_exported(module, args, kwargs, dynamic_shapes,
                                                decompositions)
            except CaptureError:
                retried = None
            if retried is not None and not retried.traced:
                result, failed = retried, None
            elif failed is not None:
                raise failed
    if branches and not result.traced:
        result.warnings.extend(branches)
    return result


def _capture_exported(
    module: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any,
    decompositions: Callable[[], dict[Any, Any]] | None,
) -> CaptureResult:
    """The capture; where it refuses a declared dim the model fixes, eager run at other
    sizes tells whether the model runs only at that size (the dim is written static, with
    a warning) or returns another structure there (the refusal says no graph holds it):
    ``_fixed_dims``."""
    try:
        return _capture_declared(module, args, kwargs, dynamic_shapes, decompositions)
    except CaptureError as exc:
        fixed = getattr(exc, "fixed_dims", None)
        if not fixed or dynamic_shapes is None:
            raise
        spec = _complete_dynamic_shapes(module, args, kwargs, dynamic_shapes)
        verdict = _fixed_dims.probe(module, args, kwargs, spec, fixed)
        if verdict.reason is not None:
            raise CaptureError(f"{verdict.reason}\n{exc}") from None
        if not verdict.static:
            raise
    result = _capture_exported(module, args, kwargs,
                               _dynamic.without_dims(spec, verdict.static), decompositions)
    result.warnings[:0] = verdict.notes
    return result


# Set for the captures of one residue class (``_residue``): their dims are derived
# (``k*r + c``), and non-strict torch.export can hold ``int()`` of a derived size
# constant with no guard (torch 2.13), where dynamo keeps it symbolic.
STRICT_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("strict_only",
                                                                   default=False)


@contextlib.contextmanager
def strict_only() -> Iterator[None]:
    token = STRICT_ONLY.set(True)
    try:
        yield
    finally:
        STRICT_ONLY.reset(token)


def _narrowed(notes: list[str]) -> tuple[int, int]:
    """How far refinement narrowed the declared dims: (bounds from above, other bounds
    and ties), compared as a tuple, so a bound from above (the last resort) weighs most."""
    above = sum(" bounded to at most " in n for n in notes)
    other = sum((" bounded to [" in n) + (" tied to other dims" in n) for n in notes)
    return (above, other)


def _capture_declared(
    module: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any,
    decompositions: Callable[[], dict[Any, Any]] | None,
) -> CaptureResult:
    register_output_containers()
    dynamic_shapes = _complete_dynamic_shapes(module, args, kwargs, dynamic_shapes)
    errors: list[str] = []
    # Non-strict torch.export fixes a dim where the model calls int() on a size (Python's
    # int() must return an int: x[:, :int(x.size(1) / 2)]); dynamo keeps it symbolic, so
    # a dim fixed there gets a strict capture before the refusal stands.
    fixed: CaptureError | None = None
    for strict in (True,) if STRICT_ONLY.get() else (False, False, True):
        if not strict and (fixed is not None or (errors and not _register_mapping_outputs(
                module, args, kwargs, errors))):
            continue  # the second non-strict try is for a model returning a dict subclass
        if errors or fixed is not None:
            _heap.release()  # the failed attempt's memory, before this one's peak
        try:
            if dynamic_shapes is None:
                # Under the same capture rewrites as a dynamic capture (frontends).
                ep = _dynamic._export(module, args, kwargs, None, strict)
                return CaptureResult(ep, f"torch.export(strict={strict})", errors)
            refined = _refine.export_refined(module, args, kwargs, dynamic_shapes, strict)
            judged = _judged(module, args, kwargs, dynamic_shapes, refined)
            if not strict and any(_narrowed(refined.notes)):
                # A declared range narrowed where a guard stops holding: the strict
                # capture may keep the size symbolic there and be general. Dynamo turns
                # ``max(t, 5, 1)`` into graph arithmetic where the non-strict trace
                # compares (``t >= 5``), and ``x[..., :-ceil(t / 4)]`` is empty, not an
                # error, past a bound from above. The narrower of the two is kept.
                with contextlib.suppress(Exception):
                    other = _refine.export_refined(module, args, kwargs, dynamic_shapes, True)
                    other_judged = _judged(module, args, kwargs, dynamic_shapes, other)
                    if _narrowed(other.notes) < _narrowed(refined.notes):
                        refined, strict, judged = other, True, other_judged
        except CaptureError as exc:
            if strict or fixed is not None or not _failures.int_of_size(str(exc)):
                raise (fixed or exc) from None
            fixed = exc
            continue
        except InvalidInputError:
            raise
        except Exception as exc:
            errors.append(f"torch.export.export(strict={strict}) failed: {_failures.short(exc)}")
            if dynamic_shapes is not None and _failures.is_shape_spec_error(exc):
                if not strict and fixed is None and "specialized it to be a constant" in str(
                        exc):
                    # len() or int() of a size: dynamo keeps it symbolic (the refusal
                    # stands if strict mode fails too).
                    fixed = CaptureError(_failures.spec_error_message(exc))
                    continue
                # The dynamic_shapes spec is wrong; strict mode would say the same.
                raise CaptureError(_failures.spec_error_message(exc)) from None
            continue
        positions = _declared_positions(module, args, kwargs, dynamic_shapes)
        ties = _size_one.ties(refined.program, positions)
        # A tie is captured from an example grown to equal sizes on purpose; its sides
        # are run apart (_size_one.check's tie points).
        sizes = {a.name: a.size for a in _dynamic.declared_axes(
            _dynamic.bound_inputs(module, args, kwargs), dynamic_shapes) if a.name}
        # A dim narrowed to just above the example (captured at a grown example, the cache
        # refill traced) is left to the run below its new minimum (``_below_minimum``),
        # which refuses where the example stays outside.
        liftable = _below_minimum.liftable(refined.notes, positions, sizes)
        _check_example_fits(refined, args, kwargs, positions,
                            {p for t in ties for ps in t.names.values() for p in ps}
                            | {(i, axis) for n, i, axis, _ in positions if n in liftable
                               or (refined.split is not None and n == refined.split[0])})
        symbols = _symbol_names(positions, refined)
        # A bound from below takes 1 out of the range; one from above ("bounded to at
        # most 3") keeps it, and the file is proved at 1 as declared (fuzz seed 7411
        # program 1114: int(B * 0.5) held at 1 from B = 2, wrong at the example's 1).
        narrowed = {m.group(1) for n in refined.notes
                    if (m := re.match(r"(\w+) bounded to \[(\d+),", n)) and int(m.group(2)) > 1}
        from_one = {name for name, _, _, low in positions if low <= 1 and name not in narrowed}
        checked, unproved = _size_one.check(
            module, refined.program, strict, symbols, ties,
            {s for s, name in symbols.items() if name in from_one})
        if _second_size.needed(refined.notes, refined.assumed) or _dynamic.has_derived(
                dynamic_shapes):
            second_notes, second = _second_size.point(
                module, refined.program, strict, _symbol_names(positions, refined), positions)
            checked, unproved = checked + second_notes, unproved + second
        checked += judged
        if refined.holes:
            from pt2onnx.capture._judged import hole_points

            unproved = unproved + hole_points(
                refined, _symbol_names(positions, refined))
        if refined.edges:
            # The file is kept over a run of sizes where a guard fails only if it is right
            # at every point away from 1 (the second size may lie in that run): where it
            # is wrong, the export is repeated with the range bounded by the guard.
            for point in unproved:
                point.bound_if_wrong = point.bound_if_wrong or not point.at_one
        separate = [t for t in ties if t.separate]
        # A tie to one residue class (``B = 3*_B``) keeps its notes: the class is a
        # narrowing that ``_residue.split_by_residue`` joins with the other classes.
        untied = {n for t in separate if isinstance(t.symbol, sympy.Symbol) for n in t.names}
        refinements = [n for n in refined.notes
                       if not any(n.startswith(f"{name} tied to other dims:") for name in untied)]
        notes = [f"dynamic shapes refined: {n}" for n in refinements] + refined.assumed
        notes += [f"{' and '.join(t.names)} broadcast against each other: torch.export "
                  "captured them as one size, and the model also runs where one of them is 1 "
                  "and the other is not; the file keeps each name, and takes them equal or "
                  "either one 1 (each such point was checked)" for t in separate]
        notes += checked
        below = _below_minimum.points(module, refined.program, refinements, positions,
                                      _symbol_names(positions, refined), liftable,
                                      (args, kwargs) if len(liftable) == 1 else None)
        return CaptureResult(
            refined.program, f"torch.export(strict={strict})", errors, warnings=notes,
            dynamic_shapes=refined.dynamic_shapes, example=refined.example,
            refinements=refinements,
            fixed_axes=refined.fixed, size_one=unproved, ties=separate, below_minimum=below,
            split=refined.split,
        )
    if fixed is not None:
        raise fixed
    if dynamic_shapes is not None:
        # A trace has static shapes: writing one would drop the declared axes quietly.
        raise CaptureError(
            "torch.export could not capture the model with the declared dynamic dims, and "
            "the only capture left, a trace on the example, would fix every dim to the "
            "example's size:\n" + "\n".join(f"  - {e}" for e in errors)
            + "\nNext step: fix the first error above in the model (if it names a size, "
            "the declared dims may not take every value in their range: narrow them with "
            "Dim(min=..., max=...), or leave that dim static), or export without "
            "dynamic_shapes / dynamic_axes to accept a static graph traced on the example."
        )
    _heap.release()
    try:
        ep, notes = trace(module, args, kwargs, decompositions() if decompositions else None)
    except Exception as exc:
        errors.append(f"make_fx trace (last resort) failed: {_failures.short(exc)}")
        raise CaptureError(
            "torch.export could not capture the model, and neither could a trace.\n"
            + "\n".join(f"  - {e}" for e in errors)
            + "\nNext step: fix the first error in your model's forward (often data-dependent "
            "Python control flow or an unsupported Python construct), or export a smaller "
            "submodule. See https://pytorch.org/docs/stable/export.html"
        ) from None
    first = errors[0].split(": ", 1)[-1].strip().splitlines()[0][:200]
    warning = (
        f"torch.export could not capture the model ({first}), so it was traced with make_fx on the example inputs instead. The trace "
        "bakes in Python control flow and every data-dependent size (number of boxes, "
        "loop counts) seen with these inputs: the ONNX graph is exact for inputs that take "
        "the same paths, not in general. To get a general graph, make the model "
        "torch.export-able (see the errors in the report's fallbacks)."
    )
    return CaptureResult(ep, "trace (make_fx)", errors, traced=True, warnings=[warning, *notes])


def _judged(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any,
            refined: _dynamic.Refined) -> list[str]:
    """The guards torch.export accepted on a declared dim without proving them over its
    range, and on torch 2.12 the ones it deferred to run-time asserts, judged over the
    range (``_judged._judge``): a bound goes into ``refined.notes``, holes into
    ``refined.holes``, and the other notes are returned for the report. Raises
    CaptureError where the capture holds at the example's size only."""
    from pt2onnx.capture._judged import accepted_guards, deferred_asserts, split_counts

    names = _symbol_names(_declared_positions(module, args, kwargs, spec), refined)
    judged = accepted_guards(refined, names, module) + split_counts(refined, names, module)
    if _compat.DEFERRED_GUARDS:
        judged += deferred_asserts(refined, names, module)
    refined.notes += [n for n in judged if " bounded " in n]
    return [n for n in judged if " bounded " not in n]


def judge_later_guards(captured: CaptureResult, module: Any, args: tuple[Any, ...],
                       kwargs: dict[str, Any], spec: Any, guards: list[Any],
                       why: str) -> list[str]:
    """Guards met after the capture, by torch's decompositions (deferred there:
    ``_compat.run_decompositions``), judged over the declared dims' ranges as the
    capture's own are (``_judged._judge``). Where one fails inside the range, the
    file is run there against eager (points added to ``captured.size_one``). One that
    would bound the range is refused: the capture was made, and a decomposition does not
    narrow it. Returns the notes for the report."""
    from pt2onnx.capture._judged import _judge, hole_points

    if not guards or not isinstance(module, torch.nn.Module):
        return []
    refined = _dynamic.Refined(captured.program, spec)
    names = _symbol_names(_declared_positions(module, args, kwargs, spec), refined)
    notes = _judge(refined, names, module, guards, skip_proved=True)
    bounded = [n for n in notes if " bounded " in n]
    if bounded:
        raise CaptureError(
            f"the dynamic shapes do not survive {why}: torch's decomposition holds only "
            f"where {bounded[0]}.\nNext step: declare that range, or make the dim static.")
    captured.size_one.extend(hole_points(refined, names))
    return [f"after decomposition: {n}" for n in notes]


def _check_example_fits(refined: _dynamic.Refined, args: tuple[Any, ...],
                        kwargs: dict[str, Any], positions: list[tuple[str, int, int, int]],
                        tied: set[tuple[int, int]]) -> None:
    """A file is never written with dims that exclude its own example: a fix torch.export
    suggested on a resized example (``time = 4*_time``, ``_time >= 61``) can."""
    from pt2onnx.capture._resize import outside_ranges

    names = {(i, axis): name for name, i, axis, _ in positions}
    problems = outside_ranges(refined.program, args, kwargs, names, tied)
    if not problems:
        return
    raise CaptureError(
        "the dynamic shapes declare a dim that can only take one size in this model: "
        "after torch.export's own suggested fixes ("
        + ("; ".join(refined.notes) or "none") + "), the dims it captured exclude the "
        "example itself:\n" + "\n".join(f"  - {p}" for p in problems)
        + "\ntorch.export drew those ranges from a resized example (a size-1 example is "
        "captured at twice its sizes), where the model's graph is another one; no file "
        "is written with a range that excludes its example.\n"
        "Next step: leave those dims static, or export from an example inside the range "
        "above (each such size then gets its own check).\n")


def _declared_positions(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                        spec: Any) -> list[tuple[str, int, int, int]]:
    """(name, tensor input index, axis, declared minimum) of each named declared dim."""
    inputs = _dynamic.bound_inputs(module, args, kwargs)
    order = {name: i for i, (name, _) in enumerate(_dynamic.tensor_leaves(inputs))}
    return [(a.name, order[a.input], a.axis, int(getattr(a.dim, "min", 0) or 0))
            for a in _dynamic.declared_axes(inputs, spec) if a.name is not None and a.input in order]


def _symbol_names(positions: list[tuple[str, int, int, int]],
                  refined: _dynamic.Refined) -> dict[Any, str]:
    """Each symbol of the program's input shapes -> the user's name for that dim."""
    from pt2onnx.capture._resize import user_shapes

    shapes = user_shapes(refined.program)
    names: dict[Any, str] = {}
    for name, i, axis, _ in positions:
        if i >= len(shapes) or axis >= len(shapes[i]):
            continue
        d = shapes[i][axis]
        if isinstance(d, torch.SymInt):
            names.setdefault(d.node.expr, name)
    return names


def _register_mapping_outputs(
    module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], errors: list[str],
) -> bool:
    """After torch.export refused an output type, registers the dict subclasses the
    model returns (``class Output(OrderedDict)``, as torch.onnx accepted) as pytree
    nodes named by their keys; whether any was registered (then capture is retried)."""
    if not errors or "which is not a known type" not in errors[-1]:
        return False
    import copy

    try:
        with torch.no_grad():
            out = module(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    except Exception:
        return False
    return register_mappings(out)
