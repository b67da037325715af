"""onnxruntime against eager PyTorch: the per-output comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

from pt2onnx.errors import ExportError


@dataclass(frozen=True)
class OutputComparison:
    """How one ONNX output compares with its eager PyTorch counterpart."""

    name: str
    max_abs_error: float
    max_rel_error: float
    tolerance: float
    shape_ok: bool
    dtype_ok: bool
    # The file's declared shape (int per static dim, None per symbolic one) where a
    # static dim of it differs from what the file computed; None when it fits.
    declared_shape: tuple[int | None, ...] | None = None

    @property
    def ok(self) -> bool:
        return (self.shape_ok and self.dtype_ok and self.declared_shape is None
                and self.max_abs_error <= self.tolerance)


@dataclass(frozen=True)
class Divergence:
    """The first FX node whose ONNX value differs from eager PyTorch."""

    node: str
    op: str
    rule: str
    source: str
    module: str
    max_abs_error: float
    tolerance: float

    def __str__(self) -> str:
        where = f"\n  at {self.source}" if self.source else ""
        module = f"\n  in module '{self.module}'" if self.module else ""
        return (
            f"first divergence: node {self.node} ({self.op}), translated by rule "
            f"{self.rule}: max abs err {self.max_abs_error:.3g} > tolerance "
            f"{self.tolerance:.3g}{where}{module}"
        )


@dataclass(frozen=True)
class VerificationResult:
    outputs: list[OutputComparison]
    # Set by verify(bisect=True) on a mismatch; None when no node was found.
    divergence: Divergence | None = None
    bisected: bool = False
    # The input sizes this comparison ran at ("batch=3, seq=10"), and the comparisons
    # at other sizes that verify() ran after the example (one per second size).
    sizes: str = ""
    more: tuple[VerificationResult, ...] = ()

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs) and all(m.ok for m in self.more)

    @property
    def runs(self) -> list[str]:
        """The sizes each comparison ran at, the example first."""
        return [self.sizes or "the given inputs"] + [m.sizes for m in self.more]

    def __str__(self) -> str:
        text = self._table()
        if not self.more:
            return text
        parts = [f"at {self.sizes or 'the given inputs'}:", text]
        for m in self.more:
            parts += ["", f"at {m.sizes}:", m._table()]
        return "\n".join(parts)

    def _table(self) -> str:
        rows = ["| output | max abs err | max rel err | tolerance | ok |", "|---|---|---|---|---|"]
        for o in self.outputs:
            rows.append(
                f"| {o.name} | {o.max_abs_error:.3g} | {o.max_rel_error:.3g} | "
                f"{o.tolerance:.3g} | {'yes' if o.ok else 'NO'} |"
            )
        for o in self.outputs:
            if o.declared_shape is not None:
                shown = tuple("?" if d is None else d for d in o.declared_shape)
                rows += ["", f"{o.name}: the file declares the shape {shown}, and computes "
                         "another (a static dim of the file's output type is wrong)"]
        if self.divergence is not None:
            rows += ["", str(self.divergence)]
        elif self.bisected:
            rows += ["", "bisection found no intermediate value that diverges"]
        return "\n".join(rows)


# verify's atol and rtol (of max|ref|) by the narrowest floating type the file computes
# in: 4 units of that type's rounding (float16 2**-11, bfloat16 2**-8), since the file
# and eager round at different points; float32's (1e-4, 1e-3) as before.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-3), "float16": (4 * 2.0**-11, 4 * 2.0**-11),
    "bfloat16": (4 * 2.0**-8, 4 * 2.0**-8),
}


def narrowest_float(dtypes: Any) -> str:
    """"bfloat16", "float16" or "float32": the narrowest of ``dtypes`` (torch or ONNX IR
    dtypes, or their names) for :data:`TOLERANCES`."""
    names = {str(getattr(d, "name", d)).lower().removeprefix("torch.") for d in dtypes}
    for name in ("bfloat16", "float16"):
        if name in names:
            return name
    return "float32"


def default_tolerance(ref: np.ndarray, atol: float = 1e-4, rtol: float = 1e-3) -> float:
    """atol + rtol * max|ref|: the bar for an exported model to match eager."""
    if ref.size == 0 or ref.dtype == np.bool_:
        return 0.0
    return atol + rtol * float(np.max(np.abs(ref.astype(np.float64))))


def require_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise ExportError(
            "verification needs onnxruntime. Next step: pip install 'pt2onnx[verify]'"
        ) from None
    return onnxruntime


def flatten_tensors(tree: Any) -> list[torch.Tensor]:
    """The tensor leaves of (nested) inputs in pytree order; a dict keyed by tensors
    gives each key before its value, as the file takes them (frontends)."""
    from pt2onnx.frontends import flatten_with_keys

    leaves = pytree.tree_leaves(flatten_with_keys(tree))
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def flatten_outputs(tree: Any) -> list[torch.Tensor]:
    """A model's outputs as the ONNX graph lists them: the tensor leaves of a (nested)
    output in pytree order (dicts by key, in insertion order), with a returned Python
    number as a 0-d tensor (the graph has a constant output for it) and None skipped."""
    leaves = pytree.tree_leaves(tree)
    return [x if isinstance(x, torch.Tensor) else torch.tensor(x) for x in leaves
            if isinstance(x, (torch.Tensor, bool, int, float))]


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """t as onnxruntime feeds and returns it: a complex tensor as ``view_as_real(t)``."""
    t = t.detach().cpu()
    if t.is_quantized:  # a quantized tensor travels as its dequantized values (_quantized)
        t = t.dequantize()
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj().resolve_neg())
    if t.dtype == torch.bfloat16:
        import ml_dtypes  # shipped with onnx

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def declared_shapes(outputs: Any) -> list[tuple[int | None, ...] | None]:
    """Each output's declared shape, an int per static dim and None per symbolic one
    (None for an output of unknown rank), from onnxruntime's ``session.get_outputs()``
    or an ``ir.Graph``'s outputs."""
    shapes: list[tuple[int | None, ...] | None] = []
    for o in outputs:
        shape = getattr(o, "shape", None)
        if shape is None:
            shapes.append(None)
            continue
        shapes.append(tuple(d if isinstance(d, int) else None for d in shape))
    return shapes


def compare(
    names: list[str], expected: list[torch.Tensor], actual: list[np.ndarray],
    atol: float = 1e-4, rtol: float = 1e-3,
    declared: list[tuple[int | None, ...] | None] | None = None,
) -> VerificationResult:
    """Each output against eager's; with ``declared`` (``declared_shapes``), also
    against the shape the file declares: a static dim that differs from the computed
    one makes a file that runs right but states a wrong type."""
    if len(expected) != len(actual):
        raise ExportError(
            f"the ONNX model has {len(actual)} outputs but eager PyTorch returned "
            f"{len(expected)} tensors"
        )
    results: list[OutputComparison] = []
    for name, exp_t, act in zip(names, expected, actual):
        exp = to_numpy(exp_t)
        shape_ok = tuple(exp.shape) == tuple(act.shape)
        dtype_ok = exp.dtype == act.dtype
        if shape_ok and exp.size:
            e64 = exp.astype(np.float64) if exp.dtype != np.bool_ else exp.astype(np.int8)
            a64 = act.astype(np.float64) if act.dtype != np.bool_ else act.astype(np.int8)
            diff = np.abs(e64 - a64)
            both_nan = np.isnan(e64) & np.isnan(a64)
            same_inf = np.isinf(e64) & (e64 == a64)
            diff = np.where(both_nan | same_inf, 0.0, diff)
            diff = np.where(np.isnan(diff), np.inf, diff)
            max_abs = float(diff.max())
            denom = np.maximum(np.abs(e64), 1e-12)
            max_rel = float((diff / denom).max())
        else:
            max_abs = 0.0 if shape_ok else float("inf")
            max_rel = max_abs
        finite = exp[np.isfinite(exp)] if exp.dtype.kind == "f" else exp
        stated = declared[len(results)] if declared and len(results) < len(declared) else None
        # A rank that differs with no dim known is the one a graph for each side of 1
        # declares where the model's own rank changes there (capture/_size_one_merge.py).
        wrong = stated is not None and (
            any(d is not None and d != n for d, n in zip(stated, act.shape))
            if len(stated) == act.ndim else any(d is not None for d in stated))
        results.append(
            OutputComparison(
                name, max_abs, max_rel, default_tolerance(finite, atol, rtol), shape_ok,
                dtype_ok, stated if wrong else None,
            )
        )
    return VerificationResult(results)


# -- bisection ------------------------------------------------------------------
def eager_intermediates(
    program: torch.export.ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Every FX node's value, from running the program's graph node by node in eager."""
    from torch.export.graph_signature import InputKind

    user = _user_leaves(program, args, kwargs)
    flat: list[Any] = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            flat.append(user.pop(0))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            flat.append(program.state_dict.get(spec.target, program.constants.get(spec.target)))
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            flat.append(program.constants[spec.target])
        else:
            flat.append(None)
    values: dict[str, Any] = {}

    class _Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            out = super().run_node(n)
            values[n.name] = out
            return out

    with torch.no_grad():
        _Recorder(program.graph_module).run(*flat)
    return values


def ordered_kwargs(program: torch.export.ExportedProgram, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` in the order the program's inputs take them."""
    in_spec = program.call_spec.in_spec
    if kwargs and in_spec is not None and in_spec.num_children == 2:
        order = in_spec.children()[1].context or list(kwargs)
        kwargs = {k: kwargs[k] for k in order if k in kwargs}
    return kwargs


def _user_leaves(
    program: torch.export.ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[Any]:
    return list(pytree.tree_leaves((args, ordered_kwargs(program, kwargs))))


def _close(expected: torch.Tensor, actual: np.ndarray, atol: float, rtol: float) -> float:
    """The max abs error, or inf when the shapes cannot be compared; 0 when within bounds."""
    ref = to_numpy(expected)
    act = np.asarray(actual)
    if ref.size != act.size:
        return float("inf")
    result = compare(["v"], [expected], [act.reshape(ref.shape).astype(ref.dtype)], atol, rtol)
    o = result.outputs[0]
    return 0.0 if o.max_abs_error <= o.tolerance else o.max_abs_error


def bisect(
    model: Any, program: torch.export.ExportedProgram, fx_values: dict[str, tuple[Any, str]],
    feeds: list[np.ndarray], args: tuple[Any, ...], kwargs: dict[str, Any],
    atol: float = 1e-4, rtol: float = 1e-3,
) -> Divergence | None:
    """The first FX node, in graph order, whose ONNX value differs from eager."""
    import onnx
    import onnx_ir as ir

    eager = eager_intermediates(program, args, kwargs)
    proto = ir.to_proto(model)
    produced = {o for n in proto.graph.node for o in n.output}
    present = {o.name for o in proto.graph.output}
    exposed: list[str] = []
    for node in program.graph.nodes:
        entry = fx_values.get(node.name)
        if entry is None or not isinstance(eager.get(node.name), torch.Tensor):
            continue
        name = entry[0].name
        if name in produced and name not in exposed:
            exposed.append(name)
            if name not in present:
                proto.graph.output.append(onnx.ValueInfoProto(name=name))
    session = _session(proto)
    inputs = [i.name for i in session.get_inputs()]
    results = dict(zip(exposed, session.run(exposed, dict(zip(inputs, feeds)))))
    for node in program.graph.nodes:
        entry = fx_values.get(node.name)
        if entry is None or entry[0].name not in results:
            continue
        value, rule = entry
        err = _close(eager[node.name], results[value.name], atol, rtol)
        if err:
            producer = value.producer()
            props = dict(producer.metadata_props) if producer is not None else {}
            tol = default_tolerance(to_numpy(eager[node.name]), atol, rtol)
            from pt2onnx.translate import op_name

            return Divergence(node.name, op_name(node.target), rule,
                              props.get("pt2onnx.source", ""), props.get("pt2onnx.module", ""),
                              err, tol)
    return None


def _session(proto: Any) -> Any:
    ort = require_onnxruntime()
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
