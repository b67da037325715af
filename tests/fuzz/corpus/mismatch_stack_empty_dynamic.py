"""pt2onnx fuzz program (seed 2000231)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 2000231
B = (5, 7)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)

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

    def forward(self, x1, x2, x5, x6, x19, x20, x22, x24, x25):
        v3 = torch.add(x2, x1)
        v4 = torch.scatter_reduce(v3, -3, x5, x6, 'amax', include_self=False)
        v8 = torch.where(v4 > 0.5, v4, 0.5)
        v8.transpose(0, 2).zero_()
        v18 = torch.scatter_reduce(x5, -2, x19, x20, 'sum', include_self=True)
        v23 = torch.ge(v18, x22)
        v26 = torch.stack([x25, v23, x24], 0)
        return (v26,)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((1, b, 1), torch.float32, g)
    x2 = _int((b, 1), torch.int64, g)
    x5 = _index((0, b, 1), 1, None, g)
    x6 = _normal((0, b, 1), torch.float32, g)
    x19 = _index((0, 1, 1), b, None, g)
    x20 = _int((0, 1, 1), torch.int64, g)
    x22 = _bool((0, b, 1), torch.bool, g)
    x24 = _int((0, b, 1), torch.int64, g)
    x25 = _bool((0, b, 1), torch.bool, g)
    return (x1, x2, x5, x6, x19, x20, x22, x24, x25)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=4, max=64)
    return ({1: b}, {0: b}, {1: b}, {1: b}, None, None, {1: b}, {1: b}, {1: b})


# Found by the differential fuzzer (pt2onnx.testing.fuzz): mismatch with pt2onnx.
# output 0 at B=5: shape (eager (3, 0, 5, 1) torch.int64, onnx (3, 5, 0, 1) int64)
EXPORTER = 'pt2onnx'
FOUND = 'mismatch'
XFAIL = None


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
