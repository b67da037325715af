"""Reading FX node metadata: source lines, module paths, dtypes, shapes, output names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.translate import _builder


@dataclass(frozen=True)
class Source:
    source: str
    module: str
    module_type: str
    # Every module call the node is inside, outermost first, the root left out: (call key,
    # path, qualified type name); passes/module_functions.py groups nodes by it.
    stack: tuple[tuple[str, str, str], ...] = ()


# pt2onnx's own frames that sit between the model's line and the op while capturing (a
# TorchFunctionMode that rewrites a few calls sees every op): never the source.
TRANSPARENT_FRAMES = ("pt2onnx/frontends/_rewrites.py",)


def is_transparent(frame_line: str) -> bool:
    return any(name in frame_line.replace("\\", "/") for name in TRANSPARENT_FRAMES)


def source_of(node: torch.fx.Node, cache: dict[Any, Source]) -> Source:
    stack = node.meta.get("stack_trace") or ""
    modules = node.meta.get("nn_module_stack") or {}
    key = (stack, id(modules))
    hit = cache.get(key)
    if hit is not None:
        return hit
    source = ""
    lines = [ln for ln in stack.strip().splitlines() if ln.strip()]
    # The innermost frame from a real file: generated code (<eval_with_key>.N, whose
    # number changes from run to run) and torch's own frames are skipped.
    fallback = ""
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i].strip()
        if not line.startswith("File "):
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) else ""
        text = f"{line}: {code}" if code else line
        if is_transparent(line):
            continue
        fallback = fallback or text
        if line.startswith('File "<') or "/site-packages/torch/" in line:
            continue
        source = text
        break
    if not source and fallback and not fallback.startswith('File "<'):
        source = fallback
    module, module_type = "", ""
    if modules:
        path, mtype = list(modules.values())[-1]
        module = _clean_module_path(str(path))
        module_type = getattr(mtype, "__name__", str(mtype)).rsplit(".", 1)[-1]
    hit = cache[key] = Source(source, module, module_type, _stack(modules))
    return hit


def _stack(modules: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """The module calls in an ``nn_module_stack``, as (call key, path, qualified type)."""
    calls = []
    for key, (path, mtype) in modules.items():
        clean = _clean_module_path(str(path))
        # torch.export files a node it has no module for under a made-up name.
        if not clean or clean.startswith("_empty_nn_module_stack"):
            continue
        name = mtype if isinstance(mtype, str) else torch.typename(mtype)
        calls.append((str(key), clean, name))
    return tuple(calls)


def _clean_module_path(path: str) -> str:
    # torch.export records paths as L['self'].layers[0].attn or as plain dotted names.
    for prefix in ("L['self'].", "L['self']"):
        if path.startswith(prefix):
            path = path[len(prefix):]
    return path.replace("._modules['", ".").replace("']", "").replace("[", ".").replace("]", "")


def shape_of(val: Any, names: dict[Any, Any] | None = None) -> ir.Shape | None:
    if not isinstance(val, torch.Tensor):
        return ir.Shape([]) if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) else None
    dims: list[int | str] = []
    for d in val.shape:
        if isinstance(d, int):
            dims.append(int(d))
        elif d.node.expr.is_number:  # a SymInt the graph specialised: a fixed size
            dims.append(int(d.node.expr))
        else:
            expr = d.node.expr
            dims.append(str(expr.xreplace(names) if names else expr))
    if val.is_complex():
        dims.append(2)  # (real, imag) pairs: see _builder.COMPLEX_PARTS
    return ir.Shape(_builder.onnx_dims(val.dtype, dims))


def type_of(val: Any) -> ir.TypeProtocol | None:
    if isinstance(val, torch.Tensor):
        return ir.TensorType(_builder.onnx_dtype(val.dtype))
    if isinstance(val, torch.SymInt):
        return ir.TensorType(ir.DataType.INT64)
    if isinstance(val, torch.SymFloat):
        return ir.TensorType(ir.DataType.FLOAT)
    if isinstance(val, torch.SymBool):
        return ir.TensorType(ir.DataType.BOOL)
    return None


CACHE_NAME = "past_key_values"


def is_cache(value: Any) -> bool:
    """Whether ``value`` is a transformers ``Cache`` (DynamicCache, EncoderDecoderCache...)."""
    return is_cache_type(type(value))


def is_cache_type(cls: Any) -> bool:
    return isinstance(cls, type) and any(
        c.__name__ == "Cache" and c.__module__.startswith("transformers") for c in cls.__mro__)


def cache_depths(spec: Any) -> list[int | None]:
    """Per leaf of a TreeSpec: the depth of the transformers Cache it is in, or None."""
    depths: list[int | None] = []

    def walk(node: Any, depth: int, found: int | None) -> None:
        if node.is_leaf():
            depths.append(found)
            return
        here = depth if found is None and is_cache_type(node.type) else found
        for child in node.children():
            walk(child, depth + 1, here)

    walk(spec, 0, None)
    return depths


def path_parts(path: Any, cache_depth: int | None = None) -> list[str]:
    """The parts of an input's or output's name along its pytree ``path``.

    The naming contract for caches (docs/models.md): a transformers ``Cache`` (found at
    ``cache_depth``, see :func:`cache_depths`) is named ``past_key_values`` whatever
    the argument or field that holds it is called, so a model keeps its ONNX names when
    transformers renames that field (5.24 renamed ``past_key_values`` to ``cache``)."""
    parts = [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", None)))) for k in path]
    if cache_depth is not None and 0 < cache_depth <= len(parts):
        parts[cache_depth - 1] = CACHE_NAME
    return parts


def spec_paths(spec: Any) -> list[tuple[Any, ...]]:
    """The key path of each leaf of a TreeSpec. A node registered without
    ``flatten_with_keys_fn`` (transformers 4.56's ``ModelOutput``) is read from its
    context: a list of keys names its children, as a dict's does."""
    import torch.utils._pytree as pytree

    if spec.is_leaf():
        return [()]
    node = pytree.SUPPORTED_NODES.get(spec.type)
    if node is not None and node.flatten_with_keys_fn is not None:
        try:
            tree = pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
            return [path for path, _ in pytree.tree_flatten_with_path(tree)[0]]
        except Exception:
            pass  # a child without keys: walk the children one by one
    context, children = spec.context, spec.children_specs
    keyed = isinstance(context, (list, tuple)) and len(context) == len(children) and all(
        isinstance(k, str) for k in context)
    paths: list[tuple[Any, ...]] = []
    for i, child in enumerate(children):
        key: Any = pytree.MappingKey(context[i]) if keyed else pytree.SequenceKey(i)
        paths += [(key, *rest) for rest in spec_paths(child)]
    return paths


def output_names_from_spec(ep: torch.export.ExportedProgram, n: int) -> list[str | None]:
    """Names such as ``logits`` or ``output_0`` from the model's output structure."""

    try:
        spec = ep.call_spec.out_spec
        paths = spec_paths(spec)
    except Exception:
        return [None] * n
    if len(paths) != n:
        return [None] * n
    depths = cache_depths(spec)
    names: list[str | None] = []
    for path, depth in zip(paths, depths):
        parts = path_parts(path, depth)
        if not parts:
            names.append("output")
        elif parts[0].isdigit():
            names.append("output_" + "_".join(parts))
        else:
            names.append("_".join(parts))
    return names
