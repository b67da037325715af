"""The example inputs at another size, to check a dynamic model away from its example.

Each free symbol of the program's input shapes gets a second value inside its
range (twice the example's, which keeps relations such as total = past + seq that
the graph does not state); every input is then rebuilt at the shapes that implies, by repeating the
example's own values along the resized axes (so token ids, masks and positions
stay valid), or cropping them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree

from pt2onnx.capture._dynamic import DeclaredAxis, tensor_leaves


def user_shapes(program: torch.export.ExportedProgram) -> list[Any]:
    user = set(program.graph_signature.user_inputs)
    vals = [n.meta.get("val") for n in program.graph.nodes
            if n.op == "placeholder" and n.name in user]
    return [v.shape for v in vals if isinstance(v, torch.Tensor)]


def _bound(x: Any) -> int | None:
    """A range end as an int; None for infinity (sympy's oo or torch's int_oo)."""
    if x is None or "oo" in str(x):
        return None
    return int(x)


def _second_value(value: int, lower: int, upper: int | None) -> int | None:
    """Twice the example's value: scaling every dim by one factor keeps the relations
    between them that the graph does not state (total = past + seq), so the second
    inputs stay valid for the model. Where the range forbids that, the nearest other size."""
    for candidate in (2 * value, value + 1, value - 1):
        if candidate != value and candidate >= max(lower, 1) and (
            upper is None or candidate <= upper
        ):
            return candidate
    return None


def _leaves(program: torch.export.ExportedProgram, args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> tuple[list[Any], Any, list[int], list[Any]] | None:
    from pt2onnx.verify import ordered_kwargs

    leaves, spec = pytree.tree_flatten((args, ordered_kwargs(program, kwargs)))
    tensors = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    shapes = user_shapes(program)
    if len(shapes) != len(tensors):
        return None
    return leaves, spec, tensors, shapes


def known_values(program: torch.export.ExportedProgram, args: tuple[Any, ...] | None = None,
                 kwargs: dict[str, Any] | None = None) -> dict[Any, int]:
    """Each root symbol of the input shapes with its size in ``(args, kwargs)`` (by
    default the program's own example inputs)."""
    if args is None:
        args, kwargs = program.example_inputs or ((), {})
    found = _leaves(program, tuple(args), dict(kwargs or {}))
    if found is None:
        return {}
    leaves, _, tensors, shapes = found
    known: dict[Any, int] = {}
    for shape, i in zip(shapes, tensors):
        for d, n in zip(shape, leaves[i].shape):
            if isinstance(d, torch.SymInt) and isinstance(d.node.expr, sympy.Symbol):
                known[d.node.expr] = int(n)
    for shape, i in zip(shapes, tensors):  # roots that only appear in expressions (2*s)
        for d, n in zip(shape, leaves[i].shape):
            expr = d.node.expr if isinstance(d, torch.SymInt) else None
            free = [s for s in getattr(expr, "free_symbols", ()) if s not in known]
            if expr is not None and len(free) == 1:
                solved = sympy.solve(expr.subs(known) - int(n), free[0])
                if solved and solved[0].is_integer:
                    known[free[0]] = int(solved[0])
    return known


def outside_ranges(program: torch.export.ExportedProgram, args: tuple[Any, ...],
                   kwargs: dict[str, Any], names: dict[tuple[int, int], str] | None = None,
                   skip: Collection[tuple[int, int]] = (),
                   ) -> list[str]:
    """Each input dim of ``(args, kwargs)`` that the program's dims cannot take: a size no
    value of its symbols gives (``4*_time`` against 130), or one whose symbol is outside
    its range (``_time >= 61`` against 32). Empty when the inputs fit. ``names`` maps
    (tensor input index, axis) to the user's name of that dim; ``skip`` holds the (index,
    axis) pairs not to check."""
    found = _leaves(program, tuple(args), dict(kwargs or {}))
    if found is None:
        return []
    leaves, _, tensors, shapes = found
    known = known_values(program, args, kwargs)
    ranges = {str(k): v for k, v in program.range_constraints.items()}
    problems: list[str] = []
    for ti, (shape, i) in enumerate(zip(shapes, tensors)):
        for axis, (d, n) in enumerate(zip(shape, leaves[i].shape)):
            if not isinstance(d, torch.SymInt) or (ti, axis) in skip:
                continue
            expr = d.node.expr
            try:
                value = int(expr.subs(known))
            except TypeError:
                value = None
            where = f"{(names or {}).get((ti, axis), 'a dim')} (tensor input {ti}, axis {axis})"
            if value != int(n):
                problems.append(f"{where} is {int(n)}, which {expr} does not take")
                continue
            for sym in expr.free_symbols:
                vr = ranges.get(str(sym))
                lower = _bound(vr.lower) if vr is not None else None
                upper = _bound(vr.upper) if vr is not None else None
                v = known.get(sym)
                # A minimum of 2 is torch's own 0/1 specialisation, not the model's: sizes
                # 0 and 1 are the size-1 proof's to check (capture/_size_one.py).
                if lower is not None and lower <= 2:
                    lower = None
                if v is not None and ((lower is not None and v < lower)
                                      or (upper is not None and v > upper)):
                    problems.append(f"{where} is {int(n)} = {expr} with {sym} = {v}, "
                                    f"outside {sym}'s range [{lower}, "
                                    f"{'inf' if upper is None else upper}]")
    return list(dict.fromkeys(problems))


def example_at(program: torch.export.ExportedProgram, values: dict[Any, int],
               args: tuple[Any, ...] | None = None, kwargs: dict[str, Any] | None = None,
               ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The example inputs (by default the program's own) rebuilt at the sizes that
    ``values`` (symbol -> size) give; None when they cannot be."""
    if args is None:
        args, kwargs = program.example_inputs or ((), {})
    found = _leaves(program, tuple(args), dict(kwargs or {}))
    if found is None:
        return None
    leaves, spec, tensors, shapes = found
    leaves = list(leaves)
    for shape, i in zip(shapes, tensors):
        try:
            target = [int(d.node.expr.subs(values)) if isinstance(d, torch.SymInt) else int(d)
                      for d in shape]
        except TypeError:  # a symbol without a value
            return None
        if any(n < 0 for n in target):
            return None
        leaves[i] = _reshaped(leaves[i], target)
    args2, kwargs2 = pytree.tree_unflatten(leaves, spec)
    return tuple(args2), dict(kwargs2)


def ints_zeroed(args: tuple[Any, ...], kwargs: dict[str, Any],
                ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with every integer tensor 0 (floats, complex and bool kept).
    A resized example's index values may not fit the new size (an index of 5 at 3); with
    them 0, a model that runs there takes the size, and only the example's values failed
    (fuzz seed 7411 program 1047)."""
    def zeroed(t: torch.Tensor) -> torch.Tensor:
        keep = t.is_floating_point() or t.is_complex() or t.dtype == torch.bool
        return t if keep else torch.zeros_like(t)

    return pytree.tree_map_only(torch.Tensor, zeroed, (tuple(args), dict(kwargs)))


def second_size(
    program: torch.export.ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any],
) -> tuple[dict[Any, tuple[int, int]], tuple[Any, ...], dict[str, Any]] | None:
    """``({symbol: (example, new)}, args, kwargs)`` at a second size; None when static."""
    known = known_values(program, args, kwargs)
    if not known:
        return None
    ranges = {str(k): v for k, v in program.range_constraints.items()}
    new: dict[Any, int] = {}
    for sym, value in known.items():
        vr = ranges.get(str(sym))
        lower = _bound(vr.lower if vr is not None else None) or 0
        upper = _bound(vr.upper if vr is not None else None)
        picked = _second_value(value, lower, upper)
        if picked is not None:
            new[sym] = picked
    if not new:
        return None
    resized = example_at(program, {**known, **new}, args, kwargs)
    if resized is None:
        return None
    return {s: (known[s], v) for s, v in new.items()}, resized[0], resized[1]


_SEED = 20261130  # the scaled copies of ``_reshaped``: the same at every run


def _reshaped(t: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """``t`` at ``shape``: its values repeated along the axes that grow (floating-point
    copies scaled apart), cropped where they shrink; an empty axis that grows is filled
    like the rest of the tensor."""
    if list(t.shape) == shape:
        return t.clone()
    if t.numel() == 0:
        if t.dtype.is_floating_point or t.dtype.is_complex:
            return torch.randn(shape, dtype=t.dtype)
        return torch.zeros(shape, dtype=t.dtype)
    reps = [max(1, math.ceil(n / o)) for n, o in zip(shape, t.shape)]
    out = t.repeat(*reps)
    for axis, n in enumerate(shape):
        out = out.narrow(axis, 0, n)
    if (t.dtype.is_floating_point or t.dtype.is_complex) and not t.is_meta and any(
            n > o for n, o in zip(shape, t.shape)):
        # The copies differ from the example: repeated values made a graph that reads
        # the wrong position look right where it was run against eager (the last piece
        # of a split of a size-1 example's flatten read as piece 2, from 3 on). Each
        # new value is the repeated one scaled by a factor in [0.5, 1): its sign, its
        # zeros and its bound by the example's largest magnitude stay.
        kept = torch.zeros(shape, dtype=torch.bool)
        kept[tuple(slice(0, min(n, o)) for n, o in zip(shape, t.shape))] = True
        g = torch.Generator().manual_seed(_SEED)
        factor = (0.5 + 0.5 * torch.rand(shape, generator=g, dtype=torch.float64))
        # Made on the CPU from one seed, moved to the example's device (CUDA too).
        kept, factor = kept.to(out.device), factor.to(out.device)
        scaled = (out.to(torch.complex128 if t.dtype.is_complex else torch.float64)
                  * factor).to(t.dtype)
        out = torch.where(kept, out, scaled)
    # A tensor of its own, not a view of the repeat: torch.export captures a view input
    # with other guards than a plain tensor (fuzz seed 2612, program 587: a chunk guard
    # it then could not drop fixed the dim).
    return out.clone(memory_format=torch.contiguous_format)


def scaled_examples(
    args: tuple[Any, ...], kwargs: dict[str, Any], inputs: dict[str, Any],
    declared: list[DeclaredAxis],
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The example with every declared dim grown, when one of them has size 1: the
    inputs to try capturing on, in order, made one at a time (a candidate is built
    only if the ones before it did not capture; each is a copy of the inputs, and
    Whisper's decoder, its cross-attention caches grown to batch 8, held three at once
    took 400 MB).

    Even size-obliviously, a size-1 example can steer torch.export into a graph that
    is wrong at other sizes (T5's attention, traced at batch 1, reshapes by
    ``heads // batch``). Doubling every declared dim, not only the size-1 ones, keeps
    relations such as total = past + seq; the repeated values stay valid inputs. Where
    a size-1 dim broadcasts against another declared dim (``x + y`` with ``y``'s ``c``
    at 1 and ``x``'s ``b`` at 3), doubling gives sizes the model rejects (6 against 2),
    so the second candidate grows the size-1 dims to the others' doubled size. Empty
    when no declared dim has size 1, or when growing leaves a Dim's range.
    """
    if not any(a.size == 1 for a in declared):
        return
    # Dim.AUTO axes may be ones the model fixes (a feature size): only their 1s grow.
    declared = [a for a in declared if a.name is not None or a.size == 1]
    others = sorted({2 * a.size for a in declared if a.size > 1 and a.name is not None})
    for ones_to in [None, *others[-1:], _aligned(declared, inputs)]:
        grown = _grown(args, kwargs, inputs, declared, ones_to)
        if grown is not None:
            yield grown
            del grown  # the caller's copy is the one alive while the next is made


def _aligned(declared: list[DeclaredAxis], inputs: dict[str, Any]) -> dict[int, int]:
    """Broadcasting lines axes up from the right: ``x * y`` with ``x`` at (1, 4) and ``y``
    at (3, 1) needs ``x``'s first dim to grow as ``y``'s does and ``y``'s last as ``x``'s.
    Each right-aligned position (-1 for the last axis) -> twice the largest example size
    of a declared dim there, for the size-1 dims to grow to (the third candidate)."""
    tensors = dict(tensor_leaves(inputs))
    to: dict[int, int] = {}
    for a in declared:
        position = a.axis - tensors[a.input].dim()
        to[position] = max(to.get(position, 2), 2 * a.size)
    return to


def _grown(
    args: tuple[Any, ...], kwargs: dict[str, Any], inputs: dict[str, Any],
    declared: list[DeclaredAxis], ones_to: int | dict[int, int] | None,
    named: dict[str, int] | None = None,
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The example with each declared dim doubled; a size-1 dim grown to ``ones_to``
    instead where given (one size, or one per right-aligned position, ``_aligned``).
    With ``named``, only the dims it names change, each to its size there."""
    tensors = dict(tensor_leaves(inputs))
    if named is not None:
        declared = [a for a in declared if a.name in named]

    def target(a: DeclaredAxis) -> int:
        if named is not None and a.name is not None:
            return named[a.name]
        if isinstance(ones_to, dict) and a.size == 1:
            return ones_to.get(a.axis - tensors[a.input].dim(), 2)
        return ones_to if isinstance(ones_to, int) and a.size == 1 else 2 * a.size

    if any(isinstance(getattr(a.dim, "max", None), int) and target(a) > a.dim.max
           for a in declared):
        return None
    targets: dict[str, list[int]] = {}
    for a in declared:
        shape = targets.setdefault(a.input, list(tensors[a.input].shape))
        shape[a.axis] = target(a)
    by_id = {id(tensors[name]): shape for name, shape in targets.items()}

    def grow(x: Any) -> Any:
        return _reshaped(x, by_id[id(x)]) if id(x) in by_id else x

    grown = pytree.tree_map(grow, (args, kwargs))
    return grown[0], grown[1]
