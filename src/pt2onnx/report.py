"""The export report: versions, per-stage timings, ops, fallbacks, verification."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pt2onnx.errors import MissingOp

STAGES = ("capture", "decompose", "translate", "optimize", "save", "verify")
# Called with (stage, seconds or None at its start); set by on_stage (the CLI's progress).
_listeners: list[Callable[[str, float | None], None]] = []


@contextlib.contextmanager
def on_stage(callback: Callable[[str, float | None], None]) -> Iterator[None]:
    """Calls ``callback(stage, None)`` as each export stage starts and
    ``callback(stage, seconds)`` as it ends, inside the block."""
    _listeners.append(callback)
    try:
        yield
    finally:
        _listeners.remove(callback)


def versions() -> dict[str, str]:
    """The versions of pt2onnx and of everything it runs with."""
    import importlib.metadata as md
    import platform

    from pt2onnx import _compat
    from pt2onnx._version import __version__

    found = {"pt2onnx": __version__, "torch": _compat.TORCH_VERSION_STRING}
    for dist in ("onnx", "onnx-ir", "onnxruntime"):
        try:
            found[dist] = md.version(dist)
        except md.PackageNotFoundError:
            found[dist] = "not installed"
    found["python"] = platform.python_version()
    return found


@dataclass
class ExportReport:
    """What happened during one export. ``str(report)`` is the Markdown report."""

    timings: dict[str, float] = field(default_factory=dict)
    capture_strategy: str = ""
    fallbacks: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    op_histogram: dict[str, int] = field(default_factory=dict)
    aten_histogram: dict[str, int] = field(default_factory=dict)
    unsupported: list[MissingOp] = field(default_factory=list)
    folded_nodes: int = 0
    opset: int = 0
    verification: Any = None
    fx_nodes: int = 0
    dynamic_dims: dict[str, str] = field(default_factory=dict)
    # torch.export's suggested fixes that were applied to the dynamic shapes, and the
    # axes dynamic=True left static because the model fixes them (each with its guard).
    dynamic_refinements: list[str] = field(default_factory=list)
    fixed_axes: list[str] = field(default_factory=list)
    decomposition: str = ""
    # (op, source, count) for each op decomposed per node; source is "torch default",
    # "torch registry" or "pt2onnx".
    decompositions: list[tuple[str, str, int]] = field(default_factory=list)
    # export_modules_as_functions: "domain::name: N call(s)" per ONNX function written
    functions: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        for listener in list(_listeners):
            listener(name, None)
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            self.timings[name] = self.timings.get(name, 0.0) + seconds
            for listener in list(_listeners):
                listener(name, seconds)

    @property
    def total_time(self) -> float:
        return sum(self.timings.values())

    def timing_line(self) -> str:
        parts = [f"{k} {v:.2f}s" for k, v in self.timings.items()]
        return f"total {self.total_time:.2f}s (" + ", ".join(parts) + ")"

    def to_markdown(self) -> str:
        lines = ["# pt2onnx export report", "", "## Versions", ""]
        for name, version in versions().items():
            lines.append(f"- {name}: {version}")
        lines += ["", "## Stages", "", "| stage | seconds |", "|---|---|"]
        for name, seconds in self.timings.items():
            lines.append(f"| {name} | {seconds:.3f} |")
        lines.append(f"| **total** | {self.total_time:.3f} |")
        lines += ["", "## Capture", "", f"- strategy: {self.capture_strategy}"]
        lines += [f"- fallback: {f}" for f in self.fallbacks]
        lines += ["", f"- decomposition: {self.decomposition}", f"- target opset: {self.opset}", f"- FX nodes: {self.fx_nodes}",
                  f"- folded at export time: {self.folded_nodes}"]
        if self.decompositions:
            lines += ["", "## Decompositions (per node)", "", "| op | source | count |",
                      "|---|---|---|"]
            lines += [f"| `{op}` | {source} | {n} |" for op, source, n in self.decompositions]
        if self.dynamic_dims:
            lines += ["", "## Dynamic dims and their guards", "", "| dim | range |", "|---|---|"]
            lines += [f"| {k} | {v} |" for k, v in self.dynamic_dims.items()]
        if self.dynamic_refinements or self.fixed_axes:
            lines += [""] + [f"- refined: {r}" for r in self.dynamic_refinements]
            lines += [f"- static: {a}" for a in self.fixed_axes]
        if self.functions:
            lines += ["", "## Functions (module calls)", ""] + [f"- {f}" for f in self.functions]
        if self.warnings:
            lines += ["", "## Warnings", ""] + [f"- {w}" for w in self.warnings]
        if self.unsupported:
            lines += ["", "## Unsupported operators", ""]
            lines += [
                f"- `{m.op}` (node `{m.node}`) at {m.source or '<no source line>'}"
                + (f" in module `{m.module}`" if m.module else "")
                for m in self.unsupported
            ]
            lines += ["", "Next step: add a rule with `@pt2onnx.translation(op)` or "
                      "`custom_translations={op: fn}`; see docs/extending.md."]
        lines += ["", "## ONNX operators", "", "| op | count |", "|---|---|"]
        for op, n in sorted(self.op_histogram.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"| {op} | {n} |")
        if self.verification is not None:
            lines += ["", "## Verification (onnxruntime vs eager)", "", str(self.verification)]
        return "\n".join(lines) + "\n"

    __str__ = to_markdown
