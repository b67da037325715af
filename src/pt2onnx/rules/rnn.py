"""pt2onnx::packed_rnn (packed LSTM / GRU / RNN) -> ONNX LSTM / GRU / RNN.

The op is what capture makes of pack_padded_sequence -> RNN -> pad_packed_sequence
(see frontends/_packed_rnn.py). Each layer is one ONNX recurrent op over the padded input
with ``sequence_lens``: the reverse direction starts at each sequence's last valid
step and the final states are taken there, as torch's packed kernels do.

Gate order differs: torch stacks LSTM gates as (i, f, g, o), ONNX as (i, o, f, c);
GRU as (r, z, n) against ONNX's (z, r, h), with torch applying the reset gate after
the hidden matmul (``linear_before_reset=1``). An LSTM with ``proj_size`` has no
ONNX op: it becomes a Loop over time steps (see ``_projected_lstm``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import onnx_ir as ir
import torch

from pt2onnx.errors import TranslationError
from pt2onnx.frontends import define_packed_rnn_ops
from pt2onnx.rule_api import RuleContext, torch_dtype, translation
from pt2onnx.rules.rnn_loop import loop_rnn

define_packed_rnn_ops()  # the op the rule below is keyed by

# For each mode: ONNX op, number of gates, torch's gate index for each ONNX gate.
_MODES = {
    "LSTM": ("LSTM", 4, (0, 3, 1, 2)),
    "GRU": ("GRU", 3, (1, 0, 2)),
    "RNN_TANH": ("RNN", 1, (0,)),
    "RNN_RELU": ("RNN", 1, (0,)),
}


def _reorder(g: RuleContext, w: ir.Value, gates: int, hidden: int,
             order: Sequence[int]) -> ir.Value:
    """Reorders the gate blocks stacked along axis 0 of a torch weight or bias."""
    if gates == 1:
        return w
    parts = g.op.Split(w, g.const([hidden] * gates), axis=0, _outputs=gates)
    return g.op.Concat(*[parts[i] for i in order], axis=0)


def _onnx_weight(g: RuleContext, per_dir: list[list[ir.Value]], gates: int, hidden: int,
                 order: Sequence[int]) -> ir.Value:
    """ONNX's [D, ...] weight: per direction, torch's tensors with their gate blocks
    reordered, joined along axis 0. Weights known at export time (parameters) become
    one initializer; others are reordered in the graph."""
    known = [[v.const_value for v in values] for values in per_dir]
    first = per_dir[0][0]
    if all(c is not None for cs in known for c in cs) and first.dtype is not None:
        consts = [[c for c in cs if c is not None] for cs in known]

        def make() -> torch.Tensor:
            rows = []
            for cs in consts:
                blocks = [torch.from_numpy(c.numpy().copy()).split(hidden) for c in cs]
                rows.append(torch.cat([bs[i] for bs in blocks for i in order]))
            return torch.stack(rows)

        dims = [c.shape.numpy() for c in consts[0]]
        shape = (len(consts), sum(d[0] for d in dims), *dims[0][1:])
        return g.lazy_initializer(make, torch_dtype(first.dtype), shape)
    rows = []
    for values in per_dir:
        parts = [_reorder(g, v, gates, hidden, order) for v in values]
        rows.append(parts[0] if len(parts) == 1 else g.op.Concat(*parts, axis=0))
    return _stack(g, rows)


def _stack(g: RuleContext, values: list[ir.Value]) -> ir.Value:
    """[D, ...] from one tensor per direction."""
    rows = [g.op.Unsqueeze(v, g.const([0])) for v in values]
    return rows[0] if len(rows) == 1 else g.op.Concat(*rows, axis=0)


def _layer_states(g: RuleContext, state: ir.Value | None, layer: int,
                  dirs: int) -> ir.Value | None:
    if state is None:
        return None
    return g.op.Slice(state, g.const([layer * dirs]), g.const([(layer + 1) * dirs]),
                      g.const([0]))


@translation(torch.ops.pt2onnx.packed_rnn.default)
def packed_rnn(g: RuleContext, x: ir.Value, lengths: ir.Value, hx: list[ir.Value],
               weights: list[ir.Value], mode: str, num_layers: int, bidirectional: bool,
               has_biases: bool, hidden_size: int,
               proj_size: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """pt2onnx::packed_rnn(Tensor input, Tensor lengths, Tensor[] hx, Tensor[] weights, str mode, int num_layers, bool bidirectional, bool has_biases, int hidden_size, int proj_size) -> (Tensor, Tensor, Tensor)"""
    return _recurrent(g, mode, x, lengths, hx, weights, num_layers, bidirectional,
                      has_biases, hidden_size, proj_size)


def _recurrent(g: RuleContext, mode: str, x: ir.Value, lengths: ir.Value | None,
               hx: Sequence[ir.Value], weights: list[ir.Value], num_layers: int,
               bidirectional: bool, has_biases: bool, hidden_size: int,
               proj_size: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """An RNN over a time-major [T, B, F] input: (output, h_n, c_n or an empty tensor).

    ``lengths`` None: every sequence runs all T steps."""
    if g.dtype not in (ir.DataType.FLOAT, ir.DataType.DOUBLE):
        raise TranslationError(
            f"{mode} in {g.dtype}: pt2onnx exports LSTM / GRU / RNN in float32 and float64. "
            "Next step: run the RNN in float32 (model.float()) before exporting.")
    dirs = 2 if bidirectional else 1
    if x.shape is not None and len(x.shape) == 3 and x.shape[1] == 0:
        return _empty_batch(g, x, mode, num_layers, dirs, hidden_size, proj_size)
    h0 = hx[0] if hx else None
    c0 = hx[1] if len(hx) > 1 else None
    if proj_size > 0 or g.dtype == ir.DataType.DOUBLE:
        # No ONNX op has LSTM's projection, and onnxruntime's recurrent ops are
        # float32 only: one Loop per layer and direction.
        if lengths is None:
            shape = g.op.Shape(x)
            lengths = g.op.Expand(g.op.Slice(shape, g.const([0]), g.const([1])),
                                  g.op.Slice(shape, g.const([1]), g.const([2])))
        out, h_n, c_loop = loop_rnn(g, mode, x, lengths, h0, c0, weights, num_layers, dirs,
                                    has_biases, hidden_size, proj_size)
        return out, h_n, c_loop if c_loop is not None else _empty(g)
    seq_lens = g.cast(lengths, ir.DataType.INT32) if lengths is not None else None
    per = 4 if has_biases else 2
    onnx_op, gates, order = _MODES[mode]
    finals_h, finals_c = [], []
    for layer in range(num_layers):
        bases = [(layer * dirs + d) * per for d in range(dirs)]
        w = _onnx_weight(g, [[weights[b]] for b in bases], gates, hidden_size, order)
        r = _onnx_weight(g, [[weights[b + 1]] for b in bases], gates, hidden_size, order)
        bias = _onnx_weight(g, [[weights[b + 2], weights[b + 3]] for b in bases], gates,
                            hidden_size, order) if has_biases else None
        inputs = [x, w, r, bias, seq_lens, _layer_states(g, h0, layer, dirs)]
        attrs: dict[str, object] = {
            "hidden_size": hidden_size,
            "direction": "bidirectional" if bidirectional else "forward",
        }
        if onnx_op == "LSTM":
            inputs.append(_layer_states(g, c0, layer, dirs))
            y, y_h, y_c = g.op.LSTM(*inputs, **attrs, _outputs=3)
            finals_c.append(y_c)
        else:
            if onnx_op == "GRU":
                attrs["linear_before_reset"] = 1
            else:
                attrs["activations"] = ["Relu" if mode == "RNN_RELU" else "Tanh"] * dirs
            y, y_h = getattr(g.op, onnx_op)(*inputs, **attrs, _outputs=2)
        finals_h.append(y_h)
        # Y is [T, D, B, H]; the next layer and torch want [T, B, D * H]. D * H is
        # known, not -1: beside a batch of 0, a -1 has no size to infer (fuzz seed 2612,
        # program 2032: a GRU on an empty batch).
        x = g.op.Reshape(g.op.Transpose(y, perm=[0, 2, 1, 3]),
                         g.const([0, 0, dirs * hidden_size]))
    h_n = finals_h[0] if num_layers == 1 else g.op.Concat(*finals_h, axis=0)
    if onnx_op == "LSTM":
        c_n = finals_c[0] if num_layers == 1 else g.op.Concat(*finals_c, axis=0)
    else:
        c_n = _empty(g)
    return x, h_n, c_n


def _empty_batch(g: RuleContext, x: ir.Value, mode: str, num_layers: int, dirs: int,
                 hidden_size: int, proj_size: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """An RNN over a batch of 0: empty outputs of eager's shapes, without the recurrent
    op (onnxruntime 1.31's GRU crashes on a 0 batch; fuzz seed 2612, program 2032)."""
    out_size = proj_size or hidden_size
    steps = g.op.Slice(g.op.Shape(x), g.const([0]), g.const([1]))
    value = ir.tensor([0.0], dtype=g.dtype)
    out = g.op.ConstantOfShape(g.op.Concat(steps, g.const([0, dirs * out_size]), axis=0),
                               value=value)
    h_n = g.op.ConstantOfShape(g.const([num_layers * dirs, 0, out_size]), value=value)
    c_n = (g.op.ConstantOfShape(g.const([num_layers * dirs, 0, hidden_size]), value=value)
           if mode == "LSTM" else _empty(g))
    return out, h_n, c_n


def _empty(g: RuleContext) -> ir.Value:
    """The op's third output for GRU and RNN: an empty tensor."""
    return g.op.ConstantOfShape(g.const([0]), value=ir.tensor([0.0], dtype=g.dtype))


def _aten_rnn(g: RuleContext, mode: str, x: ir.Value, hx: Sequence[ir.Value],
              params: list[ir.Value], has_biases: bool, num_layers: int, dropout: float,
              train: bool, bidirectional: bool,
              batch_first: bool) -> tuple[ir.Value, ...]:
    """torch's whole-sequence RNN op (every sequence runs all steps) as ONNX LSTM / GRU /
    RNN: capture keeps it whole with symbolic steps and batch (``_compat.whole_rnn_ops``),
    so the file runs at any number of steps."""
    if train and dropout > 0 and num_layers > 1:
        raise TranslationError(
            f"{mode} with dropout={dropout} runs in training mode: its dropout draws random "
            "masks, which an exported graph cannot reproduce. Next step: call .eval() on "
            "the RNN module (one kept in a list or a closure is not reached by model.eval()).")
    dirs = 2 if bidirectional else 1
    per = len(params) // (num_layers * dirs)
    gates = _MODES[mode][1]
    w_hh = params[1].shape
    dims = [d for d in w_hh if isinstance(d, int)] if w_hh is not None else []
    if len(dims) != 2:
        raise TranslationError(
            f"{mode}: the recurrent weight's shape is unknown, so its hidden size is. "
            "Next step: pass the RNN's weights as parameters or constants.")
    hidden = dims[0] // gates
    # (w_ih, w_hh[, b_ih, b_hh][, w_hr]) per layer and direction: 3 or 5 with w_hr.
    proj = dims[1] if per in (3, 5) else 0
    if batch_first:
        x = g.op.Transpose(x, perm=[1, 0, 2])
    out, h_n, c_n = _recurrent(g, mode, x, None, hx, params, num_layers, bidirectional,
                               has_biases, hidden, proj)
    if batch_first:
        out = g.op.Transpose(out, perm=[1, 0, 2])
    return (out, h_n, c_n) if mode == "LSTM" else (out, h_n)


@translation(torch.ops.aten.lstm.input)
def lstm(g: RuleContext, x: ir.Value, hx: list[ir.Value], params: list[ir.Value],
         has_biases: bool, num_layers: int, dropout: float, train: bool, bidirectional: bool,
         batch_first: bool) -> tuple[ir.Value, ...]:
    """lstm.input(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)"""
    return _aten_rnn(g, "LSTM", x, hx, params, has_biases, num_layers, dropout, train,
                     bidirectional, batch_first)


def _one_state(op: str, mode: str) -> Callable[..., tuple[ir.Value, ...]]:
    """The rule for gru / rnn_tanh / rnn_relu: one schema, a single hidden state."""
    def rule(g: RuleContext, x: ir.Value, hx: ir.Value, params: list[ir.Value],
             has_biases: bool, num_layers: int, dropout: float, train: bool,
             bidirectional: bool, batch_first: bool) -> tuple[ir.Value, ...]:
        return _aten_rnn(g, mode, x, [hx], params, has_biases, num_layers, dropout, train,
                         bidirectional, batch_first)

    rule.__doc__ = (f"{op}.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, "
                    "int num_layers, float dropout, bool train, bool bidirectional, "
                    "bool batch_first) -> (Tensor, Tensor)")
    return rule


for _op, _mode in (("gru", "GRU"), ("rnn_tanh", "RNN_TANH"), ("rnn_relu", "RNN_RELU")):
    translation(getattr(torch.ops.aten, _op).input)(_one_state(_op, _mode))
