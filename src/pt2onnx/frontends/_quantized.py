"""Eager-mode quantized models (``torch.ao.quantization.convert``), rewritten before capture.

torch.export cannot capture quantized tensors (``quint8``/``qint8``) nor the packed
weights of ``torch.ao.nn.quantized`` modules. So a copy of the model has each quantized
module swapped for a float module doing the same arithmetic with explicit quantize and
dequantize ops (``quantized_decomposed``, as PT2E writes them):

- a quantized tensor travels as its dequantized float value;
- a weight is stored as its int8 values and dequantized (per tensor or per channel);
- a module's output is quantized and dequantized with the module's output scale and
  zero point, in the dtype the module returned on the example input;
- ``QuantStub``'s ``Quantize`` becomes that quantize/dequantize pair, ``DeQuantize``
  becomes nothing.

The rules in ``rules/quantized.py`` turn the pairs into QuantizeLinear/DequantizeLinear.
The float arithmetic between them is torch's quantized kernels' arithmetic without their
intermediate integer rounding, so outputs match within one quantization step.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree

from pt2onnx.errors import InvalidInputError
from pt2onnx.frontends._qdq import QuantizedWeight as _QuantizedWeight
from pt2onnx.frontends._qdq import qd_ops as _qd
from pt2onnx.frontends._qdq import requantize as _requantize


class _Requantized(torch.nn.Module):
    """Base: the output is requantized with the module's scale and zero point."""

    def __init__(self, scale: Any, zero_point: Any, qdtype: torch.dtype | None) -> None:
        super().__init__()
        self.out_scale, self.out_zero_point = float(scale), int(zero_point)
        self.out_qdtype = qdtype

    def _out(self, y: torch.Tensor) -> torch.Tensor:
        from pt2onnx.frontends._quantized_mode import QParams, tag

        if self.out_qdtype is None:
            return y
        out = _requantize(y, self.out_scale, self.out_zero_point, self.out_qdtype)
        return tag(out, QParams(self.out_scale, self.out_zero_point, self.out_qdtype))


class _Quantize(_Requantized):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._out(x.float())


class _Dequantize(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


_ACTIVATIONS: dict[str, Callable[..., torch.Tensor]] = {
    "LinearReLU": F.relu, "ConvReLU1d": F.relu, "ConvReLU2d": F.relu, "ConvReLU3d": F.relu,
    "BNReLU2d": F.relu, "BNReLU3d": F.relu, "LinearTanh": torch.tanh,
}


def _activation(m: Any) -> Callable[[torch.Tensor], torch.Tensor] | None:
    name = type(m).__name__
    if name == "LinearLeakyReLU":
        slope = float(m.negative_slope)
        return lambda y: F.leaky_relu(y, slope)
    return _ACTIVATIONS.get(name)


class _Linear(_Requantized):
    bias: torch.Tensor | None

    def __init__(self, m: Any, qdtype: torch.dtype | None) -> None:
        super().__init__(m.scale, m.zero_point, qdtype)
        self.weight = _QuantizedWeight(m.weight())
        bias = m.bias()
        self.register_buffer("bias", None if bias is None else bias.detach().float())
        self.act = _activation(m)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight(), self.bias)
        return self._out(self.act(y) if self.act is not None else y)


class _DynamicLinear(torch.nn.Module):
    """``quantize_dynamic``'s Linear: the input quantized per call with qparams chosen from
    its range (uint8, 7-bit under reduce_range, as fbgemm's linear_dynamic), the weight
    int8 (or float16); the output stays float."""

    bias: torch.Tensor | None
    float_weight: torch.Tensor

    def __init__(self, m: Any) -> None:
        super().__init__()
        w = m.weight()
        self.weight: torch.nn.Module | None = _QuantizedWeight(w) if w.is_quantized else None
        self.register_buffer("float_weight", None if w.is_quantized else w.detach().float())
        bias = m.bias()
        self.register_buffer("bias", None if bias is None else bias.detach().float())
        # nnqd.Linear passes reduce_range=True from version 4 of its state on.
        self.qmax = 127 if (m.version or 0) >= 4 else 255

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight is None:
            return F.linear(x, self.float_weight, self.bias)
        qd = _qd()
        scale, zp = qd.choose_qparams.tensor(x, 0, self.qmax, torch.finfo(torch.float32).eps,
                                             torch.uint8)
        q = qd.quantize_per_tensor.tensor(x, scale, zp, 0, self.qmax, torch.uint8)
        xq = qd.dequantize_per_tensor.tensor(q, scale, zp, 0, self.qmax, torch.uint8)
        return F.linear(xq, self.weight(), self.bias).to(x.dtype)


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


class _Conv(_Requantized):
    bias: torch.Tensor | None

    def __init__(self, m: Any, qdtype: torch.dtype | None) -> None:
        super().__init__(m.scale, m.zero_point, qdtype)
        self.weight = _QuantizedWeight(m.weight())
        bias = m.bias()
        self.register_buffer("bias", None if bias is None else bias.detach().float())
        self.act = _activation(m)
        self.transposed = bool(m.transposed)
        self.nd = len(m.kernel_size)
        self.stride, self.dilation, self.groups = m.stride, m.dilation, m.groups
        self.padding, self.output_padding = m.padding, m.output_padding
        self.padding_mode = m.padding_mode
        self.pad = [int(p) for p in reversed(m.padding) for _ in range(2)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight()
        if self.transposed:
            y = _CONV_T[self.nd](x, w, self.bias, self.stride, self.padding,
                                 self.output_padding, self.groups, self.dilation)
        elif self.padding_mode != "zeros":
            x = F.pad(x, self.pad, mode=self.padding_mode)
            y = _CONV[self.nd](x, w, self.bias, self.stride, 0, self.dilation, self.groups)
        else:
            y = _CONV[self.nd](x, w, self.bias, self.stride, self.padding, self.dilation,
                               self.groups)
        return self._out(self.act(y) if self.act is not None else y)


class _Elementwise(_Requantized):
    """A float function of the input (and the module's float tensors), requantized."""

    def __init__(self, fn: Callable[..., torch.Tensor], scale: Any, zero_point: Any,
                 qdtype: torch.dtype | None, tensors: dict[str, torch.Tensor | None]) -> None:
        super().__init__(scale, zero_point, qdtype)
        self.fn = fn
        self.names = list(tensors)
        for name, t in tensors.items():
            self.register_buffer(name, None if t is None else t.detach().float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._out(self.fn(x, *(getattr(self, n) for n in self.names)))


class _QFunctional(_Requantized):
    """``QFunctional``'s methods on float values, each requantized as torch does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("QFunctional.forward is not meant to be called; call its methods")

    def add(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._out(x + y)

    def add_relu(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._out(F.relu(x + y))

    def mul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._out(x * y)

    def cat(self, x: list[torch.Tensor], dim: int = 0) -> torch.Tensor:
        return self._out(torch.cat(x, dim))

    def matmul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._out(torch.matmul(x, y))

    # torch adds and multiplies a scalar without an observer: only the qparams move.
    def add_scalar(self, x: torch.Tensor, y: float) -> torch.Tensor:
        return x + y

    def mul_scalar(self, x: torch.Tensor, y: float) -> torch.Tensor:
        return x * y


def _norm_tensors(m: Any, *names: str) -> dict[str, torch.Tensor | None]:
    return {n: getattr(m, n, None) for n in names}


def _swap(m: Any, qdtype: torch.dtype | None) -> torch.nn.Module | None:
    """The float replacement of quantized module ``m``; None when ``m`` is not one."""
    import torch.ao.nn.intrinsic.quantized as nniq
    import torch.ao.nn.quantized as nnq
    import torch.ao.nn.quantized.dynamic as nnqd

    if isinstance(m, nnq.Quantize):
        return _Quantize(m.scale, m.zero_point, m.dtype)
    if isinstance(m, nnq.DeQuantize):
        return _Dequantize()
    if isinstance(m, nnqd.Linear):
        return _DynamicLinear(m)
    if isinstance(m, nnq.Linear):
        return _Linear(m, qdtype)
    if type(m).__module__.startswith("torch.ao.nn.quantized.dynamic"):
        return None  # dynamic RNNs and convolutions: reported as unsupported
    if isinstance(m, (nniq.ConvAdd2d, nniq.ConvAddReLU2d)):
        return None  # two inputs: reported as unsupported
    if isinstance(m, nnq.modules.conv._ConvNd):
        return _Conv(m, qdtype)
    if isinstance(m, nnq.QFunctional):
        return _QFunctional(m.scale, m.zero_point, qdtype)
    if isinstance(m, (nnq.ReLU6, nnq.Dropout)):
        # relu6 keeps its input's qparams (exact on the grid); dropout is off in eval.
        return torch.nn.ReLU6() if isinstance(m, nnq.ReLU6) else torch.nn.Identity()
    if isinstance(m, (nnq.BatchNorm2d, nnq.BatchNorm3d)):
        relu = isinstance(m, (nniq.BNReLU2d, nniq.BNReLU3d))
        eps = float(m.eps)

        def bn(x: torch.Tensor, mean: Any, var: Any, w: Any, b: Any) -> torch.Tensor:
            y = F.batch_norm(x, mean, var, w, b, False, 0.0, eps)
            return F.relu(y) if relu else y

        return _Elementwise(bn, m.scale, m.zero_point, qdtype, _norm_tensors(
            m, "running_mean", "running_var", "weight", "bias"))
    simple = _SIMPLE.get(type(m).__name__)
    if simple is not None and type(m).__module__.startswith("torch.ao.nn.quantized"):
        fn, tensors = simple(m)
        scale = getattr(m, "scale", getattr(m, "output_scale", None))
        zp = getattr(m, "zero_point", getattr(m, "output_zero_point", None))
        return _Elementwise(fn, scale, zp, qdtype, tensors)
    return None


def _hardswish(m: Any) -> tuple[Callable[..., torch.Tensor], dict[str, Any]]:
    return F.hardswish, {}


def _elu(m: Any) -> tuple[Callable[..., torch.Tensor], dict[str, Any]]:
    alpha = float(m.alpha)
    return (lambda x: F.elu(x, alpha)), {}


def _leaky_relu(m: Any) -> tuple[Callable[..., torch.Tensor], dict[str, Any]]:
    slope = float(m.negative_slope)
    return (lambda x: F.leaky_relu(x, slope)), {}


def _sigmoid(m: Any) -> tuple[Callable[..., torch.Tensor], dict[str, Any]]:
    return torch.sigmoid, {}


def _softmax(m: Any) -> tuple[Callable[..., torch.Tensor], dict[str, Any]]:
    dim = m.dim
    return (lambda x: F.softmax(x, dim)), {}


def _layer_norm(m: Any) -> tuple[Callable[..., torch.Tensor], dict[str, Any]]:
    shape, eps = tuple(m.normalized_shape), float(m.eps)
    return ((lambda x, w, b: F.layer_norm(x, shape, w, b, eps)),
            _norm_tensors(m, "weight", "bias"))


def _group_norm(m: Any) -> tuple[Callable[..., torch.Tensor], dict[str, Any]]:
    groups, eps = int(m.num_groups), float(m.eps)
    return ((lambda x, w, b: F.group_norm(x, groups, w, b, eps)),
            _norm_tensors(m, "weight", "bias"))


def _instance_norm(m: Any) -> tuple[Callable[..., torch.Tensor], dict[str, Any]]:
    eps = float(m.eps)
    return ((lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=eps)),
            _norm_tensors(m, "weight", "bias"))


_SIMPLE: dict[str, Callable[[Any], tuple[Callable[..., torch.Tensor], dict[str, Any]]]] = {
    "Hardswish": _hardswish, "ELU": _elu, "LeakyReLU": _leaky_relu, "Sigmoid": _sigmoid,
    "Softmax": _softmax, "LayerNorm": _layer_norm, "GroupNorm": _group_norm,
    "InstanceNorm1d": _instance_norm, "InstanceNorm2d": _instance_norm,
    "InstanceNorm3d": _instance_norm,
}

_QUANTIZED_PACKAGES = ("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized")
# Modules of those packages that work on float values as they are.
_FLOAT_OK = frozenset({"FloatFunctional", "FXFloatFunctional"})


def _is_quantized_module(m: torch.nn.Module) -> bool:
    # Reference modules (FX's convert_to_reference_fx) are float modules that quantize
    # and dequantize their weight in forward: captured as they are, under the tracker.
    where = type(m).__module__
    return (where.startswith(_QUANTIZED_PACKAGES) and type(m).__name__ not in _FLOAT_OK
            and not where.startswith("torch.ao.nn.quantized.reference"))


def _output_dtypes(model: torch.nn.Module, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> dict[int, torch.dtype]:
    """The quantized dtype each quantized module returns, seen on one eager run."""
    seen: dict[int, torch.dtype] = {}

    def hook(m: torch.nn.Module, inputs: Any, out: Any) -> None:
        if isinstance(out, torch.Tensor) and out.is_quantized:
            seen[id(m)] = out.dtype

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if _is_quantized_module(m)]
    # QFunctional's methods bypass forward: wrap them for the run.
    wrapped = []
    for m in model.modules():
        if type(m).__name__ == "QFunctional":
            for name in ("add", "add_relu", "mul", "cat", "matmul"):
                original = getattr(m, name)

                def call(*a: Any, _orig: Any = original, _m: Any = m, **k: Any) -> Any:
                    out = _orig(*a, **k)
                    hook(_m, a, out)
                    return out

                setattr(m, name, call)
                wrapped.append((m, name))
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
        for m, name in wrapped:
            delattr(m, name)
    return seen


def has_quantized_modules(model: Any) -> bool:
    return isinstance(model, torch.nn.Module) and any(
        _is_quantized_module(m) for m in model.modules())


def rewrite(model: torch.nn.Module, args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> torch.nn.Module:
    """A copy of ``model`` with every eager-mode quantized module swapped for its float
    form with explicit quantize/dequantize ops; raises on a module with no such form."""
    dtypes = _output_dtypes(model, args, kwargs)
    replaced: dict[int, tuple[torch.nn.Module, torch.nn.Module | None]] = {}

    def visit(m: torch.nn.Module) -> None:
        if id(m) in replaced:
            return
        if _is_quantized_module(m):
            replaced[id(m)] = (m, _swap(m, dtypes.get(id(m))))
            if replaced[id(m)][1] is not None:
                return  # its children (packed weights) go with it
        for child in m.children():
            visit(child)

    visit(model)
    unsupported = sorted({type(m).__qualname__ for m, new in replaced.values() if new is None})
    if unsupported:
        raise InvalidInputError(
            f"the model holds eager-mode quantized modules pt2onnx cannot rewrite into "
            f"QuantizeLinear/DequantizeLinear form: {', '.join(unsupported)}. Next step: keep "
            "these modules in float (set their qconfig to None before convert), or quantize "
            "with PT2E (torchao's prepare_pt2e/convert_pt2e), whose programs export directly.")
    # deepcopy takes a module found in the memo as already copied: the swaps go in there.
    memo: dict[int, Any] = {k: new for k, (_, new) in replaced.items()}
    return copy.deepcopy(model, memo)


def _input_qparams(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The qparams of each quantized input leaf, by its pytree path."""
    from pt2onnx.frontends._quantized_mode import QParams

    found = {}
    for path, leaf in pytree.tree_flatten_with_path((args, kwargs))[0]:
        if isinstance(leaf, torch.Tensor) and leaf.is_quantized:
            if leaf.qscheme() not in (torch.per_tensor_affine, torch.per_tensor_symmetric):
                raise InvalidInputError(
                    f"input {pytree.keystr(path)} is a per-channel quantized tensor; only "
                    "per-tensor quantized inputs are supported. Next step: pass "
                    "x.dequantize() and quantize inside the model.")
            found[pytree.keystr(path)] = QParams(float(leaf.q_scale()),
                                                 int(leaf.q_zero_point()), leaf.dtype)
    return found


def needs_rewrite(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether the model holds eager-mode quantized modules or takes quantized tensors."""
    return isinstance(model, torch.nn.Module) and (
        has_quantized_modules(model) or any(
            isinstance(leaf, torch.Tensor) and leaf.is_quantized
            for leaf in pytree.tree_leaves((args, kwargs))))


def prepare(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
            ) -> tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]:
    """What to capture for an eager-mode quantized model: a float copy (``rewrite``) whose
    forward runs under a ``QParamTracker``, and the inputs with each quantized tensor
    replaced by its dequantized value (the ONNX input takes those float values)."""
    from pt2onnx.frontends._quantized_mode import QParamTracker

    inputs = _input_qparams(args, kwargs)
    module = rewrite(model, args, kwargs) if has_quantized_modules(model) else copy.copy(model)
    original: Callable[..., Any]
    if isinstance(module, torch.fx.GraphModule):
        # torch.export runs a GraphModule with an FX interpreter, past forward (and so
        # past the tracker): its code runs on a plain module sharing its attributes.
        code = _GraphCode()
        code.__dict__.update(module.__dict__)
        module, original = code, functools.partial(type(module).forward, code)
    else:
        original = module.forward

    @functools.wraps(original)
    def forward(*a: Any, **k: Any) -> Any:
        with QParamTracker() as tracker:
            for path, leaf in pytree.tree_flatten_with_path((a, k))[0]:
                tracker.tag(leaf, inputs.get(pytree.keystr(path)))
            return original(*a, **k)

    module.forward = forward
    args, kwargs = pytree.tree_map(_float_value, (args, kwargs))
    return module, args, kwargs


class _GraphCode(torch.nn.Module):
    """A GraphModule's attributes, run through its generated forward (set by prepare)."""


def _float_value(x: Any) -> Any:
    return x.dequantize() if isinstance(x, torch.Tensor) and x.is_quantized else x
