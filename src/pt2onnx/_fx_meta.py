"""Reading FX node metadata: source lines, module paths, dtypes, shapes, output names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx import _builder


@dataclass(frozen=True)
class Source:
    source: str
    module: str
    module_type: str


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
    hit = cache[key] = Source(source, module, module_type)
    return hit


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
    return ir.Shape(dims)


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
    return any(c.__name__ == "Cache" and c.__module__.startswith("transformers")
               for c in type(value).__mro__)


def path_parts(tree: Any, path: Any) -> list[str]:
    """The parts of an input's or output's name along ``path`` in ``tree``.

    The naming contract for caches (docs/models.md): a transformers ``Cache`` is named
    ``past_key_values`` whatever the argument or field that holds it is called, so a
    model keeps its ONNX names when transformers renames that field (5.24 renamed
    ``past_key_values`` to ``cache``)."""
    parts: list[str] = []
    node = tree
    for key in path:
        if node is not None and is_cache(node) and parts:
            parts[-1] = CACHE_NAME
        part = getattr(key, "key", getattr(key, "name", getattr(key, "idx", None)))
        parts.append(str(part))
        try:
            node = key.get(node)
        except Exception:
            node = None
    return parts


def output_names_from_spec(ep: torch.export.ExportedProgram, n: int) -> list[str | None]:
    """Names such as ``logits`` or ``output_0`` from the model's output structure."""
    import torch.utils._pytree as pytree

    try:
        spec = ep.call_spec.out_spec
        tree = pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
        paths = [path for path, _ in pytree.tree_flatten_with_path(tree)[0]]
    except Exception:
        return [None] * n
    if len(paths) != n:
        return [None] * n
    names: list[str | None] = []
    for path in paths:
        parts = path_parts(tree, path)
        if not parts:
            names.append("output")
        elif parts[0].isdigit():
            names.append("output_" + "_".join(parts))
        else:
            names.append("_".join(parts))
    return names
