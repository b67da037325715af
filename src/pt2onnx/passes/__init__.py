"""ONNX passes run after translation. Each pass is one file with its own test.

Rules emit the graph right the first time, so the optimizer is small: dead
code, common subexpressions and identity removal, all linear in graph size, and the
rewrites every written file gets (onnxruntime's CPU types, its fusions that change
results).

May import: ``translate`` (its door: dtypes), ``_compat``, ``errors``, onnx_ir. Must not
import: ``capture``, ``frontends``, ``rules``, ``save`` or anything above them.
"""

from __future__ import annotations

import onnx_ir as ir
import onnx_ir.passes.common as common

from pt2onnx.passes import (
    float32_ops,
    fold_batch_norm,
    module_functions,
    ort_attention,
    ort_cpu_types,
    ort_skip_norm,
    pad_before_max_pool,
    precision_io,
    runtime_workarounds,
    single_term_products,
    transposed_matvec,
    type_check,
    unsplit_heads,
)

# The door: the pipelines; each pass module above is public too.
__all__ = [
    "cleanup", "float32_ops", "fold_batch_norm", "module_functions", "optimize", "ort_attention",
    "ort_cpu_types", "ort_skip_norm",
    "pad_before_max_pool", "precision_io", "runtime_workarounds", "single_term_products", "transposed_matvec", "type_check", "unsplit_heads",
]


def optimize(model: ir.Model, float32: bool = False, onnxruntime: bool = False) -> ir.Model:
    """Runs the default pass pipeline in place and returns the model; ``float32``: the
    precision-sensitive ops of a float16 / bfloat16 graph in float32 (``float32_ops``);
    ``onnxruntime``: onnxruntime's fused ops where they compute the same
    (``ort_attention``, ``ort_skip_norm``; optimize="onnxruntime")."""
    # onnx_ir's IdentityEliminationPass is left out: it merges an Identity that
    # duplicates a subgraph output into its input, so both outputs become one
    # value (seen with onnx-ir 1.1 on a Scan body returning (h, h.clone())).
    # Rules do not emit Identity except for that purpose.
    passes = ir.passes.Sequential(
        common.CommonSubexpressionEliminationPass(),
        common.RemoveUnusedNodesPass(),
        common.RemoveUnusedOpsetsPass(),
    )
    # CSE can hand a graph output over to an equal, untyped value computed earlier
    # (seen with var_mean's mean and the ReduceMean inside its variance); a graph
    # output must stay typed, so the types and shapes are restored after the passes.
    before = [(o.type, o.shape) for o in model.graph.outputs]
    if onnxruntime:
        ort_attention.apply(model)  # before anything replaces the values the rule noted
    fold_batch_norm.apply(model)
    unsplit_heads.apply(model)
    if onnxruntime:
        ort_skip_norm.apply(model)
    runtime_workarounds.apply(model)
    pad_before_max_pool.apply(model)
    single_term_products.apply(model)
    transposed_matvec.apply(model)
    if float32:
        float32_ops.apply(model)
    ort_cpu_types.apply(model)
    model = passes(model).model
    for out, (type_, shape) in zip(model.graph.outputs, before):
        if out.type is None:
            out.type = type_
        if out.shape is None:
            out.shape = shape
    return model


def cleanup(model: ir.Model, float32: bool = False) -> ir.Model:
    """What runs even with optimize=False: unused initializers from folding go, and
    the rewrites that keep onnxruntime from crashing on a valid graph (and, with
    ``float32``, the sensitive ops of a half-precision export in float32)."""
    fold_batch_norm.apply(model)
    unsplit_heads.apply(model)
    runtime_workarounds.apply(model)
    pad_before_max_pool.apply(model)
    single_term_products.apply(model)
    transposed_matvec.apply(model)
    if float32:
        float32_ops.apply(model)
    ort_cpu_types.apply(model)
    return common.RemoveUnusedNodesPass()(model).model
