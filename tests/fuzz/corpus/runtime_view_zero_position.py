"""pt2onnx fuzz program (seed 15838205899)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 15838205899
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

    def forward(self, x1, x3):
        v2 = torch.gather(x1, 1, x3)
        v2[:, :-1].div_((x3.abs() + 1))
        v4 = torch.stack([x3, x3], -2)
        return (v4,)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((b, 1), torch.float32, g)
    x3 = _index((b, 0), 2, None, g)
    return (x1, x3)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=4, max=64)
    return ({0: b}, {0: b})


# Found by the differential fuzzer (pt2onnx.testing.fuzz): runtime with pt2onnx.
# load: Fail: [ONNXRuntimeError] : 1 : FAIL : Node (view#2) Op (Reshape) [ShapeInferenceError] Invalid position of 0.
EXPORTER = 'pt2onnx'
FOUND = 'runtime'
XFAIL = None


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
