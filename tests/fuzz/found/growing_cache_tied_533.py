"""pt2onnx fuzz program (seed 3805011948)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 3805011948
B = (5, 7)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)
B_MIN = 1  # the smallest declared size of B (1: also run at 1)
C = 1  # the example of the second dynamic dim: 1, or 'b' (= B)
WARMUP = 15  # eager calls the model once at B = WARMUP before the export

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
        self.register_buffer("b13", _normal((4, 4), torch.float32, g))
        self.p22 = torch.nn.Parameter(_normal((3, 0), torch.float32, g))
        self.register_buffer("b26", _index((3, 0), 0, 1, g))
        self.p27 = torch.nn.Parameter(_normal((3, 0), torch.float32, g))
        self.k30 = torch.empty(0)
        self.k30_len = 0

    def forward(self, x1, x5, x7, x12, x21, x28):
        v2 = torch.zeros_like(x1)
        v4 = torch.gather(v2, 0, x5)
        v6 = torch.cumsum(v4, 0)
        v6.select(2, 0).copy_(x7)
        v8 = x7.mT
        v11 = torch.clamp(x7, min=x12)
        v14 = torch.div(v8, self.b13.abs() + 1)
        v15 = v14.contiguous()
        v16 = self.b13.permute(1, 0)
        v17 = torch.eq(v14, self.b13)
        v18 = torch.diagonal(v4, 1, 0, 1)
        v19 = F.gelu(x1)
        v20 = torch.scatter_reduce(v18, 1, x21, self.p22, 'amax', include_self=False)
        v23 = x21 / 2
        v24 = torch.tanh(self.p22)
        v25 = torch.nan_to_num(v23)
        v23.scatter_(1, self.b26, self.p27.to(v23.dtype))
        v28 = v14[:, v2.shape[0] % 2 - 2:max(v2.shape[0] // 2, 3 % 2)]
        v29 = torch.arange(max(v19.size(-1) - 2, 0), device=v19.device) * v19.float().sum()
        if self.k30_len < v19.shape[0]:
            self.k30 = torch.arange(v19.shape[0], device=v19.device, dtype=torch.float32) * -1.5 + 1
            self.k30_len = v19.shape[0]
        v31 = v19 * self.k30[:v19.shape[0]].view(-1, 1, 1)
        v32 = torch.maximum(x1, x28)
        return (v15, v16, v17, v25, v28, v29, v31, v32)


def make_inputs(b=5, c=None):
    c = (b if C == 'b' else C) if c is None else c
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((b, 4, 3), torch.float32, g)
    x5 = _index((4, 4, 3), b, None, g)
    x7 = _normal((4, 4), torch.float32, g)
    x12 = _normal((4, 1), torch.float32, g)
    x21 = _index((3, 0), 3, None, g)
    x28 = _normal((c, 4, 3), torch.float32, g)
    return (x1, x5, x7, x12, x21, x28)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    c = torch.export.Dim("C", min=1, max=64)
    return ({0: b}, None, None, None, None, {0: c})
