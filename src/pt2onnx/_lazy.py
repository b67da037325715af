"""Deferred imports: sympy's, and the GC pause that pt2onnx's own deferred imports run in.

``pt2onnx/__init__.py`` imports each public name on first use and the registry imports
the built-in rules on its first use, both inside ``gc_paused()``.

onnx_ir imports sympy at module level, for symbolic-dim arithmetic that pt2onnx never
asks of it, and sympy takes about 0.3 s to import: more than half of ``import
pt2onnx`` in a process where torch is already loaded. A static export (the recording
capture) never needs sympy; a dynamic one does (torch.export's shape environment),
and then it is loaded there.

``defer_sympy()`` puts a stand-in module under ``sys.modules["sympy"]`` when sympy is
installed but not imported yet. The stand-in carries the real module's file, spec
and package path, so ``import sympy``, ``import sympy.core`` and ``inspect`` (which
reads every module's ``__file__``) work without loading it. The first attribute read
from it (``sympy.Expr``) imports the real sympy, puts it back in ``sys.modules``, and
copies its namespace into the stand-in, so code holding either sees the same objects.
``PT2ONNX_EAGER_IMPORTS=1`` turns this off.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

_LOCK = threading.RLock()


class _DeferredModule(types.ModuleType):
    """A module whose namespace is filled from the real one on the first read."""

    def __getattr__(self, name: str) -> Any:  # only for names not set yet
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # probes (__path__ of a plain module, etc.)
        return getattr(_load(self), name)


def _load(stub: _DeferredModule) -> types.ModuleType:
    with _LOCK:
        name = stub.__name__
        current = sys.modules.get(name)
        if current is not None and current is not stub:
            return current  # loaded already (by another thread, or by _load itself)
        del sys.modules[name]
        try:
            real = importlib.import_module(name)
        except BaseException:
            sys.modules[name] = stub
            raise
        stub.__dict__.update(real.__dict__)
        return real


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic GC off for the block: for imports, whose objects live as long as
    the process, and which would otherwise start full collections that scan every object
    torch and the user's model made (0.1-0.2 s each with torchvision's resnet50 loaded)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def eager_imports() -> bool:
    """``PT2ONNX_EAGER_IMPORTS=1``: import everything at ``import pt2onnx``, defer nothing."""
    return os.environ.get("PT2ONNX_EAGER_IMPORTS", "") not in ("", "0")


def defer_sympy() -> None:
    """Defers ``import sympy`` until something reads from it; see the module docstring."""
    if eager_imports():
        return
    if "sympy" in sys.modules or "onnx_ir" in sys.modules:
        return
    spec = importlib.util.find_spec("sympy")
    if spec is None or spec.origin is None:
        return  # not installed: the importer's own error is the right one
    _defer(spec)
    # onnx_ir's expression parser reads sympy.Max (and others) at import; it is used
    # only to parse a symbolic dim's text into a sympy expression.
    ir_spec = importlib.util.find_spec("onnx_ir")
    for folder in (ir_spec.submodule_search_locations or []) if ir_spec else []:
        path = os.path.join(folder, "_symbolic_shapes.py")
        if os.path.isfile(path):
            sub = importlib.util.spec_from_file_location("onnx_ir._symbolic_shapes", path)
            if sub is not None:
                _defer(sub)
            break


def _defer(spec: importlib.machinery.ModuleSpec) -> None:
    stub = _DeferredModule(spec.name)
    stub.__file__ = spec.origin
    stub.__spec__ = spec
    stub.__loader__ = spec.loader
    stub.__package__ = spec.parent if spec.submodule_search_locations is None else spec.name
    if spec.submodule_search_locations is not None:
        stub.__path__ = list(spec.submodule_search_locations)
    sys.modules[spec.name] = stub


defer_sympy()
