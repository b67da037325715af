"""Differential fuzzing of the exporter against eager PyTorch.

``python -m pt2onnx.testing.fuzz --seed S --count N [--json]`` draws N random valid
programs (small ``nn.Module`` of 3-30 ops), exports each, runs onnx's full check and
onnxruntime, and compares with eager PyTorch. See docs/testing.md.
"""

from pt2onnx.testing.fuzz import draws as _draws  # noqa: F401  (registers the op tables)
from pt2onnx.testing.fuzz.generator import generate
from pt2onnx.testing.fuzz.oracle import CLASSES, Outcome, check, check_namespace, check_source
from pt2onnx.testing.fuzz.program import Program

__all__ = ["CLASSES", "Outcome", "Program", "check", "check_namespace", "check_source",
           "generate", "program_seed"]


def program_seed(seed: int, index: int) -> int:
    """The seed of program ``index`` of the campaign ``seed``."""
    return seed * 1_000_003 + index
