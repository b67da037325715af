"""The user's dynamic_shapes, fitted to the forward's arguments: static entries filled
in, ``*args`` regrouped, and the Dim names read back for each tensor input."""

from __future__ import annotations

from typing import Any

import torch

from pt2onnx.errors import InvalidInputError


def _complete_dynamic_shapes(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any
) -> Any:
    """A dict spec may leave out inputs that are static (use_cache=False and the like),
    and, inside a dict, list or tuple input, static entries: None (or a missing key)
    there stands for the whole entry, as torch.export itself does not accept."""
    if not isinstance(dynamic_shapes, (dict, tuple, list)):
        return dynamic_shapes
    import inspect

    try:
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return dynamic_shapes
    if not isinstance(dynamic_shapes, dict):
        values = list(bound.arguments.values())
        if len(values) != len(dynamic_shapes):
            return _regroup_var_positional(bound, dynamic_shapes)
        return type(dynamic_shapes)(_fill_spec(v, s) for v, s in zip(values, dynamic_shapes))
    dynamic_shapes = _gather_var_positional(bound, dynamic_shapes)
    unknown = [k for k in dynamic_shapes if k not in bound.arguments]
    if unknown:
        raise InvalidInputError(
            f"dynamic_shapes names {unknown}, which are not inputs given to forward "
            f"{list(bound.arguments)}. Next step: key dynamic_shapes by the argument names "
            "of forward, or pass a tuple in argument order."
        )
    return {k: _fill_spec(v, dynamic_shapes.get(k)) for k, v in bound.arguments.items()}


def _regroup_var_positional(bound: Any, dynamic_shapes: Any) -> Any:
    """A flat tuple spec, one entry per positional input, for a forward that takes
    ``*args`` (torch.onnx users write it so): ``*args``'s entries become one tuple, as
    torch.export expects. Unchanged when the counts do not add up."""
    grouped: list[Any] = []
    flat = list(dynamic_shapes)
    for name, param in bound.signature.parameters.items():
        if name not in bound.arguments:
            continue
        if param.kind is param.VAR_POSITIONAL:
            n = len(bound.arguments[name])
            grouped.append(tuple(flat[:n]))
            flat = flat[n:]
        elif param.kind is not param.VAR_KEYWORD and flat:
            grouped.append(flat.pop(0))
        else:
            return dynamic_shapes
    if flat or not any(p.kind is p.VAR_POSITIONAL for p in bound.signature.parameters.values()):
        return dynamic_shapes
    return type(dynamic_shapes)(grouped)


def _gather_var_positional(bound: Any, dynamic_shapes: dict[str, Any]) -> dict[str, Any]:
    """A spec keyed ``args_0``, ``args_1``… for ``forward(self, *args)`` (the names
    pt2onnx gives those inputs, so what ``dynamic_axes`` by input names becomes): one
    tuple under ``args``, as torch.export expects."""
    for name, param in bound.signature.parameters.items():
        if param.kind is not param.VAR_POSITIONAL or name in dynamic_shapes:
            continue
        given = bound.arguments.get(name, ())
        keys = [f"{name}_{i}" for i in range(len(given))]
        if any(k in dynamic_shapes for k in keys):
            rest = {k: v for k, v in dynamic_shapes.items() if k not in keys}
            return {**rest, name: tuple(dynamic_shapes.get(k) for k in keys)}
    return dynamic_shapes


def _fill_spec(value: Any, spec: Any) -> Any:
    """``spec`` with the structure of a dict, list or tuple ``value``: a None or missing
    entry becomes that entry's structure of Nones (all static)."""
    if type(value) is dict:
        if spec is None:
            return {k: _fill_spec(v, None) for k, v in value.items()}
        if isinstance(spec, dict) and set(spec) <= set(value):
            return {k: _fill_spec(v, spec.get(k)) for k, v in value.items()}
    elif type(value) in (list, tuple):
        if spec is None:
            return type(value)(_fill_spec(v, None) for v in value)
        if isinstance(spec, (list, tuple)) and len(spec) == len(value):
            return type(spec)(_fill_spec(v, s) for v, s in zip(value, spec))
    return spec


def user_dim_names(
    module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any,
    program: torch.export.ExportedProgram,
) -> list[dict[int, str]]:
    """For each tensor input of the program, in order: axis -> the user's Dim name."""
    if dynamic_shapes is None or isinstance(module, torch.export.ExportedProgram):
        return []
    import inspect

    import torch.utils._pytree as pytree

    forward = module.forward if isinstance(module, torch.nn.Module) else module
    try:
        signature = inspect.signature(forward)
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return []
    values = dict(bound.arguments)
    for name, param in signature.parameters.items():
        if param.kind is param.VAR_KEYWORD and isinstance(values.get(name), dict):
            values.update(values.pop(name))  # what **kwargs took, by its own names
    if isinstance(dynamic_shapes, dict):
        pairs = [(values[k], v) for k, v in dynamic_shapes.items() if k in values]
    else:
        pairs = list(zip(values.values(), dynamic_shapes))
    by_id: dict[int, dict[int, str]] = {}
    for value, spec in pairs:
        _walk_spec(value, spec, by_id)
    leaves = pytree.tree_leaves(program.example_inputs)
    return [by_id.get(id(leaf), {}) for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _walk_spec(value: Any, spec: Any, out: dict[int, dict[int, str]]) -> None:
    if spec is None:
        return
    if isinstance(value, torch.Tensor):
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        # A derived dim (2 * Dim("half")) names its root: the graph's symbol is the root's.
        names = {int(axis): getattr(getattr(d, "root", d), "__name__", None)
                 for axis, d in items}
        out[id(value)] = {a: n for a, n in names.items() if isinstance(n, str)}
    elif isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        for v, s in zip(value, spec):
            _walk_spec(v, s, out)
    elif isinstance(value, dict) and isinstance(spec, dict):
        for key, s in spec.items():
            if key in value:
                _walk_spec(value[key], s, out)
    elif isinstance(spec, (list, tuple)):
        # A registered container (a transformers cache): the spec lists its leaves.
        import torch.utils._pytree as pytree

        leaves = [x for x in pytree.tree_leaves(value) if isinstance(x, torch.Tensor)]
        if len(leaves) == len(spec):
            for v, s in zip(leaves, spec):
                _walk_spec(v, s, out)
