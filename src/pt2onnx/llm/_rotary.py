"""The model's rotary, seen from export-llm's fused wrapper (``_attention``): which
modeling modules' ``apply_rotary_pos_emb`` it calls, whether that turns pairs of dims
(interleaved) or halves, and, while the wrapper runs, a record of which rotated query
and key came from which inputs, with the rotation written as ``pt2onnx::rotary`` where
the attention op can't take it (``rules/rotary.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from pt2onnx.rules import gqa as _gqa_rule


def _rotary_functions(model: torch.nn.Module) -> list[tuple[Any, Any]]:
    """(modeling module, its ``apply_rotary_pos_emb``) for each modeling module the
    model's layers come from that has one."""
    import sys

    names = {type(m).__module__ for m in model.modules() if hasattr(m, "layer_idx")}
    found = []
    for name in sorted(names):
        module = sys.modules.get(name)
        fn = getattr(module, "apply_rotary_pos_emb", None)
        if module is not None and callable(fn):
            found.append((module, fn))
    return found


def interleaved(model: torch.nn.Module, table: tuple[torch.Tensor, torch.Tensor]) -> bool:
    """Whether the model's ``apply_rotary_pos_emb`` turns each pair of dims by one angle
    (interleaved) rather than the two halves, found by running it once on random query
    and key with the rotary module's own table (``[1, positions, R]``, its halves
    equal); False where it does neither or can't be run (then the rotary stays the
    model's unless the halves' form agrees, which ``check`` finds)."""
    cos_half, sin_half = table
    n = min(8, cos_half.shape[0])
    cos, sin = cos_half[:n].float(), sin_half[:n].float()
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, n, 2 * cos.shape[-1], generator=gen)
    k = torch.randn(1, 1, n, 2 * cos.shape[-1], generator=gen)
    styles = set()
    for _, fn in _rotary_functions(model):
        try:
            with torch.no_grad():
                out = fn(q, k, torch.cat([cos, cos], -1)[None], torch.cat([sin, sin], -1)[None])
        except Exception:
            return False
        if not isinstance(out, tuple) or len(out) != 2 or out[0].shape != q.shape:
            return False
        for style in (False, True):
            want = _gqa_rule.rotate(q, cos[None, None], sin[None, None], style)
            if torch.allclose(out[0].float(), want, rtol=1e-4, atol=1e-5):
                styles.add(style)
    return styles == {True}


@contextlib.contextmanager
def recording(model: torch.nn.Module, cache: Any) -> Iterator[None]:
    """Each modeling module's ``apply_rotary_pos_emb``, wrapped to note which rotated
    query and key came from which inputs (the rotation still runs: where the op
    takes it over, its graph is left unread)."""
    patched: list[tuple[Any, Any]] = []
    for module, original in _rotary_functions(model):

        def record(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            # transformers' usual (q, k, cos, sin) form only; other families name
            # another function so (GPT-J rotates one tensor at a time).
            plain = len(args) == 4 and set(kwargs) <= {"unsqueeze_dim"} \
                and kwargs.get("unsqueeze_dim", 1) == 1
            out = _as_op(cache, *args) if plain else None
            if out is None:
                out = _original(*args, **kwargs)
            if plain and isinstance(out, tuple) and len(out) == 2:
                # out[0] is held too, so that its id is not reused in this forward.
                cache.rotated[id(out[0])] = (args[0], args[1], out[1], out[0])
                cache.last_rotated = (args[0], args[1], out[1], out[0])
            return out

        patched.append((module, original))
        vars(module)["apply_rotary_pos_emb"] = record
    try:
        yield
    finally:
        for module, original in patched:
            module.apply_rotary_pos_emb = original


def _as_op(cache: Any, query: Any, key: Any, cos: Any,
           sin: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The rotated query and key as two ``pt2onnx::rotary`` (com.microsoft
    RotaryEmbedding, ``rules/rotary.py``) at the wrapper's ``position_ids``, from its one
    table, where the wrapper asks for it and the call fits: query and key ``[B, N, S,
    D]`` in the table's dtype, ``cos`` ``[B, S, R]`` of the table's width. Where the
    attention op then rotates them itself, these are left unread. None otherwise (the
    model's own rotation runs); ``agrees`` decides whether the model's rotation is this
    one (``_fusion.check`` then captures without it)."""
    positions = getattr(cache, "position_ids", None)
    tables = cache.tables
    if not cache.rotary_op or positions is None or not tables or list(tables) != [None]:
        return None
    cos_cache, sin_cache = tables[None]
    if not all(isinstance(t, torch.Tensor) for t in (query, key, cos, sin)) \
            or query.dim() != 4 or key.dim() != 4 or cos.dim() != 3 or positions.dim() != 2 \
            or query.dtype != cos_cache.dtype or key.dtype != cos_cache.dtype \
            or cos.shape[-1] != 2 * cos_cache.shape[-1] \
            or query.shape[-1] < cos.shape[-1] or key.shape[-1] < cos.shape[-1]:
        return None
    turn = torch.ops.pt2onnx.rotary
    return (turn(query, positions, cos_cache, sin_cache, interleaved=cache.interleaved),
            turn(key, positions, cos_cache, sin_cache, interleaved=cache.interleaved))
