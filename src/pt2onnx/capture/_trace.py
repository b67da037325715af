"""The last-resort capture: a make_fx trace on the real example inputs.

torch.export refuses models whose Python code branches on tensor values; every
torchvision detection model is one. A trace runs the model once and records the
ATen ops it executed, so Python control flow and data-dependent sizes are baked
in for these inputs. The result is wrapped as an ExportedProgram (parameters and
buffers lifted to inputs, as torch.export does) so later stages see one kind of
program.

While tracing, a few library functions whose Python loops would be unrolled
into the graph are swapped for single custom ops with exact ONNX translations
(``_substitutions``); each swap is named in the report.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

from pt2onnx import _compat
from pt2onnx.frontends import define_batched_nms


@contextlib.contextmanager
def _substitutions(notes: list[str]) -> Iterator[None]:
    """What a recording or a trace captures in another form: torchvision's
    ``batched_nms`` (below) and ``addmm``-style calls with tensor ``alpha`` / ``beta``
    (``frontends/_rewrites.py``)."""
    from pt2onnx.frontends import CaptureRewrites

    with _nms_substitution(notes), CaptureRewrites():
        yield


@contextlib.contextmanager
def _nms_substitution(notes: list[str]) -> Iterator[None]:
    """Swaps torchvision's ``batched_nms`` for ``pt2onnx::batched_nms`` while tracing.

    torchvision runs one NMS per class in a Python loop over the classes present
    (more than 4,000 box coordinates on CPU), which a trace would unroll for the
    classes of the example input. The custom op keeps it one op, translated to a
    single multi-class ONNX NonMaxSuppression with the same semantics.
    """
    box_ops = sys.modules.get("torchvision.ops.boxes")
    if box_ops is None or not hasattr(box_ops, "batched_nms"):
        yield
        return
    original = box_ops.batched_nms
    define_batched_nms(original)
    used: list[bool] = []

    def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor,
                    iou_threshold: float) -> torch.Tensor:
        used.append(True)
        return torch.ops.pt2onnx.batched_nms(boxes, scores, idxs, float(iou_threshold))

    # Models call it as torchvision.ops.boxes.batched_nms (the detection models) or
    # torchvision.ops.batched_nms; a name imported into another module is not swapped.
    holders = [m for m in (box_ops, sys.modules.get("torchvision.ops"))
               if m is not None and getattr(m, "batched_nms", None) is original]
    for holder in holders:
        setattr(holder, "batched_nms", batched_nms)  # noqa: B010
    try:
        yield
    finally:
        for holder in holders:
            setattr(holder, "batched_nms", original)  # noqa: B010
        if used:
            notes.append(
                f"torchvision.ops.batched_nms was captured as one pt2onnx::batched_nms op "
                f"({len(used)} call(s)) instead of its per-class Python loop."
            )


def trace(
    module: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    decompositions: dict[Any, Any] | None,
) -> tuple[torch.export.ExportedProgram, list[str]]:
    """Traces ``module(*args, **kwargs)`` with make_fx; returns the program and notes."""
    from torch.export.graph_signature import (
        ConstantArgument,
        InputKind,
        InputSpec,
        OutputKind,
        OutputSpec,
        TensorArgument,
    )
    from torch.fx.experimental.proxy_tensor import make_fx

    params = {k: v.detach() for k, v in module.named_parameters()}
    buffers = {k: v for k, v in module.named_buffers()}
    state_names = [*params, *buffers]
    state = [*params.values(), *buffers.values()]
    flat, in_spec = pytree.tree_flatten((args, kwargs))
    out_specs: list[Any] = []

    def run(*inputs: Any) -> list[Any]:
        named = dict(zip(state_names, inputs[: len(state)]))
        a, k = pytree.tree_unflatten(list(inputs[len(state):]), in_spec)
        out = torch.func.functional_call(module, named, a, k)
        leaves, spec = pytree.tree_flatten(out)
        out_specs.append(spec)
        return leaves

    notes: list[str] = []
    with torch.no_grad(), _substitutions(notes):
        functional = torch.func.functionalize(run, remove="mutations")
        # .item() and .tolist() on traced tensors are allowed: their values are baked in.
        gm = make_fx(functional, decomposition_table=decompositions or {},
                     tracing_mode="real", record_stack_traces=True,
                     _error_on_data_dependent_ops=False)(*state, *flat)
    graph = gm.graph
    graph.eliminate_dead_code()  # unused outputs of multi-output ops (getitem nodes)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    input_specs: list[Any] = []
    for i, node in enumerate(placeholders):
        if i < len(params):
            input_specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(node.name),
                                         target=state_names[i]))
        elif i < len(state):
            input_specs.append(InputSpec(InputKind.BUFFER, TensorArgument(node.name),
                                         target=state_names[i], persistent=True))
    # Tensors created during the trace (torch.tensor(...) constants) are get_attr
    # nodes; lift them to constant inputs, placed before the user inputs.
    constants: dict[str, torch.Tensor] = {}
    first_user = placeholders[len(state)] if len(placeholders) > len(state) else None
    for node in list(graph.nodes):
        if node.op != "get_attr":
            continue
        value = getattr(gm, node.target)
        if not isinstance(value, torch.Tensor):
            continue
        name = f"c_{node.target}"
        ctx = graph.inserting_before(first_user) if first_user is not None else \
            graph.inserting_after(placeholders[-1] if placeholders else None)
        with ctx:
            ph = graph.placeholder(name)
        ph.meta.update(node.meta)
        ph.meta.setdefault("val", value)
        node.replace_all_uses_with(ph)
        graph.erase_node(node)
        constants[name] = value
        input_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(ph.name), target=name))
    for node, value, name in zip(placeholders[len(state):], flat, _input_names(module, args, kwargs)):
        node._rename(name)
        if isinstance(value, torch.Tensor):
            arg: Any = TensorArgument(node.name)
        else:
            node.meta["val"] = value
            arg = ConstantArgument(node.name, value)
        input_specs.append(InputSpec(InputKind.USER_INPUT, arg, target=None))
    output = next(n for n in graph.nodes if n.op == "output")
    output_specs = [
        OutputSpec(OutputKind.USER_OUTPUT,
                   TensorArgument(o.name) if isinstance(o, torch.fx.Node) else ConstantArgument("", o),
                   target=None)
        for o in output.args[0]
    ]
    _share_fake_mode(graph)
    graph.lint()
    gm.recompile()
    state_dict = {**dict(module.named_parameters()), **buffers}
    program = _compat.exported_program_from_graph(
        gm, input_specs, output_specs, state_dict, constants, in_spec, out_specs[-1]
    )
    return program, notes


def _input_names(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """Names for the flattened inputs from forward's parameters: ``images_0``, ``x``."""
    import inspect

    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = []
    for path, _ in pytree.tree_flatten_with_path((args, kwargs))[0]:
        keys = [getattr(k, "idx", getattr(k, "key", None)) for k in path]
        if keys[0] == 0:  # positional
            index = keys[1]
            head = params[index] if isinstance(index, int) and index < len(params) else f"arg{index}"
        else:
            head = str(keys[1])
        names.append("_".join([head, *(str(k) for k in keys[2:])]))
    return names


def _share_fake_mode(graph: torch.fx.Graph) -> None:
    """Rebuilds every ``meta["val"]`` in one FakeTensorMode.

    A real-mode trace snapshots each value in a fake mode of its own, and
    ExportedProgram expects the graph's values to share one.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)

    def refake(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        with mode:
            return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                                       device=t.device)

    for node in graph.nodes:
        if "val" in node.meta:
            node.meta["val"] = pytree.tree_map(refake, node.meta["val"])
