"""pt2onnx fuzz program (seed 4111012335)."""

import math
import torch
import torch.nn.functional as F  # noqa: F401

SEED = 4111012335
B = (6, 8)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)
B_MIN = 4  # the smallest declared size of B (1: also run at 1)
WARMUP = 63  # eager calls the model once at B = WARMUP before the export

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
        self.register_buffer("k10", torch.empty(0), persistent=False)
        self.k10_shape = None

    def forward(self, x1, x2, x6):
        v3 = torch.clamp(x2, min=x2)
        v4 = x1.unsqueeze(-1)
        v5 = torch.scatter(v4, 1, x6, 0)
        v7 = v4[-math.ceil(v4.shape[-2] / 4)::math.ceil(v4.shape[-2] / 16)]
        v8 = x2.narrow(1, 0, math.floor(x2.shape[1] / 3) * 3).reshape(*x2.shape[:1], math.floor(x2.shape[1] / 3), 3)
        v9 = x1.repeat_interleave(round(len(x1) / 24) + 1, dim=0)
        if self.k10_shape != tuple(v4.shape):
            self.k10 = (torch.arange(v4.shape[0], device=v4.device, dtype=torch.float32) * 0.5 + 0.125).view(-1, 1)
            self.k10_shape = tuple(v4.shape)
        v11 = v4 * self.k10
        return (v3, v5, v7, v8, v9, v11)


def make_inputs(b=6):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((b,), torch.float32, g)
    x2 = _normal((3, 4), torch.float32, g)
    x6 = _index((b, 1), 1, 1, g)
    return (x1, x2, x6)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({0: b}, None, {0: b})
