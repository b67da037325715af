"""Calls torch cannot capture with general sizes or values, written another way while a
model is captured (:class:`CaptureRewrites`).

``torch._dim_arange(x, d)`` (the TorchScript exporter's ``arange(x.size(d))``) reads the
size as a Python int in C++, which specialises it: it becomes
``torch.arange(x.shape[d])``.

``addmm``, ``addmv`` and ``addr`` with ``alpha`` or ``beta`` given as a tensor:

torch reads a tensor ``alpha`` / ``beta`` as a Python number (``.item()``), and its own
``beta == 0`` check (a zero ``beta`` ignores ``input``, NaN included) then needs that
number: torch.export stops on a data-dependent guard, and only a trace on the example's
values was left. While a model is captured these calls become the same arithmetic on the
tensors, ``alpha * product + where(beta == 0, 0, beta * input)``, so ``alpha`` and
``beta`` stay graph inputs. ``baddbmm`` and ``addbmm`` need none of this: their rules
take the scalars as they are captured.

``x[i] = v`` with ``i`` a 0-d integer tensor:

torch reads such an index as a Python int (``i.item()``) and writes through
``select(x, d, i)``: torch.export stops on the data-dependent index, and only a trace
with the example's index baked in was left (PyTorch's ``test_copy_``). While a model is
captured, ``i`` becomes the one-element index ``i.reshape(1)``, an advanced index that
torch writes with ``index_put_``: the same elements (a negative ``i`` counts from the
end in both), and ``v``, broadcast to the selected shape, gets the size-1 dim the
advanced index adds where torch places it. Reading ``x[i]`` needs none of this:
torch.export keeps the index symbolic there.

``split`` and ``chunk`` along a dim whose size is symbolic:

torch returns a tuple whose length is the number of pieces, ``ceil(n / size)``, a
Python int: torch.export guards it to the example's count, and the dim is fixed or
refused (``torch.split(x, 2)[0]``, ``x.chunk(3)[-1]``). While a model is captured these
calls return a sequence whose piece at a constant index is a ``narrow`` of the input,
its start and length computed from the size (``_Pieces``). ``len()``, iteration and
slices of it are torch's own split, with its guard, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_PRODUCTS: dict[Any, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    torch.addmm: torch.mm, torch.Tensor.addmm: torch.mm,
    torch.addmv: torch.mv, torch.Tensor.addmv: torch.mv,
    torch.addr: torch.outer, torch.Tensor.addr: torch.outer,
}


def _scaled(product: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], inp: torch.Tensor,
            a: torch.Tensor, b: torch.Tensor, beta: Any = 1, alpha: Any = 1) -> torch.Tensor:
    prod = product(a, b)
    dtype = torch.result_type(inp, prod)
    if isinstance(alpha, torch.Tensor):
        scaled = prod * alpha.to(dtype)
    else:
        scaled = prod * alpha
    if isinstance(beta, torch.Tensor):
        beta = beta.to(dtype)
        added = torch.where(beta == 0, torch.zeros_like(inp, dtype=dtype), inp * beta)
    elif beta == 0:
        added = torch.zeros_like(inp, dtype=dtype)
    else:
        added = inp * beta
    return (added + scaled).to(dtype)


def _is_index_scalar(t: Any) -> bool:
    return (isinstance(t, torch.Tensor) and t.dim() == 0 and not t.is_floating_point()
            and not t.is_complex() and t.dtype != torch.bool)


def _result_dims(item: Any) -> int:
    """How many dims of the indexing result one basic index item makes."""
    return 1 if item is None or isinstance(item, slice) else 0


def _setitem_scalar_tensor_index(x: torch.Tensor, index: Any, value: Any) -> bool:
    """``x[index] = value`` with each 0-d integer tensor in ``index`` an advanced index
    of one element; False, doing nothing, where ``index`` is another kind (left to
    torch)."""
    items = list(index) if isinstance(index, tuple) else [index]
    if not any(_is_index_scalar(i) for i in items) or not all(
            i is None or i is Ellipsis or isinstance(i, (int, slice)) or _is_index_scalar(i)
            for i in items):
        return False
    if sum(i is Ellipsis for i in items) > 1:
        return False
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (x.dim() - consumed)
    tensors = [k for k, i in enumerate(items) if _is_index_scalar(i)]
    # The shape torch writes through (each scalar index a select), as ints or SymInts.
    selected = x[tuple(0 if k in tensors else i for k, i in enumerate(items))].shape
    # The advanced dim goes where the (adjacent) tensor indices stand, else first.
    adjacent = tensors == list(range(tensors[0], tensors[-1] + 1))
    where = sum(_result_dims(i) for i in items[:tensors[0]]) if adjacent else 0
    value = torch.as_tensor(value, dtype=x.dtype, device=x.device)
    while value.dim() > len(selected) and value.shape[0] == 1:
        value = value[0]  # torch drops a value's leading size-1 dims
    value = value.expand(selected).unsqueeze(where)
    advanced = tuple(i.reshape(1) if k in tensors else i for k, i in enumerate(items))
    torch.Tensor.__setitem__(x, advanced, value)
    return True


_SPLITS = {torch.split: "split_size_or_sections", torch.Tensor.split: "split_size",
           torch.chunk: "chunks", torch.Tensor.chunk: "chunks"}


class _Pieces(Sequence[torch.Tensor]):
    """The pieces of ``split(x, size, dim)`` (``chunk``: ``size = ceil(n / chunks)``),
    each one at a constant index a narrow of ``x``; anything else is torch's own split."""

    def __init__(self, mode: CaptureRewrites, func: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any], x: torch.Tensor, size: Any, dim: int) -> None:
        self._mode, self._call = mode, (func, args, kwargs)
        self._x, self._size, self._dim = x, size, dim
        self._real: tuple[torch.Tensor, ...] | None = None

    def _all(self) -> tuple[torch.Tensor, ...]:
        if self._real is None:
            func, args, kwargs = self._call
            self._mode.bypass += 1
            try:
                self._real = tuple(func(*args, **kwargs))
            finally:
                self._mode.bypass -= 1
        return self._real

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter(self._all())

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, int) or isinstance(index, bool):
            return self._all()[index]
        n, size = self._x.shape[self._dim], self._size
        count = torch.sym_max((n + size - 1) // size, 1)  # an empty dim is one empty piece
        k = index if index >= 0 else count + index
        if index not in (0, -1):  # eager's IndexError where there is no such piece
            torch._check(k >= 0 if index < 0 else k < count,
                         lambda: f"split: no piece {index} at this size")
        start = k * size
        index_ = (slice(None),) * self._dim + (slice(start, start + size),)
        return self._x[index_]


def _pieces(mode: CaptureRewrites, func: Any, args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> _Pieces | tuple[torch.Tensor] | None:
    """The lazy pieces of a split or chunk whose count depends on a symbolic size; None
    for any other call (a list of sizes, a static count)."""
    name = _SPLITS[func]
    if not args or not isinstance(args[0], torch.Tensor) or set(kwargs) - {name, "dim"}:
        return None
    x = args[0]
    rest = list(args[1:]) + [kwargs[k] for k in (name, "dim") if k in kwargs]
    if not 1 <= len(rest) <= 2 or not isinstance(rest[0], (int, torch.SymInt)) or isinstance(
            rest[0], bool) or not isinstance(rest[-1] if len(rest) == 2 else 0, int):
        return None
    dim = rest[1] if len(rest) == 2 else 0
    if x.dim() == 0 or not -x.dim() <= dim < x.dim():
        return None
    dim %= x.dim()
    n, given = x.shape[dim], rest[0]
    if not isinstance(n, torch.SymInt) or (isinstance(given, int) and given <= 0):
        # A static dim: torch's own split is general; a size of 0 or less: torch's own
        # error.
        return None
    if name == "chunks" and given == 1:
        # One piece at every size: the input itself. (The general formula asks for
        # ((2*n - 1) // n), a guard torch cannot prove, and on torch 2.14 the capture
        # then took a residue class it does not need: fuzz seed 4111, program 79.)
        return (x.view_as(x),)
    if name == "chunks":
        size = torch.sym_max((n + given - 1) // given, 1)
    else:
        size = given
    return _Pieces(mode, func, args, kwargs, x, size, dim)


class CaptureRewrites(TorchFunctionMode):
    """Rewrites the calls above while capturing."""

    def __init__(self, lazy_splits: bool = True) -> None:
        super().__init__()
        # Not under dynamo (strict capture): its graph holds only tensors.
        self.lazy_splits = lazy_splits
        self.bypass = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if self.bypass:
            return func(*args, **kwargs)
        if func in _SPLITS and self.lazy_splits:
            pieces = _pieces(self, func, args, kwargs)
            if pieces is not None:
                return pieces
        if func is torch._dim_arange and len(args) == 2 and not kwargs:
            return torch.arange(args[0].shape[args[1]], dtype=torch.int64)
        if (func is torch.Tensor.__setitem__ and len(args) == 3 and not kwargs
                and _setitem_scalar_tensor_index(*args)):
            return None
        product = _PRODUCTS.get(func)
        if product is not None and len(args) == 3 and set(kwargs) <= {"alpha", "beta"} and any(
                isinstance(kwargs.get(k), torch.Tensor) for k in ("alpha", "beta")):
            return _scaled(product, *args, **kwargs)
        return func(*args, **kwargs)
