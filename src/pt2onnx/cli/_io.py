"""What the command line reads and prints: model specs, input specs, progress, summaries."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

_DTYPES = {
    "float32": torch.float32, "float": torch.float32, "float16": torch.float16,
    "half": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64,
    "double": torch.float64, "int64": torch.int64, "long": torch.int64, "int32": torch.int32,
    "int": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
    "bool": torch.bool,
}


class UsageError(Exception):
    """The command line is malformed (exit code 2)."""


def load_object(spec: str) -> Any:
    """``path/to/file.py:name`` or ``package.module:name``."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise UsageError(f"{spec!r} is not MODULE:NAME or path/to/file.py:NAME")
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target)
        if not path.is_file():
            raise UsageError(f"no such file: {path}")
        name = f"_pt2onnx_user_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent.resolve()))
        try:
            module_spec.loader.exec_module(module)
        finally:
            sys.path.pop(0)
    else:
        sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise UsageError(f"cannot import {target!r}: {exc}") from None
        finally:
            sys.path.pop(0)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UsageError(f"{target} has no attribute {attr!r}") from None


def parse_input(spec: str) -> tuple[str, torch.Tensor]:
    """``x:1x3x224x224:float32`` as a name and a random example tensor."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise UsageError(f"--input {spec!r} is not NAME:SHAPE[:DTYPE], e.g. x:1x3x224x224:float32")
    name, shape_text = parts[0], parts[1]
    dtype_name = parts[2] if len(parts) == 3 else "float32"
    dtype = _DTYPES.get(dtype_name)
    if dtype is None:
        raise UsageError(f"--input {spec!r}: unknown dtype {dtype_name!r}; one of {sorted(_DTYPES)}")
    try:
        shape = [int(d) for d in shape_text.split("x")] if shape_text not in ("", "scalar") else []
    except ValueError:
        raise UsageError(f"--input {spec!r}: the shape must be ints joined by 'x'") from None
    if dtype.is_floating_point:
        return name, torch.randn(shape, dtype=dtype)
    if dtype == torch.bool:
        return name, torch.rand(shape) > 0.5
    return name, torch.randint(0, 2, shape, dtype=dtype)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    return (value,)


def load_model_and_inputs(args: Any) -> tuple[Any, tuple[Any, ...], list[str]]:
    """The model, its example inputs and the input names from the command line."""
    made: Any = load_object(args.model)
    # Seeded, so that export and verify, run separately, build the same random weights.
    torch.manual_seed(0)
    made = made() if callable(made) and not isinstance(made, torch.nn.Module) else made
    inputs: tuple[Any, ...] | None = None
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        made, inputs = made[0], _as_tuple(made[1])
    if not isinstance(made, torch.nn.Module):
        raise UsageError(f"{args.model} made a {type(made).__name__}, not a torch.nn.Module")
    model = made.eval()
    names: list[str] = []
    given = [bool(args.input), bool(args.inputs_factory), bool(args.inputs)]
    if sum(given) > 1:
        raise UsageError("give the inputs one way: --input, --inputs-factory or --inputs")
    if args.input:
        pairs = [parse_input(s) for s in args.input]
        names = [n for n, _ in pairs]
        inputs = tuple(t for _, t in pairs)
    elif args.inputs_factory:
        inputs = _as_tuple(load_object(args.inputs_factory)())
    elif args.inputs:
        if not Path(args.inputs).is_file():
            raise UsageError(f"no such file: {args.inputs}")
        inputs = _as_tuple(torch.load(args.inputs, weights_only=True))
    if inputs is None:
        raise UsageError(
            f"{args.model} needs example inputs: --input x:1x3x224x224:float32, "
            "--inputs-factory module:fn or --inputs file.pt"
        )
    if not names and all(isinstance(t, torch.Tensor) for t in inputs):
        names = _forward_names(model, len(inputs))
    elif not names:
        # Dict, list or tuple inputs: one name per tensor inside, as export names them
        # (batch_input_ids for batch["input_ids"]).
        from pt2onnx.capture import bound_inputs, split_trailing_kwargs, tensor_leaves

        args, kwargs = split_trailing_kwargs(model, inputs, None)
        bound = bound_inputs(model, args, kwargs or {})
        names = [name for name, _ in tensor_leaves(bound)]
    return model, inputs, names


def _forward_names(model: torch.nn.Module, n: int) -> list[str]:
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return []
    plain = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return plain[:n] if len(plain) >= n else []


def parse_dynamic(specs: list[str], names: list[str]) -> dict[str, dict[int, str]]:
    """``x:0=batch`` as torch.onnx-style dynamic_axes ``{"x": {0: "batch"}}``.

    NAME is an input's name, or the name of a tensor nested in it
    (``past_key_values_key_0``: the argument name and the path inside it).
    """
    axes: dict[str, dict[int, str]] = {}
    for spec in specs:
        name, _, rest = spec.partition(":")
        axis, _, dim = rest.partition("=")
        if not name or not axis.isdigit():
            raise UsageError(f"--dynamic {spec!r} is not NAME:AXIS[=DIM], e.g. x:0=batch")
        if names and not any(name == n or name.startswith(f"{n}_") for n in names):
            raise UsageError(f"--dynamic {spec!r}: {name!r} is not an input; inputs are {names}")
        axes.setdefault(name, {})[int(axis)] = dim or f"{name}_dim{axis}"
    return axes


@contextlib.contextmanager
def progress(quiet: bool = False) -> Iterator[None]:
    """Shows each export stage as it runs: rich's spinner when installed, else plain lines."""
    from pt2onnx import report

    if quiet:
        yield
        return
    console: Any = None
    if sys.stderr.isatty():
        with contextlib.suppress(ImportError):
            from rich.console import Console

            console = Console(stderr=True)
    if console is not None:
        with console.status("exporting") as status:
            def show(stage: str, seconds: float | None) -> None:
                if seconds is None:
                    status.update(f"{stage}...")
                else:
                    console.print(f"{stage} done in {seconds:.2f}s")

            with report.on_stage(show):
                yield
        return
    start = time.perf_counter()

    def plain(stage: str, seconds: float | None) -> None:
        if seconds is not None:
            print(f"  {stage:<10} {seconds:7.2f}s  (elapsed {time.perf_counter() - start:.1f}s)",
                  file=sys.stderr, flush=True)

    with report.on_stage(plain):
        yield


def verify_file(path: Path, model: torch.nn.Module, inputs: tuple[Any, ...],
                atol: float, rtol: float) -> Any:
    """Runs an .onnx file in onnxruntime against the eager model on ``inputs``."""
    from pt2onnx.verify import (
        compare,
        flatten_outputs,
        flatten_tensors,
        require_onnxruntime,
        to_numpy,
    )

    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    ort = require_onnxruntime()
    from pt2onnx.capture import split_trailing_kwargs

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    args, kwargs = split_trailing_kwargs(model, inputs, None)
    kwargs = kwargs or {}
    arrays = [to_numpy(t).copy() for t in flatten_tensors((args, kwargs))]
    feeds = dict(zip([i.name for i in session.get_inputs()], arrays))
    actual = session.run(None, feeds)
    with torch.no_grad():
        expected = flatten_outputs(model(*args, **kwargs))
    names = [o.name for o in session.get_outputs()][: len(expected)]
    return compare(names, expected, actual[: len(expected)], atol, rtol)


def _dims(value_info: Any) -> list[Any]:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return ["?"]
    return [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim]


def summarize(path: Path) -> dict[str, Any]:
    """Inputs and outputs with their symbolic dims, opsets, op histogram and parameters."""
    import onnx
    from onnx import helper

    from pt2onnx.errors import InvalidInputError

    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise InvalidInputError(f"{path} is not a readable ONNX model: {exc}") from None
    g = proto.graph

    def io_row(v: Any) -> dict[str, Any]:
        elem = v.type.tensor_type.elem_type
        dtype = helper.tensor_dtype_to_np_dtype(elem).name if elem else "?"
        return {"name": v.name, "dtype": dtype, "shape": _dims(v)}

    ops: dict[str, int] = {}
    for node in g.node:
        key = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
        ops[key] = ops.get(key, 0) + 1
    count, size = 0, 0
    for init in g.initializer:
        n = 1
        for d in init.dims:
            n *= d
        count += n
        size += n * helper.tensor_dtype_to_np_dtype(init.data_type).itemsize
    return {
        "path": str(path), "producer": f"{proto.producer_name} {proto.producer_version}".strip(),
        "ir_version": proto.ir_version,
        "opsets": {o.domain or "ai.onnx": o.version for o in proto.opset_import},
        "inputs": [io_row(v) for v in g.input], "outputs": [io_row(v) for v in g.output],
        "nodes": len(g.node), "ops": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "parameters": count, "parameter_bytes": size, "initializers": len(g.initializer),
        # local functions (export_modules_as_functions): nodes in each body
        "functions": {f"{f.domain}::{f.name}": len(f.node) for f in proto.functions},
    }


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GB"


def format_summary(s: dict[str, Any]) -> str:
    lines = [s["path"], f"  producer: {s['producer'] or '?'}, ir_version {s['ir_version']}",
             "  opsets: " + ", ".join(f"{d} {v}" for d, v in s["opsets"].items()), "  inputs:"]
    for kind in ("inputs", "outputs"):
        if kind == "outputs":
            lines.append("  outputs:")
        for row in s[kind]:
            shape = "[" + ", ".join(str(d) for d in row["shape"]) + "]"
            lines.append(f"    {row['name']}  {row['dtype']}  {shape}")
    lines.append(f"  parameters: {s['parameters']:,} ({_size(s['parameter_bytes'])}) in "
                 f"{s['initializers']} initializers")
    lines.append(f"  ops ({s['nodes']} nodes):")
    lines += [f"    {op:<24} {n}" for op, n in s["ops"].items()]
    if s.get("functions"):
        lines.append(f"  functions ({len(s['functions'])}, nodes in each body):")
        lines += [f"    {name:<24} {n}" for name, n in s["functions"].items()]
    return "\n".join(lines)
