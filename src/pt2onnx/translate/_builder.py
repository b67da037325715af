"""The rule context: an op builder over onnx_ir, typed constants and dtype mapping.

A rule receives a :class:`RuleContext` as ``g``. It emits ONNX nodes with
``g.op.Add(a, b)``, reads the output dtype and shape of the FX node it is
translating from ``g.meta``, and makes constants with ``g.const``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

# Every torch dtype that ONNX can represent.
_TORCH_TO_ONNX: dict[torch.dtype, ir.DataType] = {
    torch.float32: ir.DataType.FLOAT,
    torch.float16: ir.DataType.FLOAT16,
    torch.bfloat16: ir.DataType.BFLOAT16,
    torch.float64: ir.DataType.DOUBLE,
    torch.int8: ir.DataType.INT8,
    torch.int16: ir.DataType.INT16,
    torch.int32: ir.DataType.INT32,
    torch.int64: ir.DataType.INT64,
    torch.uint8: ir.DataType.UINT8,
    torch.bool: ir.DataType.BOOL,
}
for _name, _onnx in (
    ("uint16", ir.DataType.UINT16),
    ("uint32", ir.DataType.UINT32),
    ("uint64", ir.DataType.UINT64),
    ("float8_e4m3fn", ir.DataType.FLOAT8E4M3FN),
    ("float8_e4m3fnuz", ir.DataType.FLOAT8E4M3FNUZ),
    ("float8_e5m2", ir.DataType.FLOAT8E5M2),
    ("float8_e5m2fnuz", ir.DataType.FLOAT8E5M2FNUZ),
    ("float8_e8m0fnu", getattr(ir.DataType, "FLOAT8E8M0", None)),
    ("float4_e2m1fn_x2", getattr(ir.DataType, "FLOAT4E2M1", None)),
    ("int4", ir.DataType.INT4),
    ("uint4", ir.DataType.UINT4),
    ("int2", getattr(ir.DataType, "INT2", None)),
    ("uint2", getattr(ir.DataType, "UINT2", None)),
):
    if hasattr(torch, _name) and _onnx is not None:
        _TORCH_TO_ONNX[getattr(torch, _name)] = _onnx
_ONNX_TO_TORCH = {v: k for k, v in _TORCH_TO_ONNX.items()}

# Complex tensors are carried as pairs: a float tensor of the component dtype with a
# trailing axis of size 2 holding (real, imag), exactly ``torch.view_as_real`` of the
# value. onnxruntime has no complex kernels, and ONNX DFT uses this layout. A complex
# dtype therefore maps to its component dtype; shapes gain the trailing 2.
# (complex32 is left out: torch itself has few kernels for it.)
COMPLEX_PARTS: dict[torch.dtype, torch.dtype] = {
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}
# The value metadata key that marks an ONNX value as a complex tensor in pair layout.
COMPLEX_KEY = "pt2onnx.complex"

FLOAT_TYPES = frozenset(
    {ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE}
)


def onnx_dtype(dtype: torch.dtype) -> ir.DataType:
    """Maps a torch dtype to its ONNX data type, or raises with the dtypes ONNX has.

    A complex dtype maps to the dtype of its parts (complex64 -> FLOAT): complex
    values travel as (real, imag) pairs in a trailing axis (see ``COMPLEX_PARTS``).
    """
    part = COMPLEX_PARTS.get(dtype)
    if part is not None:
        dtype = part
    try:
        return _TORCH_TO_ONNX[dtype]
    except KeyError:
        raise TypeError(
            f"torch dtype {dtype} has no ONNX equivalent; cast the tensor to one of "
            f"{sorted(str(d) for d in (*_TORCH_TO_ONNX, *COMPLEX_PARTS))} before exporting"
        ) from None


def onnx_type_or_none(dtype: Any) -> ir.DataType | None:
    """The ONNX data type of a torch dtype, or None where there is none (or no dtype)."""
    return _TORCH_TO_ONNX.get(dtype) if isinstance(dtype, torch.dtype) else None


def exportable(dtype: torch.dtype) -> bool:
    """Whether a tensor of ``dtype`` can be a graph input or output (complex as pairs)."""
    return dtype in _TORCH_TO_ONNX or dtype in COMPLEX_PARTS


def is_complex(value: ir.Value | None) -> bool:
    """Whether ``value`` carries a complex tensor as (real, imag) pairs in its last axis."""
    return value is not None and bool(value.meta.get(COMPLEX_KEY, False))


def mark_complex(value: ir.Value) -> ir.Value:
    """Marks ``value`` as a complex tensor in pair layout; returns it."""
    value.meta[COMPLEX_KEY] = True
    return value


def torch_dtype(dtype: ir.DataType) -> torch.dtype:
    return _ONNX_TO_TORCH[dtype]


# torch's float4_e2m1fn_x2 holds two float4 values per element (the first in the low
# four bits, as ONNX packs them): its ONNX tensor has twice the last dim.
FLOAT4_X2 = getattr(torch, "float4_e2m1fn_x2", None)
# The first opset whose schemas take each newer dtype (Identity, Cast, Constant...): a
# file at a lower opset would not pass onnx.checker.
DTYPE_OPSET: dict[ir.DataType, int] = {
    getattr(ir.DataType, name): opset
    for name, opset in (("FLOAT4E2M1", 23), ("FLOAT8E8M0", 24), ("INT2", 25), ("UINT2", 25))
    if hasattr(ir.DataType, name)
}


def onnx_dims(dtype: torch.dtype, dims: Sequence[Any]) -> list[Any]:
    """The ONNX shape of a torch tensor of ``dtype`` and shape ``dims``."""
    dims = list(dims)
    if dtype is not FLOAT4_X2 or FLOAT4_X2 is None:
        return dims
    if not dims:
        return [2]
    last = dims[-1]
    return [*dims[:-1], 2 * last if isinstance(last, int) else f"2*{last}"]


def ir_tensor(tensor: torch.Tensor, name: str | None = None) -> ir.TensorProtocol:
    """``tensor`` as an ONNX IR tensor, sub-byte dtypes packed as ONNX stores them."""
    if FLOAT4_X2 is not None and tensor.dtype is FLOAT4_X2:
        packed = tensor.contiguous().view(torch.uint8).numpy()
        return ir.PackedTensor(packed, ir.DataType.FLOAT4E2M1,
                               shape=onnx_dims(tensor.dtype, tensor.shape), name=name)
    sub_byte = _SUB_BYTE_INTS.get(tensor.dtype)
    if sub_byte is not None:  # torch keeps one value per byte; ONNX packs them
        import ml_dtypes

        signed = sub_byte.name.startswith("INT")
        raw = tensor.contiguous().view(torch.int8 if signed else torch.uint8).numpy()
        return ir.Tensor(raw.astype(getattr(ml_dtypes, sub_byte.name.lower())),
                         dtype=sub_byte, name=name)
    return ir.tensor_adapters.TorchTensor(tensor, name=name)


_SUB_BYTE_INTS = {getattr(torch, n): getattr(ir.DataType, n.upper())
                  for n in ("int4", "uint4", "int2", "uint2")
                  if hasattr(torch, n) and hasattr(ir.DataType, n.upper())}


def _attr(name: str, value: Any) -> ir.Attr:
    if isinstance(value, bool):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, ir.DataType):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, int):
        return ir.AttrInt64(name, value)
    if isinstance(value, float):
        return ir.AttrFloat32(name, value)
    if isinstance(value, str):
        return ir.AttrString(name, value)
    if isinstance(value, ir.Graph):
        return ir.AttrGraph(name, value)
    if isinstance(value, (list, tuple)):  # before the Protocol check below, which is slow
        if all(isinstance(v, (bool, int)) for v in value):
            return ir.AttrInt64s(name, [int(v) for v in value])
        if all(isinstance(v, (int, float)) for v in value):
            return ir.AttrFloat32s(name, [float(v) for v in value])
        if all(isinstance(v, str) for v in value):
            return ir.AttrStrings(name, list(value))
    elif isinstance(value, (ir.Tensor, ir.TensorProtocol)):
        return ir.AttrTensor(name, value)
    raise TypeError(f"cannot make an ONNX attribute {name!r} from {value!r}")


def _actual_dims(v: ir.Value | None) -> bool:
    """Whether ``v`` is the output of a ``Shape``: sizes read from a tensor at run time.
    (Only that: a Concat of Shape pieces is what onnxruntime's Reshape fusion folds into
    a constant with 0 meaning "copy", which allowzero would stop.)"""
    node = v.producer() if v is not None else None
    return node is not None and not node.domain and node.op_type == "Shape"


class _OpNamespace:
    """``g.op.Name(*inputs, **attributes)`` appends one ONNX node.

    ``_outputs=n`` asks for n outputs (a tuple is returned); ``_domain`` picks a
    domain other than the default one.
    """

    def __init__(self, ctx: RuleContext) -> None:
        self._ctx = ctx

    def __getattr__(self, op_type: str) -> Any:
        def make(*inputs: ir.Value | None, _outputs: int = 1, _domain: str = "", **attrs: Any) -> Any:
            return self._ctx.add_node(op_type, inputs, attrs, _outputs, _domain)

        make.__name__ = op_type
        return make


class RuleContext:
    """What a rule sees as ``g``.

    Attributes:
        op: the op builder (``g.op.Relu(x)``).
        opset: the target default-domain opset.
        meta: the ``val`` metadata of the FX node being translated (a
            FakeTensor, a tuple of them, or a SymInt).
        node: the FX node being translated.
    """

    def __init__(self, graph: ir.Graph, opset: int) -> None:
        self.graph = graph
        self.opset = opset
        self.op = _OpNamespace(self)
        self.node: torch.fx.Node | None = None
        self.meta: Any = None
        self.nodes: list[ir.Node] = []
        self._consts: dict[tuple[Any, ...], ir.Value] = {}
        self._counter = 0
        self.domains: dict[str, int] = {}
        self._transposed: dict[int, ir.Value] = {}
        # Set by the translator: translates an FX subgraph into the current node list.
        self.inline: Any = None
        # Set by the translator: the value an FX node translated to (sym_storage_offset
        # replays views from it); private, not part of the rule API.
        self._value_of: Any = None

    # -- node emission -------------------------------------------------
    def add_node(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attrs: dict[str, Any],
        num_outputs: int = 1,
        domain: str = "",
    ) -> Any:
        if (op_type == "Reshape" and not domain and attrs.get("allowzero") is None
                and self.opset >= 14 and len(inputs) == 2 and _actual_dims(inputs[1])):
            # A shape read from a tensor holds sizes, never "copy this dim": a 0 in it is
            # an empty dim (without allowzero onnxruntime copies the input's dim there, or
            # refuses the Reshape when the input has fewer dims).
            attrs = {**attrs, "allowzero": 1}
        attributes = [_attr(k, v) for k, v in attrs.items() if v is not None]
        for v in inputs:
            if v is not None and not isinstance(v, ir.Value):
                raise TypeError(
                    f"{op_type} got input {v!r}; ONNX inputs must be values, "
                    "use g.const(...) for constants"
                )
        if (op_type in ("ScatterElements", "ScatterND") and not domain
                and attrs.get("reduction", "none") != "none" and inputs[0] is not None):
            half = value_dtype(inputs[0])
            if half in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16):
                # onnxruntime's CPU kernels reduce only in float32 and wider
                # ("MLFloat16 data type is not supported"): scatter in float32.
                f32 = ir.DataType.FLOAT
                data, index, updates = inputs[0], inputs[1], inputs[2]
                assert data is not None and updates is not None
                out = self.add_node(op_type, [self.cast(data, f32), index,
                                              self.cast(updates, f32)], attrs, 1, domain)
                out.dtype = f32
                return self.cast(out, half)
        node = ir.Node(domain, op_type, inputs, attributes, num_outputs=num_outputs)
        self.nodes.append(node)
        if domain and domain not in self.domains:
            self.domains[domain] = 1
        if num_outputs == 1:
            return node.outputs[0]
        return tuple(node.outputs)

    @contextlib.contextmanager
    def scope(self) -> Iterator[list[ir.Node]]:
        """Collects the nodes emitted inside the block into a new list (a subgraph body)."""
        saved = self.nodes
        self.nodes = []
        try:
            yield self.nodes
        finally:
            self.nodes = saved

    def subgraph(self, name: str, inputs: Sequence[ir.Value], outputs: Sequence[ir.Value],
                 nodes: list[ir.Node]) -> ir.Graph:
        """An ONNX subgraph; outputs not produced inside it get an Identity there."""
        produced = {id(o) for n in nodes for o in n.outputs}
        final = []
        for out in outputs:
            if id(out) not in produced or out in final:
                copy = ir.Node("", "Identity", [out], num_outputs=1)
                copy.outputs[0].type = out.type
                copy.outputs[0].shape = out.shape
                self._counter += 1
                copy.outputs[0].name = f"{name}_out_{self._counter}"
                nodes.append(copy)
                out = copy.outputs[0]
            final.append(out)
        for out in final:  # a graph output must be typed (onnx.checker requires it)
            if out.type is None:
                dtype = value_dtype(out)
                if dtype is not None:
                    out.type = ir.TensorType(dtype)
        return ir.Graph(list(inputs), final, nodes=nodes, name=name)

    def formal(self, like: ir.Value, name: str, drop_leading: int = 0) -> ir.Value:
        """A typed subgraph input shaped like ``like`` (minus its leading dims)."""
        self._counter += 1
        shape = ir.Shape(list(like.shape)[drop_leading:]) if like.shape is not None else None
        return ir.Value(name=f"{name}_{self._counter}", type=like.type, shape=shape)

    # -- constants -----------------------------------------------------
    def const(self, value: Any, dtype: ir.DataType | torch.dtype | None = None) -> ir.Value:
        """Returns an initializer holding ``value`` (scalar, list, ndarray or tensor).

        Scalars and lists become tensors of ``dtype`` (default: int64 for
        ints, float32 for floats, bool for bools). Equal small constants are
        shared.
        """
        if isinstance(dtype, torch.dtype):
            dtype = onnx_dtype(dtype)
        if isinstance(value, torch.Tensor):
            if dtype is not None and onnx_dtype(value.dtype) != dtype:
                value = value.to(torch_dtype(dtype))
            return self.tensor_initializer(value.detach())
        if isinstance(value, ir.DataType):
            value = int(value)
        if dtype is None:
            dtype = _infer_dtype(value)
        arr = np.asarray(value)
        key = (dtype, arr.shape, arr.tobytes()) if arr.size <= 64 else None
        if key is not None and key in self._consts:
            return self._consts[key]
        tensor = torch.tensor(value, dtype=torch_dtype(dtype))
        val = self.tensor_initializer(tensor)
        if key is not None:
            self._consts[key] = val
        return val

    def lazy_initializer(self, make: Any, dtype: torch.dtype, shape: tuple[int, ...]) -> ir.Value:
        """An initializer whose data ``make()`` computes only when the model is saved."""
        self._counter += 1
        name = f"const_{self._counter}"
        dims = ir.Shape(onnx_dims(dtype, shape))
        lazy = ir.LazyTensor(lambda: ir_tensor(make(), name=name),
                             dtype=onnx_dtype(dtype), shape=dims, name=name)
        value = ir.Value(name=name, type=ir.TensorType(onnx_dtype(dtype)), shape=dims,
                         const_value=lazy)
        self.graph.register_initializer(value)
        return value

    def tensor_initializer(self, tensor: torch.Tensor, name: str | None = None) -> ir.Value:
        """An initializer holding ``tensor``; a complex tensor is stored as its pairs."""
        if name is None:
            self._counter += 1
            name = f"const_{self._counter}"
        tensor = tensor.detach()
        if tensor.is_complex():
            value = self.tensor_initializer(
                torch.view_as_real(tensor.resolve_conj().resolve_neg()).contiguous(), name)
            return mark_complex(value)
        value = ir.Value(
            name=name,
            type=ir.TensorType(onnx_dtype(tensor.dtype)),
            shape=ir.Shape(onnx_dims(tensor.dtype, tensor.shape)),
            const_value=ir_tensor(tensor, name=name),
        )
        self.graph.register_initializer(value)
        return value

    # -- metadata helpers ------------------------------------------------
    @property
    def dtype(self) -> ir.DataType:
        """The ONNX dtype of the (first) output of the node being translated.

        For a complex output, the dtype of its parts (see ``COMPLEX_PARTS``).
        """
        val = self.meta[0] if isinstance(self.meta, (tuple, list)) else self.meta
        return onnx_dtype(val.dtype)

    @property
    def is_complex(self) -> bool:
        """Whether the (first) output of the node is complex (carried as pairs)."""
        val = self.meta[0] if isinstance(self.meta, (tuple, list)) else self.meta
        return isinstance(val, torch.Tensor) and val.is_complex()

    @property
    def shape(self) -> tuple[Any, ...]:
        """The output shape as the ONNX value has it: a complex output ends in 2."""
        val = self.meta[0] if isinstance(self.meta, (tuple, list)) else self.meta
        return _pair_shape(val)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def static_shape(self, index: int = 0) -> tuple[int, ...] | None:
        """The output shape when every dim is a plain int, else None."""
        val = self.meta[index] if isinstance(self.meta, (tuple, list)) else self.meta
        shape = _pair_shape(val)
        return shape if all(type(d) is int for d in shape) else None

    def output_used(self, index: int) -> bool:
        """Whether output ``index`` of a multi-output op is read by any node (a getitem
        nobody reads, as ``ret, _, _, _ = torch.embedding_bag(...)`` leaves, is not)."""
        import operator

        assert self.node is not None
        for user in self.node.users:
            if user.target is not operator.getitem or (user.args[1] == index and user.users):
                return True
        return False

    def cast(self, x: ir.Value, dtype: ir.DataType | torch.dtype) -> ir.Value:
        """x as ``dtype``; no node when it already is."""
        if isinstance(dtype, torch.dtype):
            dtype = onnx_dtype(dtype)
        if x.dtype == dtype:
            return x
        out = self.op.Cast(x, to=dtype)
        out.dtype = dtype
        if x.shape is not None:
            out.shape = x.shape
        return out

    def transposed(self, w: ir.Value) -> ir.Value:
        """The transpose of a 2-D weight: a lazily transposed initializer when w is one."""
        tensor = w.const_value if w.is_initializer() else None
        raw = getattr(tensor, "raw", None)
        if isinstance(raw, torch.Tensor) and raw.dim() == 2:
            cached = self._transposed.get(id(w))
            if cached is None:
                name = f"{w.name}.T"
                t = raw
                lazy = ir.LazyTensor(
                    lambda: ir.tensor_adapters.TorchTensor(t.detach().t().contiguous(), name=name),
                    dtype=onnx_dtype(raw.dtype), shape=ir.Shape((raw.shape[1], raw.shape[0])),
                    name=name,
                )
                cached = ir.Value(
                    name=name, type=ir.TensorType(onnx_dtype(raw.dtype)),
                    shape=ir.Shape((raw.shape[1], raw.shape[0])), const_value=lazy,
                )
                cached.meta["pt2onnx.transpose_of"] = w.meta.get("pt2onnx.weight", w.name)
                cached.meta["pt2onnx.transpose_src"] = raw
                if raw.is_meta:
                    cached.meta["pt2onnx.meta"] = True
                self.graph.register_initializer(cached)
                self._transposed[id(w)] = cached
            return cached
        return self.op.Transpose(w, perm=[1, 0])

    def int_list(self, values: Sequence[int | ir.Value]) -> ir.Value:
        """A 1-D int64 value from Python ints and 0-d int64 values (SymInts)."""
        if all(isinstance(v, int) for v in values):
            return self.const([int(v) for v in values], ir.DataType.INT64)  # type: ignore[arg-type]
        parts = []
        for v in values:
            if isinstance(v, ir.Value):
                parts.append(self.op.Reshape(v, self.const([1])))
            else:
                parts.append(self.const([int(v)]))
        return self.op.Concat(*parts, axis=0)


_BOOL_OUT = frozenset({
    "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor",
    "IsNaN", "IsInf",
})
_INT64_OUT = frozenset({"Shape", "Size", "NonZero", "ArgMax", "ArgMin"})


def value_dtype(value: ir.Value, _depth: int = 0) -> ir.DataType | None:
    """The element type of ``value``: its own, or worked out from the node producing it.

    Rules leave intermediate values untyped (ONNX does not need their types), but a
    subgraph's outputs must be typed; this follows producers back to typed values."""
    if value.dtype is not None:
        return value.dtype
    node = value.producer()
    if node is None or _depth > 200:
        return None
    op, attrs = node.op_type, node.attributes
    index = list(node.outputs).index(value)
    if op in ("Cast", "RandomNormalLike", "RandomUniformLike") and "to" in attrs:
        return ir.DataType(attrs["to"].value)
    if op in ("Cast", "RandomNormalLike", "RandomUniformLike", "EyeLike") and "dtype" in attrs:
        return ir.DataType(attrs["dtype"].value)
    if op == "CastLike":
        return value_dtype(node.inputs[1], _depth + 1) if node.inputs[1] else None
    if op == "Constant" and "value" in attrs:
        return attrs["value"].value.dtype
    if op in _BOOL_OUT:
        return ir.DataType.BOOL
    if op in _INT64_OUT or (op in ("TopK", "Unique") and index > 0):
        return ir.DataType.INT64
    if op == "Where":
        inputs = node.inputs[1:]
    elif op in ("Loop", "If", "Scan"):
        return None
    else:
        inputs = node.inputs
    for v in inputs:
        if v is not None:
            dtype = value_dtype(v, _depth + 1)
            if dtype is not None:
                return dtype
    return None


def _pair_shape(val: Any) -> tuple[Any, ...]:
    shape = tuple(val.shape)
    return (*shape, 2) if isinstance(val, torch.Tensor) and val.is_complex() else shape


def _infer_dtype(value: Any) -> ir.DataType:
    if isinstance(value, np.ndarray):
        return ir.DataType.from_numpy(value.dtype)
    flat = value
    while isinstance(flat, (list, tuple)) and flat:
        flat = flat[0]
    if isinstance(flat, bool):
        return ir.DataType.BOOL
    if isinstance(flat, int) or (isinstance(value, (list, tuple)) and not value):
        return ir.DataType.INT64
    if isinstance(flat, float):
        return ir.DataType.FLOAT
    raise TypeError(f"cannot infer an ONNX dtype for constant {value!r}")


def rank_of(value: ir.Value) -> int:
    shape = value.shape
    if shape is None:
        raise ValueError(f"value {value.name} has no known rank")
    return len(shape)


def dtype_of(value: ir.Value) -> ir.DataType:
    if value.dtype is None:
        raise ValueError(f"value {value.name} has no known dtype")
    return value.dtype
