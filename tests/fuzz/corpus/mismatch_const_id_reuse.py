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

    def forward(self, x1):
        v2 = x1.clone()
        v2[torch.tensor([4, 1])] = torch.tensor([1.0, 2.0]).reshape(2, 1)
        return (v2,)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((5, 2), torch.float32, g)
    return (x1,)


def dynamic_shapes():
    return None


# Found while fuzzing index_put: two folded constants, the index [4, 1] took the values'
# initializer [1, 2] (the translator cached initializers by id() of freed Const objects).
EXPORTER = 'pt2onnx'
FOUND = 'mismatch'
XFAIL = None  # or the reason, for a bug not fixed yet (a strict xfail in test_corpus)


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
