"""pt2onnx fuzz program (seed 2612009868)."""

import torch
import torch.nn.functional as F  # noqa: F401

SEED = 2612009868
B = (6, 9)  # (example, second) size of the dynamic dim; None: static
HALF = False  # float16 values flow through (looser tolerance)
B_MIN = 4  # the smallest declared size of B (1: also run at 1)

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
        torch.manual_seed(SEED + 8)
        self.m8 = torch.nn.GRU(2, 3, num_layers=1, bidirectional=False, batch_first=False)

    def forward(self, x1):
        v9 = self.m8(x1)[0]
        return (v9,)


def make_inputs(b=6):
    g = torch.Generator().manual_seed(SEED)
    x1 = _normal((b, 0, 2), torch.float32, g)
    return (x1,)


def dynamic_shapes():
    if B is None:
        return None
    b = torch.export.Dim("B", min=B_MIN, max=64)
    return ({0: b},)


# Found by the differential fuzzer (pt2onnx.testing.fuzz): checker with pt2onnx.
# InferenceError: [ShapeInferenceError] Inference error(s): (op_type:Reshape, node name: m8/packed_rnn#3): [ShapeInferenceError] Invalid Target shape product of 0. Product cannot be 0 in combination with -1
EXPORTER = 'pt2onnx'
FOUND = 'checker'
XFAIL = None  # or the reason, for a bug not fixed yet (a strict xfail in test_corpus)


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
