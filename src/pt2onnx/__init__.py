"""pt2onnx: a fast, pure-Python exporter from PyTorch to ONNX."""

# _lazy first: it defers sympy before onnx_ir imports it (see _lazy.py).
from pt2onnx import _lazy  # noqa: F401
from pt2onnx import rules as _rules  # noqa: F401  (registers the built-in rules)
from pt2onnx._api import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, OnnxProgram, export
from pt2onnx._version import __version__
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
