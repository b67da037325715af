"""pt2onnx fuzz program (fuzz seed 7411, program 4186, reduced)."""

import math
import torch
import torch.nn.functional as F  # noqa: F401

SEED = 58687918212062
B = (6, 9)  # (example, second) size of the dynamic dim; None: static
HALF = True  # float16 values flow through (looser tolerance)
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
        self.register_buffer("b10", _bool((1, 5), torch.bool, g))
        self.register_buffer("b16", _bool((1, 1), torch.bool, g))
        self.register_buffer("b18", _bool((1, 5), torch.bool, g))
        self.p30 = torch.nn.Parameter(_normal((), torch.float16, g))
        self.register_buffer("b35", _normal((2,), torch.float32, g))
        self.p42 = torch.nn.Parameter(_normal((2, 1), torch.float32, g))

    def forward(self, x2, x11, x15, x24, x25, x38, x39, x43):
        v4 = torch.tensor([0, 2, 1, -1], dtype=torch.int32)
        v6 = torch.neg(v4)
        v7 = v6.permute(0)
        v9 = v4[-3:]
        v6.mul_(v4)
        v44 = F.embedding_bag(x43, self.p42, torch.arange(x43.shape[0]), mode='max', per_sample_weights=None, include_last_offset=False, padding_idx=None)
        v47 = v9[v44.size(-2) - 4::math.ceil(v44.size(-2) / 16)]
        return (v9, v47,)


def make_inputs(b=6):
    g = torch.Generator().manual_seed(SEED)
    x2 = _int((b, 5), torch.int64, g)
    x11 = _normal((b, 5), torch.float32, g)
    x15 = _index((1,), 5, None, g)
    x24 = _index((2,), b, None, g)
    x25 = _normal((2, 5), torch.float32, g)
    x38 = _bool((2,), torch.bool, g)
    x39 = _normal((2,), torch.float16, g)
    x43 = _index((b,), 2, None, g)
    return (x2, x11, x15, x24, x25, x38, x39, x43)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({0: b}, {0: b}, None, None, None, None, None, {0: b})
