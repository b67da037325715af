"""pt2onnx fuzz program (fuzz seed 7411, program 3660)."""

import math
import torch
import torch.nn.functional as F  # noqa: F401

SEED = 58687914046668
B = (6, 11)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)
B_MIN = 4  # the smallest declared size of B (1: also run at 1)
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
        self.p14 = torch.nn.Parameter(_normal((6, 2), torch.float32, g))

    def forward(self, x1, x2, x4, x6, x10, x15, x16):
        v3 = x2 / 2
        v5 = torch.ge(x4, x1)
        v7 = torch.stack([v5, x6], -2)
        v8 = torch.logsumexp(v7, (0, 2), keepdim=True)
        v11 = torch.ne(v3, x10)
        v12 = torch.cos(x10)
        v13 = v12 + 0
        v16 = F.embedding_bag(x15, self.p14, torch.arange(x15.shape[0] + 1), mode='max', per_sample_weights=None, include_last_offset=True, padding_idx=None)
        v17 = v5.narrow(0, 0, max(math.ceil((len(v5) - 1) / 2), 0))
        v18 = torch.tile(x2, (x2.shape[0] % 3 + 1,))
        v19 = torch.split(v11, max(-math.ceil(len(v11) / 4), 1), 0)[0]
        v20 = torch.maximum(x16, x1)
        return (v11, v13, v16, v17, v18, v19, v20)


def make_inputs(b=6, c=None):
    c = (b if C == 'b' else C) if c is None else c
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((b, 2), torch.float32, g)
    x2 = _int((b, 5), torch.int32, g)
    x4 = _bool((b, 2), torch.bool, g)
    x6 = _bool((b, 2), torch.bool, g)
    x10 = _normal((b, 5), torch.float32, g)
    x15 = _index((b,), 6, None, g)
    x16 = _normal((c, 2), torch.float32, g)
    return (x1, x2, x4, x6, x10, x15, x16)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    c = torch.export.Dim("C", min=1, max=64)
    return ({0: b}, {0: b}, {0: b}, {0: b}, {0: b}, {0: b}, {0: c})
