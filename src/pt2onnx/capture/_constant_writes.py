"""In-place writes the static recording takes as constants (``_record``).

An in-place op through a view, or on a tensor that has views, needs functionalization,
and the recording gives such a run to torch.export, unless what is written is a
constant: swin's shifted-window mask, ``x.new_zeros(...)`` filled slice by slice with
Python numbers. With static shapes that value is the same for every input; the
recording takes each tensor sharing its memory up again as a constant of its new value
(a copy), where torch.export would compute the same value in the graph.
"""

from __future__ import annotations

from typing import Any

import torch

aten = torch.ops.aten

# Ops whose output reads only their input's shape, dtype and device, never its values:
# with static shapes the output is the same for every input (``x.new_zeros(...)``).
SHAPE_FACTORIES = {aten.new_zeros.default, aten.new_ones.default, aten.new_full.default,
                   aten.new_empty.default, aten.zeros_like.default, aten.ones_like.default,
                   aten.full_like.default, aten.empty_like.default}


def constant_again(rec: Any, target: torch.Tensor, inputs: list[torch.fx.Node]) -> bool:
    """Whether an in-place op on ``target``, which shares its memory with other
    tensors (a view, its base), computes a constant: neither it, nor any tensor
    sharing its memory, nor the op's other inputs depend on the model's inputs (with
    static shapes such a value is the same for every input: swin's shifted-window
    mask, filled slice by slice). Then each of those tensors is taken up again,
    after the op has run, as a constant of its new value (cloned: a later write
    can't reach it); torch.export would compute the same value in the graph."""
    if any(n in rec.tainted or not _from_constants(rec, n) for n in inputs):
        return False
    storage = target.untyped_storage().data_ptr()
    aliases = [t for t in list(rec.env.keys())
               if t.device == target.device
               and t.untyped_storage().data_ptr() == storage]
    nodes = [rec.env[t] for t in aliases]
    if any(n in rec.tainted or (n.op != "call_function" and n not in rec.refreshed)
           or not _from_constants(rec, n) for n in nodes):
        return False  # a model input, parameter, buffer or constant is written
    for t in aliases:
        del rec.env[t]
    # Held until the recording ends, so that no other tensor takes their ids.
    rec.written.extend([*aliases, target])
    rec.forced_clones.update(id(t) for t in aliases)
    rec.forced_clones.add(id(target))
    return True

def _from_constants(rec: Any, node: torch.fx.Node) -> bool:
    """Whether ``node``'s value comes from constants alone: no parameter or buffer
    (weights can be fed at run time, ``export_params=False``) and no input, but
    through the shape of one (``SHAPE_FACTORIES``)."""
    known = rec.constant_of
    stack: list[torch.fx.Node] = [node]
    seen: list[torch.fx.Node] = []
    while stack:
        n = stack.pop()
        if n in known:
            if not known[n]:
                return _remember(rec, seen, False)
            continue
        seen.append(n)
        if n.op == "placeholder":
            if n not in rec.constant_nodes:
                return _remember(rec, seen, False)
        elif n.op == "call_function" and n.target not in SHAPE_FACTORIES:
            stack.extend(n.all_input_nodes)
    return _remember(rec, seen, True)

def _remember(rec: Any, nodes: list[torch.fx.Node], value: bool) -> bool:
    if value:  # every node walked is constant; on False only the last one is known
        rec.constant_of.update(dict.fromkeys(nodes, True))
    elif nodes:
        rec.constant_of[nodes[-1]] = False
    return value
