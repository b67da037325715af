"""Quantized tensors in a model's own code, while a quantized model is captured.

Inside the rewritten model (``_quantized``) a quantized tensor is a float holding its
dequantized value. What the model's forward does to it between modules is seen by a
``TorchFunctionMode`` that remembers each such tensor's qparams:

- ops that keep a quantized tensor's qparams and values exactly (``flatten``, ``relu``,
  ``max_pool2d``, indexing, ...) pass them on;
- ops torch computes in float and rounds back onto the input's grid (``avg_pool2d``,
  ``adaptive_avg_pool2d``, ``interpolate``, ``mean``, ``hardtanh``, ...) get that
  rounding as a quantize/dequantize pair, and ``sigmoid``, ``hardsigmoid`` and ``tanh``
  the fixed qparams torch's quantized kernels give them;
- ``torch.quantize_per_tensor`` / ``quantize_per_channel`` become a quantize/dequantize
  pair, ``Tensor.dequantize`` is the identity, and the ``torch.ops.quantized`` ops
  (``add``, ``cat``, ``linear``, ``conv2d``, ...) become their float forms, requantized
  with the op's output scale and zero point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode

from pt2onnx.errors import InvalidInputError


class QParams(NamedTuple):
    scale: float | torch.Tensor  # a tensor where the model keeps them in buffers
    zero_point: int | torch.Tensor
    qdtype: torch.dtype


# Ops after which a quantized tensor keeps its qparams and its values stay on the grid.
_KEEP = frozenset({
    "flatten", "reshape", "view", "permute", "transpose", "contiguous", "clone", "squeeze",
    "unsqueeze", "__getitem__", "relu", "relu_", "max_pool1d",
    "max_pool2d", "max_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "dropout",
    "chunk", "split", "unbind", "expand", "narrow", "detach", "dequantize", "float", "to",
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
})
# Ops torch computes in float on a quantized tensor and rounds back onto its grid.
_ROUND = frozenset({
    "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "interpolate", "upsample", "upsample_bilinear", "mean",
    "relu6", "hardtanh", "clamp", "leaky_relu", "gelu",
})
# Ops whose quantized kernels write fixed qparams: name -> (scale, zero point by dtype).
_FIXED = {
    "sigmoid": (1 / 256, {torch.quint8: 0, torch.qint8: -128}),
    "hardsigmoid": (1 / 256, {torch.quint8: 0, torch.qint8: -128}),
    "tanh": (2 / 256, {torch.quint8: 128, torch.qint8: 0}),
}
# Reading a quantized tensor's integer form has no float-value equivalent.
_INTEGER_VIEWS = frozenset({
    "int_repr", "q_scale", "q_zero_point", "q_per_channel_scales", "q_per_channel_zero_points",
    "q_per_channel_axis", "qscheme",
})


class QParamTracker(TorchFunctionMode):
    """Remembers the qparams of the float values that stand for quantized tensors."""

    active: list[QParamTracker] = []  # the trackers entered, innermost last

    def __init__(self) -> None:
        super().__init__()
        # id -> (the tensor, kept alive so the id is not reused; its qparams)
        self._tags: dict[int, tuple[torch.Tensor, QParams]] = {}

    def __enter__(self) -> QParamTracker:
        QParamTracker.active.append(self)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        QParamTracker.active.pop()
        super().__exit__(*exc)

    def tag(self, t: Any, qp: QParams | None) -> Any:
        if qp is not None:
            for leaf in pytree.tree_leaves(t):
                if isinstance(leaf, torch.Tensor):
                    self._tags[id(leaf)] = (leaf, qp)
        return t

    def get(self, t: Any) -> QParams | None:
        entry = self._tags.get(id(t)) if isinstance(t, torch.Tensor) else None
        return entry[1] if entry is not None else None

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        qualified = _quantized_op_name(func)
        if qualified is not None:
            return _functional(self, qualified, list(args), dict(kwargs))
        if func is torch.quantize_per_tensor:
            return _quantize_per_tensor(self, *args, **kwargs)
        if func is torch.quantize_per_channel:
            return _quantize_per_channel(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name in _INTEGER_VIEWS:
            raise InvalidInputError(
                f"the model reads a quantized tensor's integer form (Tensor.{name}), which "
                "has no equivalent in a QDQ graph, where quantized tensors travel as their "
                "dequantized values. Next step: compute on the dequantized values instead.")
        if name == "dequantize" and args and isinstance(args[0], torch.Tensor):
            return args[0]  # already the dequantized value
        out = func(*args, **kwargs)
        first = args[0] if args else None
        qp = self.get(first)
        if qp is None:
            return out
        if name in _ROUND and isinstance(out, torch.Tensor):
            return self.tag(requantize(out, qp), qp)
        if name in _FIXED and isinstance(out, torch.Tensor) and qp.qdtype in _FIXED[name][1]:
            scale, zero_points = _FIXED[name]
            fixed = QParams(scale, zero_points[qp.qdtype], qp.qdtype)
            return self.tag(requantize(out, fixed), fixed)
        if name in _KEEP:
            return self.tag(out, qp)
        return out


def tag(t: torch.Tensor, qp: QParams) -> torch.Tensor:
    """Marks ``t`` as standing for a quantized tensor with ``qp`` (when a tracker runs)."""
    if QParamTracker.active:
        QParamTracker.active[-1].tag(t, qp)
    return t


def requantize(x: torch.Tensor, qp: QParams) -> torch.Tensor:
    from pt2onnx.frontends._qdq import requantize as _requantize

    return _requantize(x, qp.scale, qp.zero_point, qp.qdtype)


def _quantized_op_name(func: Any) -> str | None:
    if isinstance(func, torch._ops.OpOverloadPacket):
        qualified = func._qualified_op_name
    elif isinstance(func, torch._ops.OpOverload):
        qualified = func._schema.name
    else:
        return None
    namespace, _, name = qualified.partition("::")
    return name if namespace == "quantized" else None


def _quantize_per_tensor(tracker: QParamTracker, x: Any, scale: Any, zero_point: Any,
                         dtype: torch.dtype) -> torch.Tensor:
    if isinstance(x, (list, tuple)):
        raise InvalidInputError(
            "torch.quantize_per_tensor on a list of tensors is not supported. "
            "Next step: quantize each tensor.")
    if isinstance(scale, torch.Tensor) or isinstance(zero_point, torch.Tensor):
        qp = QParams(scale, zero_point, dtype)
    else:
        qp = QParams(float(scale), int(zero_point), dtype)
    return tracker.tag(requantize(x.float(), qp), qp)


def _quantize_per_channel(x: torch.Tensor, scales: torch.Tensor, zero_points: torch.Tensor,
                          axis: int, dtype: torch.dtype) -> torch.Tensor:
    from pt2onnx.frontends._qdq import INT as _INT
    from pt2onnx.frontends._qdq import qd_ops as _qd

    int_dtype, qmin, qmax = _INT[dtype]
    qd = _qd()
    scales = scales.float()
    q = qd.quantize_per_channel(x.float(), scales, zero_points, axis, qmin, qmax, int_dtype)
    return qd.dequantize_per_channel(q, scales, zero_points, axis, qmin, qmax, int_dtype)


def _out_dtype(tracker: QParamTracker, x: Any) -> torch.dtype:
    qp = tracker.get(x)
    return qp.qdtype if qp is not None else torch.quint8


def _weight(w: torch.Tensor) -> torch.Tensor:
    from pt2onnx.frontends._qdq import QuantizedWeight as _QuantizedWeight

    return _QuantizedWeight(w)()


def _unpacked(packed: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    w, b = packed.unpack()
    return _weight(w), None if b is None else b.detach().float()


def _linear(x: torch.Tensor, packed: Any, relu: bool = False) -> torch.Tensor:
    w, b = _unpacked(packed)
    y = F.linear(x, w, b)
    return F.relu(y) if relu else y


def _conv(x: torch.Tensor, packed: Any, relu: bool = False) -> torch.Tensor:
    w, b = _unpacked(packed)
    nd = w.dim() - 2
    if packed.transpose():
        conv_t = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
        y = conv_t(x, w, b, packed.stride(), packed.padding(), packed.output_padding(),
                   packed.groups(), packed.dilation())
    else:
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
        y = conv(x, w, b, packed.stride(), packed.padding(), packed.dilation(), packed.groups())
    return F.relu(y) if relu else y


# quantized::<name> -> (float function of the leading arguments, how many arguments it
# takes; the output scale and zero point follow them).
_REQUANTIZED: dict[str, tuple[Callable[..., torch.Tensor], int]] = {
    "add": (torch.add, 2),
    "add_relu": (lambda a, b: F.relu(a + b), 2),
    "mul": (torch.mul, 2),
    "mul_relu": (lambda a, b: F.relu(a * b), 2),
    "hardswish": (F.hardswish, 1),
    "sigmoid": (torch.sigmoid, 1),
    "leaky_relu": (lambda x, slope, inplace: F.leaky_relu(x, float(slope)), 3),
    "linear": (_linear, 2),
    "linear_relu": (lambda x, w: _linear(x, w, True), 2),
    "conv1d": (_conv, 2), "conv2d": (_conv, 2), "conv3d": (_conv, 2),
    "conv1d_relu": (lambda x, w: _conv(x, w, True), 2),
    "conv2d_relu": (lambda x, w: _conv(x, w, True), 2),
    "conv3d_relu": (lambda x, w: _conv(x, w, True), 2),
    "conv_transpose1d": (_conv, 2), "conv_transpose2d": (_conv, 2),
    "conv_transpose3d": (_conv, 2),
    "batch_norm1d": (lambda x, w, b, m, v, eps: F.batch_norm(x, m, v, w, b, False, 0.0, eps), 6),
    "batch_norm2d": (lambda x, w, b, m, v, eps: F.batch_norm(x, m, v, w, b, False, 0.0, eps), 6),
    "batch_norm3d": (lambda x, w, b, m, v, eps: F.batch_norm(x, m, v, w, b, False, 0.0, eps), 6),
    "layer_norm": (lambda x, shape, w, b, eps: F.layer_norm(x, shape, w, b, eps), 5),
}


def _in_schema_order(name: str, args: list[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments of ``torch.ops.quantized.<name>`` in its schema's order: keywords go
    where the schema names them (``QFunctional.cat`` passes ``scale``, ``zero_point`` and
    ``dim`` as keywords, in another order), a missing one takes its default."""
    if not kwargs:
        return args
    packet = getattr(torch.ops.quantized, name)
    for overload in packet.overloads():
        schema = getattr(packet, overload)._schema
        names = [a.name for a in schema.arguments]
        if len(args) > len(names) or not set(kwargs) <= set(names[len(args):]):
            continue
        bound = list(args)
        for a in schema.arguments[len(args):]:
            if a.name in kwargs:
                bound.append(kwargs[a.name])
            elif a.has_default_value():
                bound.append(a.default_value)
            else:
                break
        else:
            return bound
    raise InvalidInputError(
        f"torch.ops.quantized.{name} was called with arguments none of its schemas take "
        f"({len(args)} positional, keywords {sorted(kwargs)}).")


def _functional(tracker: QParamTracker, name: str, args: list[Any],
                kwargs: dict[str, Any]) -> Any:
    """A ``torch.ops.quantized`` op on float values; requantized as torch does."""
    args = _in_schema_order(name, args, kwargs)
    if name == "relu6":
        return tracker.tag(F.relu6(args[0]), tracker.get(args[0]))
    if name == "cat":
        tensors, dim = args[0], args[1] if len(args) > 1 else 0
        out = torch.cat(list(tensors), dim)
        scale, zp = (args[2], args[3]) if len(args) > 3 else (None, None)
        if scale is None or zp is None:
            qp = tracker.get(tensors[0])
            return tracker.tag(requantize(out, qp), qp) if qp is not None else out
        qp = QParams(float(scale), int(zp), _out_dtype(tracker, tensors[0]))
        return tracker.tag(requantize(out, qp), qp)
    entry = _REQUANTIZED.get(name)
    if entry is None:
        raise InvalidInputError(
            f"torch.ops.quantized.{name} has no float + QuantizeLinear/DequantizeLinear form "
            "in pt2onnx. Next step: express it with ops pt2onnx supports, or quantize with PT2E "
            "(torchao's prepare_pt2e/convert_pt2e), whose programs export directly.")
    fn, n = entry
    qp = QParams(float(args[n]), int(args[n + 1]), _out_dtype(tracker, args[0]))
    return tracker.tag(requantize(fn(*args[:n]), qp), qp)
