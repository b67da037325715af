"""The rule-writing API: what a translation rule imports, built-in or the user's own.

A rule is a function ``rule(g, *inputs, **attrs)`` registered with :func:`translation`
for an ATen overload; ``g`` is a :class:`RuleContext`, which emits ONNX nodes
(``g.op.Add(a, b)``) and reads the FX node's dtypes and shapes (``g.meta``). The dtype
helpers convert between torch and ONNX dtypes and read a value's ONNX dtype.

    >>> import torch
    >>> from pt2onnx.rule_api import Registry, RuleContext, translation
    >>> mine = Registry()  # without registry=, the rule replaces the built-in one
    >>> @translation(torch.ops.aten.relu.default, registry=mine)
    ... def relu(g: RuleContext, x):
    ...     return g.op.Relu(x)
    >>> torch.ops.aten.relu.default in mine
    True

Every built-in rule under ``pt2onnx/rules/`` imports this module and nothing else of
``translate``; ``pt2onnx.translation`` and ``pt2onnx.RuleContext`` are the same objects.
See docs/extending.md.
"""

from pt2onnx.translate import (
    KEEP_UNFOLDED,
    REGISTRY,
    Registry,
    RuleContext,
    dtype_of,
    is_complex,
    onnx_dtype,
    op_name,
    torch_dtype,
    translation,
    value_dtype,
)

__all__ = [
    "KEEP_UNFOLDED", "REGISTRY", "Registry", "RuleContext", "dtype_of", "is_complex",
    "onnx_dtype", "op_name", "torch_dtype", "translation", "value_dtype",
]
