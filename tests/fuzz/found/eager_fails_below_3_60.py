"""pt2onnx fuzz program (seed 30131885870526)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 30131885870526
B = (6, 11)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)
B_MIN = 1  # the smallest declared size of B (1: also run at 1)
WARMUP = 18  # eager calls the model once at B = WARMUP before the export

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
        self.register_buffer("b12", _normal((1,), torch.float32, g))
        self.p14 = torch.nn.Parameter(_normal((1, 3), torch.float32, g))
        torch.manual_seed(SEED + 18)
        self.m18 = torch.nn.LSTM(3, 2, num_layers=1, bidirectional=False, batch_first=False)
        torch.manual_seed(SEED + 20)
        self.m20 = torch.nn.LSTM(3, 3, num_layers=2, bidirectional=True, batch_first=False)
        self.register_buffer("b22", _index((4, 1), 3, None, g))
        self.register_buffer("b23", _normal((4, 1), torch.float32, g))
        self.register_buffer("k27", torch.empty(0), persistent=False)
        self.k27_shape = None

    def forward(self, x1, x4):
        v2 = x1.flatten()
        v3 = torch.mul(v2, v2)
        v5 = torch.cat([x4, v2], 0)
        v6 = v5.select(0, 9)
        v7 = torch.atan2(v5, v5)
        v8 = v3.t()
        v10 = torch.atan2(x4, x4)
        v13 = self.b12 * v8
        v15 = self.b12 @ self.p14
        v16 = v15 * v10
        v17 = self.p14.detach().clone()
        v19 = self.m18(v17)[0]
        v21 = self.m20(self.p14)[1][1]
        v17.transpose(0, 1).scatter_add_(0, self.b22, self.b23.to(v17.transpose(0, 1).dtype))
        v24 = v3[-(v3.size(0) // 2):]
        v25 = v2.masked_fill(torch.arange(v2.size(-1), device=v2.device).view(-1) >= max(v2.size(-1), v5.size(0)), 0)
        v26 = v5.new_zeros((int(len(v5) / 2), 3))
        if self.k27_shape != v2.shape:
            self.k27 = (torch.arange(v2.shape[0], device=v2.device, dtype=torch.float32) * -1.5 + 0).view(-1)
            self.k27_shape = v2.shape
        v28 = v2 * self.k27
        return (v13, v19, v21, v24, v25, v26, v28)


def make_inputs(b=6):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((b, 3, 1), torch.float32, g)
    x4 = _normal((3,), torch.float32, g)
    return (x1, x4)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({0: b}, None)
