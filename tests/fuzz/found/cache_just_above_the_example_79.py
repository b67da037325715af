"""pt2onnx fuzz program (seed 4111012412)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 4111012412
B = (6, 9)  # (example, second) size of the dynamic dim; None: static
HALF = True  # float16 values flow through (looser tolerance)
B_MIN = 4  # the smallest declared size of B (1: also run at 1)
WARMUP = 7  # eager calls the model once at B = WARMUP before the export

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
        self.register_buffer("b43", _normal((4, 2), torch.float32, g))
        self.k48 = torch.empty(0)
        self.k48_len = 0

    def forward(self, x1, x2, x6, x20, x24, x26, x30, x31, x34, x35, x36, x41):
        v3 = x2.view(-1)
        v4 = torch.chunk(x1, 1, 1)[-1]
        v5 = torch.cat([v4, x1], 2)
        v7 = torch.maximum(v3, x6)
        v8 = torch.bitwise_xor(v5, v5)
        v10 = torch.cumprod(v8.clamp(-2, 2), 1)
        v11 = torch.nan_to_num(v7)
        v12 = v10.mT
        v13 = torch.abs(v11)
        v15 = x2.unsqueeze(-2)
        v17 = v8.to(torch.int32)
        v18 = v4.to(torch.float16)
        v19 = torch.mul(v18.unsqueeze(-1), v18.unsqueeze(-2))
        v21 = torch.div(x20, v17.abs() + 1)
        v22 = torch.minimum(v10, x20)
        v23 = torch.rsqrt(x20.abs() + 1)
        v25 = torch.where(x24, v21, v22)
        v27 = torch.where(x26, v11, v3)
        v29 = torch.floor(v25)
        v25.mul_(2)
        v32 = torch.where(x30, v5, x31)
        v33 = torch.scatter(v32, -1, x34, x35)
        v37 = torch.stack([x31, x36, v25], -1)
        v39 = v29.detach().clone()
        v40 = torch.split(x36, 3, 0)[0]
        v42 = torch.stack([v37, x41, v37], 3)
        v44 = v29 @ self.b43
        v45 = torch.mul(x26.unsqueeze(-1), self.b43.unsqueeze(-2))
        v46 = v45.transpose(-2, 2)
        v47 = torch.logcumsumexp(v45, 0)
        if self.k48_len < v42.shape[1]:
            self.k48 = torch.arange(v42.shape[1], device=v42.device, dtype=torch.float32) * 0.25 + 0.125
            self.k48_len = v42.shape[1]
        v49 = v42 + self.k48[:v42.shape[1]].view(1, -1, 1, 1, 1)
        return (v13, v19, v40, v47, v49)


def make_inputs(b=6):
    g = torch.Generator().manual_seed(SEED)
    x1 = _bool((3, b, 2), torch.bool, g)
    x2 = _normal((b,), torch.float32, g)
    x6 = _bool((b,), torch.bool, g)
    x20 = _normal((3, b, 4), torch.float32, g)
    x24 = _bool((b, 1), torch.bool, g)
    x26 = _bool((b,), torch.bool, g)
    x30 = _bool((1, 1, 4), torch.bool, g)
    x31 = _int((3, b, 4), torch.int64, g)
    x34 = _index((3, b, 2), 4, 2, g)
    x35 = _int((3, b, 2), torch.int64, g)
    x36 = _normal((3, b, 4), torch.float32, g)
    x41 = _normal((3, b, 4, 3), torch.float32, g)
    return (x1, x2, x6, x20, x24, x26, x30, x31, x34, x35, x36, x41)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({1: b}, {0: b}, {0: b}, {1: b}, {0: b}, {0: b}, None, {1: b}, {1: b}, {1: b}, {1: b}, {1: b})
