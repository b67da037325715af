"""Stage 2, translate: an FX program becomes an ONNX model.

Owns the walk over FX nodes (``_translate``), the graph builder rules write through
(``_builder``: ``RuleContext``), the rule registry (``_registry``), folding of
constant subgraphs (``_fold``), FX metadata (``_fx_meta``), decompositions for ops
without a rule (``_decomp``, ``_decomp_extra``), and the check that a rule reads no
symbolic size as a number (``_baked_sizes``). The rules themselves live in
``pt2onnx.rules`` and register into ``_registry``.

May import: ``frontends._custom_ops`` (the custom ops' names), ``_compat``, ``errors``.
Must not import: ``capture``, ``save``, ``passes`` or anything above them.
"""
