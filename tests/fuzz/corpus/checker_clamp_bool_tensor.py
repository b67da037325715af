"""pt2onnx fuzz program (seed 15839267041)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 15839267041
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

    def forward(self, x2):
        v12 = F.pad(x2, (2, 2), value=1.5)
        v13 = v12.mT
        v15 = torch.sort(v13, 1, descending=True).values
        v18 = torch.logical_not(v15)
        v23 = torch.clamp(v18, min=v18)
        return (v23,)


def make_inputs(b=5):
    g = torch.Generator().manual_seed(SEED)
    x2 = _bool((1, 1, 1), torch.bool, g)
    return (x2,)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=4, max=64)
    return (None,)


# Found by the differential fuzzer (pt2onnx.testing.fuzz): checker with pt2onnx.
# InferenceError: [ShapeInferenceError] (op_type:Max, node name: clamp): data_0 typestr: T, has unsupported type: tensor(bool)
EXPORTER = 'pt2onnx'
FOUND = 'checker'
XFAIL = None  # fixed: a bool clamp runs on uint8


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
