"""pt2onnx fuzz program (seed 7411024595)."""

import math
import torch
import torch.nn.functional as F  # noqa: F401

SEED = 7411024595
B = (1, 8)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)
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
        self.register_buffer("b5", _int((3, 0, 5), torch.int64, g))

    def forward(self, x1, x4, x7, x8, x10):
        v2 = torch.amin(x1, 0, keepdim=False)
        v3 = torch.scatter_add(v2, 1, x4, self.b5)
        v6 = torch.scatter_reduce(v3, -1, x7, x8, 'prod', include_self=True)
        v9 = torch.neg(x4)
        v11 = torch.stack([x1, x10, x1], -3)
        v12 = v11.permute(2, 0, 4, 3, 1)
        v13 = v12.split([v12.shape[-2] - (math.floor(v12.shape[-2] * 2 / 3)), math.floor(v12.shape[-2] * 2 / 3)], 3)[0]
        v14 = v3 * min(v3.size(1), 2) / max(v3.size(1), 2, 1)
        return (v6, v9, v12, v13, v14)


def make_inputs(b=1):
    g = torch.Generator().manual_seed(SEED)
    x1 = _int((4, 3, b, 5), torch.int64, g)
    x4 = _index((3, 0, 5), b, None, g)
    x7 = _index((3, b, 0), 5, None, g)
    x8 = _int((3, b, 0), torch.int64, g)
    x10 = _int((4, 3, b, 5), torch.int64, g)
    return (x1, x4, x7, x8, x10)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({2: b}, None, {1: b}, {1: b}, {2: b})

