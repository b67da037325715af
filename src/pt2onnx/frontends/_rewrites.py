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
"""

from __future__ import annotations

from collections.abc import Callable
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


class CaptureRewrites(TorchFunctionMode):
    """Rewrites the calls above while capturing."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if func is torch._dim_arange and len(args) == 2 and not kwargs:
            return torch.arange(args[0].shape[args[1]], dtype=torch.int64)
        product = _PRODUCTS.get(func)
        if product is not None and len(args) == 3 and set(kwargs) <= {"alpha", "beta"} and any(
                isinstance(kwargs.get(k), torch.Tensor) for k in ("alpha", "beta")):
            return _scaled(product, *args, **kwargs)
        return func(*args, **kwargs)
