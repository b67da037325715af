"""Dynamic shapes as people write them.

- ``dynamic_axes`` (torch.onnx style) and ``dynamic=True`` become torch.export
  ``dynamic_shapes``, for positional, keyword and nested inputs alike;
- capture runs size-obliviously, so a batch-1 example gives a general graph;
- torch.export's suggested fixes (a bound, a relation between dims) are applied
  once and reported with the line of the model that asked for them;
- a declared dim that the model fixes to one size is an error that says where.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import Dim

from pt2onnx import _compat
from pt2onnx.capture import _frames
from pt2onnx.errors import CaptureError, InvalidInputError


# -- naming inputs --------------------------------------------------------------
def bound_inputs(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The inputs by forward's argument names (``args_0``… when it has no signature)."""
    forward = module.forward if isinstance(module, torch.nn.Module) else module
    try:
        bound = inspect.signature(forward).bind(*args, **kwargs)
    except (TypeError, ValueError):
        named = {f"args_{i}": a for i, a in enumerate(args)}
        named.update(kwargs)
        return named
    values = dict(bound.arguments)
    for name, param in inspect.signature(forward).parameters.items():
        # *args and **kwargs contribute their items, as torch.export names them.
        if name in values and param.kind is inspect.Parameter.VAR_KEYWORD:
            values.update(values.pop(name))
        elif name in values and param.kind is inspect.Parameter.VAR_POSITIONAL:
            values.update({f"{name}_{i}": v for i, v in enumerate(values.pop(name))})
    return values


def _path_name(path: tuple[Any, ...]) -> str:
    parts = []
    for key in path:
        for attr in ("key", "idx", "name"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
    return re.sub(r"\W", "_", "_".join(parts))


def tensor_leaves(inputs: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """Each tensor input with its name: ``input_ids``, ``pair_0``, ``past_key_values_key_0``
    (the argument name and the path inside it, as torch.export names placeholders)."""
    from pt2onnx.frontends import flatten_with_keys
    from pt2onnx.translate import CACHE_NAME, is_cache

    leaves = []
    for name, value in inputs.items():
        # A transformers Cache is named past_key_values whatever its argument is called
        # (transformers 5.24 renamed it cache): the naming contract of docs/models.md.
        arg = CACHE_NAME if is_cache(value) else name
        # A dict keyed by tensors: each key, then its value (frontends, _tensor_keys).
        for path, leaf in pytree.tree_flatten_with_path(flatten_with_keys(value))[0]:
            if isinstance(leaf, torch.Tensor):
                leaves.append((_path_name((pytree.MappingKey(arg), *path)), leaf))
    return leaves


def _spec_like(value: Any, leaf_spec: Any) -> Any:
    """A dynamic_shapes entry with ``value``'s structure; ``leaf_spec(tensor)`` per tensor.

    Lists, tuples and dicts keep their type; any other pytree container (a
    transformers cache) is given as the list of its leaves, which torch.export accepts.
    """
    if isinstance(value, torch.Tensor):
        return leaf_spec(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_spec_like(v, leaf_spec) for v in value) if type(value) in (
            list, tuple) else [_spec_like(v, leaf_spec) for v in value]
    if isinstance(value, dict):
        return {k: _spec_like(v, leaf_spec) for k, v in value.items()}
    if type(value) in pytree.SUPPORTED_NODES:
        children, _ = pytree.tree_flatten(value)
        return [_spec_like(c, leaf_spec) for c in children]
    return None


def argument_names(module: Any) -> set[str]:
    """The names of forward's parameters (given or left at their defaults)."""
    forward = module.forward if isinstance(module, torch.nn.Module) else module
    try:
        return set(inspect.signature(forward).parameters)
    except (TypeError, ValueError):
        return set()


def dynamic_axes_to_shapes(
    inputs: dict[str, Any], input_names: list[str] | None, output_names: list[str] | None,
    dynamic_axes: dict[str, Any], arg_names: set[str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """torch.onnx-style ``dynamic_axes`` as a torch.export ``dynamic_shapes`` dict.

    Keys may be ``input_names`` entries or the inputs' own names (see
    :func:`tensor_leaves`; ``a.b`` and ``a_b`` are the same). Returns the spec and
    warnings for keys that name nothing (torch.onnx warns on those too).
    """
    leaves = tensor_leaves(inputs)
    explicit = list(input_names or [])
    by_key: dict[str, int] = {}
    for i, (name, _) in enumerate(leaves):
        by_key[name] = i
        if i < len(explicit):
            by_key[explicit[i]] = i
    chosen: dict[int, dict[int, Any]] = {}
    dims: dict[str, Any] = {}
    unknown = []
    not_tensors = []
    for key, axes in dynamic_axes.items():
        index = by_key.get(key, by_key.get(re.sub(r"\W", "_", str(key))))
        if index is None:
            if (key in inputs and not tensor_leaves({key: inputs[key]})) or (
                    key not in inputs and key in (arg_names or ())):
                # torch.onnx ignores a key naming an argument passed as a non-tensor
                # (or left at its default): there is no axis to make dynamic.
                not_tensors.append(key)
            elif key not in (output_names or []) and not re.fullmatch(r"output(_\d+)?",
                                                                        str(key)):
                unknown.append(key)
            continue
        label = explicit[index] if index < len(explicit) else leaves[index][0]
        named = axes if isinstance(axes, dict) else {a: f"{label}_dim{a}" for a in axes}
        tensor = leaves[index][1]
        spec = {}
        for axis, dim_name in named.items():
            axis = int(axis)
            if not -tensor.dim() <= axis < tensor.dim():
                raise InvalidInputError(
                    f"dynamic_axes[{key!r}] names axis {axis}, but that input has "
                    f"{tensor.dim()} dims (shape {list(tensor.shape)}). Next step: use an axis "
                    f"between 0 and {tensor.dim() - 1}."
                )
            spec[axis % tensor.dim()] = dim_named(str(dim_name), dims)
        chosen[index] = spec
    names = [n for n, _ in leaves]
    if unknown and not chosen:
        raise InvalidInputError(
            f"dynamic_axes names {unknown}, which match no input. The tensor inputs are "
            f"{explicit or names}. Next step: key dynamic_axes by those names, or give "
            "input_names=[...] in input order."
        )
    warnings = [
        f"dynamic_axes key {k!r} matches no input or output name and was ignored "
        f"(inputs: {explicit or names})." for k in unknown
    ] + [
        f"dynamic_axes key {k!r} names an argument that is not a tensor "
        f"({type(inputs[k]).__name__ if k in inputs else 'left at its default'}) and was "
        "ignored." for k in not_tensors
    ]
    ids = {id(t): i for i, (_, t) in enumerate(leaves)}
    shapes = {
        name: _spec_like(value, lambda t: chosen.get(ids.get(id(t), -1)))
        for name, value in inputs.items()
    }
    return shapes, warnings


def dim_named(name: str, dims: dict[str, Any]) -> Any:
    """The ``Dim`` for an axis name (one per name in ``dims``): the name made a Python
    identifier, as torch.export wants Dim names."""
    safe = re.sub(r"\W", "_", name)
    safe = safe if safe and not safe[0].isdigit() else "d_" + safe
    return dims.setdefault(safe, Dim(safe))


def named_dims(spec: Any) -> Any:
    """A dynamic_shapes spec with each axis given as a string (``{0: "batch"}``, as
    torch.onnx's dynamo exporter takes them) as a ``Dim`` of that name: one Dim per name,
    so axes named alike are one dim. Other entries stay as they are."""
    dims: dict[str, Any] = {}

    def walk(s: Any) -> Any:
        if isinstance(s, str):
            return dim_named(s, dims)
        if isinstance(s, dict):
            return {k: walk(v) for k, v in s.items()}
        if isinstance(s, (list, tuple)):
            return type(s)(walk(v) for v in s)
        return s

    return walk(spec) if spec is not None else None


def all_dynamic(inputs: dict[str, Any]) -> dict[str, Any]:
    """``dynamic=True``: every axis of every tensor input may vary (Dim.AUTO)."""
    return {
        name: _spec_like(value, lambda t: {a: Dim.AUTO for a in range(t.dim())} or None)
        for name, value in inputs.items()
    }


def declared_min(spec: Any, name: str) -> int:
    """The declared minimum of the Dim called ``name`` in ``spec`` (1 where not found)."""
    found: list[int] = []

    def walk(s: Any) -> None:
        if isinstance(s, dict):
            s = list(s.values())
        if isinstance(s, (list, tuple)):
            for v in s:
                walk(v)
        elif getattr(s, "__name__", None) == name and hasattr(s, "min"):
            found.append(max(int(s.min or 1), 1))

    walk(spec)
    return min(found, default=1)


def bounded_dim(spec: Any, name: str, top: int) -> Any:
    """``spec`` with the Dim called ``name`` bounded from above at ``top``; None where
    a derived dim is built on it (it would still hold the old Dim)."""
    found: list[Any] = []

    def walk(s: Any) -> Any:
        if isinstance(s, dict):
            return {k: walk(v) for k, v in s.items()}
        if isinstance(s, (list, tuple)):
            return type(s)(walk(v) for v in s)
        if getattr(getattr(s, "root", None), "__name__", None) == name:
            found.append(None)  # a derived dim of it
            return s
        if getattr(s, "__name__", None) == name and hasattr(s, "min"):
            found.append(s)
            return torch.export.Dim(name, min=s.min, max=top)
        return s

    bounded = walk(spec)
    return bounded if found and all(f is not None for f in found) else None


def has_derived(spec: Any) -> bool:
    """Whether ``spec`` declares a derived dim (``2*half``, ``k*r + c``): non-strict
    torch.export can hold ``int()`` of one constant with no guard that says so
    (``int(n * 0.5)`` with ``n = 2*r - 1``, torch 2.13), so its capture is compared with
    one at a second size (``_second_size``)."""
    if isinstance(spec, dict):
        return any(has_derived(v) for v in spec.values())
    if isinstance(spec, (list, tuple)):
        return any(has_derived(v) for v in spec)
    return getattr(spec, "root", None) is not None


def in_residue_class(spec: Any, names: list[str], k: int, offset: int, low: int,
                     high: int | None, root: str) -> Any:
    """``spec`` with each Dim called one of ``names`` replaced by ``k*root + offset``
    (one residue class of its sizes; ``root`` ranges over [low, high]); None where a
    derived dim is built on one of them (it would still hold the old Dim)."""
    base = torch.export.Dim(root, min=low, max=high) if high is not None else (
        torch.export.Dim(root, min=low))
    derived = k * base + offset if offset else k * base
    found: list[Any] = []

    def walk(s: Any) -> Any:
        if isinstance(s, dict):
            return {key: walk(v) for key, v in s.items()}
        if isinstance(s, (list, tuple)):
            return type(s)(walk(v) for v in s)
        if getattr(getattr(s, "root", None), "__name__", None) in names:
            found.append(None)
            return s
        if getattr(s, "__name__", None) in names and hasattr(s, "min"):
            found.append(s)
            return derived
        return s

    replaced = walk(spec)
    return replaced if found and all(f is not None for f in found) else None


def without_dims(spec: Any, names: list[str]) -> Any:
    """``spec`` with the Dims called ``names`` (and the dims derived from them) made static;
    None when no dynamic dim is left."""
    def strip(s: Any) -> Any:
        if isinstance(s, dict):
            return {k: strip(v) for k, v in s.items()}
        if isinstance(s, (list, tuple)):
            return type(s)(strip(v) for v in s)
        root = getattr(s, "root", s)
        return None if getattr(root, "__name__", None) in names else s

    def dynamic(s: Any) -> bool:
        if isinstance(s, dict):
            return any(dynamic(v) for v in s.values())
        if isinstance(s, (list, tuple)):
            return any(dynamic(v) for v in s)
        return s is not None and not isinstance(s, int)

    stripped = strip(spec)
    return stripped if dynamic(stripped) else None


# -- declared dims ----------------------------------------------------------------
@dataclass
class DeclaredAxis:
    input: str  # the input's name (see tensor_leaves)
    axis: int
    dim: Any  # a Dim, a derived Dim, or a Dim.AUTO / Dim.DYNAMIC hint
    size: int  # the example's size
    arg: str = ""  # the forward argument it is in

    @property
    def name(self) -> str | None:
        return getattr(self.dim, "__name__", None)


def declared_axes(inputs: dict[str, Any], spec: Any) -> list[DeclaredAxis]:
    """Every (input, axis) the spec makes dynamic, with the example's size there."""
    if spec is None:
        return []
    if not isinstance(spec, dict):
        spec = dict(zip(inputs, spec))
    names = {id(t): n for n, t in tensor_leaves(inputs)}
    found: list[DeclaredAxis] = []

    def walk(value: Any, s: Any) -> None:
        if s is None:
            return
        if isinstance(value, torch.Tensor):
            items = s.items() if isinstance(s, dict) else enumerate(s)
            for axis, d in items:
                if d is not None and not isinstance(d, int) and int(axis) < value.dim():
                    found.append(DeclaredAxis(names.get(id(value), "?"), int(axis), d,
                                              int(value.shape[int(axis)]), arg))
        elif isinstance(value, dict) and isinstance(s, dict):
            for k, sub in s.items():
                if k in value:
                    walk(value[k], sub)
        elif isinstance(s, (list, tuple)):
            children = value if isinstance(value, (list, tuple)) else pytree.tree_flatten(value)[0]
            for v, sub in zip(children, s):
                walk(v, sub)

    for arg, s in spec.items():
        if arg in inputs:
            walk(inputs[arg], s)
        elif isinstance(s, (list, tuple)) and f"{arg}_0" in inputs:
            # forward(self, *args): torch.export's spec keeps one tuple under ``args``,
            # bound_inputs names its items args_0, args_1...
            walk([inputs.get(f"{arg}_{i}") for i in range(len(s))], s)
    return found


# -- guards and where they come from ------------------------------------------
_TORCH_DIR = os.path.dirname(torch.__file__)
# pt2onnx's own frames: the package root, not this folder.
_SKIP = (_TORCH_DIR, os.path.dirname(logging.__file__),
         os.path.dirname(os.path.dirname(__file__)))


@dataclass
class Guard:
    expr: str
    where: str  # "modeling_bert.py:187 in forward", or "" when only torch frames were seen


class GuardLog(logging.Handler):
    """Collects the guards torch.export adds while capturing, each with the innermost
    stack frame outside torch (the model's line that asked for it)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.guards: list[Guard] = []
        # "L['x'].size()[0]" -> the symbols it was given, one per capture attempt
        self.sources: dict[str, set[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:
            return
        if message.startswith("create_symbol"):
            m = re.match(r"create_symbol (\w+) = \S+ for (\S+)", message)
            if m:
                self.sources.setdefault(m.group(2), set()).add(m.group(1))
        elif "[guard added]" in message:
            expr = message.split(" [guard added]")[0]
            expr = expr.removeprefix("eval ").replace("[guard suppressed] ", "")
            self.guards.append(Guard(expr.strip(), _user_frame()))

    def __enter__(self) -> GuardLog:
        self._logger = logging.getLogger(_compat.SHAPE_ENV_LOGGER)
        logger = self._logger
        self._saved = (logger.level, logger.propagate, list(logger.handlers))
        if logger.isEnabledFor(logging.INFO):
            logger.addHandler(self)  # the user asked for these logs: theirs stay too
        else:
            # Only this handler sees the records; torch's own handlers stay quiet.
            logger.handlers = [self]
            logger.setLevel(logging.INFO)
            logger.propagate = False
        return self

    def __exit__(self, *exc: Any) -> None:
        logger = self._logger
        logger.setLevel(self._saved[0])
        logger.propagate = self._saved[1]
        logger.handlers = self._saved[2]

    def find(self, symbols: list[str], hint: str = "") -> Guard | None:
        """The first guard on one of ``symbols`` seen from the model's code (one that
        mentions ``hint``, a bound or a constant, if there is such)."""
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, symbols)) + r")\b") if symbols else None
        hits = [g for g in self.guards if pattern is not None and pattern.search(g.expr)]
        for pool in ([g for g in hits if hint and re.search(rf"\b{hint}\b", g.expr)], hits):
            for g in sorted(pool, key=lambda g: len(g.expr)):  # the plainest statement first
                if g.where:
                    return g
        return hits[0] if hits else None


def _user_frame() -> str:
    return _frames.place(_frames.user_frame(2, _SKIP))


# -- capture with refinement --------------------------------------------------
def _export(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any,
            strict: bool) -> torch.export.ExportedProgram:
    from pt2onnx.capture._model_state import no_leaked_fake_tensors
    from pt2onnx.frontends import CaptureRewrites, SymBoolCausal

    # Each capture starts from the model's state: one that failed part way must not
    # leave the shape key of a cache it traced (``self.k_shape = x.shape``) for the next.
    with no_leaked_fake_tensors(module), SymBoolCausal(), CaptureRewrites(
            lazy_splits=not strict):
        return _compat.export(module, args, kwargs, spec, strict=strict)



@dataclass
class Refined:
    program: torch.export.ExportedProgram
    dynamic_shapes: Any
    example: tuple[tuple[Any, ...], dict[str, Any]] = ((), {})  # the inputs it was captured on
    notes: list[str] = field(default_factory=list)  # one per applied fix
    fixed: list[str] = field(default_factory=list)  # Dim.AUTO axes the model fixed, and why
    assumed: list[str] = field(default_factory=list)  # guards checked here, not by torch
    # Dim name -> the sizes of its range where a guard assumed here fails (``s != 16``):
    # the file is run there against eager (capture/_guards_hold.py)
    holes: dict[str, list[int]] = field(default_factory=dict)
    # The Dim names whose holes are the edges of a run of sizes where a guard fails
    # (``_guards_hold.edges_of``): a file wrong there is exported again with the range
    # bounded instead (``WrongWhereGuardFails``)
    edges: set[str] = field(default_factory=set)
    # (dim, n): captured above a bound n the model's own state set (a growing cache,
    # capture/_refine.py's _past_a_cap); the sizes up to n have a capture of their own
    split: tuple[str, int] | None = None


_FIX = re.compile(r"^\s+(\w+) = (.+?)\s*$")


def suggested_fixes(text: str) -> list[tuple[str, str]]:
    """The ``name = fix`` lines torch.export prints under "Suggested fixes:"."""
    if "Suggested fixes:" not in text:
        return []
    fixes: list[tuple[str, str]] = []
    for line in text.split("Suggested fixes:", 1)[1].splitlines()[1:]:
        m = _FIX.match(line)
        if not m:
            if fixes:
                break
            continue
        fixes.append((m.group(1), m.group(2)))
    return fixes


def is_constraint_violation(exc: BaseException) -> bool:
    kind = getattr(getattr(exc, "error_type", None), "name", "")
    return kind == "CONSTRAINT_VIOLATION" or type(exc).__name__ == "ConstraintViolationError"


def _checked(result: Refined, inputs: dict[str, Any], log: GuardLog) -> Refined:
    """Fails on a named dim the program holds as a constant; lists fixed Dim.AUTO axes."""
    result.example = result.program.example_inputs or ((), {})
    fixed = specialised_axes(result.program, inputs, result.dynamic_shapes)
    named = [(a.name or "", a.size, [a]) for a in fixed if a.name]
    if named:
        raise fixed_size_error(named, log)
    for a in fixed:
        size = a.size
        guard = log.find(_source_symbols([a], log), str(size))
        why = f" by the guard {guard.expr}" + (f" at {guard.where}" if guard.where else "") \
            if guard else ""
        result.fixed.append(f"input {a.input!r} axis {a.axis} fixed to {size}{why}")
    return result


def _torch_message(exc: BaseException) -> str:
    """torch.export's message without its generic trailer."""
    return str(exc).split("\n\nThe error above")[0].split("\nFor more information")[0].strip()


def _source_symbols(axes: list[DeclaredAxis], log: GuardLog) -> list[str]:
    """The symbols torch gave these input axes (their sources read ``L['arg']...size()[k]``)."""
    return [sym for src, syms in log.sources.items() for sym in syms for a in axes
            if src.endswith(f".size()[{a.axis}]") and f"['{a.arg}']" in src]


def _describe_fix(name: str, fix: str, axis: list[DeclaredAxis], log: GuardLog) -> str:
    m = re.match(r"Dim\('\w+'(?:, min=(\d+))?(?:, max=(\d+))?\)", fix)
    if m:
        lo, hi = m.group(1), m.group(2)
        low = lo or (getattr(axis[0].dim, "min", 0) if axis else 0)
        what = f"{name} bounded to [{low}, {hi or 'inf'}]"
        hint = hi or lo or ""
    else:
        what, hint = f"{name} tied to other dims: {name} = {fix}", ""
    guard = log.find(_source_symbols(axis, log), hint)
    if guard is not None:
        what += f" by the guard {guard.expr}" + (f" at {guard.where}" if guard.where else "")
    return what


def fixed_size_error(fixed: list[tuple[str, int, list[DeclaredAxis]]],
                     log: GuardLog) -> CaptureError:
    """The refusal for declared dims the model fixes; ``fixed_dims`` keeps
    ``(name, size)`` for each, so the capture can ask eager why (``_fixed_dims``)."""
    error = CaptureError(_fixed_size_message(fixed, log))
    error.fixed_dims = [(name, value) for name, value, _ in fixed]
    return error


def _fixed_size_message(fixed: list[tuple[str, int, list[DeclaredAxis]]], log: GuardLog) -> str:
    lines = []
    for name, value, axis in fixed:
        where = f" (input {axis[0].input!r}, axis {axis[0].axis})" if axis else ""
        guard = log.find(_source_symbols(axis, log), str(value))
        at = f": the guard {guard.expr} at {guard.where or 'torch internals'}" if guard else ""
        lines.append(f"  - {name}{where} is fixed to {value} by the model{at}")
        if axis and axis[0].size in (0, 1):
            lines.append(f"    The example's size there is {axis[0].size}, and the model takes a "
                         f"special branch for that size: export with an example of size 2 or "
                         f"more for {name}, and the graph covers every size.")
    return (
        "the dynamic shapes declare a dim that can only take one size in this model:\n" + "\n".join(lines)
        + "\nNext step: make that axis static (leave it out of dynamic_shapes / dynamic_axes, "
        "or use Dim.AUTO to let the model decide), or change the model line above so it "
        "does not depend on that size."
    )


def _check_ranges(declared: list[DeclaredAxis]) -> None:
    for a in declared:
        lo, hi = getattr(a.dim, "min", None), getattr(a.dim, "max", None)
        if a.name is None or not isinstance(lo, int) or not isinstance(hi, int):
            continue
        if not lo <= a.size <= hi:
            raise InvalidInputError(
                f"the example's size {a.size} for dim {a.name!r} (input {a.input!r}, axis "
                f"{a.axis}) is outside that Dim's range [{lo}, {hi}]. Next step: widen the "
                "Dim's min/max, or pass an example inside the range."
            )


def specialised_axes(
    program: torch.export.ExportedProgram, inputs: dict[str, Any], spec: Any
) -> list[DeclaredAxis]:
    """Declared axes that the captured program holds as a constant."""
    user = set(program.graph_signature.user_inputs)
    vals = [n.meta.get("val") for n in program.graph.nodes
            if n.op == "placeholder" and n.name in user]
    examples = [x for x in pytree.tree_leaves(program.example_inputs) if isinstance(x, torch.Tensor)]
    by_id = {id(x): v for x, v in zip(examples, [v for v in vals if isinstance(v, torch.Tensor)])}
    shapes = {name: by_id[id(t)].shape for name, t in tensor_leaves(inputs) if id(t) in by_id}
    return [
        a for a in declared_axes(inputs, spec)
        if a.input in shapes and _is_static(shapes[a.input][a.axis])
    ]


def _is_static(d: Any) -> bool:
    return not isinstance(d, torch.SymInt) or bool(d.node.expr.is_number)
