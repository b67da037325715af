"""``precision=``: the model's weights and compute in another floating dtype.

The model is converted as ``model.to(dtype)`` converts it (every floating parameter and
buffer), on a copy: the caller's model is never touched. The copy is captured on the
example inputs cast to ``dtype``, so the captured program is the model as eager PyTorch
runs it in that precision, explicit upcasts in the model's code (``x.float()``) included.
:class:`Eager` is that run, the reference ``verify`` compares the file with.

How the file's floating inputs and outputs are typed (``precision_io``) is the passes'
work (``passes.precision_io``); which ops compute in float32 too
(``passes.float32_ops``).
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from pt2onnx.errors import InvalidInputError

# The target precisions, by the names export and export-llm take.
PRECISIONS: dict[str, torch.dtype | None] = {
    "keep": None, "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
# export-llm's short spellings, taken by both.
ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
PRECISION_IO = ("keep", "convert")
# The dtypes a conversion changes: torch's ``Module.to(dtype)`` converts these.
_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def precision_name(precision: Any) -> str:
    """The long name of ``precision`` (``"bf16"`` -> ``"bfloat16"``); a typed error naming
    the allowed values for anything else."""
    if isinstance(precision, torch.dtype):
        for name, dtype in PRECISIONS.items():
            if dtype == precision:
                return name
    if isinstance(precision, str) and precision in PRECISIONS:
        return precision
    if isinstance(precision, str) and precision in ALIASES:
        return ALIASES[precision]
    raise InvalidInputError(
        f"precision={precision!r} is not one pt2onnx converts to. Next step: pass one of "
        f"{', '.join(map(repr, PRECISIONS))} (or the short {', '.join(map(repr, ALIASES))}).")


def check_precision_io(precision_io: Any) -> str:
    if precision_io not in PRECISION_IO:
        raise InvalidInputError(
            f"precision_io={precision_io!r} is not one of 'keep' (the file's floating inputs "
            "and outputs keep the model's dtypes, cast inside the file; the default) or "
            "'convert' (they are in the target precision). Next step: pass one of those.")
    return str(precision_io)


def is_floating(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in _FLOATING


def cast_floats(tree: Any, dtype: torch.dtype) -> Any:
    """``tree`` with each floating tensor leaf cast to ``dtype`` (others as they are)."""
    return pytree.tree_map(lambda t: t.to(dtype) if is_floating(t) else t, tree)


def source_dtype(model: torch.nn.Module, args: Any, kwargs: Any) -> torch.dtype:
    """The dtype the model computes in as given: its floating weights' most common dtype;
    with none, its floating inputs' one dtype; else torch's default dtype."""
    counts = Counter(t.dtype for t in (*model.parameters(), *model.buffers())
                     if t.dtype in _FLOATING)
    if counts:
        return counts.most_common(1)[0][0]
    found = {t.dtype for t in pytree.tree_leaves((args, kwargs)) if is_floating(t)}
    return found.pop() if len(found) == 1 else torch.get_default_dtype()


def converted_copy(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A copy of ``model`` with its floating parameters and buffers in ``dtype``; the
    model itself when there is nothing to convert. The converted tensors are made
    directly (no copy in the old dtype first); other tensors are copied."""
    tensors = [*model.parameters(), *model.buffers()]
    if not any(t.dtype in _FLOATING and t.dtype != dtype for t in tensors):
        return model
    memo: dict[int, Any] = {}
    for t in tensors:
        if t.dtype not in _FLOATING or id(t) in memo:
            continue
        new = t.detach().to(dtype)
        if isinstance(t, torch.nn.Parameter):
            new = torch.nn.Parameter(new, requires_grad=t.requires_grad)
        memo[id(t)] = new
    try:
        return copy.deepcopy(model, memo)
    except Exception as exc:  # a module holding something deepcopy refuses
        raise InvalidInputError(
            f"precision= converts a copy of the model, and this model cannot be copied "
            f"({type(exc).__name__}: {exc}). Next step: convert it yourself "
            f"(model.to({dtype})) and export with precision='keep'.") from exc


class Eager(torch.nn.Module):
    """The model in the target precision, as the file computes it: floating inputs cast
    to ``dtype``; floating outputs cast as the file's are (``io``: ``keep`` returns those
    in ``dtype`` in ``source``, ``convert`` returns every floating output in ``dtype``)."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype, io: str,
                 source: torch.dtype) -> None:
        super().__init__()
        self.model, self.dtype, self.io, self.source = model, dtype, io, source

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        out = self.model(*cast_floats(args, self.dtype), **cast_floats(kwargs, self.dtype))
        if self.io == "convert":
            return cast_floats(out, self.dtype)
        return pytree.tree_map(
            lambda t: t.to(self.source) if isinstance(t, torch.Tensor) and t.dtype == self.dtype
            else t, out)


@dataclass
class Converted:
    """The model and example to capture for ``precision=``, and what the file's I/O and
    the eager reference need."""

    name: str  # "float16", ...
    dtype: torch.dtype
    io: str
    source: torch.dtype  # outputs in ``dtype`` are cast to this with io="keep"
    model: Any  # the converted copy (a callable stays itself)
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    eager: Eager


def convert(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str,
            io: str) -> Converted:
    """``model`` and its example in precision ``name`` (not ``keep``)."""
    dtype = PRECISIONS[name]
    assert dtype is not None
    if isinstance(model, torch.export.ExportedProgram):
        raise InvalidInputError(
            f"precision={name!r} converts an nn.Module or a callable before capture; an "
            "ExportedProgram is already captured in its dtypes. Next step: pass the module "
            "(or convert it with .to(...) before torch.export) and leave precision at 'keep'.")
    source = (source_dtype(model, args, kwargs) if isinstance(model, torch.nn.Module)
              else _inputs_dtype(args, kwargs))
    target = converted_copy(model, dtype) if isinstance(model, torch.nn.Module) else model
    wrapped = target if isinstance(target, torch.nn.Module) else _Call(target)
    return Converted(name, dtype, io, source, target, cast_floats(args, dtype),
                     cast_floats(kwargs, dtype), Eager(wrapped, dtype, io, source))


def _inputs_dtype(args: Any, kwargs: Any) -> torch.dtype:
    found = {t.dtype for t in pytree.tree_leaves((args, kwargs)) if is_floating(t)}
    return found.pop() if len(found) == 1 else torch.get_default_dtype()


class _Call(torch.nn.Module):
    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)
