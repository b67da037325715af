"""Built-in translation rules, one module per op family.

Importing this package registers every rule in ``pt2onnx._registry.REGISTRY``.
"""

from pt2onnx.rules import (  # noqa: F401
    attention,
    backward,
    bessel,
    complex,
    composite,
    control_flow,
    core,
    creation,
    cumulative,
    data_dependent,
    debug,
    distance,
    elementwise,
    fft,
    histogram,
    indexing,
    linalg,
    linalg_solve,
    moe,
    nn,
    norm,
    polynomials,
    random,
    reduction,
    scatter,
    shape,
    sorting,
    special,
    statistics,
    symbolic,
    torchvision,
)
