"""pt2onnx fuzz program (fuzz seed 7411, program 4143, reduced)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 58687917871548
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
        self.p7 = torch.nn.Parameter(_normal((3, 4), torch.float32, g))
        self.p14 = torch.nn.Parameter(_normal((1,), torch.float16, g))
        self.register_buffer("b17", _normal((0, 2), torch.float16, g))

    def forward(self, x1, x2, x3, x5, x8, x10, x11):

        v6 = x1 @ x5



        v15 = v6[:, :, :-1, -1:0:2]









        v26 = v15.repeat_interleave(2 - v15.size(2) % 2, dim=-2)
        return (v26,)


def make_inputs(b=1):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((1, 3, b, 4), torch.float16, g)
    x2 = _bool((3, b, 0), torch.bool, g)
    x3 = _int((3, b, 0), torch.int64, g)
    x5 = _normal((4, 1), torch.float16, g)
    x8 = _index((b,), 3, None, g)
    x10 = _normal((b,), torch.float32, g)
    x11 = _int((0,), torch.int64, g)
    return (x1, x2, x3, x5, x8, x10, x11)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({2: b}, {1: b}, {1: b}, None, {0: b}, {0: b}, None)

