"""pt2onnx fuzz program (fuzz seed 7411, program 1136)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 7411023369
B = (6, 11)  # (example, second) size of the dynamic dim; None: static
HALF = True  # float16 values flow through (looser tolerance)
B_MIN = 1  # the smallest declared size of B (1: also run at 1)
C = 1  # the example of the second dynamic dim: 1, or 'b' (= B)

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
        self.k16 = torch.empty(0)
        self.k16_shape = None

    def forward(self, x1, x8, x9, x13, x14):
        v2 = torch.softmax(x1, -1)
        v3 = v2.expand(-1, -1, -1)
        v4 = torch.abs(v2)
        v5 = v2.permute(0, 1, 2)
        v6 = v3.expand(3, -1, -1, -1)
        v7 = torch.scatter(v4, -1, x8, x9)
        v10 = x9.contiguous()
        v11 = torch.logsumexp(v6, (2, 3), keepdim=False)
        v12 = torch.cos(v7)
        v14 = torch.cat([x13, v7], 0)
        v15 = torch.full((min(max(x8.shape[1] // 2, 1), x8.shape[1]),), x8.shape[1] / 3, device=x8.device)
        if self.k16_shape != v3.shape[-2:]:
            self.k16 = torch.cos(torch.arange(v3.shape[1], device=v3.device, dtype=torch.float32)[:, None] * (torch.arange(v3.shape[-1], device=v3.device, dtype=torch.float32) + 1) * 0.5)
            self.k16_shape = v3.shape[-2:]
        v17 = v3.float() * self.k16
        v18 = x14 * x8
        return (v5, v11, v14, v15, v17, v18)


def make_inputs(b=6, c=None):
    c = (b if C == 'b' else C) if c is None else c
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((2, b, 2), torch.float16, g)
    x8 = _index((2, b, 0), 2, 2, g)
    x9 = _normal((2, b, 0), torch.float16, g)
    x13 = _normal((2, b, 2), torch.float16, g)
    x14 = _int((2, c, 0), torch.int64, g)
    return (x1, x8, x9, x13, x14)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    c = torch.export.Dim("C", min=1, max=64)
    return ({1: b}, {1: b}, {1: b}, {1: b}, {1: c})

