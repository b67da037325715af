"""pt2onnx fuzz program (written by hand in the fuzzer's format)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 11
B = None  # (example, second) size of the dynamic dim; None: static
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
        self.register_buffer("b3", _index((2,), 5, 0, g))

    def forward(self, x1, x2):
        v4 = x1.clone()
        v4[:, self.b3] = x2
        v5 = x1.clone()
        v5[..., self.b3] += 1
        v6 = x1.clone()
        v6[self.b3[:1], :, self.b3] = 7.0
        return (v4, v5, v6)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((3, 5, 5), torch.float32, g)
    x2 = _normal((2, 5), torch.float32, g)
    return (x1, x2)


def dynamic_shapes():
    return None


# index_put with leading None indices (x[:, idx] = v) was refused (a typed export error);
# it now moves the indexed dims first. Written by hand in the fuzzer's format.
EXPORTER = 'pt2onnx'
FOUND = 'export_error'
XFAIL = None  # or the reason, for a bug not fixed yet (a strict xfail in test_corpus)


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
