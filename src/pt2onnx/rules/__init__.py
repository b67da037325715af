"""Built-in translation rules, one module per op family.

Importing this package registers every rule in ``pt2onnx.rule_api.REGISTRY``. Rules
import the rule-writing API from ``pt2onnx.rule_api`` (as users' rules do), and the
custom ops they translate from the ``frontends`` door.
A rule reads only its own inputs (a rewrite that looks at neighbouring nodes is a pass,
``pt2onnx.passes``).

May import: ``translate`` (the builder, the registry), ``frontends`` (the custom ops it
translates), ``_compat``, ``errors``. Must not import: ``capture``, ``save``, ``passes``
or anything above them.
"""

from pt2onnx.rules import (  # noqa: F401
    attention,
    backward,
    batch_norm_train,
    bessel,
    bitshift,
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
    float_bits,
    gamma,
    gqa,
    grid_sample,
    histogram,
    indexing,
    legacy_ops,
    linalg,
    linalg_factor,
    linalg_solve,
    moe,
    nn,
    norm,
    polynomials,
    quantized,
    random,
    reduction,
    rnn,
    rotary,
    scatter,
    shape,
    sorting,
    special,
    statistics,
    svdvals,
    symbolic,
    torchvision,
)
from pt2onnx.translate import defer_namespace

# PT2E's quantize ops exist once torch.ao.quantization.fx._decomposed (25 ms) or torchao
# is imported; their rules are registered the first time a graph holds one.
defer_namespace("quantized_decomposed", "pt2onnx.rules.quantized_pt2e")
