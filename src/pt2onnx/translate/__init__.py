"""Stage 2, translate: an FX program becomes an ONNX model.

Owns the walk over FX nodes (``_translate``), the graph builder rules write through
(``_builder``: ``RuleContext``), the rule registry (``_registry``), folding of
constant subgraphs (``_fold``), FX metadata (``_fx_meta``), decompositions for ops
without a rule (``_decomp``, ``_decomp_extra``), and the check that a rule reads no
symbolic size as a number (``_baked_sizes``). The rules themselves live in
``pt2onnx.rules`` and register into ``_registry``.

May import: ``frontends`` (its door: the custom ops' names), ``_compat``, ``errors``.
Must not import: ``capture``, ``save``, ``passes`` or anything above them.
"""

# The door: what other folders may use. Imports from outside this folder name these,
# never a private module.
from pt2onnx.translate._builder import (
    RuleContext,
    dtype_of,
    exportable,
    is_complex,
    onnx_dtype,
    torch_dtype,
    value_dtype,
)
from pt2onnx.translate._decomp import KEEP as KEEP_WHOLE
from pt2onnx.translate._decomp import (
    FixedByDecomposition,
    check_still_dynamic,
    decomposition_table,
    functionalization_error,
    reason_to_decompose,
    symbolic_input_dims,
)
from pt2onnx.translate._decomp_extra import TABLE as EXTRA_DECOMPOSITIONS
from pt2onnx.translate._finish import types_opset
from pt2onnx.translate._fold import FOLD_LIMIT
from pt2onnx.translate._fx_meta import CACHE_NAME, is_cache, is_transparent
from pt2onnx.translate._registry import (
    KEEP_UNFOLDED,
    REGISTRY,
    Registry,
    defer_namespace,
    op_name,
    translation,
)
from pt2onnx.translate._translate import Translator

__all__ = [
    "CACHE_NAME", "EXTRA_DECOMPOSITIONS", "FOLD_LIMIT", "KEEP_UNFOLDED", "KEEP_WHOLE",
    "REGISTRY", "FixedByDecomposition", "Registry", "RuleContext", "Translator", "check_still_dynamic",
    "decomposition_table", "defer_namespace", "dtype_of", "exportable", "functionalization_error", "is_cache",
    "is_complex", "is_transparent", "onnx_dtype", "op_name", "reason_to_decompose",
    "symbolic_input_dims", "torch_dtype", "translation", "types_opset", "value_dtype",
]

