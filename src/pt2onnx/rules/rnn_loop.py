"""A packed LSTM with ``proj_size`` as an ONNX Loop over time steps.

ONNX's LSTM has no output projection (torch's ``h_t = W_hr (o * tanh(c_t))``), so
each layer and direction is a Loop whose body is one LSTM step. The input
projection for every step is one MatMul before the loop. A step past a sequence's
length leaves its states unchanged and writes zeros, so the final states are
those of the last valid step; the reverse direction runs on each sequence
reversed within its length (ReverseSequence), as torch's packed kernel does.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx._builder import RuleContext


def _step_loop(g: RuleContext, x: ir.Value, lengths: ir.Value, h0: ir.Value, c0: ir.Value,
               w_ih: ir.Value, w_hh: ir.Value, bias: ir.Value | None, w_hr: ir.Value,
               hidden: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """One direction of one layer, forward in time: (Y [T, B, P], h_T, c_T)."""
    gx = g.op.MatMul(x, g.op.Transpose(w_ih, perm=[1, 0]))  # [T, B, 4H]
    if bias is not None:
        gx = g.op.Add(gx, bias)
    w_hh_t = g.op.Transpose(w_hh, perm=[1, 0])
    w_hr_t = g.op.Transpose(w_hr, perm=[1, 0])
    zero = g.const(0.0, g.dtype)
    steps = g.op.Squeeze(g.op.Slice(g.op.Shape(x), g.const([0]), g.const([1])), g.const([0]))
    with g.scope() as body_nodes:
        t = g.formal(g.const(0), "t")
        keep_going = g.formal(g.const(True), "cond")
        h = g.formal(h0, "h")
        c = g.formal(c0, "c")
        gates = g.op.Add(g.op.Gather(gx, t, axis=0), g.op.MatMul(h, w_hh_t))
        i, f, cell, o = g.op.Split(gates, g.const([hidden] * 4), axis=1, _outputs=4)
        c_new = g.op.Add(g.op.Mul(g.op.Sigmoid(f), c),
                         g.op.Mul(g.op.Sigmoid(i), g.op.Tanh(cell)))
        h_new = g.op.MatMul(g.op.Mul(g.op.Sigmoid(o), g.op.Tanh(c_new)), w_hr_t)
        valid = g.op.Unsqueeze(g.op.Less(t, lengths), g.const([1]))  # [B, 1]
        outs = [keep_going, g.op.Where(valid, h_new, h), g.op.Where(valid, c_new, c),
                g.op.Where(valid, h_new, zero)]
    # Unnamed values would be named per graph at save time, where an inner name can
    # shadow an outer value the body reads: name them after the (unique) step input.
    for k, value in enumerate(v for node in body_nodes for v in node.outputs):
        value.name = value.name or f"{t.name}_v{k}"
    for value in outs[1:]:
        value.type = ir.TensorType(g.dtype)
    body = g.subgraph("lstm_step", [t, keep_going, h, c], outs, body_nodes)
    h_t, c_t, y = g.op.Loop(steps, None, h0, c0, body=body, _outputs=3)
    return y, h_t, c_t


def _initial(g: RuleContext, state: ir.Value | None, index: int, x: ir.Value,
             size: int) -> ir.Value:
    if state is not None:
        return g.op.Squeeze(g.op.Slice(state, g.const([index]), g.const([index + 1]),
                                       g.const([0])), g.const([0]))
    batch = g.op.Slice(g.op.Shape(x), g.const([1]), g.const([2]))
    return g.op.Expand(g.const(0.0, g.dtype), g.op.Concat(batch, g.const([size]), axis=0))


def projected_lstm(g: RuleContext, x: ir.Value, lengths: ir.Value, h0: ir.Value | None,
                   c0: ir.Value | None, weights: list[ir.Value], num_layers: int, dirs: int,
                   has_biases: bool, hidden: int,
                   proj: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """pt2onnx::packed_rnn for an LSTM with proj_size > 0: (output, h_n, c_n)."""
    lengths = g.cast(lengths, ir.DataType.INT64)
    per = 5 if has_biases else 3
    finals_h, finals_c = [], []
    for layer in range(num_layers):
        ys = []
        for d in range(dirs):
            index = layer * dirs + d
            w = weights[index * per: (index + 1) * per]
            bias = g.op.Add(w[2], w[3]) if has_biases else None
            seq = x if d == 0 else g.op.ReverseSequence(x, lengths, batch_axis=1, time_axis=0)
            y, h_t, c_t = _step_loop(g, seq, lengths, _initial(g, h0, index, x, proj),
                                     _initial(g, c0, index, x, hidden), w[0], w[1], bias,
                                     w[-1], hidden)
            if d == 1:
                y = g.op.ReverseSequence(y, lengths, batch_axis=1, time_axis=0)
            ys.append(y)
            finals_h.append(g.op.Unsqueeze(h_t, g.const([0])))
            finals_c.append(g.op.Unsqueeze(c_t, g.const([0])))
        x = ys[0] if dirs == 1 else g.op.Concat(*ys, axis=2)
    return x, g.op.Concat(*finals_h, axis=0), g.op.Concat(*finals_c, axis=0)
