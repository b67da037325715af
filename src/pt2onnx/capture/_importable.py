"""The model's code is importable while torch.export's strict mode reads it.

Dynamo (strict torch.export) names the module a forward's globals come from and imports
it by that name (``importlib.import_module(forward.__globals__["__name__"])``). Code
run by ``exec`` in its own namespace (a generated or downloaded model definition, a
notebook's custom loader) has a ``__name__`` that no import finds, and strict mode
fails with "No module named ...". Non-strict mode does not import it, but it evaluates
``int()`` and ``len()`` of a size, fixing the dim, where strict mode keeps it symbolic.
So while a capture runs, each such namespace is in ``sys.modules`` under its name (a
module holding the same objects), and is taken out again afterwards.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from typing import Any

import torch


def _namespaces(model: Any) -> dict[str, dict[str, Any]]:
    """The globals of each module's forward whose ``__name__`` is not importable."""
    found: dict[str, dict[str, Any]] = {}
    modules = list(model.modules()) if isinstance(model, torch.nn.Module) else [model]
    for m in modules:
        forward = getattr(type(m), "forward", None) if isinstance(m, torch.nn.Module) else m
        scope = getattr(forward, "__globals__", None)
        if not isinstance(scope, dict):
            continue
        name = scope.get("__name__")
        if isinstance(name, str) and name and name not in sys.modules and name not in found:
            found[name] = scope
    return found


# One module object per name, refilled at each capture: dynamo caches the module it
# imported by name for the process (``functools.cache``), so a second model run by exec
# under the same ``__name__`` must find its own globals in that same object (the fuzzer's
# programs all share one name; a stale one failed "module ... has no attribute 'math'").
_MODULES: dict[str, types.ModuleType] = {}


@contextlib.contextmanager
def importable_code(model: Any) -> Iterator[None]:
    """Registers the model's unimportable code namespaces (above) while the block runs."""
    added: list[str] = []
    for name, scope in _namespaces(model).items():
        module = _MODULES.setdefault(name, types.ModuleType(name))
        module.__dict__.clear()
        module.__dict__.update(scope)
        sys.modules[name] = module
        added.append(name)
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)
