"""scaled_dot_product_attention with ``is_causal`` a SymBool, while capturing.

Models compute ``is_causal`` from a length (transformers: ``q_len > 1 and mask is None``,
whisper: ``mask is not None and n_ctx > 1``); with a dynamic length it is a SymBool,
which sdpa refuses. ``_dynamic._export`` captures inside :class:`SymBoolCausal`.
"""

from __future__ import annotations

import sys
from typing import Any

import torch


class SymBoolCausal:
    """Lets ``scaled_dot_product_attention`` take ``is_causal`` as a SymBool while capturing.

    transformers computes ``is_causal = q_len > 1 and attention_mask is None and ...``,
    whisper ``is_causal = mask is not None and n_ctx > 1``: with a dynamic length,
    Python's ``and`` hands over the SymBool ``n > 1`` itself, and sdpa refuses it.
    - With an explicit mask it can only be false (sdpa refuses a mask together with
      is_causal=True).
    - A SymBool that is a constant is read as one.
    - Otherwise it is not evaluated (that would guard on the length, and fix it at the
      example's size when the example is 1): the causal mask is written out with the
      condition inside, ``i + (0 if causal else S) >= j``, right on both sides.

    The function is replaced in ``torch.nn.functional`` and in every loaded module that
    imported it by name (``from torch.nn.functional import scaled_dot_product_attention``,
    as whisper does).
    """

    _NAME = "scaled_dot_product_attention"

    def __enter__(self) -> None:
        functional = torch.nn.functional
        self._original = original = functional.scaled_dot_product_attention

        def sdpa(*args: Any, **kwargs: Any) -> Any:
            if len(args) > 5:
                kwargs["is_causal"], args = args[5], args[:5] + args[6:]
            causal = kwargs.get("is_causal", False)
            if isinstance(causal, torch.SymBool):
                mask = kwargs.pop("attn_mask", args[3] if len(args) > 3 else None)
                args = args[:3]
                kwargs["is_causal"] = False
                expr = causal.node.expr
                if mask is None and getattr(expr, "free_symbols", None):
                    mask = _causal_mask(args[0], args[1], causal)
                elif mask is None:
                    kwargs["is_causal"] = bool(causal)
                kwargs["attn_mask"] = mask
            return original(*args, **kwargs)

        self._replaced = [namespace for namespace in _namespaces_holding(self._NAME, original)]
        for namespace in self._replaced:
            namespace[self._NAME] = sdpa

    def __exit__(self, *exc: Any) -> None:
        for namespace in self._replaced:
            namespace[self._NAME] = self._original


def _namespaces_holding(name: str, value: Any) -> list[dict[str, Any]]:
    """The loaded modules' namespaces whose ``name`` is ``value``."""
    found = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and namespace.get(name) is value:
            found.append(namespace)
    return found


def _causal_mask(q: torch.Tensor, k: torch.Tensor, causal: torch.SymBool) -> torch.Tensor:
    """sdpa's causal mask (query i sees key j <= i) when ``causal``, all True when not,
    without deciding ``causal``."""
    rows, cols = q.shape[-2], k.shape[-2]
    ite: Any = torch.sym_ite
    reach = cols * ite(causal, 0, 1)  # sym_ite wants both sides of one type
    i = torch.arange(rows, device=q.device).unsqueeze(-1)
    mask: torch.Tensor = i + reach >= torch.arange(cols, device=q.device)
    return mask
