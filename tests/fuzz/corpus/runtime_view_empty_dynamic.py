"""pt2onnx fuzz program (seed 1000194)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 1000194
B = (6, 9)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)

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

    def forward(self, x5, x7, x16, x26):
        v8 = torch.matmul(x5, x7)
        v10 = torch.sign(v8)
        v10.transpose(0, 3).copy_(x16)
        v28 = x26.flatten(-2)
        return (v28,)


def make_inputs(b=6):
    g = torch.Generator().manual_seed(SEED)
    x5 = _int((1, 1, b, 5), torch.int64, g)
    x7 = _int((5, 3, 5, 1), torch.int64, g)
    x16 = _normal((1, 3, b, 5), torch.float32, g)
    x26 = _index((0, 1, b), 1, None, g)
    return (x5, x7, x16, x26)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=4, max=64)
    return ({2: b}, None, {2: b}, {2: b})


# Found by the differential fuzzer (pt2onnx.testing.fuzz): runtime with pt2onnx.
# load: Fail: [ONNXRuntimeError] : 1 : FAIL : Node (view#2) Op (Reshape) [ShapeInferenceError] Invalid Target shape product of 0. Product cannot be 0 in combination with -1
EXPORTER = 'pt2onnx'
FOUND = 'runtime'
XFAIL = None  # fixed: the Reshape of an empty tensor keeps its 0 (allowzero)


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
