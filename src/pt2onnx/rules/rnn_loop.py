"""Packed RNN layers as ONNX Loops over time steps.

Used where ONNX's LSTM / GRU / RNN ops don't fit: an LSTM with ``proj_size``
(torch's ``h_t = W_hr (o * tanh(c_t))`` has no ONNX attribute), and float64, for
which onnxruntime has no recurrent kernels. Each layer and direction is a Loop
whose body is one step of torch's cell; the input matmul for every step is one
MatMul before the loop. A step past a sequence's length leaves its states
unchanged and writes zeros, so the final states are those of the last valid
step; the reverse direction runs on each sequence reversed within its length
(ReverseSequence), as torch's packed kernels do.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext


def _cell(g: RuleContext, mode: str, gx: ir.Value, gh: ir.Value, h: ir.Value,
          c: ir.Value | None, hidden: int) -> tuple[ir.Value, ir.Value | None]:
    """One step of torch's cell from the input and hidden matmuls (biases included)."""
    if mode == "LSTM":
        assert c is not None
        i, f, cell, o = g.op.Split(g.op.Add(gx, gh), g.const([hidden] * 4), axis=1, _outputs=4)
        c_new = g.op.Add(g.op.Mul(g.op.Sigmoid(f), c),
                         g.op.Mul(g.op.Sigmoid(i), g.op.Tanh(cell)))
        return g.op.Mul(g.op.Sigmoid(o), g.op.Tanh(c_new)), c_new
    if mode == "GRU":
        sizes = g.const([hidden] * 3)
        x_r, x_z, x_n = g.op.Split(gx, sizes, axis=1, _outputs=3)
        h_r, h_z, h_n = g.op.Split(gh, sizes, axis=1, _outputs=3)
        r = g.op.Sigmoid(g.op.Add(x_r, h_r))
        z = g.op.Sigmoid(g.op.Add(x_z, h_z))
        n = g.op.Tanh(g.op.Add(x_n, g.op.Mul(r, h_n)))
        return g.op.Add(n, g.op.Mul(z, g.op.Sub(h, n))), None  # (1 - z) n + z h
    pre = g.op.Add(gx, gh)
    return (g.op.Relu(pre) if mode == "RNN_RELU" else g.op.Tanh(pre)), None


def _step_loop(g: RuleContext, mode: str, x: ir.Value, lengths: ir.Value, h0: ir.Value,
               c0: ir.Value | None, w: list[ir.Value], has_biases: bool,
               hidden: int) -> tuple[ir.Value, ir.Value, ir.Value | None]:
    """One direction of one layer, forward in time: (Y [T, B, H_out], h_T, c_T).

    ``w`` is torch's (w_ih, w_hh[, b_ih, b_hh][, w_hr]) for this layer and direction."""
    gx = g.op.MatMul(x, g.op.Transpose(w[0], perm=[1, 0]))  # [T, B, G * H]
    if has_biases:
        gx = g.op.Add(gx, w[2])
    w_hh_t = g.op.Transpose(w[1], perm=[1, 0])
    w_hr_t = g.op.Transpose(w[-1], perm=[1, 0]) if len(w) in (3, 5) else None
    zero = g.const(0.0, g.dtype)
    steps = g.op.Squeeze(g.op.Slice(g.op.Shape(x), g.const([0]), g.const([1])), g.const([0]))
    with g.scope() as body_nodes:
        t = g.formal(g.const(0), "t")
        keep_going = g.formal(g.const(True), "cond")
        h = g.formal(h0, "h")
        c = g.formal(c0, "c") if c0 is not None else None
        gh = g.op.MatMul(h, w_hh_t)
        if has_biases:
            gh = g.op.Add(gh, w[3])
        h_new, c_new = _cell(g, mode, g.op.Gather(gx, t, axis=0), gh, h, c, hidden)
        if w_hr_t is not None:
            h_new = g.op.MatMul(h_new, w_hr_t)
        valid = g.op.Unsqueeze(g.op.Less(t, lengths), g.const([1]))  # [B, 1]
        outs = [keep_going, g.op.Where(valid, h_new, h)]
        if c is not None and c_new is not None:
            outs.append(g.op.Where(valid, c_new, c))
        outs.append(g.op.Where(valid, h_new, zero))
    # Unnamed values would be named per graph at save time, where an inner name can
    # shadow an outer value the body reads: name them after the (unique) step input.
    for k, value in enumerate(v for node in body_nodes for v in node.outputs):
        value.name = value.name or f"{t.name}_v{k}"
    for value in outs[1:]:
        value.type = ir.TensorType(g.dtype)
    inputs = [t, keep_going, h] + ([c] if c is not None else [])
    body = g.subgraph("rnn_step", inputs, outs, body_nodes)
    carried = [h0] + ([c0] if c0 is not None else [])
    results = g.op.Loop(steps, None, *carried, body=body, _outputs=len(outs) - 1)
    if c0 is None:
        h_t, y = results
        return y, h_t, None
    h_t, c_t, y = results
    return y, h_t, c_t


def _initial(g: RuleContext, state: ir.Value | None, index: int, x: ir.Value,
             size: int) -> ir.Value:
    if state is not None:
        return g.op.Squeeze(g.op.Slice(state, g.const([index]), g.const([index + 1]),
                                       g.const([0])), g.const([0]))
    batch = g.op.Slice(g.op.Shape(x), g.const([1]), g.const([2]))
    return g.op.Expand(g.const(0.0, g.dtype), g.op.Concat(batch, g.const([size]), axis=0))


def loop_rnn(g: RuleContext, mode: str, x: ir.Value, lengths: ir.Value, h0: ir.Value | None,
             c0: ir.Value | None, weights: list[ir.Value], num_layers: int, dirs: int,
             has_biases: bool, hidden: int,
             proj: int) -> tuple[ir.Value, ir.Value, ir.Value | None]:
    """pt2onnx::packed_rnn as Loops: (output, h_n, c_n or None)."""
    lengths = g.cast(lengths, ir.DataType.INT64)
    per = (4 if has_biases else 2) + (1 if proj > 0 else 0)
    out_size = proj if proj > 0 else hidden
    lstm = mode == "LSTM"
    finals_h, finals_c = [], []
    for layer in range(num_layers):
        ys = []
        for d in range(dirs):
            index = layer * dirs + d
            seq = x if d == 0 else g.op.ReverseSequence(x, lengths, batch_axis=1, time_axis=0)
            y, h_t, c_t = _step_loop(
                g, mode, seq, lengths, _initial(g, h0, index, x, out_size),
                _initial(g, c0, index, x, hidden) if lstm else None,
                weights[index * per: (index + 1) * per], has_biases, hidden)
            if d == 1:
                y = g.op.ReverseSequence(y, lengths, batch_axis=1, time_axis=0)
            ys.append(y)
            finals_h.append(g.op.Unsqueeze(h_t, g.const([0])))
            if c_t is not None:
                finals_c.append(g.op.Unsqueeze(c_t, g.const([0])))
        x = ys[0] if dirs == 1 else g.op.Concat(*ys, axis=2)
    c_n = g.op.Concat(*finals_c, axis=0) if lstm else None
    return x, g.op.Concat(*finals_h, axis=0), c_n
