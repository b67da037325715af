"""pt2onnx fuzz program (seed 30131888951017)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 30131888951017
B = (5, 7)  # (example, second) size of the dynamic dim; None: static
HALF = True  # float16 values flow through (looser tolerance)
B_MIN = 4  # the smallest declared size of B (1: also run at 1)
C = 'b'  # the example of the second dynamic dim: 1, or 'b' (= B)
WARMUP = 5  # eager calls the model once at B = WARMUP before the export

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
        self.register_buffer("b24", _int((4,), torch.int64, g))
        self.k40 = torch.empty(0)
        self.k40_shape = None

    def forward(self, x1, x6, x7, x9, x10, x14, x16, x19, x23, x26, x28, x32, x33, x37, x38):
        v2 = torch.add(x1, x1)
        v3 = torch.rsqrt(x1.abs() + 1)
        v4 = x1[2::2, :]
        v5 = torch.add(v3.unsqueeze(-1), v3.unsqueeze(-2))
        v8 = torch.cat([v4, x6, x7], -2)
        v11 = torch.where(x9, x10, x6)
        v12 = torch.where(x9, x9, x9)
        v13 = torch.tile(x6, (2,))
        v11.transpose(0, 1).zero_()
        v15 = torch.matmul(x10, x14)
        v17 = torch.remainder(x16, x1.abs() + 1)
        v18 = torch.index_select(v15, -2, x19)
        v20 = torch.flip(v18, (0,))
        v21 = v18.detach().clone()
        v22 = v18 * 2
        v22.select(0, 3).scatter_add_(0, x23, self.b24.to(v22.select(0, 3).dtype))
        v25 = torch.add(v22.unsqueeze(-1), x23.unsqueeze(-2))
        v27 = torch.matmul(v25, x26)
        v29 = torch.where(x7 > x28, x7, x28)
        v31 = torch.scatter_add(v4, -2, x32, x33)
        v34 = torch.add(v11.flatten().unsqueeze(-1), x32.flatten().unsqueeze(-2))
        v35 = torch.where(x9, x33, x33)
        v36 = torch.nan_to_num(v5)
        v38 = torch.cat([v2, v4, x37], 0)
        v39 = v36 * 0.5
        if self.k40_shape != x7.shape:
            self.k40 = torch.cos(torch.arange(x7.shape[0], device=x7.device, dtype=torch.float32)[:, None] * (torch.arange(x7.shape[-1], device=x7.device, dtype=torch.float32) + 1) * -1.5)
            self.k40_shape = x7.shape
        v41 = x7 + self.k40
        v42 = x14 - x38
        return (v27, v34, v35, v39, v41, v42)


def make_inputs(b=5, c=None):
    c = (b if C == 'b' else C) if c is None else c
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((3, b), torch.float32, g)
    x6 = _int((0, b), torch.int64, g)
    x7 = _normal((1, b), torch.float32, g)
    x9 = _bool((0, b), torch.bool, g)
    x10 = _int((1, b), torch.int32, g)
    x14 = _int((b, 3), torch.int32, g)
    x16 = _normal((3, b), torch.float16, g)
    x19 = _index((4,), 1, None, g)
    x23 = _index((4,), 3, None, g)
    x26 = _int((4, 4, 3), torch.int64, g)
    x28 = _bool((1, b), torch.bool, g)
    x32 = _index((0, b), 1, None, g)
    x33 = _normal((0, b), torch.float32, g)
    x37 = _normal((2, b), torch.float32, g)
    x38 = _int((c, 1), torch.int32, g)
    return (x1, x6, x7, x9, x10, x14, x16, x19, x23, x26, x28, x32, x33, x37, x38)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    c = torch.export.Dim("C", min=1, max=64)
    return ({1: b}, {1: b}, {1: b}, {1: b}, {1: b}, {0: b}, {1: b}, None, None, None, {1: b}, {1: b}, {1: b}, {1: b}, {0: c})

