"""Which OpInfo entries we test, in which dtypes, and what is known to fail.

Each :class:`OpCase` names one entry of ``torch.testing._internal.common_methods_invocations.op_db``
(``name`` or ``name.variant``). An :class:`XFail` says which (dtype, opset, sample) cases
fail and why; it becomes a strict xfail. A :class:`Skip` does the same for cases that
cannot run at all (for example a crash in a dependency); it always carries a reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from opinfo_harness import DEFAULT_ATOL, DEFAULT_RTOL

f32, f16, i64, b8 = torch.float32, torch.float16, torch.int64, torch.bool
MIN_OPSET = 17


@dataclass(frozen=True)
class XFail:
    reason: str
    dtypes: tuple[torch.dtype, ...] | None = None
    opsets: tuple[int, ...] | None = None
    samples: tuple[int, ...] | None = None

    def matches(self, dtype: torch.dtype, opset: int, index: int) -> bool:
        return (
            (self.dtypes is None or dtype in self.dtypes)
            and (self.opsets is None or opset in self.opsets)
            and (self.samples is None or index in self.samples)
        )


@dataclass(frozen=True)
class Skip(XFail):
    pass


@dataclass(frozen=True)
class OpCase:
    name: str
    dtypes: tuple[torch.dtype, ...] = (f32,)
    xfails: tuple[XFail, ...] = ()
    # dtype -> (atol, rtol)
    tol: dict[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    # Random ops: compare shapes and dtypes only.
    shape_only: bool = False
    opsets: tuple[int, ...] | None = None

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        default = (1e-2, 1e-2) if dtype == f16 else (DEFAULT_ATOL, DEFAULT_RTOL)
        return self.tol.get(dtype, default)

    def marks(self, dtype: torch.dtype, opset: int, index: int) -> Iterator[Any]:
        for x in self.xfails:
            if x.matches(dtype, opset, index):
                if isinstance(x, Skip):
                    yield pytest.mark.skip(reason=x.reason)
                else:
                    yield pytest.mark.xfail(reason=x.reason, strict=True)
                return


def case(name: str, *dtypes: torch.dtype, xfails: tuple[XFail, ...] = (),
         **kw: Any) -> OpCase:
    return OpCase(name, dtypes or (f32,), xfails, **kw)


def xfail(reason: str, *, dtypes: Any = None, opsets: Any = None, samples: Any = None) -> XFail:
    return XFail(reason, _tuple(dtypes), _tuple(opsets), _tuple(samples))


def skip(reason: str, *, dtypes: Any = None, opsets: Any = None, samples: Any = None) -> Skip:
    return Skip(reason, _tuple(dtypes), _tuple(opsets), _tuple(samples))


def _tuple(x: Any) -> Any:
    if x is None:
        return None
    return tuple(x) if isinstance(x, (list, tuple, range)) else (x,)


CASES: list[OpCase] = [
]
