"""Turns one OpInfo sample into a module, exports it with pt2onnx and compares with eager.

Shared by tests/rules/test_opinfo.py and benchmarks/opinfo_compare.py. Only
tensors become graph inputs; Python scalars, lists and dtypes in a sample stay
inside the wrapper module as constants.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

DEFAULT_ATOL = 1e-4
DEFAULT_RTOL = 1e-3


@functools.cache
def op_db_by_name() -> dict[str, Any]:
    """OpInfo entries by ``name`` or ``name.variant``."""
    from torch.testing._internal.common_methods_invocations import op_db

    out = {}
    for info in op_db:
        key = f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name
        out.setdefault(key, info)
    return out


class OpModule(torch.nn.Module):
    """``op(*sample)`` with the sample's tensors as the only inputs."""

    def __init__(self, op: Callable[..., Any], spec: Any, leaves: list[Any],
                 tensor_pos: list[int]) -> None:
        super().__init__()
        self.op = op
        self.spec = spec
        self.leaves = leaves
        self.tensor_pos = tensor_pos

    def forward(self, *tensors: torch.Tensor) -> Any:
        leaves = list(self.leaves)
        for pos, t in zip(self.tensor_pos, tensors, strict=False):
            leaves[pos] = t
        inp, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.op(inp, *args, **kwargs)


def wrap_sample(op: Callable[..., Any], sample: Any) -> tuple[OpModule, tuple[torch.Tensor, ...]]:
    """The module and its tensor inputs for one ``SampleInput``."""
    leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    tensor_pos = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = tuple(leaves[i].detach().clone().contiguous() for i in tensor_pos)
    consts = [None if i in tensor_pos else leaf for i, leaf in enumerate(leaves)]
    return OpModule(op, spec, consts, tensor_pos), tensors


def samples(info: Any, dtype: torch.dtype, limit: int | None = None) -> Iterator[Any]:
    """The OpInfo's reference samples (no grad), at most ``limit`` of them."""
    torch.manual_seed(0)
    it = info.sample_inputs("cpu", dtype, requires_grad=False)
    for i, sample in enumerate(it):
        if limit is not None and i >= limit:
            return
        yield sample


@dataclass
class Outcome:
    ok: bool
    message: str = ""


def float32_outputs(proto: Any) -> Any:
    """A copy of ``proto`` whose bfloat16 outputs are cast to float32.

    onnxruntime's Python API cannot return bfloat16 arrays (numpy has no such
    type), so both exporters' models are compared through this cast; the eager
    side is cast alike in :func:`compare_outputs`. Exact: float32 holds every bfloat16.
    """
    import onnx

    if not any(o.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16
               for o in proto.graph.output):
        return proto
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    for out in model.graph.output:
        if out.type.tensor_type.elem_type != onnx.TensorProto.BFLOAT16:
            continue
        name = out.name
        inner = f"{name}__bfloat16"
        for node in model.graph.node:
            node.output[:] = [inner if o == name else o for o in node.output]
            node.input[:] = [inner if i == name else i for i in node.input]
        model.graph.node.append(onnx.helper.make_node("Cast", [inner], [name],
                                                      to=onnx.TensorProto.FLOAT))
        out.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    return model


def run_onnx(proto: Any, tensors: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    """Runs ``proto`` in onnxruntime (CPU) on ``tensors``; bfloat16 outputs come back as float32."""
    import onnxruntime as ort

    if not proto.graph.output:
        # Nothing to compute (broadcast_shapes() of no shapes returns no tensor), and
        # onnxruntime refuses to load a graph without values: only the count is compared.
        return []
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(float32_outputs(proto).SerializeToString(), opts,
                                   providers=["CPUExecutionProvider"])
    from pt2onnx.verify import to_numpy

    names = [i.name for i in session.get_inputs()]
    return list(session.run(None, dict(zip(names, map(to_numpy, tensors), strict=False))))


def _flat_outputs(out: Any) -> list[Any]:
    return [x for x in pytree.tree_leaves(out) if x is not None]


def compare_outputs(expected: Any, actual: list[np.ndarray], atol: float = DEFAULT_ATOL,
                    rtol: float = DEFAULT_RTOL, shape_only: bool = False) -> Outcome:
    """Max abs diff <= atol + rtol * max|ref| per output; exact for ints and bools.

    ``shape_only`` (random ops) compares each output's shape and dtype only.
    """
    exp = _flat_outputs(expected)
    if len(exp) != len(actual):
        return Outcome(False, f"{len(exp)} eager outputs, {len(actual)} from onnxruntime")
    for i, (e, a) in enumerate(zip(exp, actual, strict=False)):
        if not isinstance(e, torch.Tensor):
            e = torch.tensor(e)
        if e.dtype == torch.bfloat16:
            e = e.float()  # as float32_outputs does on the onnxruntime side
        if e.is_complex():
            # ONNX has no complex values at run time: both exporters write a complex
            # output as a float tensor whose last axis holds (real, imag).
            e = torch.view_as_real(e.resolve_conj().resolve_neg())
        e_np = e.detach().cpu().resolve_conj().numpy()
        if tuple(e_np.shape) != tuple(a.shape):
            return Outcome(False, f"output {i}: shape {a.shape}, expected {e_np.shape}")
        if shape_only:
            if e_np.dtype != a.dtype:
                return Outcome(False, f"output {i}: dtype {a.dtype}, expected {e_np.dtype}")
            continue
        if e_np.dtype == np.bool_ or not np.issubdtype(e_np.dtype, np.floating):
            if not np.array_equal(e_np, a.astype(e_np.dtype)):
                return Outcome(False, f"output {i}: {int((e_np != a).sum())} values differ")
            continue
        e64, a64 = e_np.astype(np.float64), a.astype(np.float64)
        if not np.array_equal(np.isnan(e64), np.isnan(a64)):
            return Outcome(False, f"output {i}: NaN positions differ")
        finite = np.isfinite(e64) & np.isfinite(a64)
        if not np.array_equal(e64[~finite & ~np.isnan(e64)], a64[~finite & ~np.isnan(e64)]):
            return Outcome(False, f"output {i}: infinities differ")
        if not finite.any():
            continue
        diff = float(np.abs(e64[finite] - a64[finite]).max())
        bound = atol + rtol * float(np.abs(e64[finite]).max())
        if diff > bound:
            return Outcome(False, f"output {i}: max abs diff {diff:.3g} > {bound:.3g}")
    return Outcome(True)


def eager(module: torch.nn.Module, tensors: tuple[torch.Tensor, ...]) -> Any:
    with torch.no_grad():
        return module(*tensors)
