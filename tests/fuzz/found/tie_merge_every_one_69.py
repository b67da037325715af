"""pt2onnx fuzz program (seed 4111012402)."""

import math
import torch
import torch.nn.functional as F  # noqa: F401

SEED = 4111012402
B = (5, 10)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)
B_MIN = 1  # the smallest declared size of B (1: also run at 1)
C = 'b'  # the example of the second dynamic dim: 1, or 'b' (= B)

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

    def forward(self, x2, x4, x5, x6, x9, x10):
        v3 = torch.scatter_reduce(x2, 0, x4, x5, 'sum', include_self=True)
        v7 = torch.fmod(x4, x6.abs() + 1)
        v8 = v7.reshape(5, -1)
        v10 = torch.hypot(x9, v7)
        v11 = v7 // 2
        v12 = torch.movedim(v10, 2, 0)
        v12.neg_()
        v13 = torch.narrow(x5, -1, 0, math.floor(x5.shape[2] / 4))
        v14 = x9 - x10
        return (v3, v8, v11, v12, v13, v14)


def make_inputs(b=5, c=None):
    c = (b if C == 'b' else C) if c is None else c
    g = torch.Generator().manual_seed(SEED)
    x2 = _normal((1, 5, b), torch.float32, g)
    x4 = _index((1, 5, b), 1, None, g)
    x5 = _normal((1, 5, b), torch.float32, g)
    x6 = _int((1, 1, 1), torch.int32, g)
    x9 = _normal((1, 5, b), torch.float32, g)
    x10 = _normal((1, 5, c), torch.float32, g)
    return (x2, x4, x5, x6, x9, x10)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    c = torch.export.Dim("C", min=1, max=64)
    return ({2: b}, {2: b}, {2: b}, None, {2: b}, {2: c})
