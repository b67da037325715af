"""pt2onnx fuzz program (seed 2611010625)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 2611010625
B = None  # (example, second) size of the dynamic dim; None: static
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
        self.p5 = torch.nn.Parameter(_normal((0, 1), torch.float32, g))
        self.p12 = torch.nn.Parameter(_normal((2,), torch.float32, g))

    def forward(self, x1, x4):
        v3 = torch.mean(x1, -2, keepdim=False)
        v3.transpose(0, 1).scatter_(0, x4, self.p5.to(v3.transpose(0, 1).dtype))
        v13 = v3 @ self.p12
        return (v13,)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((2, 1, 2), torch.float32, g)
    x4 = _index((0, 1), 2, 0, g)
    return (x1, x4)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return (None, None)


# Found by the differential fuzzer (pt2onnx.testing.fuzz): mismatch with pt2onnx.
# output 0: max abs err 4.66 > 0.0181 (eager (2,) torch.float32, onnx (2,) float32)
EXPORTER = 'pt2onnx'
FOUND = 'mismatch'
XFAIL = None  # or the reason, for a bug not fixed yet (a strict xfail in test_corpus)


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
