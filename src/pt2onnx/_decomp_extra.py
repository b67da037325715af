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

from pt2onnx import _compat

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


def _linear_cross_entropy(x: torch.Tensor, linear_weight: torch.Tensor, target: torch.Tensor,
                          linear_bias: torch.Tensor | None, weight: torch.Tensor | None,
                          reduction: str, ignore_index: int,
                          label_smoothing: float) -> torch.Tensor:
    """What the chunked op computes, unchunked: a linear layer, then cross entropy.

    Chunking only bounds memory in eager; one Gemm and one softmax give the same loss.
    Halves accumulate in float32, as the op's default acc_dtype policy does.
    """
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    logits = torch.nn.functional.linear(
        x.to(acc), linear_weight.to(acc), None if linear_bias is None else linear_bias.to(acc))
    loss = torch.nn.functional.cross_entropy(
        logits, target, None if weight is None else weight.to(acc), ignore_index=ignore_index,
        reduction=reduction, label_smoothing=label_smoothing)
    return loss.to(x.dtype)


def _linear_cross_entropy_chunked(
    x: torch.Tensor, linear_weight: torch.Tensor, target: torch.Tensor,
    linear_bias: torch.Tensor | None, weight: torch.Tensor | None, reduction: str,
    ignore_index: int, label_smoothing: float, batch_chunk_size: int, acc_policy: str,
    acc_dtype: Any, allow_retain_graph: bool, compute_input_grad: bool,
    compute_linear_weight_grad: bool, compute_linear_bias_grad: bool,
) -> tuple[torch.Tensor, ...]:
    """torch_nn::_linear_cross_entropy_batch_chunked: (loss, grad_input, grad_linear_weight, grad_linear_bias)

    An exported (inference) graph asks for no gradients: those outputs are the
    op's empty placeholders. Gradients are a training-time result ONNX export
    does not compute.
    """
    if compute_input_grad or compute_linear_weight_grad or compute_linear_bias_grad:
        raise NotImplementedError("linear_cross_entropy gradients are not exported")
    loss = _linear_cross_entropy(x, linear_weight, target, linear_bias, weight, reduction,
                                 ignore_index, label_smoothing)
    return (loss, x.new_empty((0, 0)), x.new_empty((0, 0)), x.new_empty((0,)))


def _linear_cross_entropy_chunked_none(
    x: torch.Tensor, linear_weight: torch.Tensor, target: torch.Tensor,
    linear_bias: torch.Tensor | None, weight: torch.Tensor | None, ignore_index: int,
    batch_chunk_size: int, acc_policy: str, acc_dtype: Any,
) -> torch.Tensor:
    """torch_nn::_linear_cross_entropy_batch_chunked_no_reduction: the per-sample loss"""
    return _linear_cross_entropy(x, linear_weight, target, linear_bias, weight, "none",
                                 ignore_index, 0.0)


_LCE = _compat.linear_cross_entropy_ops()
if _LCE is not None:
    TABLE[_LCE[0]] = _linear_cross_entropy_chunked
    TABLE[_LCE[1]] = _linear_cross_entropy_chunked_none
