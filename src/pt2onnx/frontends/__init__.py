"""Model rewrites that run before or during capture, so that the captured program holds
ops pt2onnx can translate: quantized modules and tensors (``_quantized``,
``_quantized_mode``), plain and packed RNNs as one op (``_packed_rnn``), containers of
modules (``_containers``), sdpa with a symbolic ``is_causal`` (``_sdpa_symbool``), and
pt2onnx's own torch ops (``_custom_ops``).

May import: ``_compat``, ``errors``. Must not import: ``capture``, ``translate``,
``save``, ``passes`` or anything above them.
"""
