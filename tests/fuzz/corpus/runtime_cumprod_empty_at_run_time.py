"""pt2onnx fuzz program (seed 2612015103)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 2612015103
B = (1, 7)  # (example, second) size of the dynamic dim; None: static
HALF = True  # float16 values flow through (looser tolerance)
B_MIN = 1  # the smallest declared size of B (1: also run at 1)

def _normal(shape, dtype, g):
    return (torch.randn(shape, generator=g) * 2).to(dtype)


def _int(shape, dtype, g):
    return torch.randint(-5, 6, shape, generator=g).to(dtype)


def _bool(shape, dtype, g):
    return torch.rand(shape, generator=g) < 0.5


def _index(shape, bound, unique_dim, g):
    """int64 indices in [0, bound), distinct along unique_dim when it is set."""
    if unique_dim is None:
        return torch.randint(0, max(bound, 1), shape, generator=g) if bound else torch.zeros(
            shape, dtype=torch.int64)
    full = list(shape)
    full[unique_dim] = bound
    perm = torch.argsort(torch.rand(full, generator=g), dim=unique_dim)
    return perm.narrow(unique_dim, 0, shape[unique_dim])


class Program(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(SEED + 1)

    def forward(self, x1):
        v4 = x1.reshape(-1, 2, 2)
        v9 = torch.logsumexp(v4, -2, keepdim=False)
        v14 = torch.amax(v9, -1, keepdim=False)
        v15 = v14[:-2]
        v22 = F.gelu(v15)
        v24 = torch.cumprod(v22.clamp(-2, 2), 0)
        return (v24,)


def make_inputs(b=1):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((4, b), torch.float16, g)
    return (x1,)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({1: b},)


# Found by the differential fuzzer (pt2onnx.testing.fuzz): runtime with pt2onnx.
# run (B=1): Fail: [ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Scan node. Name:'cumprod#8' Status Message: /onnxruntime_src/onnxruntime/core/framework/ort_value_tensor_slicer.cc:28 static onnxruntime::OrtValueTensorSlicer<T> onnxruntime::OrtValueTensorSlicer<T>::Create(
EXPORTER = 'pt2onnx'
FOUND = 'runtime'
XFAIL = None  # or the reason, for a bug not fixed yet (a strict xfail in test_corpus)


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
