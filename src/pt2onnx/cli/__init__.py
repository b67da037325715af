"""The ``pt2onnx`` command line (``pt2onnx`` and ``python -m pt2onnx``).

Owns the argument parsing and the subcommands (``_main``), what they read and print
(``_io``: model and input specs, progress, summaries), and the operator support matrix
behind ``pt2onnx ops`` and docs/ops.md (``_support``, with the OpInfo entries that do not
pass in ``_opinfo_gaps``).

May import: the public API and anything below it. Nothing in pt2onnx imports it.
"""

# The door: what other folders may use.
from pt2onnx.cli._main import main

__all__ = ["main"]
