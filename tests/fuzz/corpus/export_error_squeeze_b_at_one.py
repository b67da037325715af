"""Seed 2611, program 693 (session 25): `v19.squeeze(0)` on B with B = 1 as the example.
A SizeOneError before the If on the size; now a graph for each side of 1.

pt2onnx fuzz program (seed 20676576517395)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 20676576517395
B = (1, 11)  # (example, second) size of the dynamic dim; None: static
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
        self.register_buffer("b14", _bool((0,), torch.bool, g))
        self.register_buffer("b16", _int((0,), torch.int32, g))
        self.register_buffer("b28", _normal((0, 1), torch.float32, g))
        self.register_buffer("b32", _index((3,), 1, None, g))

    def forward(self, x1, x2, x6, x13, x22, x33):
        v3 = torch.ne(x2, x1)
        v4 = x2 + 2
        v7 = torch.where(x6, v4, True)
        v8 = torch.logical_or(x2, v7)
        v9 = v4 + 0
        v10 = torch.logical_or(x2, v3)
        v11 = v10[0:]
        v12 = torch.index_add(v10, 0, x13, self.b14)
        v15 = torch.full((x13.shape[0], 2), 1)
        v17 = torch.atan2(self.b14, self.b16)
        v18 = torch.log1p(torch.abs(x1))
        v19 = torch.movedim(v18, 0, 0)
        v20 = torch.stack([v17, x13, v17], 0)
        v21 = torch.where(self.b14, v20, v20)
        v23 = torch.where(self.b14, x22, v20)
        v24 = v23.clone().contiguous()
        v25 = torch.flip(x22, (0,))
        v26 = v21 * 0.5
        v27 = torch.cumsum(v11, 0)
        v29 = torch.matmul(v25, self.b28)
        v30 = v19.squeeze(0)
        v31 = torch.round(v30)
        v29[-1:].add_(x6)
        v29.scatter_add_(0, self.b32, x33.to(v29.dtype))
        v34 = v31 + 0
        return (v8, v12, v15, v34)


def make_inputs(b=1):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((b,), torch.float32, g)
    x2 = _int((b,), torch.int64, g)
    x6 = _bool((1,), torch.bool, g)
    x13 = _index((0,), b, None, g)
    x22 = _normal((0,), torch.float32, g)
    x33 = _int((3,), torch.int32, g)
    return (x1, x2, x6, x13, x22, x33)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({0: b}, {0: b}, None, None, None, None)
