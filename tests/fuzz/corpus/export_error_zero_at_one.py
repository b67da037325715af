"""Seed 2611, program 745 (session 25): `v2.zero_()` then `squeeze(0)` on B declared down to 1.
The capture at B = 1 (a static recording) holds aten.zero, which had no rule, so the
If on the size could not be built (a SizeOneError); aten.zero now shares zeros_like's rule.

pt2onnx fuzz program (seed 2611008578)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 2611008578
B = (1, 7)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)
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

    def forward(self, x1, x11, x12):
        v2 = torch.add(x1, x1)
        v2.zero_()
        v3 = v2.clone().contiguous()
        v3.mul_(v2)
        v4 = torch.lt(v2, 2)
        v5 = v2.squeeze(0)
        v6 = v2[:-2]
        v7 = v2 + 0
        v9 = torch.all(v6, 0, keepdim=False)
        v10 = torch.scatter_reduce(v4, 0, x11, x12, 'prod', include_self=False)
        return (v5, v7, v10)


def make_inputs(b=1):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((b,), torch.float32, g)
    x11 = _index((0,), b, None, g)
    x12 = _bool((0,), torch.bool, g)
    return (x1, x11, x12)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({0: b}, None, None)
