"""Grouped (per-expert) matrix products of mixture-of-experts layers.

transformers' experts (Mixtral, Qwen-MoE, OLMoE, GPT-OSS, Granite-MoE, DeepSeek...)
sort the (token, expert) pairs by expert, count them per expert (histc), and run one
grouped product over the sorted rows: row ``r`` of ``input`` [S, K] is multiplied by
``weight[e]`` [K, N], where ``e`` is the group whose range holds ``r``. ``offs`` [E]
holds the cumulative ends of the groups; rows at or past ``offs[-1]`` belong to no
group and come out as zeros, as in transformers' fallback. Under torch.export on
float32 weights transformers calls its custom op ``transformers::grouped_mm_fallback``;
elsewhere it calls ``aten::_grouped_mm``. Both get the same rule.

The groups' sizes are data: they change with every input. Two formulations stay
correct for any routing (docs/models.md compares their onnxruntime speed):

- ``grouped_mm_sparse`` (registered): per expert, a Slice of the rows between two
  offsets, one MatMul with that expert's weight, and a Concat of the pieces. It does
  exactly the S*K*N multiply-adds of the product; the loop over experts is unrolled
  (E is the static leading dim of the weight).
- ``grouped_mm_dense``: every row through every expert (one batched MatMul, E times
  the work), then each row keeps its own group's result (a mask from the offsets).

``transformers::grouped_mm_fallback`` exists only once transformers is imported, so
``register()`` adds its rule then; the exporter calls it before translating, and
importing pt2onnx never imports transformers.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.errors import TranslationError
from pt2onnx.rule_api import REGISTRY, Registry, RuleContext
from pt2onnx.rules._common import rank, static_dim

I64 = ir.DataType.INT64


def _check(input: ir.Value, weight: ir.Value, offs: ir.Value | None, op: str) -> int:
    if offs is None or rank(input) != 2 or rank(weight) != 3:
        raise TranslationError(
            f"{op}: only the mixture-of-experts form is supported, input [S, K], weight "
            f"[E, K, N] and offs [E]; got input of rank {rank(input)}, weight of rank "
            f"{rank(weight)} and {'no' if offs is None else 'an'} offs. Call torch.bmm or "
            f"torch.matmul for the other forms.")
    try:
        return static_dim(weight, 0)
    except ValueError:
        raise TranslationError(
            f"{op}: the number of experts (dim 0 of the weight) must be static; it is "
            f"{weight.shape[0] if weight.shape else '?'}. Keep the weight a parameter or a "
            f"constant of fixed shape.") from None


def grouped_mm_sparse(g: RuleContext, input: ir.Value, weight: ir.Value,
                      offs: ir.Value) -> ir.Value:
    """Per expert: the rows between two offsets times that expert's weight."""
    return _sparse(g, input, weight, offs, g.dtype)


def _sparse(g: RuleContext, input: ir.Value, weight: ir.Value, offs: ir.Value | None,
            dtype: ir.DataType) -> ir.Value:
    experts = _check(input, weight, offs, "grouped_mm")
    assert offs is not None
    ends = g.cast(offs, I64)
    axis0 = g.const([0])
    pieces = []
    start = g.const([0])
    for e in range(experts):
        end = g.op.Slice(ends, g.const([e]), g.const([e + 1]))
        rows = g.op.Slice(input, start, end, axis0)
        pieces.append(g.op.MatMul(rows, g.op.Gather(weight, g.const(e), axis=0)))
        start = end
    # Rows past the last offset belong to no expert: zeros, as in transformers.
    n_out = g.op.Shape(weight, start=2, end=3)
    tail = g.op.Sub(g.op.Shape(input, start=0, end=1), start)
    pieces.append(g.op.Expand(g.const(0.0, dtype), g.op.Concat(tail, n_out, axis=0)))
    return g.op.Concat(*pieces, axis=0)


def _groups(g: RuleContext, input: ir.Value, offs: ir.Value) -> ir.Value:
    """The group of each row, [S]: how many offsets are <= the row's index (E past the end)."""
    rows = g.op.Range(g.const(0), g.op.Squeeze(g.op.Shape(input, start=0, end=1), g.const([0])),
                      g.const(1))
    past = g.op.LessOrEqual(g.op.Unsqueeze(g.cast(offs, I64), g.const([0])),
                            g.op.Unsqueeze(rows, g.const([1])))
    return g.op.ReduceSum(g.cast(past, I64), g.const([1]), keepdims=0)


def grouped_mm_dense(g: RuleContext, input: ir.Value, weight: ir.Value,
                     offs: ir.Value) -> ir.Value:
    """Every row times every expert's weight, then each row keeps its own group's."""
    experts = _check(input, weight, offs, "grouped_mm")
    every = g.op.MatMul(g.op.Unsqueeze(input, g.const([0])), weight)  # [E, S, N]
    mine = g.op.Equal(g.op.Unsqueeze(g.op.Range(g.const(0), g.const(experts), g.const(1)),
                                     g.const([1])),
                      g.op.Unsqueeze(_groups(g, input, offs), g.const([0])))  # [E, S]
    kept = g.op.Where(g.op.Unsqueeze(mine, g.const([2])), every, g.const(0.0, g.dtype))
    return g.op.ReduceSum(kept, g.const([0]), keepdims=0)


def aten_grouped_mm(g: RuleContext, input: ir.Value, weight: ir.Value, offs: ir.Value | None = None,
                    bias: ir.Value | None = None, out_dtype: Any = None) -> ir.Value:
    """_grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, Tensor? bias=None, ScalarType? out_dtype=None) -> Tensor"""
    if bias is not None:
        raise TranslationError("_grouped_mm: a bias is not supported; add it after the product.")
    # torch takes bfloat16 here (its meta kernel insists); onnxruntime's CPU MatMul
    # does not, so the product runs in float32 and is rounded once at the end.
    if input.dtype in (ir.DataType.BFLOAT16, ir.DataType.FLOAT16):
        input, weight = g.cast(input, ir.DataType.FLOAT), g.cast(weight, ir.DataType.FLOAT)
    if offs is None and rank(input) == 3 and rank(weight) == 3:
        out = g.op.MatMul(input, weight)  # one product per batch entry
    else:
        out = _sparse(g, input, weight, offs, ir.DataType.FLOAT
                      if input.dtype == ir.DataType.FLOAT else g.dtype)
    return g.cast(out, g.dtype)


def grouped_mm_fallback(g: RuleContext, input: ir.Value, weight: ir.Value,
                        offs: ir.Value) -> ir.Value:
    """transformers::grouped_mm_fallback(Tensor input, Tensor weight, Tensor offs) -> Tensor"""
    return grouped_mm_sparse(g, input, weight, offs)


@contextlib.contextmanager
def grouped_experts(model: Any) -> Iterator[list[str]]:
    """While capturing, runs transformers' "eager" experts as "grouped_mm".

    The eager experts loop in Python over the experts the example routes to (a
    data-dependent loop torch.export cannot capture, and a trace would bake in the
    example's routing). ``grouped_mm`` computes the same sums through one grouped
    product that has a rule. Yields the notes for the report; restores the model's
    choice afterwards.
    """
    notes: list[str] = []
    getter = getattr(model, "get_experts_implementation", None)
    if "transformers" not in sys.modules or getter is None:
        yield notes
        return
    try:
        before = dict(getter())
    except Exception:  # a model without experts, or an older transformers
        before = {}
    # Only models with experts classes (transformers' use_experts_implementation sets
    # these attributes on them); a dense model reports "eager" too.
    eager = [m for m in model.modules() if hasattr(m, "is_concatenated")
             and hasattr(m, "has_gate") and getattr(getattr(m, "config", None),
                                                    "_experts_implementation", None) == "eager"]
    if not eager or "eager" not in before.values():
        yield notes
        return
    wanted = {k: "grouped_mm" if v == "eager" else v for k, v in before.items()}
    try:
        model.set_experts_implementation(wanted)
    except Exception as exc:  # grouped_mm unavailable: capture as is
        notes.append(f"transformers' eager experts could not be switched to grouped_mm ({exc}); "
                     "captured as they are.")
        yield notes
        return
    notes.append("transformers' experts_implementation='eager' loops over the experts the "
                 "example routes to, which torch.export cannot capture in general; the model "
                 "was captured with experts_implementation='grouped_mm', which computes the same "
                 "sums for any routing.")
    try:
        yield notes
    finally:
        model.set_experts_implementation(before)


def register(registry: Registry = REGISTRY) -> None:
    """Adds the rules for the ops that exist in this process (idempotent)."""
    grouped = getattr(torch.ops.aten, "_grouped_mm", None)
    if grouped is not None and grouped.default not in registry:
        registry.register(grouped.default, aten_grouped_mm)
    if "transformers" not in sys.modules:
        return
    try:
        op = torch.ops.transformers.grouped_mm_fallback.default
    except (AttributeError, RuntimeError):
        return
    if op not in registry:
        registry.register(op, grouped_mm_fallback)


register()
