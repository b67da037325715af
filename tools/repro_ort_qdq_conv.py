"""A QDQ ConvTranspose / Conv in plain ONNX, run by onnxruntime with its QDQ fusion into
integer kernels on and off, against the op's definition (float math on the dequantized
values, requantized). No pt2onnx involved: the reproduction for onnxruntime, should its
fused kernel differ on some CPU (tests/test_quantized.py::test_quantized_modules
xfails naming it there; issue 27 found ConvTranspose2d 99 steps off on an AVX-512 EPYC).

    python tools/repro_ort_qdq_conv.py

Prints the CPU's vector extensions, then per op the largest difference in output steps
for fused and unfused runs (0 or 1 is rounding; more is a wrong kernel).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

X_SCALE, X_ZP, W_SCALE, Y_SCALE, Y_ZP = 0.05, 120, 0.01, 0.05, 100


def _model(op: str, w_q: np.ndarray, bias: np.ndarray, x_shape: tuple[int, ...],
           stride: int) -> onnx.ModelProto:
    def const(name: str, value: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(value, name)

    inits = [const("x_scale", np.array(X_SCALE, np.float32)),
             const("x_zp", np.array(X_ZP, np.uint8)),
             const("w_q", w_q), const("w_scale", np.array(W_SCALE, np.float32)),
             const("w_zp", np.array(0, np.int8)), const("bias", bias),
             const("y_scale", np.array(Y_SCALE, np.float32)),
             const("y_zp", np.array(Y_ZP, np.uint8))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["wd"]),
             helper.make_node(op, ["xd", "wd", "bias"], ["y"], strides=[stride, stride]),
             helper.make_node("QuantizeLinear", ["y", "y_scale", "y_zp"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "y_scale", "y_zp"], ["out"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(x_shape))], [helper.make_tensor_value_info(
            "out", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _run(model: onnx.ModelProto, x: np.ndarray, fuse: bool) -> np.ndarray:
    options = ort.SessionOptions()
    if not fuse:
        options.add_session_config_entry("session.disable_quant_qdq", "1")
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def main() -> None:
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        pass
    found = sorted({f for f in flags.split() if f.startswith(("avx512", "avx_vnni", "avx2"))})
    print(f"onnxruntime {ort.__version__}; CPU: {', '.join(found) or 'unknown'}")
    torch.manual_seed(0)
    x = torch.randn(1, 3, 5, 5)
    xd = torch.quantize_per_tensor(x, X_SCALE, X_ZP, torch.quint8).dequantize()
    for op, shape, stride in (("ConvTranspose", (3, 4, 3, 3), 2), ("Conv", (4, 3, 3, 3), 1)):
        w_q = torch.clamp(torch.round(torch.randn(shape) * 0.3 / W_SCALE), -128, 127)
        bias = torch.randn(shape[1] if op == "ConvTranspose" else shape[0]) * 0.1
        wd = w_q * W_SCALE
        conv = F.conv_transpose2d if op == "ConvTranspose" else F.conv2d
        ref = torch.quantize_per_tensor(conv(xd, wd, bias, stride), Y_SCALE, Y_ZP,
                                        torch.quint8).dequantize().numpy()
        model = _model(op, w_q.numpy().astype(np.int8), bias.numpy(), tuple(x.shape), stride)
        for fuse in (False, True):
            got = _run(model, x.numpy(), fuse)
            steps = float(np.abs(got - ref).max() / Y_SCALE)
            print(f"{op:14} fusion {'on ' if fuse else 'off'}: largest difference "
                  f"{steps:.0f} step(s){'' if steps <= 1 + 1e-3 else '  <-- WRONG'}")


if __name__ == "__main__":
    main()
