"""pt2onnx fuzz program (fuzz seed 7411, program 109)."""

import math
import torch
import torch.nn.functional as F  # noqa: F401

SEED = 58687885926300
B = (6, 11)  # (example, second) size of the dynamic dim; None: static
HALF = True  # float16 values flow through (looser tolerance)
B_MIN = 1  # the smallest declared size of B (1: also run at 1)
C = 'b'  # the example of the second dynamic dim: 1, or 'b' (= B)

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
        self.p8 = torch.nn.Parameter(_normal((3, 2), torch.float32, g))
        torch.manual_seed(SEED + 14)
        self.m14 = torch.nn.LSTM(1, 2, num_layers=1, bidirectional=False, batch_first=False)

    def forward(self, x1, x3, x9, x10, x15):
        v2 = torch.cumsum(x1, 1)
        v4 = torch.lt(x1, x3)
        v5 = v4.to(torch.float16)
        v6 = x1.mT
        v7 = torch.amax(v5, (-2, 1), keepdim=False)
        v11 = F.embedding_bag(x9, self.p8, None, mode='sum', per_sample_weights=x10, include_last_offset=False, padding_idx=None)
        v12 = torch.ne(x10, x10)
        v13 = v11.transpose(1, 0)
        v15 = self.m14(x10)[1][1]
        v16 = v4[..., :v4.shape[1] + v4.size(1)]
        v17 = v6.unsqueeze(0).expand(max(1, len(v6) // 16), *v6.shape)
        v18 = torch.arange(v5.shape[1], device=v5.device) < math.floor(v5.shape[1] / 4)
        v19 = x1 * x15
        return (v2, v12, v15, v16, v17, v18, v19)


def make_inputs(b=6, c=None):
    c = (b if C == 'b' else C) if c is None else c
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((5, b), torch.float32, g)
    x3 = _normal((b,), torch.float32, g)
    x9 = _index((5, 1), 3, None, g)
    x10 = _normal((5, 1), torch.float32, g)
    x15 = _normal((5, c), torch.float32, g)
    return (x1, x3, x9, x10, x15)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    c = torch.export.Dim("C", min=1, max=64)
    return ({1: b}, {0: b}, None, None, {1: c})
