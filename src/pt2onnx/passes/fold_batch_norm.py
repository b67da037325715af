"""Folds an inference ``BatchNormalization`` into the ``Conv`` before it.

``Conv -> BatchNormalization`` with constant weights and statistics, where nothing else
reads the Conv's output, becomes one ``Conv`` whose weights and bias are scaled by the
norm: ``w * gamma / sqrt(var + eps)`` and ``(b - mean) * gamma / sqrt(var + eps) + beta``
(computed in float64, rounded once to the weights' dtype). onnxruntime does the same at
load time; the file is smaller and other runtimes get it too. The new weights are
computed only when the model is saved, a block of output channels at a time, so no
second copy of the weights, nor of one weight, is held meanwhile; the Conv's original weight initializer is left to whoever
else reads it (and removed as unused otherwise).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np
import onnx_ir as ir
import torch

from pt2onnx.passes._graphs import rewrite_all
from pt2onnx.translate import onnx_dtype


def _raw(v: ir.Value | None) -> torch.Tensor | None:
    """The torch tensor behind a constant initializer (not a meta tensor), else None."""
    raw = getattr(v.const_value, "raw", None) if v is not None and v.is_initializer() else None
    if isinstance(raw, np.ndarray):  # a constant the rules made (ones, zeros)
        return torch.from_numpy(np.array(raw))
    return raw if isinstance(raw, torch.Tensor) and not raw.is_meta else None


class _Made:
    """A LazyTensor's function: ``make()``'s tensor, and, where ``make`` has them, its
    ``blocks``, which the writer (``save/``) takes instead, a block of rows at a time."""

    def __init__(self, make: Callable[[], torch.Tensor], name: str) -> None:
        self.make, self.name = make, name
        self.blocks = getattr(make, "blocks", None)

    def __call__(self) -> ir.TensorProtocol:
        return ir.tensor_adapters.TorchTensor(self.make(), name=self.name)


def _lazy(graph: ir.Graph, make: Callable[[], torch.Tensor], like: torch.Tensor,
          shape: tuple[int, ...], name: str) -> ir.Value:
    dtype = onnx_dtype(like.dtype)
    lazy = ir.LazyTensor(_Made(make, name), dtype=dtype, shape=ir.Shape(shape), name=name)
    value = ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(shape),
                     const_value=lazy)
    graph.register_initializer(value)
    return value


def _rewrite(graph: ir.Graph, names: Iterator[str]) -> int:
    outputs = {id(o) for o in graph.outputs}
    count = 0
    for bn in list(graph):
        if bn.op_type != "BatchNormalization" or bn.domain or len(bn.outputs) != 1:
            continue
        training = bn.attributes.get("training_mode")
        if training is not None and training.as_int():
            continue
        x = bn.inputs[0]
        conv = x.producer() if x is not None else None
        if x is None or conv is None or conv.op_type != "Conv" or conv.domain:
            continue
        if len(x.uses()) != 1 or id(x) in outputs or len(conv.inputs) < 2:
            continue
        w = _raw(conv.inputs[1])
        b = _raw(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] is not None else None
        if len(conv.inputs) > 2 and conv.inputs[2] is not None and b is None:
            continue
        gamma, beta, mean, var = (_raw(v) for v in bn.inputs[1:5])
        if w is None or gamma is None or beta is None or mean is None or var is None:
            continue
        attr = bn.attributes.get("epsilon")
        eps = attr.as_float() if attr is not None else 1e-5

        def scale(v: torch.Tensor = var, g: torch.Tensor = gamma, e: float = eps) -> torch.Tensor:
            return torch.rsqrt(v.double() + e) * g.double()

        def fused_bias(w: torch.Tensor = w, b: torch.Tensor | None = b, m: torch.Tensor = mean,
                       beta: torch.Tensor = beta, scale: Callable[[], torch.Tensor] = scale,
                       ) -> torch.Tensor:
            with torch.no_grad():
                shift = (b.double() if b is not None else torch.zeros_like(m, dtype=torch.float64)) - m
                return (shift * scale() + beta.double()).to(w.dtype)

        if len(conv.inputs) < 3:
            conv.resize_inputs(3)
        conv.replace_input_with(1, _lazy(graph, _Scaled(w, scale), w, tuple(w.shape),
                                         next(names)))
        conv.replace_input_with(2, _lazy(graph, fused_bias, w, (w.shape[0],), next(names)))
        ir.convenience.replace_nodes_and_values(graph, bn, [bn], [], [bn.outputs[0]], [x])
        count += 1
    return count


# Output channels are scaled this many float64 elements at a time: the double-precision
# product of a block stays in cache, where the whole weight's would go through memory
# three times (to double, times the scale, back); the same bits, about twice as fast.
_BLOCK = 1 << 16


class _Scaled:
    """The folded weight ``(w.double() * scale).to(w.dtype)``, a scale per output
    channel: whole when called, or a block of output channels at a time (``blocks``),
    which is how the file gets it: the whole new weight is never in memory at save."""

    def __init__(self, w: torch.Tensor, scale: Callable[[], torch.Tensor]) -> None:
        self.w, self.scale = w, scale

    def blocks(self) -> Iterator[torch.Tensor]:
        w = self.w
        scale = self.scale().reshape(-1, *([1] * (w.dim() - 1)))
        step = max(1, _BLOCK // max(1, w[0].numel()))
        with torch.no_grad():
            for i in range(0, w.shape[0], step):
                yield w[i:i + step].double().mul_(scale[i:i + step]).to(w.dtype)

    def __call__(self) -> torch.Tensor:
        out = torch.empty_like(self.w, memory_format=torch.contiguous_format)
        i = 0
        for block in self.blocks():
            out[i:i + block.shape[0]] = block
            i += block.shape[0]
        return out


def apply(model: ir.Model) -> int:
    """Folds in place (subgraphs included); returns how many norms it folded."""
    taken = set(model.graph.initializers)
    names = (f"bn_folded_{i}" for i in itertools.count() if f"bn_folded_{i}" not in taken)
    return rewrite_all(model, lambda graph: _rewrite(graph, names))
