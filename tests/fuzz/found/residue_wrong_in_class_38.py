"""pt2onnx fuzz program (seed 6301018941)."""

import math
import torch
import torch.nn.functional as F  # noqa: F401

SEED = 6301018941
B = (5, 10)  # (example, second) size of the dynamic dim; None: static
HALF = True  # float16 values flow through (looser tolerance)
B_MIN = 4  # the smallest declared size of B (1: also run at 1)

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
        torch.manual_seed(SEED + 19)
        self.m19 = torch.nn.RNN(1, 4, num_layers=1, bidirectional=False, batch_first=True)
        self.register_buffer("b33", _bool((), torch.bool, g))
        self.register_buffer("b34", _normal((1, 1), torch.float32, g))

    def forward(self, x1, x4, x13, x21, x28, x39, x40):
        v2 = torch.std(x1, (0, 1), keepdim=False, correction=0)
        v3 = x1.expand(1, -1, -1)
        v5 = torch.stack([x1, x1, x4], 0)
        v6 = x4.detach().clone()
        v7 = torch.mul(v5.flatten().unsqueeze(-1), v5.flatten().unsqueeze(-2))
        v8 = torch.cumsum(v7, 1)
        v9 = v6.clone()
        v10 = torch.mul(True, v6)
        v12 = torch.cumsum(v8, -1)
        v14 = torch.maximum(v5, x13)
        v15 = torch.cumsum(x13, -2)
        v16 = torch.full((x13.shape[0], 1), -2)
        v17 = torch.triu(v15, 1)
        v18 = v15.narrow(1, 0, 3)
        v20 = self.m19(v18)[1]
        v22 = torch.where(x21, v17, v17)
        v23 = torch.stack([v10, v6], -2)
        v8.select(0, 4).relu_()
        v24 = torch.split(v15, 2, 2)[0]
        v25 = v20[:, -3:3, :]
        v27 = v5.contiguous()
        v29 = torch.add(v12, x28, alpha=2)
        v32 = True * v27
        v35 = torch.where(self.b33, x28, self.b34)
        v36 = torch.where(self.b33, v20, v25)
        v37 = torch.ne(x28, v35)
        v38 = torch.scatter_reduce(v24, 1, x39, x40, 'mean', include_self=True)
        v41 = torch.mul(v38.flatten().unsqueeze(-1), v24.flatten().unsqueeze(-2))
        v42 = torch.split(v29, max(v29.size(0) - v29.size(0) // 2, 1), 0)[0]
        v43 = v22.narrow(1, 0, math.floor(v22.size(1) / 2) * 2).reshape(*v22.shape[:1], math.floor(v22.size(1) / 2), 2, *v22.shape[2:])
        return (v16, v23, v29, v41, v42, v43)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((b, 1), torch.float16, g)
    x4 = _normal((b, 1), torch.float16, g)
    x13 = _normal((3, b, 1), torch.float32, g)
    x21 = _bool((3, b, 1), torch.bool, g)
    x28 = _bool((1, 1), torch.bool, g)
    x39 = _index((3, 4, 1), b, None, g)
    x40 = _normal((3, 4, 1), torch.float32, g)
    return (x1, x4, x13, x21, x28, x39, x40)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({0: b}, {0: b}, {1: b}, {1: b}, None, None, None)

