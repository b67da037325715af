"""pt2onnx fuzz program (fuzz seed 7411, program 39)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 58687885371973
B = (5, 10)  # (example, second) size of the dynamic dim; None: static
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
        self.register_buffer("b13", _index((2, 1), 2, None, g))
        self.p24 = torch.nn.Parameter(_normal((1, 3), torch.float32, g))

    def forward(self, x1, x2, x4, x28, x29):
        v3 = torch.ne(x1, x2)
        v5 = torch.mul(x1, x4)
        v6 = v5[:, :, 2:]
        v7 = torch.full((x4.shape[0], 2), 0.5)
        v8 = torch.minimum(v7, v7)
        v9 = v6.permute(0, 1, 2)
        v10 = torch.trunc(v8)
        v11 = v10.transpose(1, 0)
        v12 = torch.gather(v11, 1, self.b13)
        v14 = torch.arange(v5.shape[2])
        v18 = torch.logsumexp(v14, 0, keepdim=True)
        v19 = v9[..., None, 0]
        v20 = torch.sqrt(torch.abs(v6))
        v21 = 2 ** v20.clamp(-3, 3)
        v22 = torch.flip(x2, (1,))
        v23 = torch.tril(v19, 1)
        v25 = v23 @ self.p24
        v29 = torch.eq(v23, x28)
        v25.select(2, 0).sub_(0.5)
        v7.zero_()
        v30 = x1.narrow(-1, x1.shape[2] // 4, x1.shape[2] - (x1.shape[2] // 4))
        v31 = torch.where(x29 > 0, x1, x29)
        return (v3, v21, v22, v29, v30, v31)


def make_inputs(b=5, c=None):
    c = (b if C == 'b' else C) if c is None else c
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((2, 5, b), torch.float32, g)
    x2 = _normal((2, 5, b), torch.float32, g)
    x4 = _normal((2, 5, b), torch.float32, g)
    x28 = _normal((2, 5, 1), torch.float32, g)
    x29 = _normal((2, 5, c), torch.float32, g)
    return (x1, x2, x4, x28, x29)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    c = torch.export.Dim("C", min=1, max=64)
    return ({2: b}, {2: b}, {2: b}, None, {2: c})
