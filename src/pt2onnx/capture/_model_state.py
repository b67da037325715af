"""An export leaves the model as it found it.

Capturing runs the model (an eager recording, or torch.export's trace), and a model's
own code may change itself while it runs: transformers installs output-capturing hooks
and marks them installed, YOLO's Detect head caches anchors keyed by the input shape.
These context managers put such changes back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.nn.modules.lazy import LazyModuleMixin

from pt2onnx.errors import CaptureError


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
               "_backward_pre_hooks", "_state_dict_hooks", "_state_dict_pre_hooks",
               "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")


# What "as it found it" means for a lazy module (torch.nn.LazyLinear and every other
# LazyModuleMixin): its first forward materializes its parameters in place (random
# values), removes its own ``_initialize_hook`` / ``_load_hook`` and may change its
# class (LazyLinear -> Linear). That cannot be undone without throwing the values away,
# and the written file holds exactly those values: undone, the next eager call would draw
# new ones and no longer match the file. So a lazy module the export materialized is left
# materialized, whole, exactly as a first eager call leaves it (torch.compile does the
# same); materialize_lazy does that with one eager call on the example before capture, so
# no capture tier ever sees an uninitialized parameter. A lazy module with nothing to
# materialize (no parameters left uninitialized) is put back whole: its hooks, its
# attributes and its class, so its own first eager call still works.
def _pending_lazy(module: torch.nn.Module) -> bool:
    """A lazy module whose first forward has not run yet, with parameters to materialize."""
    return (isinstance(module, LazyModuleMixin) and "_initialize_hook" in module.__dict__
            and module.has_uninitialized_params())


def _materialized(module: torch.nn.Module) -> bool:
    """A lazy module whose first forward completed, with real (not tracing) tensors."""
    if "_initialize_hook" in module.__dict__:
        return False
    if isinstance(module, LazyModuleMixin) and module.has_uninitialized_params():
        return False
    tensors = list(module.parameters(recurse=False)) + list(module.buffers(recurse=False))
    return not any(_holds_fake(t) for t in tensors)


def materialize_lazy(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """Materializes the model's lazy modules by one eager call on the example, as the
    model's first eager call would (see the comment above); returns a report line, or
    none where there was nothing to materialize. The call runs in eval mode and without
    gradients on copies of the inputs, so it changes nothing else (batch norm statistics
    included); every other change it makes is put back."""
    if not isinstance(model, torch.nn.Module):
        return []
    pending = [name or type(model).__name__ for name, m in model.named_modules()
               if _pending_lazy(m)]
    if not pending:
        return []
    # Copies of the inputs: a forward that writes into one must not change the example.
    args, kwargs = torch.utils._pytree.tree_map_only(
        torch.Tensor, lambda t: t.clone(), (args, kwargs))
    try:
        with preserved_state(model), torch.no_grad():
            model.eval()
            model(*args, **kwargs)
    except Exception as exc:
        raise CaptureError(
            f"the model's lazy modules ({', '.join(pending)}) materialize their parameters "
            f"on the first forward, and that eager call on the example failed: "
            f"{type(exc).__name__}: {exc}. Next step: call the model once on an example "
            "before exporting it (or fix the error above).") from exc
    return [f"lazy modules materialized by one eager call on the example, as a first eager "
            f"call would: {', '.join(pending)}"]


@contextlib.contextmanager
def preserved_state(model: Any) -> Iterator[None]:
    """An export leaves the model as it found it: each module's hooks, attributes, class,
    training flag, replaced buffers and parameters' ``requires_grad`` are put back (a lazy module the run
    materialized stays materialized, see above). transformers installs output-capturing
    hooks during a forward; left behind by the captured run, they broke Segformer's next
    eager call."""
    if not isinstance(model, torch.nn.Module):
        yield
        return
    modules = list(model.modules())
    # Only the hook dicts that hold something are copied (most are empty: 11 per module).
    hooks = [(m, {k: dict(d) if d else None for k in _HOOK_DICTS
                  if isinstance(d := m.__dict__.get(k), dict)}) for m in modules]
    classes = [(m, type(m)) for m in modules]
    lazy = [m for m in modules if _pending_lazy(m)]
    training = [(m, m.training) for m in modules]
    # A buffer the forward replaces (self.grid = make_grid(h, w)) goes back too; one it
    # changes in place keeps its object, and is not touched here.
    buffers = [(m, dict(m._buffers), set(m._non_persistent_buffers_set)) for m in modules]
    # Each module's own parameters (a shared one twice: restoring it twice is harmless),
    # without a second walk of the module tree.
    grads = [(p, p.requires_grad) for m in modules for p in m._parameters.values()
             if p is not None]
    try:
        # Every attribute the export's runs wrote goes back too: transformers 5.24 marks
        # its hooks installed with a flag, which must not outlive the hooks.
        with no_leaked_fake_tensors(model, everything=True,
                                    keep=lambda: [m for m in lazy if _materialized(m)],
                                    modules=modules):
            yield
    finally:
        kept = {id(m) for m in lazy if _materialized(m)}
        for m, saved in hooks:
            if id(m) in kept:
                continue
            for key, before in saved.items():
                now = m.__dict__.get(key)
                if not isinstance(now, dict):
                    continue
                if before is None:
                    if now:
                        now.clear()
                elif now.keys() != before.keys():
                    now.clear()
                    now.update(before)
        for m, cls in classes:
            if id(m) not in kept and type(m) is not cls:
                m.__class__ = cls
        for m, flag in training:
            if m.training is not flag:
                m.training = flag
        for m, saved_buffers, non_persistent in buffers:
            if id(m) in kept or (m._buffers.keys() == saved_buffers.keys() and all(
                    m._buffers[k] is v for k, v in saved_buffers.items())):
                continue
            m._buffers.clear()
            m._buffers.update(saved_buffers)
            m._non_persistent_buffers_set.clear()
            m._non_persistent_buffers_set.update(non_persistent)
        for p, flag in grads:
            if p.requires_grad != flag:
                p.requires_grad_(flag)


@contextlib.contextmanager
def no_leaked_fake_tensors(module: Any, everything: bool = False,
                           keep: Callable[[], list[Any]] = list,
                           modules: list[torch.nn.Module] | None = None) -> Iterator[None]:
    """Undoes attribute writes that leave tracing tensors on the model.

    A forward that caches a tensor on ``self`` (YOLO's Detect head keeps its anchors
    and strides, keyed by the input shape it saw) stores a FakeTensor while
    torch.export traces it. Left there, the next export or eager call reads the fake
    tensor as if it were real. In each module where that happened, every attribute the
    capture wrote gets its earlier value back (or goes, if the capture added it), so
    the cache and its key stay consistent. With ``everything``, every module's writes
    are undone (the recorded eager run: an export leaves the model as it found it).
    An attribute the run deleted comes back too (a lazy module deletes its
    ``_initialize_hook``). ``keep`` names, once the run is over, the modules whose
    writes stay (the lazy modules it materialized); ``modules`` is ``module.modules()``
    where the caller has it already."""
    if not isinstance(module, torch.nn.Module):
        yield
        return
    skip = ("_parameters", "_buffers", "_modules")
    before = [(m, dict(m.__dict__)) for m in (module.modules() if modules is None else modules)]
    try:
        yield
    finally:
        kept = {id(m) for m in keep()}
        for m, saved in before:
            if id(m) in kept:
                continue
            changed = [k for k, v in m.__dict__.items()
                       if k not in skip and (k not in saved or saved[k] is not v)]
            deleted = [k for k in saved if k not in m.__dict__]
            if not everything and not any(_holds_fake(m.__dict__[k]) for k in changed):
                continue
            for key in changed + deleted:
                if key in saved:
                    m.__dict__[key] = saved[key]
                else:
                    del m.__dict__[key]


def refill_state(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """One eager call on the example, without gradients, whose writes to the model stay
    (the export's ``preserved_state`` puts them back when it ends); returns the
    attributes it changed, ``module.attr`` each, or none.

    A cache keyed by the input shape (YOLO's Detect head: ``if self.shape != shape:``
    refill ``self.anchors``) left by an eager call at another size makes torch.export
    compare a dynamic size with that stale one (``batch != 3``), a guard no declared
    range holds. Refilled at the example's shape, the cache is compared with the
    example, which a capture at a grown example reads as a change (so it traces the
    refill, the general path)."""
    if not isinstance(model, torch.nn.Module):
        return []
    skip = ("_parameters", "_buffers", "_modules", *_HOOK_DICTS)
    before = [(name, m, dict(m.__dict__), dict(m._buffers)) for name, m in model.named_modules()]
    args, kwargs = torch.utils._pytree.tree_map_only(
        torch.Tensor, lambda t: t.clone(), (args, kwargs))
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    except Exception:  # the capture's own error is the one to show
        return []
    changed = []
    for name, m, saved, buffers in before:
        for key, value in [*m.__dict__.items(), *m._buffers.items()]:
            if key in skip or key.startswith("__"):
                continue
            old = saved.get(key, buffers.get(key))
            if old is not value and not (isinstance(value, (int, float, str, tuple))
                                         and type(old) is type(value) and old == value):
                changed.append(f"{name}.{key}" if name else key)
    return sorted(set(changed))
