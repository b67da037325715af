"""pt2onnx fuzz program (seed 2612018543)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 2612018543
B = None  # (example, second) size of the dynamic dim; None: static
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
        self.register_buffer("b6", _normal((5,), torch.float32, g))

    def forward(self, x1):
        v3 = F.elu(x1)
        v4 = torch.arange(x1.shape[0])
        v5 = v4.to(torch.float16)
        v5 += self.b6
        v7 = torch.minimum(v5, v5)
        return (v3, v7)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((5, 5), torch.float16, g)
    return (x1,)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return (None,)



# Found by the differential fuzzer (seed 2612, program 10707): checker with pt2onnx.
# A float16 value updated in place by a float32 buffer: the recording wrote the
# functional add, which promotes to float32, where the in-place op keeps float16.
EXPORTER = "pt2onnx"
FOUND = "checker"
XFAIL = None
