"""pt2onnx fuzz program (seed 6301018940)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 6301018940
B = (5, 7)  # (example, second) size of the dynamic dim; None: static
HALF = True  # float16 values flow through (looser tolerance)
B_MIN = 4  # the smallest declared size of B (1: also run at 1)

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

    def forward(self, x1, x2, x4, x5, x6, x7, x10, x12):
        v3 = x2.masked_fill(x4, 1.5)
        v3.transpose(0, 1).scatter_(0, x5, x6.to(v3.transpose(0, 1).dtype))
        v3[...] = x2
        v8 = x7 + x6
        v9 = x6[x10]
        v11 = v9.to(torch.bool)
        v13 = torch.atan2(x1, x12)
        v14 = torch.add(x2.flatten().unsqueeze(-1), x12.flatten().unsqueeze(-2))
        v15 = torch.sign(v14)
        v17 = torch.atan(v13)
        v18 = 3 + v15
        v19 = x1 + 0
        v20 = torch.hypot(v17, v13)
        v21 = torch.mul(x1, v20)
        v22 = v15.narrow(1, 0, v15.shape[1] // 4 * 4).reshape(*v15.shape[:1], v15.shape[1] // 4, 4)
        v23 = v21.split(max(len(v21) - len(v21) % 2, 1), 0)[-1]
        v24 = v19 * (v19.shape[0] / 2)
        return (v11, v18, v21, v22, v23, v24)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _int((b, 1), torch.int64, g)
    x2 = _normal((5, b), torch.float32, g)
    x4 = _bool((5, 1), torch.bool, g)
    x5 = _index((3, 5), b, 0, g)
    x6 = _int((3, 5), torch.int64, g)
    x7 = _normal((1, 5), torch.float16, g)
    x10 = _index((1,), 3, None, g)
    x12 = _int((b, 1), torch.int32, g)
    return (x1, x2, x4, x5, x6, x7, x10, x12)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({0: b}, {1: b}, None, None, None, None, None, {0: b})

