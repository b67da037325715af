"""Typed errors. Each message names the cause, the place and the next step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pt2onnx._compat import exporter_error_base

_Base: type[Exception] = exporter_error_base()


class ExportError(_Base):  # type: ignore[misc,valid-type]
    """Base class of every error pt2onnx raises on bad input or a failed export.

    It subclasses ``torch.onnx.errors.OnnxExporterError`` (a ``RuntimeError``), so
    ``except`` clauses written for torch.onnx keep working after switching."""


class InvalidInputError(ExportError, TypeError):
    """The arguments given to ``export`` are not usable as they are."""


class CaptureError(ExportError):
    """``torch.export`` could not capture the model."""


class SizeOneError(CaptureError):
    """A declared dynamic dim may be 1, and there the model computes something the
    dynamic graph does not (a ``squeeze``, a branch on ``size == 1``)."""


class VerificationError(ExportError):
    """``export(..., verify=True)`` ran the graph in onnxruntime and it does not match eager
    PyTorch. ``result`` holds the per-output comparison, at each size that ran."""

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class OpsetError(ExportError, ValueError):
    """The requested opset is outside the range pt2onnx writes."""


class TranslationError(ExportError):
    """A translation rule failed on a node."""


class TypeConstraintError(TranslationError):
    """A node of the translated graph breaks its ONNX schema's type constraints (two
    dtypes bound to one type parameter, or a dtype the op does not take), so no runtime
    would load the file. ``violations`` lists each node with the rule that wrote it and
    the model line."""

    def __init__(self, message: str, violations: Sequence[object] = ()) -> None:
        super().__init__(message)
        self.violations = list(violations)


class SaveError(ExportError, OSError):
    """The model could not be written to the requested path."""


@dataclass(frozen=True)
class MissingOp:
    op: str
    source: str
    module: str
    node: str


class UnsupportedOperatorError(ExportError):
    """The graph uses ops that have no translation rule. Lists all of them."""

    def __init__(self, missing: list[MissingOp], opset: int) -> None:
        self.missing = missing
        self.opset = opset
        names = sorted({m.op for m in missing})
        lines = [
            f"{len(names)} operator(s) have no translation rule at opset {opset}: "
            + ", ".join(names)
        ]
        for m in missing:
            where = m.source or "<no source line recorded>"
            module = f" in module '{m.module}'" if m.module else ""
            lines.append(f"  - {m.op} (node {m.node}){module}\n      at {where}")
        lines.append(
            "Next step: register a rule with @pt2onnx.translation(<op>) or pass "
            "custom_translations={<op>: fn} to pt2onnx.export; see docs/extending.md. "
            "Run `pt2onnx ops` for the support matrix."
        )
        super().__init__("\n".join(lines))
