"""pt2onnx's own decompositions, in Python over ATen: the last try for an op without a rule.

Each entry is ``op -> fn(*args, **kwargs)`` with the op's signature; it is
traced like torch's own decompositions (``_decomp.trace``), so it may call any
ATen op, and an op it calls that has no rule is decomposed again. Add an entry
here for an op that neither a rule nor torch's tables cover.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

aten = torch.ops.aten
prims = torch.ops.prims

TABLE: dict[Any, Callable[..., Any]] = {}


def _register(op: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        TABLE[op] = fn
        return fn

    return wrap


@_register(aten.var_mean.correction)
def var_mean(
    x: torch.Tensor, dim: Sequence[int] | None = None, *, correction: Any = None,
    keepdim: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)

    torch registers only a decomposition into prims; var and mean have rules.
    """
    var = aten.var.correction(x, dim, correction=correction, keepdim=keepdim)
    mean = aten.mean.dim(x, dim, keepdim) if dim is not None else aten.mean.default(x)
    if dim is None and keepdim:
        mean = mean.reshape([1] * x.dim())
    return var, mean


@_register(aten.erfc.default)
def erfc(x: torch.Tensor) -> torch.Tensor:
    """erfc(Tensor self) -> Tensor

    ONNX has Erf only. ``1 - erf(x)`` loses relative precision where erfc is
    tiny (x > ~4 in float32) but stays within float32's absolute error.
    """
    return 1 - aten.erf.default(x)


@_register(prims.prod.default)
def prod(x: torch.Tensor, dims: Sequence[int], *, output_dtype: Any = None) -> torch.Tensor:
    """prod(Tensor inp, int[]? dims, *, ScalarType? output_dtype=None) -> Tensor

    torch's registered cumprod decomposition ends in this prim.
    """
    out = x
    for d in sorted((d % max(x.dim(), 1) for d in dims), reverse=True):
        out = aten.prod.dim_int(out, d)
    return out if output_dtype is None else out.to(output_dtype)


@_register(aten.logcumsumexp.default)
def logcumsumexp(x: torch.Tensor, dim: int) -> torch.Tensor:
    """logcumsumexp(Tensor self, int dim) -> Tensor

    Each prefix as one masked logsumexp (n x n along ``dim``, as torch's cumprod
    decomposition does), which is as stable as logsumexp itself.
    """
    if x.dim() == 0:
        return x.clone()
    last = x.movedim(dim, -1)
    n = last.shape[-1]
    index = torch.arange(n, device=x.device)
    keep = index.unsqueeze(0) <= index.unsqueeze(1)  # [i, j]: j is in prefix i
    rows = last.unsqueeze(-2).expand(*last.shape[:-1], n, n)
    masked = torch.where(keep, rows, torch.full((), float("-inf"), dtype=x.dtype))
    return torch.logsumexp(masked, -1).movedim(-1, dim)
