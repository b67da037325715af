"""One capture per residue class of a dim: ``If(B % k == r, capture of class r, ...)``.

torch.export's solver removes a ``FloorDiv`` or ``Mod`` from guards it cannot prove by
tying a declared dim to the example's residue class (``B = 4*_B - 3``: sizes 1 more
than a multiple of 4). Where every class ties (``x.split(max(n - n % 2, 1))[-1]``: one
chunk at even sizes, two at odd ones, beside ``n // 4``), no single capture holds, but each class has one that torch.export proves over the
whole class: pt2onnx captures the model once from a size in each class, translates
each, and joins them under ``If`` on ``Shape(input)[axis] % k``. Each class is run
against eager through the joined file at its example, the next size of its class and
its last one (the example's own class wrong there is a typed refusal), and each size
below a class's proved range is run too, with a static capture of its own under
``If(n == m)`` where the class's graph differs there. Where a class's capture narrows
anything more than its class, the narrowing stands, as reported.

Where torch.export refuses the dim with no suggested fix (the split alone from an
even example guards ``ceil(n / max(1, n - n % 2)) == 1``), ``capture_by_residue``
captures from the example's class mod 2, 3, 4 or 6 first, and its notes carry the tie.
Where that class's capture is general to torch.export but wrong at another size of its
class (a slice step ``n % 3 + 1`` beside a split by ``n % 2``, held from a class mod 2),
``_api`` exports again with that modulus skipped (``residue_moduli``): the class mod 6
holds both.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any

import torch

from pt2onnx.capture._refine import _with_ties
from pt2onnx.capture._residue_classes import (
    _CHOSEN,
    _MODULI,
    _SKIPPED,
    _about,
    _below,
    _class_of,
    _lowest_of_class,
    _more_of_class,
    residue_moduli,
)
from pt2onnx.errors import CaptureError

__all__ = ["capture_by_residue", "residue_moduli", "split_by_residue"]


def split_by_residue(
    prog: Any, rep: Any, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
    spec: Any, dim_names: list[dict[int, str]],
    capture_on: Callable[[Any, tuple[tuple[Any, ...], dict[str, Any]], Any], tuple[Any, Any]],
    settle: Callable[[Any, Any], list[str]], at_size: Callable[[Any], Any],
    example: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
) -> list[str]:
    """Where the report holds declared dims to one residue class mod k, ``prog.model``
    becomes ``If(B % k == r, capture from a size of class r, ...)`` over every other
    class, and the narrowing is dropped from the report. ``capture_on(prog, inputs,
    spec)`` captures and translates the model on other inputs with another spec;
    ``at_size(point)`` captures it with the tied dims static at the point's size. Returns notes; none where no
    such narrowing is reported or a class has no general capture (it then stands).
    ``example``: the user's example, where the capture was made from another one (it
    widened, ``_groups_of_a_broadcast``): its dims at 1 are run apart from the classes
    (``_ties_apart``), so where the joined file matches eager there, no class's missing
    size bounds them."""
    import onnx_ir as ir

    from pt2onnx.capture._dynamic import bound_inputs, declared_axes
    from pt2onnx.capture._refine import _eager_runs
    from pt2onnx.capture._resize import _grown, ints_zeroed
    from pt2onnx.capture._size_one import Unproved, _run
    from pt2onnx.capture._size_one_merge import merge_at, merge_residue

    notes = list(rep.dynamic_refinements)
    inputs = bound_inputs(module, args, kwargs)
    declared = declared_axes(inputs, spec)
    sizes = {a.name: a.size for a in declared if a.name is not None}
    found = _class_of(notes, set(sizes))
    if found is None:
        return []
    example_ones: set[str] = set()
    if example is not None:
        in_example: dict[str, set[int]] = {}
        for a in declared_axes(bound_inputs(module, *example), spec):
            if a.name is not None:
                in_example.setdefault(a.name, set()).add(a.size)
        example_ones = {n for n, s in in_example.items() if s == {1}}
    tied, k, root, residue = found
    # A dim at 1 beside the class's dim (a broadcast, ``_ties_apart``): the classes are
    # captured with it at the class dim's size, and the joined file run with it at 1.
    values = {sizes[n] for n in tied}
    ones = [n for n in tied if sizes[n] == 1] if len(values - {1}) == 1 else []
    if len(values) != 1 and not ones:
        return []
    lows = [getattr(a.dim, "min", None) for a in declared if a.name in tied]
    highs = [getattr(a.dim, "max", None) for a in declared if a.name in tied]
    low = max((v for v in lows if isinstance(v, int)), default=0)
    high: float = min((v for v in highs if isinstance(v, int)), default=float("inf"))
    narrowing = [n for n in notes if _about(n) in {root, *tied}]
    below = _below(narrowing, tied, k, residue, low, high)
    if below is None:
        return [f"{', '.join(tied)}: held to sizes {residue} mod {k}, and that capture "
                "does not reach the declared maximum; the narrowing stands"]
    general = set(notes) - set(narrowing)
    where = next(((i, axis) for i, axes in enumerate(dim_names) for axis, n in axes.items()
                  if (n in tied and n not in ones) or n == root), None)
    if where is None:
        return []
    size = max(values)

    def runnable(grown: Any) -> Any:
        """``grown``, or it with integer inputs 0 (the example's index values may not
        fit the size), where eager runs on it; else None."""
        if grown is None:
            return None
        for candidate in (grown, ints_zeroed(*grown)):
            if _eager_runs(module, *candidate):
                return candidate
        return None

    def grown_to(n: int) -> Any:
        return runnable(_grown(args, kwargs, inputs, declared, None,
                               _with_ties(dict.fromkeys(tied, n), notes)))

    def apart_at(n: int) -> Any:
        return runnable(_grown(args, kwargs, inputs, declared, None,
                               {**dict.fromkeys(tied, n), **dict.fromkeys(ones, 1)}))

    # (size, inputs, whether a capture of its own may be made there: below a range)
    # A size below whose inputs eager cannot take (None) is left out of the range.
    points = [(n, grown_to(n), True) for n in below]
    # The lowest size of the example's class that torch.export proved: a split read by
    # its position is proved wherever the piece exists, and the pieces can be more
    # there (``x.split(max(int(n / 3), 1))[-1]``: 5 pieces at 5, 4 from 8 on).
    points += _lowest_of_class(notes, tied, k, residue, size, grown_to)
    # The example's class at two more of its sizes, the last one included: the capture
    # is proved over the class, and what it holds constant without a guard shows here.
    # The file is the export's own as it stands, so a mismatch is a refusal.
    for n, grown in _more_of_class(size, k, high, grown_to):
        wrong = _run(prog, Unproved(f"{tied[0]}={n}", grown[0], grown[1], ""))
        if wrong is not None:
            raise CaptureError(
                f"the dynamic shapes declare a dim whose graph is fixed by the model: "
                f"torch.export held "
                f"{', '.join(tied)} to sizes {residue} mod {k}, and the graph captured at "
                f"{size} does not match eager PyTorch at {tied[0]}={n}, a size of that "
                f"class:\n{wrong[:400]}\nThe model turns a "
                "size into a Python value that torch.export held at the example's value. "
                f"Next step: leave {tied[0]} static (export at the size you will run), or "
                "compute that value with tensor ops so the graph stays general.")
    branches: list[tuple[int, Any, list[str]]] = []
    for r in range(k):
        if r == residue:
            continue
        found_r = _class_capture(spec, tied, k, r, low, high, size, general, capture_on,
                                 prog, grown_to)
        if isinstance(found_r, str):
            if found_r.startswith("no size"):  # eager fails at the sizes tried
                return [f"{', '.join(tied)}: held to sizes {residue} mod {k}; {found_r}, so "
                        "the model itself seems to take only that class: the narrowing "
                        "stands, as reported"]
            return [f"{', '.join(tied)}: held to sizes {residue} mod {k}, and {found_r}; "
                    "the narrowing stands"]
        other, cap, more = found_r
        points += more
        extra: list[str] = []
        if cap.size_one:
            try:
                extra = settle(other, cap)
            except Exception as exc:
                return [f"{', '.join(tied)}: the capture for sizes {r} mod {k} is not right "
                        f"at size 1 ({type(exc).__name__}: {str(exc)[:200]}); the "
                        "narrowing stands"]
        branches.append((r, other, extra))
    kept = ir.to_proto(prog.model)
    try:
        for r, other, _ in branches:
            prog.model, _ = merge_residue(prog.model, other.model, where, k, r)
    except ValueError as exc:  # the captures' inputs or outputs differ
        prog.model, prog._session = ir.from_proto(kept), None
        return [f"{', '.join(tied)}: the captures of the classes mod {k} cannot be joined "
                f"({exc}); the narrowing stands"]
    prog._session = None
    # Each branch on its own example, and the sizes below its capture's range one by
    # one, through the joined file; where one does not match, a capture at that size.
    fixed: list[int] = []
    unchecked: list[int] = []
    if ones:  # each class with the broadcast side at 1 too
        run_at = dict.fromkeys([size] + [n for n, g, _ in points if g is not None])
        points += [(n, g, False) for n in run_at if (g := apart_at(n)) is not None]
    for n, grown, own in points:
        if grown is None:
            unchecked.append(n)
            continue
        wrong = _run(prog, Unproved(f"{tied[0]}={n}", grown[0], grown[1], ""))
        if wrong is not None and own:
            try:
                at_n = at_size(Unproved(f"{tied[0]}={n}", grown[0], grown[1], "",
                                        dim_names=list(tied)))
                prog.model, _ = merge_at(prog.model, at_n, where, n)
                prog._session = None
                fixed.append(n)
            except Exception as exc:
                wrong += f" (a capture at {n} failed: {type(exc).__name__}: {str(exc)[:200]})"
            else:
                wrong = _run(prog, Unproved(f"{tied[0]}={n}", grown[0], grown[1], ""))
        if wrong is not None:
            prog.model, prog._session = ir.from_proto(kept), None
            return [f"{', '.join(tied)}: joined by residue mod {k}, the file does not match "
                    f"eager PyTorch at {tied[0]}={n}: {wrong[:300]}; the narrowing stands"]
    rep.dynamic_refinements[:] = [n for n in notes if n not in narrowing]
    _name_joined_dims(prog.model.graph, dim_names)
    dropped = {f"dynamic shapes refined: {n}" for n in narrowing}
    rep.warnings[:] = [w for w in rep.warnings if w not in dropped]
    if unchecked:
        # No capture proves those sizes and none could be run: the range starts above.
        shown = "inf" if high == float("inf") else str(int(high))
        floor = max(unchecked) + 1
        if example_ones and example is not None and _run(
                prog, Unproved("the example", example[0], example[1], "")) is not None:
            example_ones = set()  # the joined file is not right at the user's example
        for name in (n for n in tied if n not in ones and n not in example_ones):
            note = (f"{name} bounded to [{floor}, {shown}]: no capture of its residue class "
                    f"holds at {', '.join(map(str, sorted(unchecked)))}, and eager fails on "
                    "the example resized there, so the file was not run there")
            rep.dynamic_refinements.append(note)
            rep.warnings.append(f"dynamic shapes refined: {note}")
    out = [f"{', '.join(tied)}: torch.export proves each capture only for one residue class "
           f"mod {k} (a // or % of the size), so the file holds one capture per class, "
           f"chosen by an If on {tied[0]} % {k}, each run against eager on its own "
           f"example; {', '.join(tied)} keep{'s' if len(tied) == 1 else ''} the declared "
           "range"]
    if fixed:
        out.append(f"{tied[0]} at {', '.join(map(str, fixed))}: the class's capture does not "
                   "match eager PyTorch there, so the file holds a capture of its own at each "
                   "of those sizes")
    for r, _, extra in branches:
        out += [f"{tied[0]} % {k} == {r}: {n}" for n in extra]
    return out


def _name_joined_dims(graph: Any, dim_names: list[dict[int, str]]) -> None:
    """The joined file takes every class: an input dim the class capture named by its
    class (``2*B - 1``) takes the user's name, and so does an output dim of that name."""
    import onnx_ir as ir

    renamed: dict[str, str] = {}
    for value, given in zip(graph.inputs, dim_names):
        if value.shape is None:
            continue
        dims = list(value.shape)
        for axis, name in given.items():
            d = dims[axis] if axis < len(dims) else None
            if isinstance(d, ir.SymbolicDim) and d.value and not d.value.isidentifier():
                renamed[d.value] = name
                dims[axis] = ir.SymbolicDim(name)
        value.shape = ir.Shape(dims)
    for value in graph.outputs if renamed else ():
        if value.shape is not None:
            value.shape = ir.Shape([
                ir.SymbolicDim(renamed[d.value]) if isinstance(d, ir.SymbolicDim)
                and d.value in renamed else d for d in value.shape])


def _class_capture(spec: Any, tied: list[str], k: int, r: int, low: int, high: float,
                   size: int, general: set[str], capture_on: Callable[..., tuple[Any, Any]],
                   prog: Any, grown_to: Callable[[int], Any],
                   ) -> tuple[Any, Any, list[tuple[int, Any, bool]]] | str:
    """The model captured from a size of class ``r`` with the tied dims declared as
    ``k*root + r - k`` (the root is 2 at the class's second size: torch specializes a
    root at 1), and the points to run the joined file at: its example, and each size of
    the class below the capture's range where eager runs. Why not, as a string."""
    from pt2onnx.capture._dynamic import in_residue_class

    offset = r - k
    lowest = max(2, -(-(low - offset) // k))
    top = None if high == float("inf") else (int(high) - offset) // k
    if top is not None and top < lowest:
        return f"class {r} mod {k} has too few sizes in the declared range to capture"
    spec_r = in_residue_class(spec, tied, k, offset, lowest, top, f"_{tied[0]}_{r}_mod{k}")
    if spec_r is None:
        return f"a derived dim is built on {tied[0]}"
    first = k * lowest + offset
    tried = [n for start in (max(size + 1, first), 2 * size) for n in range(start, start + k)
             if n % k == r and n >= first and n <= high]
    why = f"no size of class {r} mod {k} runs in eager"
    for n in dict.fromkeys(tried):
        grown = grown_to(n)
        if grown is None:
            continue
        try:
            other, cap = _either_mode(functools.partial(capture_on, prog, grown, spec_r))
        except Exception as exc:
            why = f"the capture from {tied[0]}={n} failed ({type(exc).__name__}: " \
                  f"{str(exc)[:200]})"
            continue
        new = [note for note in cap.refinements if note not in general]
        if cap.below_minimum or cap.split is not None or new:
            why = f"the capture from {tied[0]}={n} narrows it ({'; '.join(new)})"
            continue
        points = [(n, grown, False)] + [(m, g, False) for m, g in _more_of_class(
            n, k, high, grown_to)] + [(m, grown_to(m), True) for m in range(max(low, 0), first)
                                      if m % k == r]
        if first != n and first <= high and (at_first := grown_to(first)) is not None:
            points.append((first, at_first, True))  # the class's lowest proved size
        return other, cap, points
    return why


def capture_by_residue(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any,
                       refusal: Exception, attempt: Callable[[Any, Any], Any]) -> Any:
    """Where torch.export refuses a declared dim that eager runs at other sizes and
    suggests no fix (``x.split(max(n - n % 2, 1))[-1]``: at even sizes the guard is
    ``Eq(ceil(n / max(1, n - n % 2)), 1)``, which its solver cannot turn into a tie), the
    capture from the example's residue class mod 2, 3, 4 or 6 (less those skipped by
    ``residue_moduli``), the dim declared as
    ``k*root + r - k``: its notes hold the dim to that class as torch.export's own tie
    does, so ``split_by_residue`` captures the other classes. None where no class
    capture is general (the refusal stands)."""
    from pt2onnx.capture._dynamic import bound_inputs, declared_axes, in_residue_class
    from pt2onnx.capture._refine import _eager_runs
    from pt2onnx.capture._resize import _grown

    if not isinstance(module, torch.nn.Module) or spec is None:
        return None
    text = str(refusal)
    try:
        inputs = bound_inputs(module, args, kwargs)
        declared = declared_axes(inputs, spec)
    except Exception:
        return None
    by_name: dict[str, list[Any]] = {}
    for a in declared:
        if a.name is not None:
            by_name.setdefault(a.name, []).append(a)
    at_one_size: list[Any] = []  # a capture of the example widened, where that is one
    for group in itertools.chain(_refused_groups(text, by_name), _groups_of_a_broadcast(
            module, args, kwargs, inputs, declared, by_name, attempt, spec, at_one_size)):
        axes = [a for n in group for a in by_name[n]]
        sizes = {a.size for a in axes}
        size = axes[0].size
        at_size = (args, kwargs)
        if len(sizes) > 1:
            # A dim at 1 in the example beside the class's dim (``maximum(b, c)`` with c
            # at 1): captured tied at the other's size, where eager runs, and run apart
            # at 1 afterwards (``_size_one.ties``: the file keeps both names).
            if len(sizes - {1}) != 1:
                continue
            size = max(sizes)
            ones = [n for n in group if all(a.size == 1 for a in by_name[n])]
            widened = _grown(args, kwargs, inputs, declared, None, dict.fromkeys(ones, size))
            if widened is None or not _eager_runs(module, *widened):
                continue
            at_size = widened
        lows = [getattr(a.dim, "min", None) for a in axes]
        highs = [getattr(a.dim, "max", None) for a in axes]
        low = max((v for v in lows if isinstance(v, int)), default=0)
        high = min((v for v in highs if isinstance(v, int)), default=None)
        name = group[0]
        for k in _MODULI:
            if k in _SKIPPED.get():
                continue
            r = size % k
            offset = r - k
            lowest = max(2, -(-(low - offset) // k))
            top = None if high is None else (high - offset) // k
            # An example below its class's lowest size (1: torch specializes a root of
            # 1) is captured at that lowest size, k + 1, and checked at 1 with the join
            # (``split_by_residue``: a size below a class's range is run against eager).
            below = size < k * lowest + offset
            if (below and size != 1) or (top is not None and top <= lowest):
                continue
            # The class must hold another size eager runs at (``x.view(4, -1)``: 8
            # from 4); where none does, the dim is the model's own, and no capture is
            # tried.
            if high is not None and size + k > high:
                continue
            grown = _grown(args, kwargs, inputs, declared, None,
                           dict.fromkeys(group, size + k))
            if grown is None or not _eager_runs(module, *grown):
                continue
            if below and any(a.size == size + k for a in declared if a.name not in group):
                # Grown onto another declared dim's size, the capture may tie the two
                # (``torch.where(c_mask, b_values, ...)``: c is 1 or b), which the
                # example, at 1, is not.
                continue
            root = f"_{name}_{r}_mod{k}"
            spec_k = in_residue_class(spec, group, k, offset, lowest, top, root)
            if spec_k is None:
                break
            try:
                cap = _either_mode(functools.partial(
                    attempt, spec_k, grown if below else None if at_size[0] is args else at_size))
            except Exception:
                continue
            if below:
                cap.example = cap.example if cap.example is not None else grown
                cap.below_example = (name, refusal)
            elif at_size[0] is not args and cap.example is None:
                cap.example = at_size
            # The file's dims carry the user's names (``_name_joined_dims``).
            cap.dynamic_shapes = spec
            if len(group) > 1:
                _ties_apart(module, cap, spec, cap.example or (args, kwargs))
            if cap.below_minimum or cap.split is not None or any(
                    n.startswith(f"{root} ") for n in cap.refinements):
                continue
            shown = "oo" if top is None else str(top)
            ours = [f"{root} bounded to [{lowest}, {shown}]"] + [
                f"{n} tied to other dims: {n} = {k}*{root} - {k - r}" for n in group]
            cap.refinements[:0] = ours
            cap.warnings[:0] = [f"dynamic shapes refined: {n}" for n in ours]
            chosen = _CHOSEN.get()
            if chosen is not None:
                chosen.append(k)
            return cap
    return at_one_size[0] if at_one_size else None


def _groups_of_a_broadcast(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                           inputs: dict[str, Any], declared: list[Any],
                           by_name: dict[str, list[Any]], attempt: Callable[[Any, Any], Any],
                           spec: Any, captured: list[Any]) -> Iterator[list[str]]:
    """The groups a refusal of the example widened names, after the ones the example's
    own refusal names: where declared dims are 1 in the example and the others share one
    size, the example with every dim at that size is captured. Where that capture is
    made, it goes into ``captured`` (the user's example is run apart: ``_size_one``'s
    tie points, and verify); where it is refused, its refusal's groups that hold a
    size-1 dim are yielded.

    A dim at 1 that broadcasts against a dim held to one residue class (``x1 ^ x24``
    with ``x24``'s C at 1, beside ``split(n - n % 4)``) makes torch.export fix both dims
    to the example's sizes, separately; from the widened example it ties C to B's class
    (``C = 4*_B + 1``), the group a class capture needs, and the size-1 side is run
    apart from the user's example (fuzz seed 7411, program 4840). Nothing where eager
    fails on the widened example. Lazy: tried only after the named groups."""
    from pt2onnx.capture._refine import _eager_runs
    from pt2onnx.capture._resize import _grown

    ones = [n for n, axes in by_name.items() if all(a.size == 1 for a in axes)]
    others = {a.size for n, axes in by_name.items() if n not in ones for a in axes}
    if not ones or len(others) != 1 or 1 in others:
        return
    widened = _grown(args, kwargs, inputs, declared, None, dict.fromkeys(ones, others.pop()))
    if widened is None or not _eager_runs(module, *widened):
        return
    try:
        cap = attempt(spec, widened)
    except Exception as exc:
        text = str(exc)
    else:
        cap.example = cap.example if cap.example is not None else widened
        cap.dynamic_shapes = spec
        captured.append(cap)
        return
    groups = _refused_groups(text, by_name)
    tied = [g for g in groups if len(g) > 1 and any(n in ones for n in g)]
    if tied:
        yield from tied
    elif any(n in ones for g in groups for n in g) and len(by_name) > 1:
        # torch.export fixed the dims to the widened size each on its own, or only the
        # size-1 ones, naming no tie (``split(x, max(-ceil(B / 4), 1))[0]`` beside ``x -
        # y``, y's C at 1: B and C both "fixed to 6"): every declared dim, all at one size
        # there, is tried as one group.
        yield list(by_name)


def _ties_apart(module: Any, cap: Any, spec: Any, inputs: tuple[Any, Any]) -> None:
    """The declared dims of one class capture that the model also runs apart, one of
    them at 1 (``maximum(b, c)``): the class's spec declares them one dim, so its capture
    found no tie. Found here by the user's names, each side at 1 becomes a point the
    file is run at, and the file keeps both names (``_size_one.ties``)."""
    from pt2onnx.capture import _size_one
    from pt2onnx.capture._capture import _declared_positions

    positions = _declared_positions(module, inputs[0], inputs[1], spec)
    found = _size_one.ties(cap.program, positions, classes=True)
    notes, points = _size_one._tie_points(module, cap.program, found)
    separate = [t for t in found if t.separate]
    if not separate:
        return
    cap.ties = separate
    cap.size_one = list(cap.size_one) + points
    cap.warnings += notes + [
        f"{' and '.join(t.names)} broadcast against each other: the capture of their "
        "residue class holds them as one size, and the model also runs where one of them "
        "is 1 and the other is not; the file keeps each name, and takes them equal or "
        "either one 1 (each such point is run)" for t in separate]


# ``C tied to other dims: C = 2*_B``: the dims a refusal ties to one root.
_REFUSED_TIE = re.compile(r"(\w+) tied to other dims: \1 = \d+\*(\w+)")


def _refused_groups(text: str, by_name: dict[str, list[Any]]) -> list[list[str]]:
    """The declared dims a refusal names, each with the ones it ties to the same root
    (``B = 2*_B``, ``C = 2*_B``: grown and declared together), in declaration order."""
    roots: dict[str, list[str]] = {}
    for m in _REFUSED_TIE.finditer(text):
        if m.group(1) in by_name and m.group(1) not in roots.setdefault(m.group(2), []):
            roots[m.group(2)].append(m.group(1))
    groups: list[list[str]] = []
    seen: set[str] = set()
    for name in by_name:
        if name in seen or (f"{name} " not in text and f"({name})" not in text):
            continue
        group = next((g for g in roots.values() if name in g), [name])
        group = [n for n in by_name if n in group]
        seen.update(group)
        groups.append(group)
    return groups


def _either_mode(capture: Callable[[], Any]) -> Any:
    """``capture()`` of a residue class, strict first: its dims are derived, and
    non-strict torch.export can hold ``int()`` of a derived size constant with no guard
    (``int(n * 0.5)`` with ``n = 2*r - 1`` became 3, torch 2.13), where dynamo keeps it
    symbolic; then as any capture (the comparison at a second size catches what the
    non-strict one holds constant, ``_second_size``)."""
    from pt2onnx.capture._capture import strict_only

    try:
        with strict_only():
            return capture()
    except Exception:
        return capture()
