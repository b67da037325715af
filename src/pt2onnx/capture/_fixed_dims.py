"""A declared dynamic dim the model fixes: eager, run at other sizes, says why.

torch.export fixes a declared dim for two kinds of reason, and they call for
different answers:

- **The model runs only at that size.** ``x[:, n:] = torch.tensor([1, 2, 3])`` needs
  the last dim to be 3; ``aa.expand_as(x)`` of a ``(3, 1)`` constant needs ``x``'s first
  dim to be 3. Eager raises at every other size, so a graph with the dim fixed computes
  what the model computes everywhere it computes anything (onnxruntime rejects other
  sizes). That dim is written static, and a warning names the sizes eager refused.
- **The model runs at other sizes, but the result has another structure there.**
  ``torch.chunk(x, x.size(0), 1)`` returns as many tensors as ``x.size(0)``;
  ``x.new_zeros(x.shape[1:x.size(2)])`` has a rank that depends on ``x.size(2)``. An ONNX
  graph has a fixed number of outputs, each of a fixed rank, so no single graph holds
  the model: the refusal says so, with the two structures eager gave.

Anything else (eager runs and returns the same structure) keeps the refusal as it was:
the model reads the size in a way torch.export specialises.

The probe sizes are 1, 2, the example's size k as k - 1, k + 1, 2k, 2k + 1 and 3k, and
the other declared dims' sizes (a dim broadcasting against another runs at 1 and there);
a dim is taken as fixed by the model only where eager raises at every one of them
(``view(4, -1)`` of a batch of 4 and 6 columns runs at 2 and 8: that refusal stays).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from pt2onnx.capture._dynamic import bound_inputs, declared_axes, tensor_leaves


@dataclass
class Verdict:
    static: list[str] = field(default_factory=list)  # dims the model runs only at their size
    notes: list[str] = field(default_factory=list)  # a warning for each of them
    reason: str | None = None  # why no single graph holds the model


def _structure(out: Any) -> list[tuple[str, int]]:
    """(kind, rank) for each leaf of a result: the things one ONNX graph fixes."""
    leaves = pytree.tree_leaves(out)
    return [("tensor", t.dim()) if isinstance(t, torch.Tensor) else (type(t).__name__, 0)
            for t in leaves]


def _describe(first: list[tuple[str, int]], other: list[tuple[str, int]]) -> tuple[str, str]:
    if len(first) != len(other):
        return f"{len(first)} outputs", f"{len(other)}"
    for i, (a, b) in enumerate(zip(first, other)):
        if a != b:
            return f"output {i} of rank {a[1]}", f"rank {b[1]}"
    return "the same structure", "the same"  # not reached: the structures differ


def _run(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    def copy(x: Any) -> Any:  # the model may write into its inputs
        return x.clone() if isinstance(x, torch.Tensor) else x

    with torch.no_grad():
        return module(*pytree.tree_map(copy, args), **pytree.tree_map(copy, kwargs))


def _at(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any, name: str,
        size: int) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The example with every axis declared as ``name`` at ``size``."""
    from pt2onnx.capture._resize import _reshaped

    inputs = bound_inputs(module, args, kwargs)
    axes = [a for a in declared_axes(inputs, spec) if a.name == name]
    if not axes:
        return None
    by_name = dict(tensor_leaves(inputs))
    resized: dict[int, torch.Tensor] = {}
    for a in axes:
        t = by_name.get(a.input)
        if t is None:
            return None
        base = resized.get(id(t), t)
        shape = list(base.shape)
        shape[a.axis] = size
        resized[id(t)] = _reshaped(base, shape)

    def swap(x: Any) -> Any:
        return resized.get(id(x), x) if isinstance(x, torch.Tensor) else x

    return pytree.tree_map(swap, args), pytree.tree_map(swap, kwargs)


def probe(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any,
          fixed: list[tuple[str, int]]) -> Verdict:
    """Runs eager with each fixed dim at other sizes (see the module's docstring)."""
    verdict = Verdict()
    try:
        reference = _structure(_run(module, args, kwargs))
    except Exception:
        return verdict
    from pt2onnx.capture._dynamic import bound_inputs, declared_axes

    try:
        declared = declared_axes(bound_inputs(module, args, kwargs), spec)
    except Exception:
        declared = []
    for name, size in fixed:
        # The other declared dims' sizes too: a dim that broadcasts against another (C
        # against B in ``x6 + x5``) runs at 1 and at B's size, and nowhere else.
        tied = {a.size for a in declared if a.name is not None and a.name != name}
        sizes = sorted({s for s in (1, 2, size - 1, size + 1, 2 * size, 2 * size + 1, 3 * size,
                                    *tied) if s >= 1 and s != size})
        refused: list[str] = []
        ran = False
        for other in sizes:
            example = _at(module, args, kwargs, spec, name, other)
            if example is None:
                ran = True  # cannot tell: keep the refusal
                break
            try:
                out = _run(module, *example)
            except Exception as exc:
                refused.append(f"{other} ({type(exc).__name__}: "
                               f"{str(exc).strip().splitlines()[0][:120]})")
                continue
            ran = True
            structure = _structure(out)
            if structure != reference:
                at_example, there = _describe(reference, structure)
                verdict.reason = (
                    f"no single ONNX graph computes this model for every {name}: eager's "
                    f"result has {at_example} at {name}={size} but {there} at {name}={other}, "
                    "and an ONNX graph has a fixed number of outputs, each of a fixed rank. "
                    f"Next step: leave {name} static (or export once per size you need)."
                )
                return verdict
            break
        if not ran and refused:
            verdict.static.append(name)
            verdict.notes.append(
                f"{name} was declared dynamic, but the model runs only at {name}={size}: "
                f"eager raises at {', '.join(refused)}; {name} is written as the fixed size "
                f"{size} (onnxruntime rejects other sizes, as eager does)")
    return verdict
