"""Higher-order ops: cond -> If, while_loop -> Loop, scan and map -> Scan.

Subgraphs are translated by the same rules (``g.inline``). Values from the
enclosing graph are referenced directly, as ONNX allows.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.rule_api import RuleContext, translation

hop = torch.ops.higher_order


def _as_bool_scalar(g: RuleContext, pred: ir.Value) -> ir.Value:
    pred = g.cast(pred, ir.DataType.BOOL)
    if pred.shape is not None and len(pred.shape) == 0:
        return pred
    return g.op.Reshape(pred, g.const([], ir.DataType.INT64))


@translation(hop.cond)
def cond(g: RuleContext, pred: Any, true_fn: torch.fx.GraphModule,
         false_fn: torch.fx.GraphModule, operands: Any, *rest: Any) -> tuple[ir.Value, ...]:
    """cond(pred, true_fn, false_fn, operands) -> If"""
    operands = list(operands)
    if isinstance(pred, (bool, int)):
        # Known at export time: only the branch taken exists.
        return tuple(g.inline(true_fn if pred else false_fn, operands))
    with g.scope() as then_nodes:
        then_out = g.inline(true_fn, operands)
    with g.scope() as else_nodes:
        else_out = g.inline(false_fn, operands)
    then_graph = g.subgraph("then_branch", [], then_out, then_nodes)
    else_graph = g.subgraph("else_branch", [], else_out, else_nodes)
    outs = g.op.If(_as_bool_scalar(g, pred), then_branch=then_graph, else_branch=else_graph,
                   _outputs=len(then_out))
    return outs if isinstance(outs, tuple) else (outs,)


@translation(hop.while_loop)
def while_loop(g: RuleContext, cond_fn: torch.fx.GraphModule, body_fn: torch.fx.GraphModule,
               carried: Any, additional: Any = (), *rest: Any) -> tuple[ir.Value, ...]:
    """while_loop(cond_fn, body_fn, carried_inputs, additional_inputs) -> Loop"""
    carried = list(carried)
    additional = list(additional)
    (first,) = g.inline(cond_fn, carried + additional)
    with g.scope() as body_nodes:
        iteration = g.formal(g.const(0), "iter")
        cond_in = g.formal(g.const(True), "cond_in")
        formals = [g.formal(c, "carried") for c in carried]
        new_carried = g.inline(body_fn, formals + additional)
        (again,) = g.inline(cond_fn, list(new_carried) + additional)
        again = _as_bool_scalar(g, again)
    body = g.subgraph("loop_body", [iteration, cond_in, *formals], [again, *new_carried],
                      body_nodes)
    outs = g.op.Loop(None, _as_bool_scalar(g, first), *carried, body=body,
                     _outputs=len(carried))
    return outs if isinstance(outs, tuple) else (outs,)


def _scan(g: RuleContext, fn: torch.fx.GraphModule, init: list[ir.Value], xs: list[ir.Value],
          additional: list[Any]) -> tuple[ir.Value, ...]:
    with g.scope() as body_nodes:
        states = [g.formal(s, "state") for s in init]
        elems = [g.formal(x, "elem", drop_leading=1) for x in xs]
        outs = g.inline(fn, states + elems + additional)
    body = g.subgraph("scan_body", states + elems, outs, body_nodes)
    n_out = len(outs)
    results = g.op.Scan(*init, *xs, body=body, num_scan_inputs=len(xs), _outputs=n_out)
    return results if isinstance(results, tuple) else (results,)


@translation(hop.scan)
def scan(g: RuleContext, combine_fn: torch.fx.GraphModule, init: Any, xs: Any,
         additional: Any = (), *rest: Any) -> tuple[ir.Value, ...]:
    """scan(combine_fn, init, xs, additional_inputs) -> Scan"""
    return _scan(g, combine_fn, list(init), list(xs), list(additional))


@translation(hop.map_impl)
def map_impl(g: RuleContext, body_fn: torch.fx.GraphModule, xs: Any,
             pos_args: Any = ()) -> tuple[ir.Value, ...]:
    """map_impl(f, xs, pos_args) -> Scan with no state"""
    return _scan(g, body_fn, [], list(xs), list(pos_args))
