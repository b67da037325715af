"""pt2onnx fuzz program (seed 100000325)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 100000325
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
        self.register_buffer("b3", _index((1,), 4, None, g))

    def forward(self, x1, x16):
        v2 = x1[:, :, self.b3]
        v2.select(3, 3).relu_()
        v15 = torch.addcmul(x1, x16, x16, value=0.5)
        return (v15,)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _int((1, 1, 3, 4), torch.int64, g)
    x16 = _int((1, 1, 1, 1), torch.int64, g)
    return (x1, x16)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=4, max=64)
    return (None, None)


# Found by the differential fuzzer (pt2onnx.testing.fuzz): export_error with pt2onnx.
# ValueError: value argument of type <class 'float'> cannot be safely cast to type <class 'int'>! While executing %addcmul : [num_users=1] = call_function[target=torch.ops.aten.addcmul.default](args = (%x1, %x16, %x16), kwargs = {value: 0.5})
EXPORTER = 'pt2onnx'
FOUND = 'export_error'
XFAIL = None  # or the reason, for a bug not fixed yet (a strict xfail in test_corpus)


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
