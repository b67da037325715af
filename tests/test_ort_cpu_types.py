"""passes/ort_cpu_types.py: a node in a dtype onnxruntime's CPU build has no kernel for
(or that ONNX's schema does not allow for the op) is computed in a wider type, and the
file loads and matches eager. benchmarks/dtype_sweep.py runs every OpInfo entry in these
dtypes; this file keeps the ops real models meet."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch

import pt2onnx
from pt2onnx.passes import ort_cpu_types
from pt2onnx.passes._ort_cpu_kernels import KERNELS

INTS = (torch.int8, torch.int16, torch.uint8)


def _supports(kernels: dict[str, list[tuple[int, int, dict[str, str]]]], op: str,
              version: int) -> set[tuple[str, str]]:
    """The (constraint, type) pairs some kernel of ``op`` takes at schema ``version``."""
    return {(name, t) for first, last, constraints in kernels.get(op, ())
            if first <= version <= last
            for name, types in constraints.items() for t in types.split()}


def _installed_kernels() -> dict[str, list[tuple[int, int, dict[str, str]]]]:
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    out: dict[str, list[tuple[int, int, dict[str, str]]]] = {}
    for k in C.get_all_opkernel_def():
        if k.provider != "CPUExecutionProvider" or k.domain:
            continue
        first, last = k.version_range
        out.setdefault(k.op_name, []).append((first, last, {
            name: " ".join(t.removeprefix("tensor(").removesuffix(")") for t in types)
            for name, types in k.type_constraints.items()}))
    return out


def test_the_table_claims_no_kernel_the_installed_onnxruntime_lacks() -> None:
    """At every schema version a node can have at the opsets pt2onnx writes, each type
    the table says onnxruntime runs, the installed one runs. The table may lag a newer
    onnxruntime (it then widens a node that would have run), and its kernels' version
    ranges may be cut differently (1.32 splits some)."""
    installed = _installed_kernels()
    missing = []
    for op in KERNELS:
        versions = set()
        for opset in range(17, onnx.defs.onnx_opset_version() + 1):
            try:
                versions.add(onnx.defs.get_schema(op, opset, "").since_version)
            except onnx.defs.SchemaError:
                pass
        for v in sorted(versions):
            lacking = _supports(KERNELS, op, v) - _supports(installed, op, v)
            missing += [(op, v, *pair) for pair in sorted(lacking)]
    assert not missing, (
        f"{len(missing)} kernels in passes/ort_cpu_kernels.json are not in this onnxruntime, "
        f"for example {missing[:5]}. Next step: python tools/gen_ort_cpu_kernels.py > "
        "src/pt2onnx/passes/ort_cpu_kernels.json with the oldest supported onnxruntime")


def _check(fn, *args: torch.Tensor, atol: float = 0.0) -> ir.Model:  # type: ignore[no-untyped-def]
    class M(torch.nn.Module):
        def forward(self, *xs: torch.Tensor):  # type: ignore[no-untyped-def]
            return fn(*xs)

    with torch.no_grad():
        expected = M()(*args)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "will not load" warning
        warnings.filterwarnings("ignore", message=".*(TypedStorage|deprecated).*")
        prog = pt2onnx.export(M(), args)
    assert not ort_cpu_types.unloadable(prog.model)
    onnx.checker.check_model(prog.model_proto, full_check=True)
    actual = prog.run(*args)
    exp = expected if isinstance(expected, tuple) else (expected,)
    for e, a in zip(exp, actual, strict=True):
        assert tuple(e.shape) == tuple(a.shape)
        e = e.float().numpy() if e.dtype == torch.bfloat16 else e.numpy()
        a = np.asarray(a, dtype=np.float32) if e.dtype == np.float32 and a.dtype != e.dtype else a
        if atol:
            np.testing.assert_allclose(a, e, atol=atol, rtol=2e-2)
        else:
            np.testing.assert_array_equal(a, e)
    return prog.model


def _ints(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max + 1, shape, generator=g, dtype=torch.int64).to(dtype)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: str(d).removeprefix("torch."))
def test_narrow_integer_arithmetic_wraps_as_eager(dtype: torch.dtype) -> None:
    """Sums, products and differences overflow the narrow type on these values: the wider
    computation cast back keeps the low bits, as eager's does. A clamp bound outside the
    type (-3 in uint8) is what the running torch makes of it (2.13 wraps it, 2.15
    saturates it)."""
    x, y = _ints(dtype, 4, 6), _ints(dtype, 4, 6)
    _check(lambda a, b: (a.sum(-1, dtype=dtype), a.cumsum(0), a * b, a - b,
                         a.prod(1, dtype=dtype), torch.maximum(a, b), torch.clamp(a, min=-3, max=90), a.relu()),
           x, y)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: str(d).removeprefix("torch."))
def test_narrow_integer_order_and_selection(dtype: torch.dtype) -> None:
    x = _ints(dtype, 5, 7)
    mask = x > 0
    _check(lambda a, m: (torch.where(m, a, a.flip(0)), a.amax(1), a.amin(0),
                         a.argmax(-1), a.abs(), a.neg(), torch.topk(a.to(torch.int32), 2).values,
                         a.sort(dim=-1, stable=True).values, a.max(0).values, a == a.flip(1),
                         a.index_select(0, torch.tensor([4, 0]))), x, mask)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: str(d).removeprefix("torch."))
def test_narrow_integer_bitwise(dtype: torch.dtype) -> None:
    x, y = _ints(dtype, 3, 5), _ints(dtype, 3, 5)
    _check(lambda a, b: (a & b, a | b, a ^ b, ~a), x, y)


def test_sam_int16_sum_loads() -> None:
    """SAM's multimask decoder counts mask pixels with ``sum(dtype=torch.int16)``: ONNX's
    ReduceSum has no int16 (the file would not load anywhere)."""
    masks = torch.randn(1, 3, 16, 16) > 0
    _check(lambda m: m.flatten(-2).sum(-1, dtype=torch.int16), masks)


def test_bool_selection() -> None:
    m = torch.rand(4, 5) > 0.5
    a, b = torch.rand(4, 5) > 0.3, torch.rand(4, 5) > 0.6
    _check(lambda c, x, y: torch.where(c, x, y), m, a, b)


def test_uint16_selection() -> None:
    m = torch.rand(4, 5) > 0.5
    u = torch.arange(20, dtype=torch.int32).reshape(4, 5).to(torch.uint16)
    try:
        torch.where(m, u, u.flip(0))
    except NotImplementedError as e:  # torch 2.12: "where_cpu" not implemented for 'UInt16'
        pytest.skip(f"this torch has no uint16 where in eager: {e}")
    _check(lambda c, x: torch.where(c, x, x.flip(0)), m, u)


def test_bfloat16_layers_load_and_match() -> None:
    """A bfloat16 block: onnxruntime's CPU build has almost no bfloat16 kernels, so each
    op computes in float32 and rounds back."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8).to(torch.bfloat16)
    norm = torch.nn.LayerNorm(8).to(torch.bfloat16)
    x = torch.randn(2, 3, 8).to(torch.bfloat16)
    model = _check(lambda t: (norm(torch.relu(lin(t)) + t).softmax(-1), t.sum(1), t.amax(-1)),
                   x, atol=2e-2)
    assert any(n.op_type == "Cast" for n in model.graph)


def test_a_node_no_widening_fixes_is_named() -> None:
    """BitShift is unsigned-only in ONNX, and an int8 one has no type to widen to."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.INT8), shape=ir.Shape([3]))
    node = ir.Node("", "BitShift", [x, x], [ir.AttrString("direction", "LEFT")])
    node.outputs[0].dtype = ir.DataType.INT8
    graph = ir.Graph([x], node.outputs, nodes=[node], opset_imports={"": 21})
    model = ir.Model(graph, ir_version=10)
    assert ort_cpu_types.apply(model) == 0
    assert ort_cpu_types.unloadable(model) == ["BitShift(T=int8)"]


def test_float16_is_left_to_onnxruntime() -> None:
    """onnxruntime casts a float16 node with only a float32 kernel itself, and other
    runtimes have float16 kernels: no Cast is added."""
    x = torch.randn(3, 4).to(torch.float16)
    prog = pt2onnx.export(torch.nn.ReLU(), (x,))
    assert [n.op_type for n in prog.model.graph] == ["Relu"]


def test_a_bfloat16_model_runs_and_verifies() -> None:
    """run() and verify() feed and return bfloat16 through float32 at the session's
    boundary (onnxruntime's Python API has no bfloat16 arrays); the file keeps bfloat16."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.GELU()).to(torch.bfloat16)
    x = torch.randn(3, 8).to(torch.bfloat16)
    prog = pt2onnx.export(model, (x,), verify=True)
    assert prog.model.graph.inputs[0].dtype == ir.DataType.BFLOAT16
    assert prog.model.graph.outputs[0].dtype == ir.DataType.BFLOAT16
    out = prog.run(x)[0]
    assert out.dtype.name == "bfloat16"
    np.testing.assert_allclose(out.astype(np.float32), model(x).float().detach().numpy(),
                               atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("kw", [
    {"size": (11, 23), "mode": "bilinear"},
    {"size": (11, 23), "mode": "bilinear", "antialias": True},
    {"size": (7, 9), "mode": "bicubic"},
    {"scale_factor": 1.5, "mode": "bicubic", "align_corners": True},
    {"size": (7, 30), "mode": "bicubic", "antialias": True},
], ids=["bilinear", "bilinear_aa", "bicubic", "bicubic_align", "bicubic_aa"])
def test_uint8_images_resample_within_one_of_eager(kw) -> None:  # type: ignore[no-untyped-def]
    """torch resamples a uint8 image one axis at a time in fixed point, rounding and
    clamping in between; the file does the same in float32 (a bicubic overshoot is
    clamped, which the single 2-D Resize did not: 9 off) and is within 1 of eager. The
    antialiased path multiplied uint8 weight matrices (247 off)."""
    x = torch.randint(0, 256, (2, 3, 16, 16), dtype=torch.uint8)

    class M(torch.nn.Module):
        def forward(self, t):  # type: ignore[no-untyped-def]
            return torch.nn.functional.interpolate(t, **kw)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(M(), (x,))
    out = prog.run(x)[0]
    expected = M()(x).numpy()
    assert out.dtype == np.uint8 and out.shape == expected.shape
    diff = np.abs(out.astype(np.int64) - expected.astype(np.int64))
    assert diff.max() <= 1, diff.max()
    assert (diff > 0).mean() < 0.1


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32])
def test_scatter_amax_without_self_starts_at_the_lowest_value(dtype: torch.dtype) -> None:
    """``scatter_reduce(..., "amax", include_self=False)`` starts each written position
    at the dtype's lowest value: it started at -max, which is 1 in uint8 and min + 1 in
    a signed type, so a position that only receives the lowest value came out wrong."""
    low = torch.iinfo(dtype).min
    x = torch.full((4, 3), 7, dtype=dtype)
    src = torch.full((2, 3), low, dtype=dtype)
    index = torch.tensor([[0, 1, 2], [3, 3, 0]])
    _check(lambda a, i, s: (a.scatter_reduce(0, i, s, "amax", include_self=False),
                            a.scatter_reduce(0, i, -s - 1 if dtype != torch.uint8 else s + 200,
                                             "amin", include_self=False)), x, index, src)


def test_bfloat16_attention_accumulates_in_float32() -> None:
    """bfloat16 sdpa computes in float32 and rounds once, as torch's CPU kernel
    accumulates: op by op in bfloat16 (each op widened and rounded back) the file was
    13x further from a float64 reference than eager."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=g).to(torch.bfloat16) for _ in range(3))

    class M(torch.nn.Module):
        def forward(self, q, k, v):  # type: ignore[no-untyped-def]
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    reference = M()(q.double(), k.double(), v.double())
    eager_err = (M()(q, k, v).double() - reference).abs().max().item()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = pt2onnx.export(M(), (q, k, v))
    out = torch.from_numpy(prog.run(q, k, v)[0].astype(np.float32)).double()
    assert (out - reference).abs().max().item() <= 1.5 * eager_err + 1e-6


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: str(d).removeprefix("torch."))
def test_hardtanh_of_integers(dtype: torch.dtype) -> None:
    """hardtanh's default bounds are -1 and 1: in uint8 torch 2.13 refuses them, 2.15
    saturates -1 to 0 (the export failed there: -1 is no uint8 constant)."""
    x = _ints(dtype, 3, 4)
    try:
        torch.nn.functional.hardtanh(x)
    except RuntimeError as e:
        pytest.skip(f"this torch refuses hardtanh of {dtype}: {e}")
    _check(lambda a: torch.nn.functional.hardtanh(a), x)
