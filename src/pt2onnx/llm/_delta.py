"""The gated delta rule of Qwen3.5's linear-attention layers as one scan over the tokens.

transformers computes a prefill with its chunked form, whose Python loop runs once per
64 tokens (a count a single graph can't hold for a dynamic length), and a one-token
decode step with its recurrent form, a Python loop over the tokens. Both compute the
same recurrence: per token ``t`` and value head, the state ``S [dk, dv]`` is decayed by
``exp(g_t)``, corrected toward ``v_t`` along ``k_t`` with the rate ``beta_t`` (the
delta rule), and read by ``q_t``. Written as torch's ``scan`` higher-order op over the
sequence dim, the recurrence is captured once for every length (size 1 and an empty
past included) and becomes one ONNX ``Scan``.

``replaced(model)`` swaps the model's own functions for this one while the model is
run or captured, and restores them after.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch

# The modeling module's names of the chunked and the recurrent forms (transformers 5.x).
_FORMS = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    # As transformers' (and the FLA library's): x / sqrt(sum(x^2) + 1e-6).
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + 1e-6)


def _step(state: torch.Tensor, xs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """One token: ``state [B, H, dk, dv]``; ``q, k [B, H, dk]``, ``v [B, H, dv]``,
    ``beta, g [B, H]`` -> the new state and the read ``[B, H, dv]``."""
    q, k, v, beta, g = xs
    state = state * g.exp()[..., None, None]
    remembered = (state * k.unsqueeze(-1)).sum(dim=-2)
    correction = (v - remembered) * beta.unsqueeze(-1)
    state = state + k.unsqueeze(-1) * correction.unsqueeze(-2)
    read = (state * q.unsqueeze(-1)).sum(dim=-2)
    # scan requires a carry that aliases no input.
    return state.clone(), read


def gated_delta_rule(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     g: torch.Tensor, beta: torch.Tensor, chunk_size: int | None = None,
                     initial_state: torch.Tensor | None = None,
                     output_final_state: bool = False,
                     use_qk_l2norm_in_kernel: bool = False, **_: Any,
                     ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """transformers' signature: ``query, key [B, S, Hk, dk]``, ``value [B, S, Hv, dv]``,
    ``g, beta [B, S, Hv]``, ``initial_state [B, Hv, dk, dv]`` -> ``([B, S, Hv, dv], the
    final state or None)``; computed in float32."""
    from torch._higher_order_ops.scan import scan

    dtype = query.dtype
    heads_k, heads_v = key.shape[2], value.shape[2]
    if heads_k != heads_v:  # each query/key head serves consecutive value heads
        query = query.repeat_interleave(heads_v // heads_k, dim=2)
        key = key.repeat_interleave(heads_v // heads_k, dim=2)
    # Tokens first: scan walks dim 0.
    q, k, v, b, decay = (x.transpose(0, 1).to(torch.float32)
                         for x in (query, key, value, beta, g))
    if use_qk_l2norm_in_kernel:
        q, k = _l2norm(q), _l2norm(k)
    q = q / (q.shape[-1] ** 0.5)
    if initial_state is None:
        state = torch.zeros(value.shape[0], heads_v, key.shape[-1], value.shape[-1],
                            dtype=torch.float32, device=value.device)
    else:
        state = initial_state.to(torch.float32)
    final, out = scan(_step, state, [q, k, v, b, decay])
    out = out.transpose(0, 1).contiguous().to(dtype)
    return out, (final if output_final_state else None)


@contextlib.contextmanager
def replaced(model: torch.nn.Module) -> Iterator[None]:
    """The model's gated-delta-rule forms replaced by ``gated_delta_rule`` (the layers
    call them as their modeling module's globals)."""
    modules = {sys.modules[type(m).__module__] for m in model.modules()}
    saved = [(mod, name, getattr(mod, name)) for mod in modules for name in _FORMS
             if hasattr(mod, name)]
    for mod, name, _fn in saved:
        setattr(mod, name, gated_delta_rule)
    try:
        yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)
