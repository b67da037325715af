"""Packed RNN sequences as one op: ``pt2onnx::packed_rnn``.

``pack_padded_sequence`` -> ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` ->
``pad_packed_sequence`` cannot be captured by torch.export: the packed data has
a data-dependent size and the RNN reads ``batch_sizes[0]`` as a Python size.
While a model is captured, ``_substitutions`` swaps these three for versions
that keep the sequences padded:

- ``pack_padded_sequence`` returns a :class:`_PaddedPacked`, a PackedSequence
  holding the padded input (time-major) and the lengths;
- an RNN module given one calls ``pt2onnx::packed_rnn`` (padded input, lengths,
  initial states, weights -> padded output, final states) and returns another;
- ``pad_packed_sequence`` masks the padded output and cuts it to
  ``max(lengths)`` (or ``total_length``), as torch does.

The op runs torch's own packed kernels when executed, so the captured program
computes what eager does; its rule (rules/rnn.py) emits ONNX LSTM/GRU/RNN with
``sequence_lens``. Sorting (``enforce_sorted``) does not change torch's results,
so the op takes the lengths in any order.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch.nn.utils import rnn as _rnn

from pt2onnx.errors import CaptureError
from pt2onnx.frontends import _custom_ops

_PACK = _rnn.pack_padded_sequence
_PAD = _rnn.pad_packed_sequence
_PACK_SEQUENCE = _rnn.pack_sequence
_SCHEMA = (
    "packed_rnn(Tensor input, Tensor lengths, Tensor[] hx, Tensor[] weights, str mode, "
    "int num_layers, bool bidirectional, bool has_biases, int hidden_size, int proj_size)"
    " -> (Tensor, Tensor, Tensor)"
)


def _packed_rnn(input: torch.Tensor, lengths: torch.Tensor, hx: list[torch.Tensor],
                weights: list[torch.Tensor], mode: str, num_layers: int, bidirectional: bool,
                has_biases: bool, hidden_size: int,
                proj_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eager kernel: torch's packed RNN on a padded [T, B, F] input.

    Returns the padded output [T, B, D * H_out] (zeros past each length), the final
    hidden state [L * D, B, H_out] and, for an LSTM, the final cell state (else an
    empty tensor), in the batch order of the input."""
    steps, batch = input.shape[0], input.shape[1]
    dirs = 2 if bidirectional else 1
    out_size = proj_size if proj_size > 0 else hidden_size
    if batch == 0:
        # torch's RNN modules take an empty batch and return empty outputs; packing
        # refuses empty tensors (fuzz seed 6301, program 212: the eager call of a
        # grown example, under the capture's rewrite, failed there).
        return _packed_rnn_fake(input, lengths, hx, weights, mode, num_layers,
                                bidirectional, has_biases, hidden_size, proj_size)
    packed = _PACK(input, lengths.to("cpu", torch.int64), enforce_sorted=False)
    order, restore = packed.sorted_indices, packed.unsorted_indices
    assert order is not None and restore is not None
    states = [h.index_select(1, order) for h in hx]
    if not states:
        states = [input.new_zeros(num_layers * dirs, batch, out_size)]
        if mode == "LSTM":
            states.append(input.new_zeros(num_layers * dirs, batch, hidden_size))
    args = (packed.data, packed.batch_sizes)
    flags = (has_biases, num_layers, 0.0, False, bidirectional)
    vf: Any = torch._VF
    if mode == "LSTM":
        out, h, c = vf.lstm(*args, states, weights, *flags)
    else:
        kernel = {"GRU": vf.gru, "RNN_TANH": vf.rnn_tanh, "RNN_RELU": vf.rnn_relu}[mode]
        out, h = kernel(*args, states[0], weights, *flags)
        c = input.new_zeros(0)
    result = _rnn.PackedSequence(out, packed.batch_sizes, order, restore)
    padded, _ = _PAD(result, total_length=steps)
    h = h.index_select(1, restore)
    return padded, h, c.index_select(1, restore) if mode == "LSTM" else c


def _packed_rnn_fake(input: torch.Tensor, lengths: torch.Tensor, hx: list[torch.Tensor],
                     weights: list[torch.Tensor], mode: str, num_layers: int,
                     bidirectional: bool, has_biases: bool, hidden_size: int,
                     proj_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dirs = 2 if bidirectional else 1
    out_size = proj_size if proj_size > 0 else hidden_size
    steps, batch = input.shape[0], input.shape[1]
    out = input.new_empty(steps, batch, dirs * out_size)
    h = input.new_empty(num_layers * dirs, batch, out_size)
    c = input.new_empty(num_layers * dirs, batch, hidden_size) if mode == "LSTM" \
        else input.new_empty(0)
    return out, h, c


def define_ops() -> None:
    """Defines ``pt2onnx::packed_rnn`` once per process."""
    _custom_ops.define(_SCHEMA, _packed_rnn, _packed_rnn_fake)


class _PaddedPacked(_rnn.PackedSequence):
    """A PackedSequence seen during capture: padded [T, B, *] data and the lengths.

    Only the substituted RNN modules and ``pad_packed_sequence`` read it; its
    packed fields do not exist, so reading them, or returning it from the model
    (which iterates over them), raises."""

    padded: torch.Tensor
    lengths: torch.Tensor

    def __new__(cls, padded: torch.Tensor, lengths: torch.Tensor) -> _PaddedPacked:
        self = tuple.__new__(cls, (None, None, None, None))
        self.padded, self.lengths = padded, lengths
        return self

    def _refuse(self, *_: Any) -> Any:
        raise CaptureError(
            "The model reads the packed data of a PackedSequence (.data / .batch_sizes / "
            "the sorted indices) or returns a PackedSequence: its packed size depends on "
            "the lengths' values. pt2onnx captures pack_padded_sequence -> nn.LSTM / "
            "nn.GRU / nn.RNN -> pad_packed_sequence as one op. Next step: unpack with "
            "pad_packed_sequence before using or returning the outputs."
        )

    def to(self, *args: Any, **kwargs: Any) -> _PaddedPacked:
        """As PackedSequence.to: the padded data moves or converts, the lengths stay."""
        return _PaddedPacked(self.padded.to(*args, **kwargs), self.lengths)

    def cpu(self, *args: Any, **kwargs: Any) -> _PaddedPacked:
        return _PaddedPacked(self.padded.cpu(*args, **kwargs), self.lengths)

    def cuda(self, *args: Any, **kwargs: Any) -> _PaddedPacked:
        return _PaddedPacked(self.padded.cuda(*args, **kwargs), self.lengths)

    def float(self) -> _PaddedPacked:
        return self.to(torch.float32)

    def double(self) -> _PaddedPacked:
        return self.to(torch.float64)

    @property
    def is_cuda(self) -> bool:
        return self.padded.is_cuda

    data = property(_refuse)
    batch_sizes = property(_refuse)
    sorted_indices = property(_refuse)
    unsorted_indices = property(_refuse)
    __iter__ = _refuse
    __getitem__ = _refuse


def _pack_padded_sequence(input: torch.Tensor, lengths: Any, batch_first: bool = False,
                          enforce_sorted: bool = True) -> _rnn.PackedSequence:
    if isinstance(lengths, torch.Tensor):
        lengths = lengths.to(dtype=torch.int64)
    else:
        lengths = torch.as_tensor(lengths, dtype=torch.int64, device="cpu")
    # enforce_sorted only decides whether torch checks the order: the results are the same.
    return _PaddedPacked(input.transpose(0, 1) if batch_first else input, lengths)


def _pack_sequence(sequences: Any, enforce_sorted: bool = True) -> _rnn.PackedSequence:
    lengths = torch.as_tensor([len(s) for s in sequences], dtype=torch.int64)
    return _pack_padded_sequence(_rnn.pad_sequence(sequences), lengths)


def _pad_packed_sequence(sequence: Any, batch_first: bool = False, padding_value: float = 0.0,
                         total_length: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(sequence, _PaddedPacked):
        return _PAD(sequence, batch_first, padding_value, total_length)
    out, lengths = sequence.padded, sequence.lengths
    steps = out.shape[0]
    if total_length is None:
        # torch cuts the output to the longest sequence: a size read from the data.
        size: Any = lengths.max().item()
        torch._check(size >= 1)
        torch._check(size <= steps)
    else:
        size = int(total_length)
        if not isinstance(steps, int) or size > steps:
            # Padding by total_length rows whatever the steps keeps a dynamic number
            # of steps free of a guard (steps < total_length) that would bound it.
            out = torch.cat([out, out.new_zeros(size, *out.shape[1:])], 0)
    out = out.narrow(0, 0, size)
    valid = torch.arange(size, device=out.device).unsqueeze(1) < lengths.to(out.device)
    valid = valid.reshape(*valid.shape, *([1] * (out.dim() - 2)))
    out = torch.where(valid, out, torch.full((), padding_value, dtype=out.dtype,
                                             device=out.device))
    return (out.transpose(0, 1) if batch_first else out), lengths


def _plain_forward(module: torch.nn.RNNBase, input: torch.Tensor, hx: Any) -> Any:
    """A plain (not packed) RNN call as ``pt2onnx::packed_rnn`` with every length full.

    torch.export unrolls ``aten.lstm`` / ``gru`` / ``rnn`` over the steps, which fixes a
    dynamic number of steps; the op keeps it a dim, and its rule writes an ONNX
    LSTM / GRU / RNN that runs at any length, 1 included."""
    unbatched = input.dim() == 2
    x = input.unsqueeze(1) if unbatched else (
        input.transpose(0, 1) if module.batch_first else input)
    if hx is not None and unbatched:
        hx = tuple(h.unsqueeze(1) for h in hx) if isinstance(hx, (tuple, list)) \
            else hx.unsqueeze(1)
    lengths = torch.full((x.shape[1],), 1, dtype=torch.int64) * x.shape[0]
    packed, state = _rnn_forward(module, _PaddedPacked(x, lengths), hx)
    out = packed.padded
    if unbatched:
        out = out.squeeze(1)
        state = tuple(h.squeeze(1) for h in state) if isinstance(state, tuple) \
            else state.squeeze(1)
    elif module.batch_first:
        out = out.transpose(0, 1)
    return out, state


def _rnn_forward(module: torch.nn.RNNBase, packed: _PaddedPacked, hx: Any) -> Any:
    if module.training and module.dropout > 0 and module.num_layers > 1:
        raise CaptureError(
            f"{type(module).__name__} with dropout={module.dropout} is in training mode: its "
            "dropout draws random masks, which an exported graph cannot reproduce. "
            "Next step: call model.eval() before exporting."
        )
    proj = int(getattr(module, "proj_size", 0))
    # The parameters as the module holds them now (torch.export swaps them in).
    weights = [getattr(module, name) for name in module._flat_weights_names]
    states = [] if hx is None else list(hx) if isinstance(hx, (tuple, list)) else [hx]
    out, h, c = torch.ops.pt2onnx.packed_rnn(
        packed.padded, packed.lengths, states, weights, module.mode,
        module.num_layers, module.bidirectional, module.bias, module.hidden_size, proj)
    result = _PaddedPacked(out, packed.lengths)
    return (result, (h, c)) if module.mode == "LSTM" else (result, h)


def holds_hidden_rnn(model: torch.nn.Module) -> bool:
    """Whether the model holds an ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` that
    ``model.modules()`` does not list: in a plain list, tuple or dict attribute, or in
    the closure of a function attribute (``self.f = lambda x: rnn(x)``). Such a module
    may be given a PackedSequence, whose packed size torch.export cannot capture."""
    seen: set[int] = set()

    def reaches(value: Any, depth: int) -> bool:
        if isinstance(value, (torch.Tensor, str, int, float, bool)) or value is None or \
                id(value) in seen or depth > 4:
            return False
        seen.add(id(value))
        if isinstance(value, torch.nn.RNNBase):
            return True
        if isinstance(value, torch.nn.Module):
            return any(reaches(v, depth + 1) for v in vars(value).values())
        if isinstance(value, (list, tuple, set, frozenset)):
            return any(reaches(v, depth + 1) for v in value)
        if isinstance(value, dict):
            return any(reaches(v, depth + 1) for v in value.values())
        if isinstance(value, functools.partial):
            return reaches(value.func, depth + 1) or any(
                reaches(v, depth + 1) for v in (*value.args, *value.keywords.values()))
        if inspect.ismethod(value):
            return reaches(value.__self__, depth + 1)
        if inspect.isfunction(value):
            return any(reaches(_cell_value(c), depth + 1) for c in value.__closure__ or ())
        return False

    internal = frozenset(vars(torch.nn.Module()))  # parameters, buffers, hooks, ...
    return any(not isinstance(m, torch.nn.RNNBase) and
               any(reaches(v, 0) for k, v in vars(m).items() if k not in internal)
               for m in model.modules())


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a cell not filled yet
        return None


def _settle_dynamo_rules() -> None:
    """Has Dynamo resolve its table of torch functions before any is swapped.

    Dynamo builds that table (name -> function object, cached for the process) when it
    is first imported, which torch.export may do during the capture: built then, it
    would hold the substitutes instead of torch's functions for the rest of the
    process."""
    try:
        from torch._dynamo import trace_rules

        trace_rules.get_torch_obj_rule_map()
    except (ImportError, AttributeError):  # pragma: no cover - a torch without the table
        pass


@contextlib.contextmanager
def substitutions(notes: list[str], plain: bool = False) -> Iterator[None]:
    """Swaps pack / unpack and the RNN modules' forward while a model is captured.

    The functions are replaced wherever a loaded module holds them (a model that did
    ``from torch.nn.utils.rnn import pack_padded_sequence`` included). With ``plain``
    (dynamic shapes), a plain RNN call becomes the same op, with full lengths."""
    define_ops()
    _settle_dynamo_rules()
    used: list[bool] = []
    swaps = {_PACK: _pack_padded_sequence, _PAD: _pad_packed_sequence,
             _PACK_SEQUENCE: _pack_sequence}
    originals = {id(f) for f in swaps}
    replaced: list[tuple[Any, str, Any]] = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict) or namespace is globals():  # _PACK stays torch's
            continue
        for name, value in list(namespace.items()):
            if id(value) in originals and value in swaps:
                replaced.append((namespace, name, value))
                namespace[name] = swaps[value]
    classes = (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)
    forwards = {cls: cls.__dict__["forward"] for cls in classes}

    def make(original: Any) -> Any:
        def forward(self: torch.nn.RNNBase, input: Any, hx: Any = None) -> Any:
            if isinstance(input, _PaddedPacked):
                used.append(True)
                return _rnn_forward(self, input, hx)
            if plain and isinstance(input, torch.Tensor) and input.dim() in (2, 3):
                used.append(False)
                return _plain_forward(self, input, hx)
            return original(self, input, hx)
        forward.__wrapped__ = original  # type: ignore[attr-defined]
        return forward

    for cls, original in forwards.items():
        cls.forward = make(original)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls, original in forwards.items():
            cls.forward = original  # type: ignore[method-assign]
        for namespace, name, value in replaced:
            namespace[name] = value
        if any(used):
            notes.append(
                f"pack_padded_sequence -> RNN -> pad_packed_sequence was captured as "
                f"pt2onnx::packed_rnn ({sum(used)} call(s)): the sequences stay padded and "
                "their lengths become ONNX sequence_lens."
            )
        if not all(used):
            notes.append(
                f"nn.LSTM / nn.GRU / nn.RNN was captured as pt2onnx::packed_rnn "
                f"({len(used) - sum(used)} call(s)), so its number of steps stays dynamic."
            )
