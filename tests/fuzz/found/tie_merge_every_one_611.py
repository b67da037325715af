"""pt2onnx fuzz program (seed 4111012944)."""

import math
import torch
import torch.nn.functional as F  # noqa: F401

SEED = 4111012944
B = (6, 8)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)
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
        self.p3 = torch.nn.Parameter(_normal((4, 1), torch.float32, g))
        self.register_buffer("b7", _normal((1,), torch.float32, g))

    def forward(self, x1, x4, x8):
        v2 = torch.cumsum(x1, 0)
        v5 = F.embedding_bag(x4, self.p3, None, mode='sum', per_sample_weights=None, include_last_offset=False, padding_idx=None)
        v6 = v5.detach().clone()
        v5.relu_()
        v8 = self.b7 * x4
        v9 = torch.split(v6, [math.ceil(len(v6) / 4), len(v6) - (math.ceil(len(v6) / 4))], 0)[0]
        v10 = x4[..., :-(x4.size(1) // 4)]
        v11 = x8 + x4
        return (v2, v6, v8, v9, v10, v11)


def make_inputs(b=6, c=None):
    c = (b if C == 'b' else C) if c is None else c
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((4, 0, b), torch.float32, g)
    x4 = _index((b, 2), 4, None, g)
    x8 = _int((c, 2), torch.int64, g)
    return (x1, x4, x8)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    c = torch.export.Dim("C", min=1, max=64)
    return ({2: b}, {0: b}, {0: c})
