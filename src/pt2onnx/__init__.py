"""pt2onnx: a fast, pure-Python exporter from PyTorch to ONNX.

``import pt2onnx`` loads almost nothing: each public name is imported from its module
the first time it is read (``pt2onnx.export`` loads the exporter, onnx_ir and the
built-in rules; ``pt2onnx.export_llm`` the LLM exporter), so a script that imports
pt2onnx and never exports, or imports it long before it exports, pays only for what it
uses (docs/architecture.md, "Imports"). ``PT2ONNX_EAGER_IMPORTS=1`` loads everything
at import, as before.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

# _lazy first: it defers sympy before onnx_ir imports it (see _lazy.py).
from pt2onnx import _lazy
from pt2onnx._version import __version__

if TYPE_CHECKING:
    from pt2onnx._api import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, OnnxProgram, export
    from pt2onnx.debug import annotate, as_output, unstrip
    from pt2onnx.errors import (
        CaptureError,
        ExportError,
        InvalidInputError,
        OpsetError,
        SaveError,
        SizeOneError,
        TranslationError,
        TypeConstraintError,
        UnsupportedOperatorError,
        VerificationError,
    )
    from pt2onnx.llm import export_llm
    from pt2onnx.report import ExportReport
    from pt2onnx.rule_api import RuleContext, translation
    from pt2onnx.verify import Divergence, OutputComparison, VerificationResult

# Where each public name lives; read on first use by __getattr__ below.
_HOMES = {
    **dict.fromkeys(
        ["DEFAULT_OPSET", "MAX_OPSET", "MIN_OPSET", "OnnxProgram", "export"], "pt2onnx._api"),
    **dict.fromkeys(["annotate", "as_output", "unstrip"], "pt2onnx.debug"),
    **dict.fromkeys(
        ["CaptureError", "ExportError", "InvalidInputError", "OpsetError", "SaveError",
         "SizeOneError", "TranslationError", "TypeConstraintError",
         "UnsupportedOperatorError", "VerificationError"], "pt2onnx.errors"),
    "export_llm": "pt2onnx.llm",
    "ExportReport": "pt2onnx.report",
    **dict.fromkeys(["RuleContext", "translation"], "pt2onnx.rule_api"),
    **dict.fromkeys(
        ["Divergence", "OutputComparison", "VerificationResult"], "pt2onnx.verify"),
}

__all__ = [
    "DEFAULT_OPSET",
    "MAX_OPSET",
    "MIN_OPSET",
    "CaptureError",
    "Divergence",
    "ExportError",
    "ExportReport",
    "InvalidInputError",
    "OnnxProgram",
    "OpsetError",
    "OutputComparison",
    "RuleContext",
    "SaveError",
    "SizeOneError",
    "TranslationError",
    "TypeConstraintError",
    "UnsupportedOperatorError",
    "VerificationError",
    "VerificationResult",
    "__version__",
    "annotate",
    "as_output",
    "export",
    "export_llm",
    "translation",
    "unstrip",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        if not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}"):
            return importlib.import_module(f"{__name__}.{name}")  # pt2onnx.errors, ...
        raise AttributeError(f"module 'pt2onnx' has no attribute {name!r}")
    with _lazy.gc_paused():
        value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # read once: later reads are plain attribute lookups
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if _lazy.eager_imports():
    for _name in _HOMES:
        __getattr__(_name)
    importlib.import_module("pt2onnx.rules")  # which the registry loads on first use
