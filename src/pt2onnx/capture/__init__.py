"""Stage 1, capture: the model and its example become an FX program.

Owns the three capture tiers and the choice between them (``_capture``: the static
recording in ``_record``, torch.export, the trace in ``_trace``), dynamic-shape specs
and their checking (``_dynamic``, ``_guards_hold``, ``_resize``), the size-1 check
and the graph for each side of 1 (``_size_one``, ``_size_one_merge``), and putting
back what a model changes in itself while it runs (``_model_state``).

May import: ``frontends`` (rewrites applied during capture), ``translate`` (only
``_size_one`` and ``_size_one_merge``, for the graph at 1), ``_compat``, ``errors``.
Must not import: ``save``, ``passes``, ``_api`` and what sits above it.
"""
