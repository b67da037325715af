"""pt2onnx fuzz program (fuzz seed 7411, program 1114)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 58687893884896
B = (1, 10)  # (example, second) size of the dynamic dim; None: static
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

    def forward(self, x1, x3, x5, x6):
        v2 = x1 - x1
        v2[-4:-2:2, :, :, :].copy_(x3)
        v4 = torch.index_add(x1, -1, x5, x6)
        v7 = torch.maximum(x1.unsqueeze(-1), x5.unsqueeze(-2))
        v8 = v2 + v2.shape[3] % 2
        v9 = torch.narrow(v8, 3, 0, int(v8.shape[3] * 0.5))
        return (v4, v7, v8, v9)


def make_inputs(b=1):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((4, 4, 5, b), torch.float16, g)
    x3 = _int((1, 4, 5, b), torch.int64, g)
    x5 = _index((0,), b, None, g)
    x6 = _normal((4, 4, 5, 0), torch.float16, g)
    return (x1, x3, x5, x6)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({3: b}, {3: b}, None, None)
