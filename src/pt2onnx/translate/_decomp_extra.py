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
from pt2onnx.translate._registry import load_deferred

aten = torch.ops.aten
prims = torch.ops.prims

TABLE: dict[Any, Callable[..., Any]] = {}
# Ops whose entry here is tried before torch's decompositions, and replaces torch's in
# the run_decompositions table: torch's istft overlap-adds with index_put on complex
# tensors, which has no rule.
PREFERRED: set[Any] = set()


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


_TORCH_NN_ADDED = False


def find(op: Any) -> Callable[..., Any] | None:
    """pt2onnx's decomposition of ``op``, if it has one.

    torch_nn's linear_cross_entropy ops are added the first time a graph holds one of
    torch_nn's ops: importing the module that defines them costs about 20 ms, and a model
    that uses them has imported it already."""
    global _TORCH_NN_ADDED
    load_deferred(op)  # its rules' module may add its decomposition
    if not _TORCH_NN_ADDED and getattr(op, "namespace", None) == "torch_nn":
        _TORCH_NN_ADDED = True
        ops = _compat.linear_cross_entropy_ops()
        if ops is not None:
            TABLE[ops[0]] = _linear_cross_entropy_chunked
            TABLE[ops[1]] = _linear_cross_entropy_chunked_none
    return TABLE.get(op)


def _overlap_add(frames: torch.Tensor, hop: int) -> torch.Tensor:
    """(B, n, T) frames, frame t starting at t * hop, summed into (B, n + hop * (T - 1)).

    The frame is padded to r = ceil(n / hop) chunks of hop samples; output chunk j sums
    chunk k of frame j - k, so r shifted copies added together give the whole signal
    (r * n * T additions, no scatter)."""
    b, n, t = frames.shape
    r = -(-n // hop)
    if r * hop > n:
        frames = torch.nn.functional.pad(frames, (0, 0, 0, r * hop - n))
    chunks = frames.reshape(b, r, hop, t)
    out = torch.nn.functional.pad(chunks[:, 0], (0, r - 1))
    for k in range(1, r):
        out = out + torch.nn.functional.pad(chunks[:, k], (k, r - 1 - k))
    out = out.transpose(1, 2).reshape(b, (t + r - 1) * hop)
    return out[:, :n + hop * (t - 1)]


@_register(aten.istft.default)
def istft(x: torch.Tensor, n_fft: int, hop_length: int | None = None,
          win_length: int | None = None, window: torch.Tensor | None = None,
          center: bool = True, normalized: bool = False, onesided: bool | None = None,
          length: int | None = None, return_complex: bool = False) -> torch.Tensor:
    """istft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, bool center=True, bool normalized=False, bool? onesided=None, int? length=None, bool return_complex=False) -> Tensor

    torch's algorithm (SpectralOps.cpp): irfft of each frame, times the window, overlap-
    added, divided by the overlap-added squared window, trimmed (and padded to length).
    torch's own decomposition writes the overlap-add with index_put.
    """
    hop = hop_length if hop_length is not None else n_fft // 4
    win = win_length if win_length is not None else n_fft
    batched = x.dim() == 3
    if not batched:
        x = x.unsqueeze(0)
    frames_n = x.shape[-1]
    if onesided is None:
        onesided = x.shape[-2] != n_fft
    norm = "ortho" if normalized else "backward"
    if return_complex:
        # A complex signal (two-sided input): the real and imaginary parts of the
        # inverse DFT go through the overlap-add separately.
        pair = torch.view_as_real(torch.fft.ifft(x, n_fft, dim=-2, norm=norm))
        parts = [pair[..., 0], pair[..., 1]]
    else:
        if not onesided:
            x = x.narrow(-2, 0, n_fft // 2 + 1)
        parts = [torch.fft.irfft(x, n_fft, dim=-2, norm=norm)]
    w = window if window is not None else torch.ones(win, dtype=parts[0].dtype,
                                                      device=parts[0].device)
    if win != n_fft:
        left = (n_fft - win) // 2
        w = torch.nn.functional.pad(w, (left, n_fft - win - left))
    expected = n_fft + hop * (frames_n - 1)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = expected - n_fft // 2 if center else expected
    stop = min(end, expected)

    def fold(frames: torch.Tensor) -> torch.Tensor:
        return _overlap_add(frames, hop)[:, start:stop]

    def finish(y: torch.Tensor) -> torch.Tensor:
        if end > expected:
            y = torch.nn.functional.pad(y, (0, end - expected))
        return y if batched else y.squeeze(0)

    def spread(v: torch.Tensor) -> torch.Tensor:  # (n_fft,) -> (1, n_fft, frames)
        return v.reshape(1, n_fft, 1).expand(1, n_fft, frames_n)

    if not w.is_complex():
        envelope = fold(spread(w * w))
        outs = [finish(fold(part * w.reshape(n_fft, 1)) / envelope) for part in parts]
    else:
        # A complex window (return_complex=True only): complex products, the envelope
        # is the overlap-added w ** 2 (complex too), and a complex division.
        wp = torch.view_as_real(w)
        wr, wi = wp[..., 0], wp[..., 1]
        re, im = parts
        a = fold(re * wr.reshape(n_fft, 1) - im * wi.reshape(n_fft, 1))
        b = fold(re * wi.reshape(n_fft, 1) + im * wr.reshape(n_fft, 1))
        c, d = fold(spread(wr * wr - wi * wi)), fold(spread(2 * wr * wi))
        den = c * c + d * d
        outs = [finish((a * c + b * d) / den), finish((b * c - a * d) / den)]
    if return_complex:
        return torch.view_as_complex(torch.stack(outs, dim=-1))
    return outs[0]


PREFERRED.add(aten.istft.default)


def _final_states_shaped_like(op: Any) -> Callable[..., Any] | None:
    """torch's decomposition of a whole-sequence RNN op, with its final states reshaped
    to the initial states' shape ([layers * directions, batch, hidden]). torch 2.12's
    decompositions stack them one dim too many ((1, 1, B, H) for one layer), which eager
    never returns."""
    from torch._decomp import decomposition_table

    torch_fn = decomposition_table.get(op)
    if torch_fn is None:
        return None

    def fixed(input: torch.Tensor, hx: Any, *args: Any, **kwargs: Any) -> Any:
        out, *states = torch_fn(input, hx, *args, **kwargs)
        shapes = [h.shape for h in (hx if isinstance(hx, (list, tuple)) else [hx])]
        return (out, *(s.reshape(shape) for s, shape in zip(states, shapes)))

    return fixed


for _op in (aten.lstm.input, aten.gru.input, aten.rnn_tanh.input, aten.rnn_relu.input):
    _fn = _final_states_shaped_like(_op)
    if _fn is not None:
        TABLE[_op] = _fn
        PREFERRED.add(_op)
