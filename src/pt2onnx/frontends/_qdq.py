"""Quantize / dequantize as the rewritten quantized modules compute them: torch's
``quantized_decomposed`` ops, the integer range of each quantized dtype, and a quantized
weight kept as its integer values. Shared by ``_quantized`` (the module swap) and
``_quantized_mode`` (quantized tensors in a model's own code)."""

from __future__ import annotations

from typing import Any

import torch

from pt2onnx import _compat
from pt2onnx.errors import InvalidInputError

# quantized dtype -> (integer dtype, quant_min, quant_max)
INT = {
    torch.quint8: (torch.uint8, 0, 255),
    torch.qint8: (torch.int8, -128, 127),
    torch.qint32: (torch.int32, -(2**31), 2**31 - 1),
}


def qd_ops() -> Any:
    ns = _compat.quantized_decomposed_ops()
    if ns is None:  # pragma: no cover - every tested torch has it
        raise InvalidInputError(
            "this torch has no torch.ao.quantization.fx._decomposed, which pt2onnx uses to "
            "export eager-mode quantized modules. Next step: quantize with PT2E (torchao) or "
            "use a torch that still ships torch.ao.quantization.")
    return ns


def requantize(x: torch.Tensor, scale: float | torch.Tensor, zero_point: int | torch.Tensor,
                qdtype: torch.dtype) -> torch.Tensor:
    """x rounded to the grid of a quantized tensor with these qparams (a Q -> DQ pair)."""
    dtype, qmin, qmax = INT[qdtype]
    qd = qd_ops()
    if isinstance(scale, torch.Tensor) or isinstance(zero_point, torch.Tensor):
        # qparams held in buffers (FX's convert_fx): the .tensor overloads
        scale, zero_point = torch.as_tensor(scale), torch.as_tensor(zero_point)
        q = qd.quantize_per_tensor.tensor(x, scale, zero_point, qmin, qmax, dtype)
        return qd.dequantize_per_tensor.tensor(q, scale, zero_point, qmin, qmax, dtype)
    q = qd.quantize_per_tensor(x, scale, zero_point, qmin, qmax, dtype)
    return qd.dequantize_per_tensor(q, scale, zero_point, qmin, qmax, dtype)


class QuantizedWeight(torch.nn.Module):
    """A quantized weight as integer values and qparams; calling it dequantizes."""

    def __init__(self, w: torch.Tensor) -> None:
        super().__init__()
        self.dtype, self.qmin, self.qmax = INT[w.dtype]
        self.register_buffer("values", w.int_repr())
        self.axis: int | None = None
        if w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
            self.axis = int(w.q_per_channel_axis())
            self.register_buffer("scales", w.q_per_channel_scales().float())
            self.register_buffer("zero_points", w.q_per_channel_zero_points())
        else:
            self.scale, self.zero_point = float(w.q_scale()), int(w.q_zero_point())

    def forward(self) -> torch.Tensor:
        qd = qd_ops()
        if self.axis is None:
            return qd.dequantize_per_tensor(self.values, self.scale, self.zero_point,
                                            self.qmin, self.qmax, self.dtype)
        return qd.dequantize_per_channel(self.values, self.scales, self.zero_points, self.axis,
                                         self.qmin, self.qmax, self.dtype)
