"""pt2onnx fuzz program (seed 49897773095825)."""

import math
import torch
import torch.nn.functional as F  # noqa: F401

SEED = 49897773095825
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
        self.register_buffer("b24", _int((2, 2, 1, 1), torch.int64, g))
        self.register_buffer("b26", _int((1, 1, 1, 1), torch.int64, g))

    def forward(self, x1, x2, x4, x9, x12, x13, x16, x17, x23):
        v3 = 2 ** x2.clamp(-3, 3)
        v5 = torch.logical_or(x1, x4)
        v6 = x4.to(torch.int32)
        v7 = torch.all(v3, (-2, 1), keepdim=False)
        v8 = torch.sort(x1, 0, descending=True).values
        v10 = v6 @ x9
        v11 = v8.select(2, -1)
        v5.select(1, 1).scatter_(3, x12, x13.to(v5.select(1, 1).dtype))
        v14 = v11.squeeze()
        v15 = torch.scatter_add(x13, 3, x16, x17)
        v18 = torch.tile(x17, (3,))
        v19 = torch.where(v15 > x13, v15, x13)
        v20 = v7.to(torch.float16)
        v21 = torch.sum(v18, (2, 3), keepdim=True)
        v21[:, :, :, -1:-1].zero_()
        v22 = v21 + 0
        v25 = torch.cat([v21, x23, self.b24], 1)
        v22.transpose(0, 3).mul_(self.b26)
        v27 = torch.sign(x16)
        v28 = v25[:, 1:, -1:-1:3, :]
        v29 = v6.to(torch.int32)
        v30 = v29.squeeze(1)
        v31 = torch.where(v7, v15, v19)
        v33 = v21.transpose(-2, 3)
        v34 = v31 + v15
        v35 = x17.mT
        v36 = x12.narrow(1, 0, math.floor(x12.size(1) / 2) * 2).reshape(*x12.shape[:1], math.floor(x12.size(1) / 2), 2, *x12.shape[2:])
        v37 = torch.narrow(v6, 2, 0, v6.size(2) - v6.size(2) % 2)
        return (v14, v27, v28, v35, v36, v37)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _int((5, b, 2, 4), torch.int32, g)
    x2 = _normal((2, 1), torch.float16, g)
    x4 = _int((2, 1, b, 2, 1), torch.int64, g)
    x9 = _int((1, 3), torch.int32, g)
    x12 = _index((2, b, 2, 1), 4, 3, g)
    x13 = _int((2, b, 2, 1), torch.int64, g)
    x16 = _index((2, b, 2, 2), 1, None, g)
    x17 = _int((2, b, 2, 2), torch.int64, g)
    x23 = _int((2, 1, 1, 1), torch.int64, g)
    return (x1, x2, x4, x9, x12, x13, x16, x17, x23)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({1: b}, None, {2: b}, None, {1: b}, {1: b}, {1: b}, {1: b}, None)

