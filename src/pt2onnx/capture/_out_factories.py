"""A factory call that writes into a tensor of the model's own (``out=``), while capturing.

``torch.arange(n, end, out=t)`` (PyTorch's legacy exporter tests: ``test_arange_start_out``
and its kin) resizes ``t`` to the result's length and fills it. torch.export's fake kernel
for that resize compares the old and new lengths; with an ``end`` read from a tensor the
new length is known only at run time, the comparison is a data-dependent guard, and the
capture stops (the trace that was left baked in the example's ``end``).

The result does not depend on ``t``'s old contents or size, only on its dtype. So while
capturing, the call is made without ``out`` and with ``dtype=t.dtype``, and ``t`` takes the
result with ``t.set_(result)``: the model's variable then holds what eager's resize gave
it, and the program reads the result from there. Only the factories (which all take a
dtype) are rewritten; ``out=`` elsewhere is captured as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_FACTORIES = frozenset({torch.arange, torch.range, torch.linspace, torch.logspace,
                        torch.zeros, torch.ones, torch.full, torch.empty, torch.eye})


class _OutFactories(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        out = kwargs.get("out")
        if func not in _FACTORIES or not isinstance(out, torch.Tensor):
            return func(*args, **kwargs)
        del kwargs["out"]
        kwargs.setdefault("dtype", out.dtype)
        kwargs.setdefault("device", out.device)
        result = func(*args, **kwargs)
        with torch.no_grad():
            return out.set_(result)


@contextlib.contextmanager
def functional_out_factories() -> Iterator[None]:
    """Captures ``factory(..., out=t)`` as ``t.set_(factory(..., dtype=t.dtype))``."""
    with _OutFactories():
        yield
