"""The oracle: export, onnx's full check, onnxruntime against eager PyTorch.

A program's outcome is one of ``ok``, ``export_error`` (the exporter refused it),
``checker`` (onnx.checker's full check rejects the model), ``runtime`` (onnxruntime
cannot load or run it) and ``mismatch`` (it runs and computes something else). A
dynamic program runs at its example size and at a second size of its dynamic dim.
"""

from __future__ import annotations

import contextlib
import copy
import io
import re
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from pt2onnx.testing.fuzz.program import B_MAX, Program, load
from pt2onnx.verify import compare, declared_shapes, flatten_tensors, to_numpy

CLASSES = ("export_error", "checker", "runtime", "mismatch")
EXPORTERS = ("pt2onnx", "torch.onnx", "torchscript")
# As pt2onnx.verify; float16 values get float16's resolution.
TOLERANCE = {False: (1e-4, 1e-3), True: (1e-2, 1e-2)}
_OP_NAME = re.compile(r"aten[.:]+\w+")


@dataclass
class Outcome:
    cls: str  # "ok" or one of CLASSES
    detail: str = ""
    typed: bool = True  # export_error only: a typed error that names the op
    ops: set[str] = field(default_factory=set)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.cls != "ok"


def _first_lines(e: BaseException, n: int = 3) -> str:
    text = f"{type(e).__name__}: {e}".strip()
    return "\n".join(text.splitlines()[:n])[:600]


def export(exporter: str, module: torch.nn.Module, args: tuple[Any, ...],
           dynamic_shapes: Any) -> tuple[Any, set[str], list[str]]:
    """The ModelProto of ``module`` from ``exporter``, the ATen ops it used, and the
    dynamic dims it reported fixed (made static) with the reason."""
    if exporter == "pt2onnx":
        import pt2onnx

        prog = pt2onnx.export(module, args, dynamic_shapes=dynamic_shapes)
        rep = prog.report
        graph = prog._program.graph if prog._program is not None else None
        return (prog.model_proto, _aten_ops(graph),
                list(rep.fixed_axes) + list(rep.dynamic_refinements))
    if exporter == "torchscript":
        return _torchscript(module, args, dynamic_shapes), set(), []
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tprog: Any = torch.onnx.export(module, args, dynamo=True,
                                       dynamic_shapes=dynamic_shapes, verbose=False,
                                       report=False)
    ep = tprog.exported_program
    return tprog.model_proto, _aten_ops(ep.graph if ep is not None else None), []


def _torchscript(module: torch.nn.Module, args: tuple[Any, ...], dynamic_shapes: Any) -> Any:
    """torch.onnx's TorchScript exporter (``dynamo=False``): each declared dim becomes a
    named dynamic axis of its input, and every output axis is declared dynamic, so the
    file is judged on the values and shapes it computes (a trace declares the example's
    output shapes)."""
    import onnx

    names = [f"input_{i}" for i in range(len(args))]
    axes: dict[str, dict[int, str]] = {}
    for name, spec in zip(names, dynamic_shapes or [None] * len(args)):
        if spec:
            axes[name] = {int(a): getattr(d, "__name__", str(d)) for a, d in spec.items()}
    with torch.no_grad():
        outs = flatten_tensors(module(*copy.deepcopy(args)))
    out_names = [f"output_{i}" for i in range(len(outs))]
    for name, out in zip(out_names, outs):
        axes[name] = {a: f"{name}_{a}" for a in range(out.dim())}
    buf = io.BytesIO()
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buf, dynamo=False, input_names=names,  # type: ignore[arg-type]
                          output_names=out_names, dynamic_axes=axes)
    return onnx.load_from_string(buf.getvalue())


def _aten_ops(graph: Any) -> set[str]:
    """The ATen ops of a captured graph (``aten.add.Tensor``)."""
    if graph is None:
        return set()
    return {str(n.target) for n in graph.nodes
            if n.op == "call_function" and str(n.target).startswith("aten.")}


def _session(proto: Any) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def _eager(module: torch.nn.Module, args: tuple[Any, ...]) -> list[torch.Tensor]:
    """Eager outputs of a copy of ``module``: a program that updates a buffer in place
    (through an alias such as ``.to`` of its own dtype) must not change the state the
    exporter and later eager runs start from."""
    with torch.no_grad():
        fresh = copy.deepcopy(module)
        return [t.detach().clone() for t in flatten_tensors(fresh(*copy.deepcopy(args)))]


_HALF_TO_FLOAT = {torch.float16: torch.float32}
_TO_DOUBLE = {torch.float16: torch.float64, torch.float32: torch.float64}


def _wider(module: torch.nn.Module, args: tuple[Any, ...], actual: list[Any],
           widen: dict[torch.dtype, torch.dtype]) -> list[torch.Tensor] | None:
    """Eager's outputs with its floating parameters, buffers and inputs held in a wider
    dtype (``widen``), each rounded back to the exported output's dtype; None when the
    wider program does not run or gives other outputs."""
    def up(t: Any) -> Any:
        return t.to(widen[t.dtype]) if isinstance(t, torch.Tensor) and t.dtype in widen else t

    wide = copy.deepcopy(module)
    for p in [*wide.parameters(), *wide.buffers()]:
        if p.dtype in widen:
            p.data = p.data.to(widen[p.dtype])
    default = torch.get_default_dtype()
    try:
        # Floats the program makes from Python numbers (torch.where(m, ints, 0.5),
        # torch.full) are the default dtype: widened with the rest; and so is every
        # dtype the program names (x.to(torch.float16), sum(dtype=...)).
        torch.set_default_dtype(widen.get(default, default))
        with torch.no_grad(), _WidenDtypes(widen):
            outs = flatten_tensors(wide(*[up(a) for a in copy.deepcopy(args)]))
    except Exception:  # the wider dtype changes a promotion or an op refuses it
        return None
    finally:
        torch.set_default_dtype(default)
    if len(outs) != len(actual):
        return None
    narrow = {np.dtype(np.float16): torch.float16, np.dtype(np.float32): torch.float32}
    dtypes = [narrow.get(np.asarray(a).dtype) for a in actual]
    return [e.detach().to(d) if d is not None and e.is_floating_point() else e.detach()
            for e, d in zip(outs, dtypes, strict=True)]


class _WidenDtypes(torch.overrides.TorchFunctionMode):
    """Replaces each dtype named in a torch call by its wider dtype."""

    def __init__(self, widen: dict[torch.dtype, torch.dtype]) -> None:
        super().__init__()
        self.widen = widen

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        def sub(v: Any) -> Any:
            return self.widen.get(v, v) if isinstance(v, torch.dtype) else v
        return func(*[sub(a) for a in args], **{k: sub(v) for k, v in (kwargs or {}).items()})


class _RoundEachOp(torch.utils._python_dispatch.TorchDispatchMode):
    """Runs each floating op in float64 and rounds its result to the op's own dtype: a
    float32 program whose every op is correctly rounded. torch's float32 ``erf`` is one
    ulp off at -3.9239 (-0.99999994 where the true -0.9999999893 rounds to -1.0f), and
    a ``ceil`` after it turns that ulp into 1 (fuzz seed 2613, program 207); the float64
    opinion agrees with torch there, since its ``erf`` is never rounded to float32."""

    _WIDE = (torch.float16, torch.bfloat16, torch.float32)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        schema = getattr(func, "_schema", None)
        if schema is None or schema.is_mutable or any(
                r.alias_info is not None for r in schema.returns):
            return out  # a view or an in-place op: nothing is rounded there
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        if not any(isinstance(t, torch.Tensor) and t.dtype in self._WIDE for t in leaves):
            return out

        def up(t: Any) -> Any:
            return t.to(torch.float64) if isinstance(t, torch.Tensor) and (
                t.dtype in self._WIDE) else t

        try:
            wide = func(*torch.utils._pytree.tree_map(up, args),
                        **torch.utils._pytree.tree_map(up, kwargs))
        except Exception:
            return out
        outs, spec = torch.utils._pytree.tree_flatten(out)
        wides, wide_spec = torch.utils._pytree.tree_flatten(wide)
        if spec != wide_spec:
            return out
        return torch.utils._pytree.tree_unflatten(
            [w.to(o.dtype) if isinstance(o, torch.Tensor) and isinstance(w, torch.Tensor)
             and o.is_floating_point() and w.is_floating_point() and w.shape == o.shape
             else o for o, w in zip(outs, wides)], spec)


class _UlpEachOp(torch.utils._python_dispatch.TorchDispatchMode):
    """Moves each floating op's result one ulp away from zero (or toward it; a 0 stays):
    eager as a runtime whose
    kernels are an ulp off would compute it. onnxruntime's float32 ``Tanh`` of 8.748283
    is 1.0, one ulp above the correctly rounded 0.99999994 (torch's, float64's and
    numpy's), and a cast to int32 after it turns that ulp into 1 (fuzz seed 3805,
    program 121): the file is right (``Tanh`` then ``Cast``, as the model), the kernel is
    an ulp off. A graph that is wrong by more than an ulp per op matches neither."""

    def __init__(self, away: bool) -> None:
        super().__init__()
        self.away = away

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        schema = getattr(func, "_schema", None)
        if schema is None or schema.is_mutable or any(
                r.alias_info is not None for r in schema.returns):
            return out  # a view or an in-place op: nothing is rounded there

        def nudge(t: Any) -> Any:
            if not (isinstance(t, torch.Tensor) and t.dtype in _RoundEachOp._WIDE):
                return t
            if not self.away:
                return torch.nextafter(t, torch.zeros_like(t))
            inf = torch.full_like(t, float("inf"))
            return torch.where(t == 0, t, torch.nextafter(t, torch.where(t > 0, inf, -inf)))

        return torch.utils._pytree.tree_map(nudge, out)


def _ulp_each_op(module: torch.nn.Module, args: tuple[Any, ...], actual: list[Any],
                 away: bool) -> list[torch.Tensor] | None:
    try:
        with torch.no_grad(), _UlpEachOp(away):
            outs = flatten_tensors(copy.deepcopy(module)(*copy.deepcopy(args)))
    except Exception:
        return None
    return [o.detach() for o in outs] if len(outs) == len(actual) else None


def _rounded_each_op(module: torch.nn.Module, args: tuple[Any, ...], actual: list[Any],
                     ) -> list[torch.Tensor] | None:
    try:
        with torch.no_grad(), _RoundEachOp():
            outs = flatten_tensors(copy.deepcopy(module)(*copy.deepcopy(args)))
    except Exception:
        return None
    return [o.detach() for o in outs] if len(outs) == len(actual) else None


def _within_rounding(module: torch.nn.Module, args: tuple[Any, ...], half: bool,
                     names: list[str], bad: list[int], actual: list[Any], atol: float,
                     rtol: float) -> bool:
    """Whether every output that differs from eager matches eager run in a wider dtype:
    a second opinion for when eager's own rounding is what differs.

    - float16 in float32: eager's float16 rounding order can overflow where a wider
      accumulation does not (a float16 ``prod`` that reaches inf part way and then meets
      a 0 is NaN in eager, -0.0 in float32 and in onnxruntime).
    - float32 (and float16) in float64: a result within rounding of the true value can
      differ from eager's at a discontinuity (torch's float32 ``gelu`` returns +0.0 far
      left of 0, where the true value is a tiny negative number and onnxruntime's is
      -0.0; ``atan2`` of it then differs by 2*pi).
    - each op rounded to its own dtype from float64 (``_RoundEachOp``), and each op an
      ulp away from zero or toward it (``_UlpEachOp``): a kernel of eager's or of the runtime's that is an
      ulp off, before a discontinuity (a cast to an integer, ``ceil``).

    A real bug differs from every opinion."""
    opinions = []
    for widen in ([_HALF_TO_FLOAT] if half else []) + [_TO_DOUBLE]:
        wide = _wider(module, args, actual, widen)
        if wide is not None:
            opinions.append(wide)
    rounded = _rounded_each_op(module, args, actual)
    if rounded is not None:
        opinions.append(rounded)
    for away in (True, False):
        off = _ulp_each_op(module, args, actual, away)
        if off is not None:
            opinions.append(off)
    for i in bad:
        if not any(_same(names[i], wide[i], actual[i], atol, rtol) for wide in opinions):
            return False
    return bool(opinions)


def _reference_agrees(proto: Any, feeds: dict[str, Any], expected: list[torch.Tensor],
                      names: list[str], bad: list[int], atol: float, rtol: float) -> bool:
    """Whether the ONNX reference evaluator, running the same file on the same inputs,
    matches eager at each output onnxruntime got wrong: the file is right by the ONNX
    spec, and onnxruntime's kernel is not (seed 5227, program 2966: its LSTM turns a NaN
    input into finite values, where the spec's sigmoid and tanh of NaN are NaN)."""
    try:
        from onnx.reference import ReferenceEvaluator

        got: list[Any] = list(ReferenceEvaluator(proto).run(None, feeds))
    except Exception:  # an op the reference does not implement: no opinion
        return False
    return all(_same(names[i], expected[i], got[i], atol, rtol) for i in bad)


def _same(name: str, expected: torch.Tensor, actual: Any, atol: float, rtol: float) -> bool:
    try:
        return compare([name], [expected], [np.asarray(actual)], atol, rtol).ok
    except Exception:
        return False


# The note on a narrowing that cuts off only sizes where eager itself fails.
MODEL_RANGE = "the model's own range"
_FROM_BELOW = re.compile(r"^B bounded to \[(\d+), (\d+)\]")


def _eager_at_one(ns: dict[str, Any], module: torch.nn.Module, sizes: list[Any],
                  fixed: list[str] | None = None) -> str:
    """For a refusal on an edge program: whether eager itself runs at B = 1 (a range the
    model cannot run in is rightly narrowed; one it can, the report must show). Where
    the only narrowing is B's from below and eager fails at every size cut off, that
    is said instead: the file loses no size the model runs at (the campaign's tables
    count these apart)."""
    found = [_FROM_BELOW.match(f) for f in fixed or []]
    if found and all(m is not None and int(m.group(2)) >= 64 for m in found):
        low = max(int(m.group(1)) for m in found if m is not None)
        cut = range(max(int(ns.get("B_MIN", 1)), 1), low)
        if len(cut) and not any(_runs(module, ns, size) for size in cut):
            return (f" (eager fails at every size cut off, B = {cut[0]}..{cut[-1]}: "
                    f"{MODEL_RANGE})")
    if 1 not in sizes:
        return ""
    try:
        _eager(module, ns["make_inputs"](1))
    except Exception:
        return " (eager fails at B=1 too)"
    return " (EAGER RUNS AT B=1)"


def _runs(module: torch.nn.Module, ns: dict[str, Any], size: int) -> bool:
    try:
        _eager(module, ns["make_inputs"](size))
    except Exception:
        return False
    return True


def check_namespace(ns: dict[str, Any], exporter: str = "pt2onnx") -> Outcome:
    """Runs the oracle on a loaded program (``Program``, ``make_inputs``, ``B``, ``HALF``)."""
    start = time.perf_counter()
    out = _check(ns, exporter)
    out.seconds = time.perf_counter() - start
    return out


def check(program: Program, exporter: str = "pt2onnx") -> Outcome:
    return check_namespace(load(program.source()), exporter)


def check_source(source: str, exporter: str = "pt2onnx") -> Outcome:
    return check_namespace(load(source), exporter)


def run_points(ns: dict[str, Any], sizes: list[Any]) -> list[tuple[Any, Any]]:
    """(B, C) of each run: every size of B; a program with a second dynamic dim C (an
    input that broadcasts against B) also runs at C = 1 and C = B for each, the
    example's C first."""
    if ns.get("C") is None:
        return [(size, None) for size in sizes]
    points = []
    for size in sizes:
        example = size if ns["C"] == "b" else ns["C"]
        points += [(size, c) for c in dict.fromkeys([example, 1, size])]
    return points


def make_inputs(ns: dict[str, Any], b: Any, c: Any = None) -> Any:
    return ns["make_inputs"](b) if c is None else ns["make_inputs"](b, c)


def _c_text(c: Any) -> str:
    return "" if c is None else f", C={c}"


def _check(ns: dict[str, Any], exporter: str) -> Outcome:
    import onnx

    torch.manual_seed(0)
    module = ns["Program"]().eval()
    if ns.get("WARMUP") is not None:  # eager ran the model once before, at another size
        with torch.no_grad():
            module(*make_inputs(ns, ns["WARMUP"]))
    b = ns["B"]
    sizes = list(b) if b else [None]
    if b and ns.get("B_MIN", 4) <= 1 and 1 not in sizes:
        sizes.append(1)  # an edge program: B = 1 is declared, so the file must be right there
    if b and B_MAX not in sizes:
        sizes.append(B_MAX)  # the declared maximum: the other edge of the range
    points = run_points(ns, sizes)
    args = make_inputs(ns, *points[0]) if b else ns["make_inputs"]()
    atol, rtol = TOLERANCE[bool(ns.get("HALF"))]
    expected = _eager(module, args)
    try:
        proto, ops, fixed = export(exporter, module, copy.deepcopy(args), ns["dynamic_shapes"]())
    except Exception as e:  # every refusal is classified
        import pt2onnx

        msg = str(e)
        # Acceptable: a typed error that names the op, or a typed capture error that
        # names the dynamic dim the model fixes or whose range a guard excludes (the
        # program's dynamic spec is wrong), or whose captured range excludes the example
        # (capture._check_example_fits).
        # A rule that crashed (an assertion or a Python error inside it) is a pt2onnx
        # bug even though its TranslationError names the op.
        crashed = isinstance(e, pt2onnx.TranslationError) and isinstance(e.__cause__, (
            AssertionError, AttributeError, IndexError, KeyError, TypeError,
            ZeroDivisionError, UnboundLocalError))
        typed = isinstance(e, pt2onnx.ExportError) and not crashed and (
            isinstance(e, pt2onnx.SizeOneError) or "would fix every dim" in msg
            or bool(_OP_NAME.search(msg)) or (
                isinstance(e, pt2onnx.CaptureError) and "dynamic shapes" in msg
                and ("fixed" in msg or "rejected" in msg or "exclude the example" in msg))
            or (isinstance(e, pt2onnx.CaptureError)
                and "dims declared independent are related" in msg))
        return Outcome("export_error", _first_lines(e), typed)
    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as e:
        return Outcome("checker", _first_lines(e), ops=ops)
    try:
        session = _session(proto)
    except Exception as e:
        return Outcome("runtime", "load: " + _first_lines(e), ops=ops)
    for i, (size, c) in enumerate(points):
        if i and fixed:  # the exporter said the model fixes B: a typed refusal
            return Outcome("export_error", "dynamic dim made static, as reported: "
                           + "; ".join(fixed)[:300] + _eager_at_one(ns, module, sizes, fixed),
                           typed=True, ops=ops)
        if i:
            try:
                args = make_inputs(ns, size, c)
                expected = _eager(module, args)
            except Exception:
                # drawn over [B_MIN, B_MAX]: eager itself refuses B = 1; at B_MAX the
                # example's index values or a state the model keeps can still fail
                if size in (1, B_MAX):
                    continue
                raise
        feeds = [to_numpy(t) for t in flatten_tensors(args)]
        names = [x.name for x in session.get_inputs()]
        if exporter == "torchscript":  # a trace drops the inputs it does not read
            feeds = [feeds[int(n.rsplit("_", 1)[1])] for n in names]
        if len(names) != len(feeds):
            return Outcome("runtime", f"the model takes {len(names)} inputs, not "
                           f"{len(feeds)}", ops=ops)
        try:
            actual = session.run(None, dict(zip(names, feeds)))
        except Exception as e:
            return Outcome("runtime", f"run (B={size}{_c_text(c)}): " + _first_lines(e),
                           ops=ops)
        outs = [o.name for o in session.get_outputs()]
        try:
            result = compare(outs, expected, [np.asarray(a) for a in actual], atol, rtol,
                             declared_shapes(session.get_outputs()))
        except Exception as e:  # output count differs
            return Outcome("mismatch", _first_lines(e), ops=ops)
        bad_idx = [i for i, o in enumerate(result.outputs) if not o.ok]
        numeric = all(result.outputs[i].shape_ok and result.outputs[i].dtype_ok
                      and result.outputs[i].declared_shape is None for i in bad_idx)  # a wrong shape or dtype gets no second opinion
        if not result.ok and numeric and _within_rounding(module, args, bool(ns.get("HALF")), outs,
                                              bad_idx, actual, atol, rtol):
            continue
        if not result.ok and numeric and _reference_agrees(proto, dict(zip(names, feeds)),
                                                           expected, outs, bad_idx, atol, rtol):
            where = f" at B={size}{_c_text(c)}" if size is not None else ""
            return Outcome("runtime", f"output {bad_idx[0]}{where}: onnxruntime differs from "
                           "eager, and the ONNX reference evaluator (onnx.reference) running "
                           "the same file matches eager: a kernel of onnxruntime's departs "
                           "from the ONNX spec", ops=ops)
        if not result.ok:
            bad = [o for o in result.outputs if not o.ok]
            o = bad[0]
            what = ("shape" if not o.shape_ok else "dtype" if not o.dtype_ok else
                    f"declared shape {o.declared_shape}" if o.declared_shape is not None else
                    f"max abs err {o.max_abs_error:.3g} > {o.tolerance:.3g}")
            where = f" at B={size}{_c_text(c)}" if size is not None else ""
            idx = [x.name for x in result.outputs].index(o.name)
            detail = (f"output {idx}{where}: {what} (eager {tuple(expected[idx].shape)} "
                      f"{expected[idx].dtype}, onnx {tuple(np.asarray(actual[idx]).shape)} "
                      f"{np.asarray(actual[idx]).dtype})")
            return Outcome("mismatch", detail, ops=ops)
    return Outcome("ok", ops=ops)
