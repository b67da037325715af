"""Building torch objects an export needs without paying for what it does not use:
programs from a recorded graph (their GraphModules' code generated only when read),
torch.onnx's error base class without torch.onnx's exporters, and fake kernels without
torch's look-up of the caller's module. Part of ``_compat``, which re-exports these
names: each reaches into torch internals that are the same in torch 2.12 through 2.15."""

from __future__ import annotations

import contextlib
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch


def exported_program_from_graph(
    gm: torch.fx.GraphModule,
    input_specs: list[Any],
    output_specs: list[Any],
    state_dict: dict[str, torch.Tensor],
    constants: dict[str, torch.Tensor],
    in_spec: Any,
    out_spec: Any,
) -> torch.export.ExportedProgram:
    """Wraps a traced ATen graph (lifted placeholders) as an ExportedProgram.

    Used by the trace fallback, so the rest of the pipeline sees one kind of
    program. The graph is not re-verified: a make_fx trace holds
    data-dependent ops (nonzero, custom ops) that the ATen verifier refuses.
    """
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
    from torch.export.graph_signature import ExportGraphSignature

    signature = ExportGraphSignature(input_specs=input_specs, output_specs=output_specs)
    entry = ModuleCallEntry(
        fqn="",
        signature=ModuleCallSignature(
            inputs=[], outputs=[], in_spec=in_spec, out_spec=out_spec
        ),
    )
    with _lazy_export_graph_module():
        return _Unverified(
            root=gm,
            graph=gm.graph,
            graph_signature=signature,
            state_dict=state_dict,
            range_constraints={},
            module_call_graph=[entry],
            constants=dict[str, Any](constants),
        )


def lazy_graph_module(root: Any, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    """A GraphModule whose Python code is generated when it is first run or read, not
    when it is built.

    A translated program is only walked, never run, so building its code is wasted:
    0.13 s for YOLO11n, each of the two times the recording path builds one. torch's
    ``_LazyGraphModule`` (torch 2.2 and later, unchanged through 2.15) does this; where
    it is missing, a plain GraphModule."""
    make: Any = torch.fx.GraphModule
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule

        make = _LazyGraphModule
    except ImportError:
        pass
    module: torch.fx.GraphModule = make(root, graph)
    return module


@contextlib.contextmanager
def _lazy_export_graph_module() -> Iterator[None]:
    """ExportedProgram's constructor builds its own GraphModule through
    ``torch.export.exported_program._create_graph_module_for_export`` (torch 2.12
    through 2.15); while this is open, that one is lazy too. Where the function is
    missing, nothing changes (the export is only slower)."""
    import torch.export.exported_program as ep

    make = getattr(ep, "_create_graph_module_for_export", None)
    if make is None:
        yield
        return

    def lazily(root: Any, graph: torch.fx.Graph) -> torch.fx.GraphModule:
        try:
            return lazy_graph_module(root, graph)
        except Exception:  # what torch's own handles (SyntaxError) and anything else
            return make(root, graph)

    ep._create_graph_module_for_export = lazily
    try:
        yield
    finally:
        if ep._create_graph_module_for_export is lazily:
            ep._create_graph_module_for_export = make


class _Unverified(torch.export.ExportedProgram):
    """An ExportedProgram that skips torch's verifier when it is built: the verifier
    refuses what a make_fx trace holds (data-dependent and custom ops), and it imports
    sympy, which a static export otherwise never loads (0.3 s)."""

    def validate(self) -> None:
        return None




def exporter_error_base() -> type[Exception]:
    """torch.onnx's error base class where this torch has one, so that code written
    ``except torch.onnx.errors.OnnxExporterError`` also catches pt2onnx's errors.

    ``import torch.onnx.errors`` runs ``torch/onnx/__init__.py`` first, which loads both
    of torch's exporters (60-100 ms of an export that needs neither). The module
    itself imports nothing from torch (torch 2.12 through 2.15), so where torch.onnx is
    not loaded yet, it is loaded alone, under its own name: ``torch/onnx/__init__.py``
    reads it from ``sys.modules`` when it runs later (``from . import errors``), so
    there is still one ``OnnxExporterError`` class in the process."""
    module = sys.modules.get("torch.onnx.errors")
    if module is None and "torch.onnx" not in sys.modules:
        module = _load_alone("torch.onnx.errors", ("torch", "onnx", "errors.py"))
    if module is None or not hasattr(module, "OnnxExporterError"):
        try:
            from torch.onnx.errors import OnnxExporterError
        except ImportError:  # pragma: no cover - every tested torch has it
            return Exception
        return OnnxExporterError
    base: type[Exception] = module.OnnxExporterError
    return base


def _load_alone(name: str, parts: tuple[str, ...]) -> types.ModuleType | None:
    """Module ``name`` executed from its file without importing its parent package;
    None where that fails (the caller imports it the usual way)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), *parts)
    spec = importlib.util.spec_from_file_location(name, path)
    if not os.path.isfile(path) or spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        if sys.modules.get(name) is module:
            del sys.modules[name]
        return None
    return module


def register_fake(lib: Any, qualname: str, fake: Callable[..., Any], source: str) -> None:
    """``torch.library.register_fake(qualname, fake, lib=lib)`` without its look-up of the
    caller's module: torch finds it with ``inspect.getmodule``, whose first call in a
    process resolves the real path of every loaded module's file (25-50 ms with torch
    and a model library loaded) to check a stub that only torch's own packages declare.
    The registry it writes to (``torch._library.simple_registry``, the same in torch 2.12
    through 2.15) is used directly, with ``source`` as the place torch's messages name;
    where it is missing, torch's public function."""
    try:
        from torch._library import simple_registry

        entry = simple_registry.singleton.find(qualname)
        handle = entry.fake_impl.register(fake, source, lib)
    except (ImportError, AttributeError, TypeError):
        torch.library.register_fake(qualname, fake, lib=lib)
        return
    handles = getattr(lib, "_registration_handles", None)
    if isinstance(handles, list):
        handles.append(handle)  # removed with the library, as torch's own path does
