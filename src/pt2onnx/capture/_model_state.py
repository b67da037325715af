"""An export leaves the model as it found it.

Capturing runs the model (an eager recording, or torch.export's trace), and a model's
own code may change itself while it runs: transformers installs output-capturing hooks
and marks them installed, YOLO's Detect head caches anchors keyed by the input shape.
These context managers put such changes back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


def _holds_fake(value: Any) -> bool:
    """Whether ``value`` is, or holds, a tensor that only exists while tracing."""
    from torch._subclasses.fake_tensor import FakeTensor

    tracing: tuple[type, ...] = (FakeTensor,)
    try:
        from torch._subclasses.functional_tensor import FunctionalTensor

        tracing += (FunctionalTensor,)
    except ImportError:  # pragma: no cover - every tested torch has it
        pass
    leaves = torch.utils._pytree.tree_leaves(value) if isinstance(
        value, (tuple, list, dict)) else [value]
    return any(isinstance(leaf, tracing) for leaf in leaves)


_HOOK_DICTS = ("_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
               "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_backward_hooks",
               "_backward_pre_hooks")


@contextlib.contextmanager
def preserved_state(model: Any) -> Iterator[None]:
    """An export leaves the model as it found it: each module's hooks, attributes,
    training flag and parameters' ``requires_grad`` are put back. transformers installs output-capturing
    hooks during a forward; left behind by the captured run, they broke Segformer's next
    eager call."""
    if not isinstance(model, torch.nn.Module):
        yield
        return
    modules = list(model.modules())
    hooks = [(m, {k: dict(d) for k in _HOOK_DICTS if isinstance(d := m.__dict__.get(k), dict)})
             for m in modules]
    training = [(m, m.training) for m in modules]
    grads = [(p, p.requires_grad) for p in model.parameters()]
    try:
        # Every attribute the export's runs wrote goes back too: transformers 5.24 marks
        # its hooks installed with a flag, which must not outlive the hooks.
        with no_leaked_fake_tensors(model, everything=True):
            yield
    finally:
        for m, saved in hooks:
            for key, before in saved.items():
                now = m.__dict__.get(key)
                if isinstance(now, dict) and now.keys() != before.keys():
                    now.clear()
                    now.update(before)
        for m, flag in training:
            m.training = flag
        for p, flag in grads:
            if p.requires_grad != flag:
                p.requires_grad_(flag)


@contextlib.contextmanager
def no_leaked_fake_tensors(module: Any, everything: bool = False) -> Iterator[None]:
    """Undoes attribute writes that leave tracing tensors on the model.

    A forward that caches a tensor on ``self`` (YOLO's Detect head keeps its anchors
    and strides, keyed by the input shape it saw) stores a FakeTensor while
    torch.export traces it. Left there, the next export or eager call reads the fake
    tensor as if it were real. In each module where that happened, every attribute the
    capture wrote gets its earlier value back (or goes, if the capture added it), so
    the cache and its key stay consistent. With ``everything``, every module's writes
    are undone (the recorded eager run: an export leaves the model as it found it)."""
    if not isinstance(module, torch.nn.Module):
        yield
        return
    skip = ("_parameters", "_buffers", "_modules")
    before = [(m, dict(m.__dict__)) for m in module.modules()]
    try:
        yield
    finally:
        for m, saved in before:
            changed = [k for k, v in m.__dict__.items()
                       if k not in skip and (k not in saved or saved[k] is not v)]
            if not everything and not any(_holds_fake(m.__dict__[k]) for k in changed):
                continue
            for key in changed:
                if key in saved:
                    m.__dict__[key] = saved[key]
                else:
                    del m.__dict__[key]
