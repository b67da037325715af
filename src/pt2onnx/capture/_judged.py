"""Guards a capture accepted, judged over the whole declared range afterwards.

Where torch.export accepted a guard on a named Dim that does not hold everywhere the
range allows (a refined capture, ``_dynamic.Refined``), each guard is evaluated over the
range (``_judge``): it is proved, or bounds the range where it fails from one size on,
or leaves holes where it fails at a few sizes only. At each hole the file is run
against eager (``hole_points``) and refused where it differs. Split from
``_guards_hold.py``, which checks the guards torch.export could not decide before
capturing again.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

import torch

from pt2onnx.capture._dynamic import Refined
from pt2onnx.capture._guards_hold import HOLES, _compiled_symbolic, _edges_note, _sizes, edges_of


def hole_points(refined: Refined, names: dict[Any, str]) -> list[Any]:
    """An ``Unproved`` point (capture/_size_one.py) at each hole of ``refined``: the file
    is run there against eager, and refused where it differs (no graph of its own can be
    chosen there). Raises CaptureError where a hole's inputs cannot be built."""
    from pt2onnx.capture._resize import example_at, known_values
    from pt2onnx.capture._size_one import Unproved, WrongWhereGuardFails
    from pt2onnx.errors import CaptureError

    known = known_values(refined.program)
    points = []
    for name, sizes in refined.holes.items():
        symbols = [s for s, n in names.items() if n == name and getattr(s, "is_Symbol", False)]
        for size in sizes:
            built = example_at(refined.program, {**known, **dict.fromkeys(symbols, size)}
                               ) if symbols else None
            if built is None and name in refined.edges:
                raise WrongWhereGuardFails(
                    f"pt2onnx could not build inputs with {name}={size}, where a guard "
                    "fails, to run the file there")
            if built is None:
                raise CaptureError(
                    f"the dynamic shapes declare {name}, and the model holds a guard that "
                    f"fails at {name}={size} only; pt2onnx could not build inputs of that "
                    f"size to check the file there.\nNext step: declare {name}'s range "
                    f"so that it leaves {size} out (min or max), or make {name} static.")
            message = (
                f"the dynamic shapes declare {name}, and the model computes something else at "
                f"{name}={size}: torch.export captured the model under a guard that fails "
                f"there only (such as a cache kept for the last input shape compared with "
                f"the input), and the file, run at {name}={size} against eager PyTorch, is "
                "wrong.\nNext step: declare a range for "
                f"{name} that leaves {size} out, or make {name} static.")
            points.append(Unproved(f"{name}={size} (where a guard fails)", *built, message,
                                   symbols, [name], "", None, at_one=False,
                                   bound_if_wrong=name in refined.edges))
    return points


def _eager_fails_at(module: Any, program: Any, symbols: list[Any], sizes: list[int]) -> bool:
    """Whether eager raises on the example resized to each of ``sizes`` (the model's own
    precondition, such as a view that needs a multiple of 4), its state left as it was.
    ``symbols``: every symbol of the declared dim (torch.export can keep one Dim as two
    symbols; resizing one of them makes inputs eager refuses for another reason)."""
    import copy

    from pt2onnx.capture._model_state import no_leaked_fake_tensors
    from pt2onnx.capture._resize import example_at, ints_zeroed, known_values

    def runs(args: Any, kwargs: Any) -> bool:
        try:
            with no_leaked_fake_tensors(module, everything=True), torch.no_grad():
                module(*copy.deepcopy(args), **copy.deepcopy(kwargs))
        except Exception:
            return False
        return True

    for size in sizes:
        built = example_at(program, {**known_values(program), **dict.fromkeys(symbols, size)})
        if built is None or runs(*built):
            return False
        if runs(*ints_zeroed(*built)):  # only the example's index values failed
            return False
    return True


def deferred_asserts(refined: Refined, names: dict[Any, str],
                     module: Any = None) -> list[str]:
    """Where torch defers its guards to run-time asserts (torch 2.12, ``_compat.
    DEFERRED_GUARDS``), a guard torch.export would have reported (``B != 16`` from a
    branch on one size) is an ``_assert_scalar`` node of the program, which the file
    does not hold: the capture took one branch and nothing says where it stops being
    right. Each assert on one declared dim is judged over the dim's range
    (``_judge``). Returns the notes for the report."""
    found = []
    for node in refined.program.graph.nodes:
        if node.target is not torch.ops.aten._assert_scalar.default or not node.args:
            continue
        cond = node.args[0]
        value = cond.meta.get("val") if isinstance(cond, torch.fx.Node) else None
        expr = getattr(getattr(value, "node", None), "expr", None)
        if expr is not None:
            found.append(expr)
    return _judge(refined, names, module, found)


def split_counts(refined: Refined, names: dict[Any, str], module: Any = None) -> list[str]:
    """The number of pieces of each ``split`` whose sizes follow a dynamic size. The
    program holds the example's number of outputs, and a piece read from the end
    (``x.split(s)[-1]``) or the whole tuple is right only where the number is the same.
    torch.export guards that number on a strict capture, but not where its guards are
    deferred (torch 2.12: the file was silently wrong at odd sizes for ``x.split(int(B *
    0.5))[-1]`` from 6), nor for a non-strict one. Each such number is judged over the
    dim's range here (``_judge``), as the guard torch.export would have written.
    Returns the notes for the report."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv

    def expr_of(v: Any) -> Any:
        if isinstance(v, torch.fx.Node):
            v = v.meta.get("val")
        if isinstance(v, torch.SymInt):
            return v.node.expr
        return sympy.Integer(int(v)) if isinstance(v, int) else None

    found = []
    for node in refined.program.graph.nodes:
        if node.target is not torch.ops.aten.split.Tensor or len(node.args) < 2:
            continue
        x, outputs = node.args[0], node.meta.get("val")
        value = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if value is None or not isinstance(outputs, (list, tuple)):
            continue
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
        whole, step = expr_of(value.shape[dim]), expr_of(node.args[1])
        if whole is None or step is None or not (whole.free_symbols | step.free_symbols):
            continue
        count = sympy.Max(FloorDiv(whole + step - 1, step), 1)
        found.append(sympy.Eq(count, len(outputs)))
    return _judge(refined, names, module, found, skip_proved=True)


def accepted_guards(refined: Refined, names: dict[Any, str], module: Any = None) -> list[str]:
    """The guards torch.export accepted without proving them over the declared range.
    Its solver turns each guard on a Dim into a bound or a violation, but one it cannot
    read may pass unchecked: ``x[..., int(-b / 3):]`` from an example of 2 guards
    ``Eq(TruncToInt(IntTrueDiv(-b, 3)), 0)``, true only for b <= 2, and torch.export
    kept b's range [1, 64], so the file returned the whole row where eager returns a
    third of it (fuzz seed 5227, program 2499). Each guard of the capture's shape env
    on one declared dim is judged over the dim's range here (``_judge``); a guard
    torch's own range analysis proves is skipped. Returns the notes for the report."""
    from pt2onnx.capture._resize import user_shapes

    shapes = [d for shape in user_shapes(refined.program) for d in shape
              if isinstance(d, torch.SymInt)]
    if not shapes:
        return []
    shape_env = shapes[0].node.shape_env
    found, seen = [], set()
    for guard in getattr(shape_env, "guards", ()):
        expr = getattr(guard, "expr", None)
        if expr is None or str(expr) in seen:
            continue
        seen.add(str(expr))
        # A guard on int() of a float of a size (``Eq(TruncToInt(0.5*ToFloat(B)), 1)``)
        # is left to the runs at 1 and at a second size, as before such guards could be
        # read: in a capture torch accepted, it came from the layout of a length-1 slice,
        # and bounding B by it refused files that are right over the range (fuzz seed
        # 7411 programs 3007, 3854).
        if "ToFloat" in str(expr):
            continue
        found.append(expr)
    return _judge(refined, names, module, found, skip_proved=True)


def _proved(expr: Any, symbol: Any, lo: int, hi: int | None) -> bool:
    """Whether torch's range analysis shows ``expr`` true for every size in [lo, hi]."""
    try:
        import sympy
        from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

        top = hi if hi is not None else sympy.oo
        bound = bound_sympy(expr, {symbol: ValueRanges(lo, top)})
        return bool(bound.is_singleton() and bound.lower == sympy.true)
    except Exception:
        return False


# The names torch's Python printer writes a guard with (``math.trunc(((-1)*s27) / 3)``).
_PRINTED: dict[str, Any] = {"math": math, "max": max, "min": min, "abs": abs, "float": float,
                            "int": int, "round": round, "True": True, "False": False,
                            # ToFloat of a size prints as torch.sym_float(s) (int(B * 0.5))
                            "torch": types.SimpleNamespace(
                                sym_float=float, sym_int=int, sym_max=max, sym_min=min,
                                sym_sqrt=math.sqrt)}


def _evaluator(expr: Any, symbol: Any) -> Callable[[int], bool] | None:
    """``expr`` as a function of its one symbol's size: as logged, or as torch's Python
    printer writes it (TruncToInt, IntTrueDiv and the like)."""
    holds = _compiled_symbolic(str(expr), {str(symbol)})
    if holds is not None:
        return holds
    try:
        from torch.utils._sympy.printers import PythonPrinter

        code = compile(PythonPrinter().doprint(expr), "<guard>", "eval")
    except Exception:
        return None
    known = set(_PRINTED) | {str(symbol), "trunc", "floor", "ceil", "sqrt", "sym_float",
                             "sym_int", "sym_max", "sym_min", "sym_sqrt"}
    if set(code.co_names) - known:
        return None
    name = str(symbol)

    def evaluated(b: int) -> bool:
        return bool(eval(code, {"__builtins__": {}, **_PRINTED}, {name: b}))

    return evaluated


def _judge(refined: Refined, names: dict[Any, str], module: Any, found: list[Any],
           skip_proved: bool = False) -> list[str]:
    """Each guard of ``found`` on one declared dim evaluated over the dim's range: sizes
    where it fails become holes (the file is run there), a range that stops holding
    from some size on is reported as bounded, a guard that fails below the example
    bounds the range from below (the sizes below are run against eager where few,
    ``_below_minimum``), one that fails at every other size is refused, one that fails
    where eager fails too is the model's own precondition, and any other failure is run
    at its first failing sizes against eager, and refused where the file is wrong."""
    from pt2onnx.capture._resize import known_values
    from pt2onnx.errors import CaptureError

    program = refined.program
    known = known_values(program)
    notes = []
    for expr in found:
        if len(getattr(expr, "free_symbols", ())) != 1:
            continue
        (symbol,) = expr.free_symbols
        name = names.get(symbol)
        bounds = program.range_constraints.get(symbol)
        if name is None or bounds is None:
            continue
        lo = max(int(bounds.lower), 2)
        if refined.split is not None and refined.split[0] == name:
            lo = max(lo, refined.split[1] + 1)  # the sizes up to it have a capture of their own
        hi = int(bounds.upper) if bounds.upper.is_finite and bounds.upper < 2**31 else None
        if (hi is not None and hi < lo) or (skip_proved and _proved(expr, symbol, lo, hi)):
            continue
        holds = _evaluator(expr, symbol)
        if holds is None:
            continue
        sizes, _ = _sizes(lo, hi)
        try:
            bad = [b for b in sizes if not holds(b)]
        except Exception:  # a division by a size of 0, an unknown function
            continue
        if not bad:
            continue
        example = known.get(symbol)
        some = f"{', '.join(map(str, bad[:8]))}{', ...' if len(bad) > 8 else ''}"
        if len(bad) <= HOLES and bad != list(range(lo, bad[-1] + 1)) and (
                hi is None or bad[-1] < hi) and (example is None or example <= bad[-1]):
            refined.holes.setdefault(name, [])
            refined.holes[name] = sorted(set(refined.holes[name]) | set(bad))
            notes.append(f"dynamic dim {name}: the capture assumes {expr}, which holds at "
                         f"every size of {name}'s range but {', '.join(map(str, bad))}; "
                         "the file was run there against eager PyTorch")
        elif ((bad == [b for b in sizes if b >= bad[0]] and bad[0] > lo) or (
                example is not None and example > bad[-1])) and (
                runs := edges_of(bad, sizes, example)) is not None:
            # Only where the range would be bounded (the two branches below); a guard
            # that fails where eager fails too, or elsewhere, keeps its own handling.
            refined.holes[name] = sorted(set(refined.holes.get(name, [])) | set(runs))
            refined.edges.add(name)
            notes.append(_edges_note(name, str(expr), bad, runs))
        elif bad == [b for b in sizes if b >= bad[0]] and bad[0] > lo:
            notes.append(f"{name} bounded to at most {bad[0] - 1}: the capture assumes "
                         f"{expr}, which fails at every size checked from {bad[0]} on")
        elif example is not None and example > bad[-1]:
            notes.append(f"{name} bounded to [{bad[-1] + 1}, {hi if hi else 'inf'}]: the "
                         f"capture assumes {expr}, which fails at {some}")
        elif bad == sizes:
            raise CaptureError(
                f"the dynamic shapes declare a dim that can only take one size in this "
                f"model: {name} is fixed to {example} by the model (it was captured under "
                f"the assumption {expr}, which fails at every other size of its range).\n"
                f"Next step: make {name} static, or change the model so that it does not "
                "depend on that size.")
        elif module is not None and _eager_fails_at(
                module, program, [symbol, *(s for s, n in names.items() if n == name
                                           and s != symbol and s in known)], bad[:4]):
            notes.append(f"dynamic dim {name}: the capture assumes {expr}, which fails at "
                         f"{some}, where eager PyTorch fails too (the model's own "
                         "precondition)")
        else:
            # torch 2.12 also emits guards that later releases prove (the parity of a
            # CNN's image size): the file is run at the first sizes where it fails, and
            # refused where it is wrong there.
            sample = bad[:HOLES]
            refined.holes[name] = sorted(set(refined.holes.get(name, [])) | set(sample))
            notes.append(f"dynamic dim {name}: the capture assumes {expr}, which fails at "
                         f"{some}; the file was run at {', '.join(map(str, sample))} "
                         "against eager PyTorch")
    return notes
