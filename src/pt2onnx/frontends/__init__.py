"""Model rewrites that run before or during capture, so that the captured program holds
ops pt2onnx can translate: quantized modules and tensors (``_quantized``,
``_quantized_mode``), plain and packed RNNs as one op (``_packed_rnn``), containers of
modules (``_containers``), sdpa with a symbolic ``is_causal`` (``_sdpa_symbool``), dicts
keyed by tensors among the inputs (``_tensor_keys``), and pt2onnx's own torch ops
(``_custom_ops``); and ``precision=``'s converted copy of the model (``_precision``).

May import: ``_compat``, ``errors``. Must not import: ``capture``, ``translate``,
``save``, ``passes`` or anything above them.
"""

# The door: what other folders may use. Imports from outside this folder name these,
# never a private module.
from pt2onnx.frontends._as_output import as_output_op
from pt2onnx.frontends._containers import register_mappings, register_output_containers
from pt2onnx.frontends._custom_ops import define as define_custom_op
from pt2onnx.frontends._nms import define as define_batched_nms
from pt2onnx.frontends._packed_rnn import define_ops as define_packed_rnn_ops
from pt2onnx.frontends._packed_rnn import holds_hidden_rnn
from pt2onnx.frontends._packed_rnn import substitutions as packed_rnn_substitutions
from pt2onnx.frontends._precision import (
    ALIASES as PRECISION_ALIASES,
)
from pt2onnx.frontends._precision import (
    PRECISION_IO,
    PRECISIONS,
    Converted,
    check_precision_io,
    converted_copy,
    precision_name,
)
from pt2onnx.frontends._precision import (
    convert as convert_precision,
)
from pt2onnx.frontends._quantized import needs_rewrite, prepare
from pt2onnx.frontends._rewrites import CaptureRewrites
from pt2onnx.frontends._sdpa_symbool import SymBoolCausal
from pt2onnx.frontends._tensor_keys import (
    flatten_with_keys,
    has_tensor_keys,
    keys_as_inputs,
    spec_as_pairs,
)

__all__ = [
    "PRECISIONS", "PRECISION_ALIASES", "PRECISION_IO", "CaptureRewrites", "Converted",
    "SymBoolCausal", "as_output_op", "check_precision_io", "convert_precision",
    "converted_copy", "define_batched_nms", "define_custom_op", "define_packed_rnn_ops", "flatten_with_keys", "has_tensor_keys",
    "holds_hidden_rnn", "keys_as_inputs", "needs_rewrite", "packed_rnn_substitutions",
    "precision_name", "prepare", "register_mappings", "register_output_containers", "spec_as_pairs",
]

