"""Built-in translation rules, one module per op family.

Importing this package registers every rule in ``pt2onnx._registry.REGISTRY``.
"""

from pt2onnx.rules import (  # noqa: F401
    attention,
    core,
    creation,
    elementwise,
    indexing,
    linalg,
    nn,
    norm,
    reduction,
    shape,
)
