"""Proof that a dynamic program is right where a declared dim is 1.

torch.export reasons about a dynamic dim as if it were never 1 (its "0/1
specialisation", and the size-oblivious capture pt2onnx uses for batch-1 examples).
That is what lets one graph serve every size, and it is right for most ops. It is
wrong for every op whose result changes when a size is 1: ``squeeze(d)`` drops the
dim only then, a reshape of a permuted tensor may be a view only then, and a model's
own ``if x.size(0) == 1`` takes another branch. Such a graph computes other shapes
or numbers at size 1, and nothing fails.

So for each declared dim whose range holds 1, the model is captured once more with
static shapes at that size (every other dim at its example size; and with every
such dim at 1 together), and the two programs are compared node by node: the same
ops, the same non-tensor arguments and the same output shapes once the dynamic
program's symbols take those sizes. Equal programs prove that the dynamic graph
computes, at size 1, what torch computes there. Where they differ, :func:`settle` runs
the written graph there; where it is wrong, the size gets a graph of its own under an
``If`` (``capture/_size_one_merge.py``), and a second such dim is a typed refusal naming the op,
the model's line and the dim, with the ways out.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from pt2onnx.capture._graph_diff import Step, describe, first_difference, source_line
from pt2onnx.errors import CaptureError, SizeOneError

aten = torch.ops.aten

def root_symbols(program: torch.export.ExportedProgram) -> dict[sympy.Symbol, int]:
    """Each plain symbol of the user inputs' shapes, with its size in the program's example."""
    from pt2onnx.capture._resize import known_values

    return known_values(program)


def ones_allowed(program: torch.export.ExportedProgram, sym: sympy.Symbol) -> bool:
    ranges = {str(k): v for k, v in program.range_constraints.items()}
    vr = ranges.get(str(sym))
    if vr is None:
        return True
    try:
        return bool(vr.lower <= 1) and (("oo" in str(vr.upper)) or bool(vr.upper >= 1))
    except TypeError:
        return True


@dataclass
class Unproved:
    """A size-1 point where the two captures differ: the written file must be run there."""

    label: str  # "batch=1"
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    message: str  # the refusal, should the file be wrong there
    symbols: list[Any] = field(default_factory=list)  # the symbols at 1 there
    dim_names: list[str] = field(default_factory=list)  # their Dim names
    where: str = ""  # the model line of the first difference
    # (tensor input index, axis) whose sizes, all 1, pick the branch; None: the
    # symbol's first input dim
    positions: list[tuple[int, int]] | None = None
    # False for a point at another size (capture/_second_size.py): no graph of its own
    # can be chosen there, so a wrong file is refused
    at_one: bool = True
    # A point at an edge of a run of sizes where a guard fails (``_guards_hold.
    # edges_of``): a file wrong there raises WrongWhereGuardFails, and the export is
    # repeated with the range bounded by the guard
    bound_if_wrong: bool = False


class WrongWhereGuardFails(CaptureError):
    """The file is wrong (or cannot be run) at an edge of a run of sizes where a guard
    of the capture fails; the export is repeated with the range bounded by the guard
    (``_guards_hold.guards_bound_the_range``), as before such runs were tried."""


class WrongAtSecondSize(CaptureError):
    """The file is wrong at a second size (``_second_size``): the capture held a value
    computed from a size constant. ``non_strict``: the capture was non-strict, which holds
    ``int()`` of a size at the example's value where dynamo keeps it symbolic, so the
    export is tried again capturing strict only (fuzz seed 7411, program 2694)."""

    def __init__(self, message: str, non_strict: bool = False) -> None:
        super().__init__(message)
        self.non_strict = non_strict


@dataclass
class Tie:
    """Declared dims that torch.export tied into one symbol (``c = b``, from a broadcast
    ``x + y`` it captured as if neither could be 1). The model may still run with one
    side at 1 and the other not: then each side is a size-1 point of its own, and the
    file keeps the declared names apart (``separate``)."""

    symbol: Any
    names: dict[str, list[tuple[int, int]]]  # declared name -> (tensor input index, axis)
    may_be_one: set[str] = field(default_factory=set)  # names declared down to 1
    separate: bool = False


def ties(program: torch.export.ExportedProgram, axes: list[tuple[str, int, int, int]],
         classes: bool = False) -> list[Tie]:
    """The ties among ``axes`` ((declared name, tensor input index, axis, declared
    minimum)): names whose input dims the program holds as one plain symbol."""
    from pt2onnx.capture._resize import user_shapes

    shapes = user_shapes(program)
    groups: dict[Any, Tie] = {}
    for name, i, axis, lower in axes:
        if i >= len(shapes) or axis >= len(shapes[i]):
            continue
        d = shapes[i][axis]
        # A plain symbol, or (``classes``) one residue class's ``2*r - 1``, whose sides
        # at 1 ``capture/_residue.py`` runs from the user's example.
        expr = d.node.expr if isinstance(d, torch.SymInt) else None
        if expr is not None and (isinstance(expr, sympy.Symbol) or (
                classes and expr.free_symbols)):
            tie = groups.setdefault(d.node.expr, Tie(d.node.expr, {}))
            tie.names.setdefault(name, []).append((i, axis))
            if lower <= 1:
                tie.may_be_one.add(name)
    return [t for t in groups.values() if len(t.names) > 1]


def _one_side(program: torch.export.ExportedProgram, positions: list[tuple[int, int]],
              ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The program's example with the dims at ``positions`` set to 1."""
    from pt2onnx.capture._resize import _leaves, _reshaped

    args, kwargs = program.example_inputs or ((), {})
    found = _leaves(program, tuple(args), dict(kwargs))
    if found is None:
        return None
    leaves, spec, tensors, _ = found
    leaves = list(leaves)
    for i, axis in positions:
        t = leaves[tensors[i]]
        leaves[tensors[i]] = _reshaped(t, [1 if a == axis else n for a, n in enumerate(t.shape)])
    args1, kwargs1 = torch.utils._pytree.tree_unflatten(leaves, spec)
    return tuple(args1), dict(kwargs1)


def _tie_message(label: str, name: str, others: str) -> str:
    return (
        f"the exported graph computes something else than the model where {label}: "
        f"torch.export captured {name} and {others} as one size, and the model also runs "
        f"where {name} is 1 and {others} is not (a broadcast).\n"
        f"Next step: if {name} is never 1 while {others} is larger, say so: "
        f"Dim({name!r}, min=2), or make {name} and {others} one Dim; otherwise leave "
        f"{name} static.")


def _tie_points(module: torch.nn.Module, program: torch.export.ExportedProgram,
                found: list[Tie]) -> tuple[list[str], list[Unproved]]:
    """Each side of each tie at 1, the other at the example's size, where the model runs
    there: a point the written graph is run at (``settle``)."""
    known = root_symbols(program)
    notes: list[str] = []
    unproved: list[Unproved] = []
    for tie in found:
        if not tie.symbol.free_symbols <= set(known):
            continue
        size = int(tie.symbol.subs(known))
        for name, positions in tie.names.items():
            if name not in tie.may_be_one:
                continue
            others = ", ".join(n for n in tie.names if n != name)
            label = f"{name}=1 ({others}={size})"
            example = _one_side(program, positions)
            if example is None:
                notes.append(f"{label} not checked: the inputs could not be resized")
                continue
            args1, kwargs1 = example
            try:
                with torch.no_grad():
                    module(*args1, **kwargs1)
            except Exception:
                continue  # the model itself needs {name} = {others} there: a real tie
            tie.separate = True
            # Always run there: a comparison of the two captures cannot see inside an op
            # kept whole (tensordot sums a contracted dim of 1 away inside the op, and
            # its decomposition is traced for equal sizes).
            unproved.append(Unproved(
                label, args1, kwargs1, _tie_message(label, name, others), [tie.symbol],
                [name], "", positions[:1]))
    return notes, unproved


_TRUSTED: contextvars.ContextVar[str] = contextvars.ContextVar("size_one_trusted", default="")


def trusted_now() -> bool:
    """Whether the proofs are skipped for this export (:func:`trusted`)."""
    return bool(_TRUSTED.get())


@contextlib.contextmanager
def trusted(why: str) -> Iterator[None]:
    """Skips the proof for exports whose size-1 behaviour pt2onnx's own tests run (``why``
    says which): export-llm's decoder wrapper, run by onnxruntime-genai's loop at batch 1,
    one token and an empty cache in tests/test_export_llm.py."""
    token = _TRUSTED.set(why)
    try:
        yield
    finally:
        _TRUSTED.reset(token)


def check(module: torch.nn.Module, program: torch.export.ExportedProgram,
          strict: bool, names: dict[Any, str], found_ties: list[Tie] | None = None,
          declared_ones: set[Any] | None = None) -> tuple[list[str], list[Unproved]]:
    """Compares ``program`` with a static capture at each size-1 point its ranges allow.

    Returns notes on the points that could not be checked, and the points where the
    captures differ. Many differences change nothing (transformers builds its causal
    mask another way when the query has one token), so such a point is not refused here:
    the written file is run there against eager (:func:`settle`), which gives the
    size its own graph, or refuses, only where it is wrong."""
    from pt2onnx.capture._aliasing import layout_dependent_write
    from pt2onnx.capture._dynamic import _export
    from pt2onnx.capture._resize import example_at

    if _TRUSTED.get():
        return [], []
    known = root_symbols(program)
    # A dim declared from 1 that the capture ranges from 2 (``Dim.DYNAMIC`` after the
    # guards were judged, ``_guards_hold.as_dynamic``) keeps 1 in the file's range: it is
    # compared there too (fuzz seed 7411 program 2362: ``min(n, 2) / max(n, 2, 1)`` held
    # as ``2 / n`` was wrong at 1, the example).
    ones = [s for s in known if ones_allowed(program, s) or s in (declared_ones or ())]
    notes, unproved = _tie_points(module, program, found_ties or [])
    # A tie the model runs apart is a dim per name: at the symbol's 1, all are 1.
    apart = {t.symbol: t for t in found_ties or [] if t.separate}
    names = {**names, **{s: ", ".join(t.names) for s, t in apart.items()}}
    # torch.export can keep one declared Dim as two symbols (one per input): they are 1
    # together, or the point mixes sizes no call can give (fuzz seed 7411 program 4186:
    # the capture "at B=1" held the other input at 6, and the file was wrong at 1).
    by_dim: dict[str, list[Any]] = {}
    for s in ones:
        by_dim.setdefault(names.get(s, str(s)), []).append(s)
    configs = list(by_dim.values()) + ([ones] if len(by_dim) > 1 else [])
    # Same ops in both captures can still share memory differently at 1 (_aliasing.py).
    write = layout_dependent_write(program.graph_module) if configs else None
    for config in configs:
        values = {**known, **{s: 1 for s in config}}
        label = ", ".join(dict.fromkeys(
            f"{n}=1" for s in config for n in names.get(s, str(s)).split(", ")))
        example = example_at(program, values)
        if example is None:
            notes.append(f"size 1 not checked for {label}: the inputs could not be resized")
            continue
        args1, kwargs1 = example
        try:
            with torch.no_grad():
                at_one = _export(module, args1, kwargs1, None, strict)
        except Exception as exc:
            why = (str(exc).strip().splitlines() or [""])[0][:200]
            notes.append(f"size 1 not checked for {label}: the model does not capture at that "
                         f"size ({type(exc).__name__}: {why})")
            continue
        found = first_difference(program, at_one, values)
        if found is None and write is not None:
            step = Step(write, (str(write.target), (), (), None))
            found = (step, step)
        if found is not None:
            first = found[0] or found[1]
            tie = apart.get(config[0]) if len(config) == 1 else None
            message = (_write_message(found[0], label) if found[0] is found[1] else
                       _message(found, label, config, names))
            unproved.append(Unproved(
                label, args1, kwargs1, message, list(config),
                [n for s in config if s in names for n in names[s].split(", ")],
                source_line(first.node) if first is not None else "",
                [p[0] for p in tie.names.values()] if tie is not None else None))
    return notes, unproved


def _run(prog: Any, point: Unproved) -> str | None:
    """Runs the written graph at ``point`` against eager: None when it matches, else the
    comparison; raises where it cannot tell."""
    import copy

    try:
        # verify's tolerance for the narrowest floating type the graph computes in.
        atol, rtol = prog._tolerance(None, None)
        result = prog._verify_once(copy.deepcopy(point.args), copy.deepcopy(point.kwargs),
                                   atol, rtol, False, point.label)
    except Exception as exc:
        if "onnxruntime" in str(exc) and "install" in str(exc).lower():
            raise SizeOneError(
                point.message + "\nThe graph may still be right there, but pt2onnx can "
                "only tell by running it: install onnxruntime (pip install "
                "'pt2onnx[verify]') and export again.") from None
        return f"the graph failed there: {type(exc).__name__}: {str(exc)[:300]}"
    return None if result.ok else str(result)


def _position(captured: Any, point: Unproved) -> list[tuple[int, int]] | None:
    from pt2onnx.capture._size_one_merge import input_position

    if point.positions is not None:
        return point.positions
    # Two symbols of one declared Dim are equal at every call: either one's input picks.
    one_dim = len(point.symbols) == 1 or (bool(point.dim_names) and len(
        set(point.dim_names)) == 1 and len(point.dim_names) == len(point.symbols))
    found = input_position(captured.program, point.symbols[0]) if one_dim else None
    return None if found is None else [found]


def settle(prog: Any, captured: Any, at_one: Any) -> list[str]:
    """Runs the written graph at each unproved size-1 point against eager PyTorch.

    Where it is wrong at one dim's 1, the model captured at that size (``at_one(point)``,
    an ir.Model) and the general graph are joined under an ``If`` on that dim
    (:mod:`pt2onnx.capture._size_one_merge`), and the point is run again. Raises
    :class:`~pt2onnx.errors.SizeOneError` where a point stays wrong. Returns notes."""
    import copy

    from pt2onnx.capture._size_one_merge import merge_at_one

    notes = []
    branched = False
    for point in captured.size_one:
        try:
            with torch.no_grad():
                prog._module(*copy.deepcopy(point.args), **copy.deepcopy(point.kwargs))
        except Exception as exc:  # the resized inputs are not valid for the model
            why = f"{type(exc).__name__}: {str(exc)[:150]}"
            where = _position(captured, point) if point.at_one else None
            valid = None if where is not None and not branched else _with_ints_zeroed(
                prog, point)
            if valid is not None:
                # Only the example's index values failed there (an index of 5 at 3):
                # with every integer input 0 the model runs, and the file is run so.
                point = valid
            elif branched or where is None:
                notes.append(f"{point.label}: not checked, the model itself fails on the "
                             f"example resized there ({why})")
                continue
            else:
                # The captures differ there and nothing can be run to tell whether that
                # matters (an index the example holds is out of range at 1): the file
                # takes the capture at 1 for that size, right by construction.
                try:
                    one = at_one(point)
                except Exception as failed:
                    # Eager fails there, with integer inputs 0 too, and no graph of the
                    # model at 1 exists (a squeeze() drops the dim and a later op's dim
                    # is out of range): 1 is not a size the model runs at.
                    if not _leave_out_one(prog, captured, point, why, failed):
                        raise
                    continue
                prog.model, other_rank = merge_at_one(prog.model, one, where)
                prog._session = None
                branched = True
                notes.append(f"{point.label}: the model's capture differs there (at "
                             f"{point.where}) and the example resized there is not valid "
                             f"input for the model ({why}), so the file holds the capture "
                             "at 1 for that size, chosen by an If on the input's size")
                if other_rank:
                    notes.append(f"{point.label}: outputs {other_rank} have a lower rank "
                                 "there than the file declares (ONNX declares one rank per "
                                 "output); onnxruntime warns and returns eager's shape")
                continue
        wrong = _run(prog, point)
        if wrong is None:
            notes.append(f"{point.label}: the capture differs there, and the written graph "
                         "was run there and matches eager PyTorch")
            continue
        if point.bound_if_wrong:
            raise WrongWhereGuardFails(point.message + "\nRun there against eager "
                                       "PyTorch:\n" + wrong)
        if not point.at_one:
            raise WrongAtSecondSize(
                point.message + "\nRun there against eager PyTorch:\n" + wrong,
                non_strict=captured.strategy == "torch.export(strict=False)")
        where = _position(captured, point)
        if branched or where is None:
            raise SizeOneError(point.message + "\nRun there against eager PyTorch:\n" + wrong)
        try:
            prog.model, other_rank = merge_at_one(prog.model, at_one(point), where)
        except SizeOneError:
            raise
        except Exception as exc:
            raise SizeOneError(point.message + "\nRun there against eager PyTorch:\n" + wrong
                               + f"\nA graph for each side of 1 could not be built either: "
                               f"{type(exc).__name__}: {str(exc)[:300]}") from None
        prog._session = None
        branched = True
        again = _run(prog, point)
        if again is not None:
            raise SizeOneError(point.message + "\nEven as a graph for each side of 1, run "
                               "there against eager PyTorch:\n" + again)
        notes.append(f"{point.label}: the model computes something else there (at "
                     f"{point.where}), so the file holds a graph for each side of 1, "
                     f"chosen by an If on the input's size")
        if other_rank:
            notes.append(f"{point.label}: outputs {other_rank} have a lower rank there than "
                         "the file declares (ONNX declares one rank per output); onnxruntime "
                         "warns and returns eager's shape")
    if branched:
        _check_every_one(prog, captured)
    return notes


def _leave_out_one(prog: Any, captured: Any, point: Unproved, why: str,
                   failed: Exception) -> bool:
    """Narrows the one dim of ``point`` to start at 2, as reported, where eager fails on
    the example resized to 1 (``why``) and the capture at 1 failed too (``failed``).
    False where the point is not one dim's 1 (a refusal then stands)."""
    if len(set(point.dim_names)) != 1 or len(point.dim_names) != len(point.symbols):
        return False
    name = point.dim_names[0]
    vr = {str(k): v for k, v in captured.program.range_constraints.items()}.get(
        str(point.symbols[0]))
    upper = getattr(vr, "upper", None)
    shown = str(int(upper)) if upper is not None and upper.is_finite else "inf"
    note = (f"{name} bounded to [2, {shown}]: eager fails on the example resized to "
            f"{name}=1 ({why}), with integer inputs 0 too, and the model has no graph "
            f"at 1 ({type(failed).__name__}: {str(failed).splitlines()[0][:150]}), so 1 is "
            "left out of the file's range")
    rep = prog.report
    rep.dynamic_refinements.append(note)
    rep.warnings.append(f"dynamic shapes refined: {note}")
    return True


def _with_ints_zeroed(prog: Any, point: Unproved) -> Unproved | None:
    """``point`` with every integer tensor input 0, where eager runs on that; None where
    it does not (the size itself is not valid input for the model)."""
    import copy
    import dataclasses

    from pt2onnx.capture._resize import ints_zeroed

    args, kwargs = ints_zeroed(point.args, point.kwargs)
    try:
        with torch.no_grad():
            prog._module(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    except Exception:
        return None
    return dataclasses.replace(point, args=args, kwargs=kwargs)


def _check_every_one(prog: Any, captured: Any) -> None:
    """A file joined under an ``If`` on one dim is run with every declared dim at 1 too:
    the graph for that side of 1 was captured with the other dims at the example's size
    (a tie point, ``B=1 (C=12)``), and where it holds one of them there the joined file
    is wrong with all of them at 1 (fuzz seed 4111, programs 69 and 611)."""
    import copy

    from pt2onnx.capture._resize import example_at

    program = captured.program
    symbols = list(root_symbols(program))
    built = example_at(program, dict.fromkeys(symbols, 1)) if symbols else None
    if built is None or not _declared_from_one(getattr(captured, "dynamic_shapes", None)):
        return
    try:
        with torch.no_grad():
            prog._module(*copy.deepcopy(built[0]), **copy.deepcopy(built[1]))
    except Exception:  # the model itself does not run there
        return
    names = ", ".join(f"{s}=1" for s in symbols)
    message = (f"the exported graph computes something else than the model where every "
               f"declared dim is 1 ({names}): the graph for one side of 1, joined under an "
               "If, holds another declared dim at the size it was captured at. pt2onnx "
               "refuses rather than write a file wrong there.\nNext step: declare the "
               "dims with min=2 if they are never 1 together, or make one of them static.")
    wrong = _run(prog, Unproved("every dim at 1", built[0], built[1], message, symbols))
    if wrong is not None:
        raise SizeOneError(message + "\nRun there against eager PyTorch:\n" + wrong)


def _declared_from_one(spec: Any) -> bool:
    """Whether every Dim the user declared takes 1."""
    import torch.utils._pytree as pytree

    dims = [d for d in pytree.tree_leaves(spec, is_leaf=lambda x: hasattr(x, "min"))
            if hasattr(d, "min")]
    return bool(dims) and all(not isinstance(d.min, int) or d.min <= 1 for d in dims)


def _write_message(step: Step | None, label: str) -> str:
    where = source_line(step.node) if step is not None else "(unknown)"
    return (
        f"the exported graph computes something else than the model where {label}: "
        f"at {where}\n"
        "  an in-place op writes through a reshape or contiguous() that returns a view "
        "at that size (the tensor is contiguous there) and a copy at the example's size, "
        "so it changes another tensor at that size only.\n"
        "Next step: write the op out of place (x = x - y instead of x.sub_(y)), or "
        "clone() before writing, so the result does not depend on memory layout; or "
        "declare the dim with min=2.")


def _message(found: tuple[Step | None, Step | None], label: str, config: list[Any],
             names: dict[Any, str]) -> str:
    general, at_one = found
    node = (general or at_one)
    where = source_line(node.node) if node is not None else "(unknown)"
    dims = ", ".join(names.get(s, str(s)) for s in config)
    return (
        f"the exported graph computes something else than the model where {label}: "
        f"at {where}\n"
        f"  - at that size, PyTorch runs {describe(at_one)};\n"
        f"  - the dynamic graph (captured as if {dims} were never 1) runs "
        f"{describe(general)} there.\n"
        "A file written from it would give wrong shapes or numbers at that size, so "
        "pt2onnx refuses.\n"
        f"Next step: if {dims} is never 1 in use, say so: Dim({dims.split(', ')[0]!r}, min=2) "
        "in dynamic_shapes, with an example of size 2 or more there; otherwise change the line above so its result does not "
        "depend on the size being 1 (x[0] or x.reshape(...) instead of x.squeeze(0), an "
        "explicit branch-free form instead of `if x.size(0) == 1`), or leave that dim static."
    )
