"""Stage 1, capture: the model and its example become an FX program.

Owns the call's arguments as the capture takes them (``_arguments``), the three
capture tiers and the choice between them (``_capture``: the static recording in
``_record``, torch.export, the trace in ``_trace``), dynamic-shape specs
and their checking (``_dynamic``, ``_guards_hold``, ``_resize``), the size-1 check
and the graph for each side of 1 (``_size_one``, ``_size_one_merge``; ``_up_to`` for
each side of a cache's length), and putting
back what a model changes in itself while it runs (``_model_state``).

May import: ``frontends`` (rewrites applied during capture), ``translate`` (only
``_size_one`` and ``_size_one_merge``, for the graph at 1), ``_compat``, ``errors``.
Must not import: ``save``, ``passes``, ``_api`` and what sits above it.
"""

# The door: what other folders may use. Imports from outside this folder name these,
# never a private module.
from pt2onnx.capture._arguments import as_module, check_args, split_trailing_kwargs
from pt2onnx.capture._below_minimum import lift
from pt2onnx.capture._capture import (
    CaptureResult,
    capture,
    composite,
    judge_later_guards,
    preserved_state,
    strict_only,
    user_dim_names,
)
from pt2onnx.capture._dynamic import (
    Refined,
    all_dynamic,
    argument_names,
    bound_inputs,
    bounded_dim,
    declared_min,
    dynamic_axes_to_shapes,
    is_constraint_violation,
    named_dims,
    tensor_leaves,
    without_dims,
)
from pt2onnx.capture._guards_hold import (
    edges_tracked,
    guards_bound_the_range,
    guards_hold,
)
from pt2onnx.capture._judged import accepted_guards
from pt2onnx.capture._model_state import materialize_lazy
from pt2onnx.capture._refine import without_far_split
from pt2onnx.capture._residue import capture_by_residue, residue_moduli, split_by_residue
from pt2onnx.capture._resize import (
    example_at,
    known_values,
    outside_ranges,
    second_size,
    user_shapes,
)
from pt2onnx.capture._size_one import (
    Unproved,
    WrongAtSecondSize,
    WrongWhereGuardFails,
    ones_allowed,
    settle,
    trusted,
)
from pt2onnx.capture._up_to import split_up_to

__all__ = [
    "CaptureResult",
    "Refined",
    "Unproved",
    "WrongAtSecondSize",
    "WrongWhereGuardFails",
    "accepted_guards",
    "all_dynamic",
    "argument_names",
    "as_module",
    "bound_inputs",
    "bounded_dim",
    "capture",
    "capture_by_residue",
    "check_args",
    "composite",
    "declared_min",
    "dynamic_axes_to_shapes",
    "edges_tracked",
    "example_at",
    "guards_bound_the_range",
    "guards_hold",
    "is_constraint_violation",
    "judge_later_guards",
    "known_values",
    "lift",
    "materialize_lazy",
    "named_dims",
    "ones_allowed",
    "outside_ranges",
    "preserved_state",
    "residue_moduli",
    "second_size",
    "settle",
    "split_by_residue",
    "split_trailing_kwargs",
    "split_up_to",
    "strict_only",
    "tensor_leaves",
    "trusted",
    "user_dim_names",
    "user_shapes",
    "without_dims",
    "without_far_split",
]

