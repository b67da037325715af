"""pt2onnx fuzz program (seed 791903674419)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 791903674419
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

    def forward(self, x10, x13, x14):
        v12 = torch.scatter_reduce(x10, 0, x13, x14, 'amax', include_self=False)
        return (v12,)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x10 = _bool((2, 1), torch.bool, g)
    x13 = _index((1, 1), 3, None, g)
    x14 = _bool((1, 1), torch.bool, g)
    return (x10, x13, x14)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=4, max=64)
    return (None, None, None)


# Found by the differential fuzzer (pt2onnx.testing.fuzz): export_error with pt2onnx.
# TranslationError: the rule scatter_reduce18 for aten::scatter_reduce.two failed on node scatter_reduce: TypeError: torch.bool is not supported by torch.iinfo Next step: check the rule against the op's schema, or override it with custom_translations={op: fn}.
EXPORTER = 'pt2onnx'
FOUND = 'export_error'
XFAIL = None  # or the reason, for a bug not fixed yet (a strict xfail in test_corpus)


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
