"""pt2onnx fuzz program (fuzz seed 7411, program 108)."""

import math
import torch
import torch.nn.functional as F  # noqa: F401

SEED = 58687885918380
B = (1, 8)  # (example, second) size of the dynamic dim; None: static
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
        self.register_buffer("b22", _normal((), torch.float32, g))
        self.p26 = torch.nn.Parameter(_normal((2, 2), torch.float32, g))
        self.register_buffer("b36", _normal((2, 0), torch.float16, g))
        self.p38 = torch.nn.Parameter(_normal((), torch.float16, g))
        self.register_buffer("b43", _normal((4,), torch.float32, g))

    def forward(self, x1, x6, x7, x8, x27, x32, x33, x35, x41):
        v2 = x1[-2:, :]
        v3 = torch.arange(v2.shape[0])
        v4 = torch.stack([v3, v3], -1)
        v5 = torch.scatter(x1, 0, x6, 0)
        v9 = torch.where(x7, x6, x8)
        v10 = x8.to(torch.float32)
        v11 = torch.logical_xor(v4, v4)
        v12 = v3 @ v4
        v15 = v3.to(torch.bool)
        v16 = v15[-2:-1]
        v16.zero_()
        v20 = v16.sum(0, keepdim=False, dtype=torch.float32)
        v21 = v2.to(torch.float16)
        v23 = torch.ge(v20, self.b22)
        v24 = torch.softmax(v21, 0)
        v25 = x1.unsqueeze(1)
        v28 = F.embedding_bag(x27, self.p26, torch.arange(x27.shape[0]), mode='max', per_sample_weights=None, include_last_offset=False, padding_idx=1)
        v29 = torch.mul(v20, -2.5)
        v30 = torch.maximum(v24, v5)
        v31 = torch.ceil(v29)
        v30.select(1, 0).clamp_(0, 2)
        v5.transpose(0, 1).index_put_((x32,), torch.as_tensor(x33), accumulate=True)
        v34 = torch.index_add(v30, 1, x35, self.b36)
        v37 = torch.var(self.b22, correction=0)
        v39 = torch.where(v23, v31, self.p38)
        v42 = x35 @ x41
        v42.copy_(self.b43)
        v44 = torch.where(v23, v42, v42)
        v45 = v10.masked_fill(torch.arange(len(v10), device=v10.device).view(-1) >= max(math.ceil((len(v10) - 2) / 4), 0), True)
        v46 = self.p26[-(len(v45) // 3)::len(v45) % 3 + 1]
        v47 = x27[:len(x27) % 2 - 2]
        return (v11, v39, v44, v45, v46, v47)


def make_inputs(b=1):
    g = torch.Generator().manual_seed(SEED)
    x1 = _bool((2, b), torch.bool, g)
    x6 = _index((1, b), 2, 0, g)
    x7 = _bool((1, b), torch.bool, g)
    x8 = _bool((b,), torch.bool, g)
    x27 = _index((b,), 2, None, g)
    x32 = _index((3,), b, None, g)
    x33 = _bool((3, 2), torch.bool, g)
    x35 = _index((0,), b, None, g)
    x41 = _int((0, 4), torch.int64, g)
    return (x1, x6, x7, x8, x27, x32, x33, x35, x41)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({1: b}, {1: b}, {1: b}, {0: b}, {0: b}, None, None, None, None)
