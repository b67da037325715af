"""pt2onnx fuzz program (seed 1207, minimized by hand)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 1207
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
    def forward(self, x1, x30, x31, x32):
        v27 = x1 * 2
        v27.transpose(0, 3).scatter_(2, x30, x31.to(v27.transpose(0, 3).dtype))
        v27.transpose(0, 3).div_((x32.abs() + 1))
        v33 = v27.reshape(v27.size(0), -1)
        return (v27, v33)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((5, 5, 1, 4), torch.float32, g)
    x30 = _index((4, 1, 1, 5), 1, None, g)
    x31 = _bool((4, 1, 1, 5), torch.bool, g)
    x32 = _normal((4, 5, 1, 5), torch.float32, g)
    return (x1, x30, x31, x32)


def dynamic_shapes():
    return None


# Found by the differential fuzzer (pt2onnx.testing.fuzz): export_error with pt2onnx.
# In-place writes through a transposed view of a tensor made in the graph: the recording
# gave them up, and torch.export's functionalization failed ("Cannot view a tensor with
# shape [5, 5, 1, 4] and strides (1, 5, 5, 25) as a tensor with shape (5, 20)").
EXPORTER = 'pt2onnx'
FOUND = 'export_error'
XFAIL = None  # or the reason, for a bug not fixed yet (a strict xfail in test_corpus)


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
