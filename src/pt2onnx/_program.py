"""``OnnxProgram``: what ``pt2onnx.export`` returns (the model, its report, save, run,
verify)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import torch

from pt2onnx import debug
from pt2onnx.capture import split_trailing_kwargs
from pt2onnx.errors import ExportError, InvalidInputError
from pt2onnx.report import ExportReport
from pt2onnx.save import PROTO_LIMIT_BYTES, initializer_bytes, save_model
from pt2onnx.verify import (
    TOLERANCES,
    VerificationResult,
    compare,
    declared_shapes,
    flatten_outputs,
    flatten_tensors,
    narrowest_float,
    require_onnxruntime,
    to_numpy,
)
from pt2onnx.verify import (
    bisect as bisect_nodes,
)


def _bf16() -> Any:
    import ml_dtypes  # shipped with onnx

    return np.dtype(ml_dtypes.bfloat16)


_BF16 = _bf16()


def _float32_boundary(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with its bfloat16 inputs and outputs as float32, cast inside the graph,
    for onnxruntime's Python API, which takes and returns no bfloat16 arrays."""
    bf16 = onnx.TensorProto.BFLOAT16
    if not any(v.type.tensor_type.elem_type == bf16
               for v in (*proto.graph.input, *proto.graph.output)):
        return proto
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    graph = model.graph
    renames: dict[str, str] = {}
    for inp in graph.input:
        if inp.type.tensor_type.elem_type == bf16:
            renames[inp.name] = f"{inp.name}__as_bfloat16"
            inp.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    out_renames: dict[str, str] = {}
    for out in graph.output:
        if out.type.tensor_type.elem_type == bf16:
            out_renames[out.name] = f"{out.name}__bfloat16"
            out.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    for node in graph.node:
        node.input[:] = [renames.get(i, i) for i in node.input]
        node.output[:] = [out_renames.get(o, o) for o in node.output]
    # An output that is an input (or another output) passes through under its new name.
    for old, new in out_renames.items():
        for node in graph.node:
            node.input[:] = [new if i == old else i for i in node.input]
    heads = [onnx.helper.make_node("Cast", [old], [new], to=bf16) for old, new in renames.items()]
    tails = [onnx.helper.make_node("Cast", [out_renames[o] if o not in renames else renames[o]],
                                   [o], to=onnx.TensorProto.FLOAT) for o in out_renames]
    nodes = heads + list(graph.node) + tails
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def _as_input(array: np.ndarray, value: ir.Value) -> np.ndarray:
    """A floating ``array`` in the floating dtype of the graph input ``value``."""
    dtype = value.dtype
    floating = (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16,
                ir.DataType.BFLOAT16)
    if dtype not in floating or not (array.dtype.kind == "f" or array.dtype == _BF16):
        return array
    want = _BF16 if dtype == ir.DataType.BFLOAT16 else dtype.numpy()
    return array if array.dtype == want else array.astype(want)


class OnnxProgram:
    """An exported ONNX model, with the means to save, run and verify it."""

    def __init__(
        self,
        model: ir.Model,
        report: ExportReport,
        module: Callable[..., Any] | None = None,
        kwarg_order: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.report = report
        self._module = module
        self._kwarg_order = list(kwarg_order)
        self._session: Any = None
        self._path: Path | None = None
        # Set by export: what verify(bisect=True) and save_testcase need.
        self._program: torch.export.ExportedProgram | None = None
        self._fx_values: dict[str, Any] = {}
        self._example: tuple[tuple[Any, ...], dict[str, Any]] = ((), {})
        self._extra_outputs = 0
        self._sym_names: dict[Any, Any] = {}  # torch's symbols -> the user's dim names
        self._traced = False  # a make_fx trace is specialised to the example's sizes
        self._call_model: Any = module  # whose signature reads a trailing dict of kwargs
        # quantized_io='triple': the quantized leaves of the inputs and outputs (passes/
        # quantized_io.py), each fed and returned as (integer values, scale, zero point)
        self._triples: tuple[list[Any], list[Any]] | None = None
        # precision=: the dtype the model was converted to; floating inputs are cast to
        # the file's input dtypes when run.
        self._precision: torch.dtype | None = None

    def __repr__(self) -> str:
        g = self.model.graph
        return (
            f"OnnxProgram(opset={g.opset_imports.get('', '?')}, nodes={len(g)}, "
            f"inputs={[v.name for v in g.inputs]}, outputs={[v.name for v in g.outputs]})"
        )

    @property
    def model_proto(self) -> onnx.ModelProto:
        """The model as an ``onnx.ModelProto`` (weights inline)."""
        if initializer_bytes(self.model) > PROTO_LIMIT_BYTES:
            raise ExportError(
                "the model's weights exceed the 2 GB protobuf limit, so it has no in-memory "
                "ModelProto. Next step: use .save(path), which writes external data."
            )
        return ir.to_proto(self.model)

    def save(
        self, path: str | os.PathLike[str], *, external_data: bool | None = None,
        strip_weights: bool = False, weights: Any = None,
    ) -> Path:
        """Writes the model atomically; large weights go to ``<path>.data`` beside it.

        With ``strip_weights=True`` large float weights are replaced by their
        statistics, to share a repro without them; ``pt2onnx.unstrip`` restores
        random weights with the same statistics.

        ``weights`` gives the data of a model exported from the meta device:
        safetensors file(s), a ``state_dict`` or a callable ``name -> Tensor``.
        Tensors are streamed one at a time into the external-data file.
        """
        if strip_weights:
            return debug.strip(self.model, path)
        written = save_model(self.model, path, external_data, weights)
        self._path = written
        return written

    # -- running ------------------------------------------------------
    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A trailing dict of keyword inputs, read as export read it (torch.onnx's form)."""
        if self._call_model is None:
            return args, kwargs
        args, split = split_trailing_kwargs(self._call_model, tuple(args), kwargs)
        return args, split or {}

    def _flat_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[np.ndarray]:
        args, kwargs = self._split(args, kwargs)
        ordered = {k: kwargs[k] for k in self._kwarg_order if k in kwargs}
        ordered.update({k: v for k, v in kwargs.items() if k not in ordered})
        tensors = flatten_tensors((args, ordered))
        arrays = []
        for t in tensors:
            if self._triples is not None and t.is_quantized:
                arrays += [t.int_repr().numpy(), np.array(t.q_scale(), np.float64),
                           np.array(t.q_zero_point(), np.int64)]
            else:
                arrays.append(to_numpy(t))
        inputs = self.model.graph.inputs
        if len(arrays) != len(inputs):
            raise InvalidInputError(
                f"the ONNX model takes {len(inputs)} tensor inputs "
                f"({[v.name for v in inputs]}) but {len(arrays)} were given."
            )
        if self._precision is not None:  # float inputs in the dtype the file takes
            arrays = [_as_input(a, v) for a, v in zip(arrays, inputs)]
        return arrays

    def _tolerance(self, atol: float | None, rtol: float | None) -> tuple[float, float]:
        """The given atol and rtol, or the defaults for the narrowest floating type the
        file computes in (verify.TOLERANCES)."""
        if atol is not None and rtol is not None:
            return atol, rtol
        g = self.model.graph
        dtypes: set[Any] = {v.dtype for v in (*g.inputs, *g.outputs,
                                              *g.initializers.values())}
        dtypes.update(v.dtype for node in g for v in node.outputs)
        if self._precision is not None:
            dtypes.add(self._precision)
        default = TOLERANCES[narrowest_float(d for d in dtypes if d is not None)]
        return (default[0] if atol is None else atol, default[1] if rtol is None else rtol)

    def _dequantized_outputs(self, actual: list[np.ndarray], names: list[str],
                             ) -> tuple[list[np.ndarray], list[str]]:
        """With quantized_io='triple': each output triple as its dequantized values."""
        if self._triples is None:
            return actual, names
        values, kept, i = [], [], 0
        for leaf in self._triples[1]:
            if leaf is None:
                values.append(actual[i])
                kept.append(names[i])
                i += 1
                continue
            ints, scale, zero = actual[i:i + 3]
            values.append(((ints.astype(np.float32) - np.float32(zero)) * scale).astype(
                np.float32))
            kept.append(names[i])
            i += 3
        return values + actual[i:], kept + names[i:]

    def _get_session(self) -> Any:
        if self._session is None:
            ort = require_onnxruntime()
            opts = ort.SessionOptions()
            # Fatal only: a failed run raises with onnxruntime's message, which the
            # verification table reports; its log line would repeat it on stderr.
            opts.log_severity_level = 4
            if initializer_bytes(self.model) > PROTO_LIMIT_BYTES:
                if self._path is None:
                    raise ExportError(
                        "this model is too large to run from memory. Next step: call "
                        ".save(path) first, then .run(...)."
                    )
                source: Any = str(self._path)
            else:
                source = _float32_boundary(self.model_proto).SerializeToString()
            self._session = ort.InferenceSession(
                source, opts, providers=["CPUExecutionProvider"]
            )
        return self._session

    def run(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        """Runs the model in onnxruntime on the same kind of inputs as the export."""
        return self._run_flat(self._flat_inputs(args, kwargs))

    def _run_flat(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        session = self._get_session()
        # bfloat16 travels as float32 (onnxruntime's Python API has no bfloat16 arrays):
        # every bfloat16 is a float32, so both casts are exact.
        arrays = [a.astype(np.float32) if a.dtype == _BF16 else a for a in arrays]
        feeds = dict(zip([i.name for i in session.get_inputs()], arrays))
        outs = list(session.run(None, feeds))
        return [o.astype(_BF16) if v.dtype == ir.DataType.BFLOAT16 else o
                for o, v in zip(outs, self.model.graph.outputs)]

    def save_testcase(self, directory: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Path:
        """Writes ``model.onnx`` and ``test_data_set_0/{input,output}_N.pb`` (ONNX backend-test
        layout) under directory; the inputs default to the export's example inputs and the
        outputs come from eager PyTorch (onnxruntime when there is no eager model)."""
        if not args and not kwargs:
            args, kwargs = self._example
        args, kwargs = self._split(args, kwargs)
        arrays = [a.copy() for a in self._flat_inputs(args, kwargs)]
        if self._module is not None and not self._extra_outputs:
            with torch.no_grad():
                outputs = [to_numpy(t) for t in flatten_outputs(self._module(*args, **kwargs))]
        else:
            outputs = self._run_flat(arrays)
        return debug.save_testcase(self.model, directory, arrays, outputs)

    def verify(
        self, *args: Any, atol: float | None = None, rtol: float | None = None,
        bisect: bool = False, **kwargs: Any,
    ) -> VerificationResult:
        """Compares each output with eager PyTorch: max abs/rel error per output.

        An output matches where its max abs error is at most ``atol + rtol * max|eager|``;
        by default (None) 1e-4 and 1e-3, or for a file that computes in float16
        or bfloat16 4 units of that type's rounding (``verify.TOLERANCES``).

        Called with no inputs, it runs the export's example inputs and then, for a
        model with dynamic dims, the same inputs at a second size of every dim
        (within its range); ``result.runs`` says which sizes ran.

        With ``bisect=True`` and a mismatch, also finds the first FX node whose
        ONNX value diverges from eager and names its rule and source line.
        """
        if self._module is None:
            raise ExportError("this program has no eager model to compare against.")
        atol, rtol = self._tolerance(atol, rtol)
        if args or kwargs:
            result = self._verify_once(args, kwargs, atol, rtol, bisect)
        else:
            import copy

            from pt2onnx.capture import second_size

            # Copies: eager may update the example in place (a transformers cache grows).
            example = copy.deepcopy(self._example)
            second = None
            if self._program is not None and not self._traced:
                second = second_size(self._program, *example)
            shown = "the example inputs"
            if second is not None:
                shown += " (" + ", ".join(
                    f"{self._dim_name(s)}={old}" for s, (old, _) in second[0].items()) + ")"
            result = self._verify_once(*example, atol, rtol, bisect, shown)
            more = []
            if second is not None:
                sizes, args2, kwargs2 = second
                shown = ", ".join(f"{self._dim_name(s)}={new}" for s, (_, new) in sizes.items())
                more.append(self._verify_once(args2, kwargs2, atol, rtol, bisect, shown))
            ones = self._at_one(example)
            if ones is not None:
                shown, args1, kwargs1 = ones
                more.append(self._verify_once(args1, kwargs1, atol, rtol, bisect, shown))
            if more:
                result = VerificationResult(result.outputs, result.divergence, result.bisected,
                                            result.sizes, tuple(more))
        self.report.verification = result
        return result

    def _at_one(self, example: Any) -> tuple[str, tuple[Any, ...], dict[str, Any]] | None:
        """The example with every dynamic dim whose range allows it at 1, when the example
        has another size there: the edge where size-oblivious capture is most often wrong."""
        if self._program is None or self._traced:
            return None
        from pt2onnx.capture import example_at, known_values, ones_allowed

        known = known_values(self._program, *example)
        ones = {s: 1 for s, v in known.items()
                if v != 1 and ones_allowed(self._program, s)}
        if not ones:
            return None
        resized = example_at(self._program, {**known, **ones}, *example)
        if resized is None or self._module is None:
            return None
        import copy

        try:  # a model that itself fails at size 1 (x[:, -2] along the dim) is not run there
            with torch.no_grad():
                self._module(*copy.deepcopy(resized[0]), **copy.deepcopy(resized[1]))
        except Exception:
            return None
        shown = ", ".join(f"{self._dim_name(s)}=1" for s in ones)
        return shown, resized[0], resized[1]

    def _verify_once(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], atol: float, rtol: float,
        bisect: bool, sizes: str = "",
    ) -> VerificationResult:
        assert self._module is not None
        args, kwargs = self._split(args, kwargs)
        # Snapshot the inputs first: eager models may update them in place
        # (a transformers cache grows by the new keys and values).
        arrays = [a.copy() for a in self._flat_inputs(args, kwargs)]
        with torch.no_grad():
            expected = flatten_outputs(self._module(*args, **kwargs))
        actual = self._run_flat(arrays)
        if self._extra_outputs:  # pt2onnx.as_output values come after the model's outputs
            actual = actual[: len(actual) - self._extra_outputs]
        names = [v.name or f"output_{i}" for i, v in enumerate(self.model.graph.outputs)]
        actual, names = self._dequantized_outputs(actual, names)
        # A traced file declares the example's shapes throughout (the trace's own warning
        # says so): a data-dependent count (NonMaxSuppression's kept boxes) differs at
        # other inputs by construction. Declared shapes are checked for captures.
        result = compare(names, expected, actual, atol, rtol,
                         None if self._traced else declared_shapes(self.model.graph.outputs))
        found = None
        if bisect and not result.ok and self._program is not None:
            found = bisect_nodes(self.model, self._program, self._fx_values, arrays,
                                 args, kwargs, atol, rtol)
        return VerificationResult(result.outputs, found, bisect and not result.ok, sizes)

    def _dim_name(self, symbol: Any) -> str:
        return str(self._sym_names.get(symbol, symbol))
