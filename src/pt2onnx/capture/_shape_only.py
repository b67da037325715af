"""What the static recording (``_record.py``) does not compute: a heavy op on tensors
that derive from the model's inputs gets a tensor of its output's shape, not its value.

The recording's cost then follows the graph, not the example's multiply-adds (issue 30:
a giant ViT at 448 pixels, a stack of large Linear layers). No recorded decision can
depend on those values: reading any value derived from the inputs already ends the
recording.
"""

from __future__ import annotations

import os
from typing import Any

import torch

aten = torch.ops.aten


# Ops whose cost grows with the example's compute (multiply-adds), where the graph does
# not: on inputs that come from the model's inputs, a recording takes only their output's
# shape from the meta kernel and hands the model a tensor of that shape. No recorded
# decision can depend on those values: reading a value of a tensor derived from the
# inputs is already Unrecordable. Below _SHAPE_ONLY_ABOVE multiply-adds, computing is
# cheaper than asking.
_HEAVY = {
    aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
    aten.addbmm.default, aten.mv.default, aten.convolution.default,
    aten._convolution.default, aten.linear.default,
    aten.scaled_dot_product_attention.default,
}
for _name in ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_attention_math",
              "mkldnn_convolution", "_scaled_dot_product_efficient_attention"):
    _packet = getattr(aten, _name, None)
    if _packet is not None:
        _HEAVY.add(_packet.default)
_SHAPE_ONLY_ABOVE = 1 << 21
# The first meta kernel a process asks for imports torch's meta registrations (about
# 0.25 s here), more than a small model's whole forward: heavy ops are computed until
# their multiply-adds pass this budget (YOLO11n's forward is about 3.3e9), and only the
# ones after it are taken by shape.
_COMPUTE_BUDGET = 5_000_000_000


def _compute_real() -> bool:
    """PT2ONNX_CAPTURE=eager: the recording computes every op (for comparisons)."""
    return os.environ.get("PT2ONNX_CAPTURE", "").strip().lower() == "eager"


def lean_from_start() -> bool:
    """PT2ONNX_CAPTURE=lean: the recording is lean from its first op (for tests)."""
    return os.environ.get("PT2ONNX_CAPTURE", "").strip().lower() == "lean"


def _conv_outputs(x: torch.Tensor, w: torch.Tensor, args: tuple[Any, ...]) -> int:
    """Output elements of ``convolution(x, w, bias, stride, padding, dilation, ...)``
    (stride 1 and no padding where the arguments are not those)."""
    spatial = list(x.shape[2:])
    def arg(i: int) -> list[int]:
        value = args[i] if len(args) > i else None
        if isinstance(value, int):
            return [value] * len(spatial)
        if isinstance(value, (list, tuple)) and len(value) == len(spatial) and all(
                isinstance(v, int) for v in value):
            return list(value)
        return [1 if i != 4 else 0] * len(spatial)
    stride, padding, dilation = arg(3), arg(4), arg(5)
    out = x.shape[0] * w.shape[0] if x.dim() > 2 else w.shape[0]
    for n, k, s, p, d in zip(spatial, w.shape[2:], stride, padding, dilation):
        out *= max((n + 2 * p - d * (k - 1) - 1) // max(s, 1) + 1, 0)
    return int(out)


def _work(func: Any, tensors: list[torch.Tensor], args: tuple[Any, ...] = ()) -> int:
    """Multiply-adds of a heavy op, estimated from its inputs' shapes alone (asking the
    meta kernel for the output costs more than a small op: it is asked only above the
    threshold)."""
    if not tensors:
        return 0
    name = func.name() if hasattr(func, "name") else ""
    first = tensors[0]
    second = tensors[1] if len(tensors) > 1 else first
    if "attention" in name:  # q (.., L, E) against k (.., S, E), twice
        return 2 * first.numel() * (second.shape[-2] if second.dim() >= 2 else 1)
    if "conv" in name:  # each output position through the weight's window
        return _conv_outputs(first, second, args) * (second.numel() // max(second.shape[0], 1))
    if name.split("::")[-1].startswith(("addmm", "addbmm", "baddbmm")) and len(tensors) > 2:
        first, second = tensors[1], tensors[2]
    if "linear" in name:  # x (.., in) with w (out, in)
        return first.numel() * (second.shape[0] if second.dim() else 1)
    # a matrix product: a (.., m, k) with b (.., k, n), or a matrix with a vector
    return first.numel() * (second.shape[-1] if second.dim() >= 2 else 1)


def _own_output(func: Any, args: tuple[Any, ...]) -> torch.Tensor | None:
    """The output of a plain convolution or matrix product, shaped from its inputs'
    shapes here: asking torch's meta kernel for a convolution first imports its Python
    meta registrations (about 0.25 s), more than a small model's whole forward. None
    where the op is another or has arguments this does not read (then the meta kernel
    answers); tests/test_record_shape_only.py holds each case against the meta kernel."""
    name = func.name().split("::")[-1] if hasattr(func, "name") else ""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or any(t.dtype != tensors[0].dtype or t.is_sparse for t in tensors):
        return None
    dtype = tensors[0].dtype
    if not dtype.is_floating_point:
        return None
    shape: list[int] | None = None
    memory_format = torch.contiguous_format
    if name == "convolution" and len(args) >= 9 and args[6] is False:
        x, w = args[0], args[1]
        if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor):
            return None
        spatial = w.dim() - 2
        geometry = [args[3], args[4], args[5]]
        if spatial < 1 or x.dim() != spatial + 2 or not all(
                isinstance(g, (list, tuple)) and len(g) == spatial
                and all(type(v) is int for v in g) for g in geometry):
            return None
        stride, padding, dilation = geometry
        sizes = []
        for n, k, st, pad, dil in zip(x.shape[-spatial:], w.shape[2:], stride, padding,
                                      dilation):
            size = (n + 2 * pad - dil * (k - 1) - 1) // st + 1
            if size <= 0:
                return None  # torch refuses: let the real op say so
            sizes.append(size)
        shape = [x.shape[0], w.shape[0], *sizes]
        if spatial == 2 and any(t.is_contiguous(memory_format=torch.channels_last)
                                and not t.is_contiguous() for t in (x, w)):
            memory_format = torch.channels_last
    elif name in ("mm", "addmm") and all(t.dim() == 2 for t in tensors[-2:]):
        a, b = tensors[-2], tensors[-1]
        shape = [a.shape[0], b.shape[1]]
    elif name in ("bmm", "baddbmm") and all(
            t.dim() == 3 for t in tensors[-2:]):
        a, b = tensors[-2], tensors[-1]
        shape = [a.shape[0], a.shape[1], b.shape[2]]
    elif name == "linear" and len(tensors) >= 2 and tensors[1].dim() == 2 and (
            tensors[0].dim() >= 1):
        shape = [*tensors[0].shape[:-1], tensors[1].shape[0]]
    if shape is None:
        return None
    return torch.empty(shape, dtype=dtype, memory_format=memory_format)


def _zeros_like_meta(value: Any) -> Any:
    """A tensor for each meta tensor in ``value``. Floats are left uninitialized (a large
    allocation is fresh pages from the OS, zero until written: no pass over the memory);
    integers and bools are zeroed, so an index derived from them stays in range."""
    def one(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        out = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype)
        return out if t.dtype.is_floating_point or t.dtype.is_complex else out.zero_()

    return torch.utils._pytree.tree_map(one, value)


# A lean recording (past its resident limit, ``_heap.Trimmer.over``) takes by shape the
# ops on values from the inputs whose floating output is at least this large
LEAN_BYTES = 1 << 16
# and that always return fresh memory of the shape their meta kernel gives: every op
# tagged pointwise (the meta function of a TensorIterator op is the CPU kernel's own),
# and these. Not an op whose real output may share its input's memory without saying so
# (``_unsafe_view``: an in-place write later would not reach it), nor one whose meta
# shape differs from the CPU kernel's (``native_batch_norm``'s saved statistics, empty
# on the CPU in inference).
_LEAN_OPS = {
    aten.clone.default, aten._to_copy.default, aten.cat.default, aten._softmax.default,
    aten._log_softmax.default, aten.mm.default, aten.bmm.default, aten.addmm.default,
    aten.baddbmm.default, aten.linear.default, aten.layer_norm.default,
    aten.group_norm.default, aten.scaled_dot_product_attention.default,
}


def lean_output(func: Any, args: Any, kwargs: Any, tensors: list[torch.Tensor],
                fake: Any) -> Any:
    """``func``'s outputs as uninitialized tensors of their shapes and strides, from its
    meta kernel, when it is a pointwise op or one of _LEAN_OPS and its outputs are all
    floating and together at least LEAN_BYTES; None where the op must run: another op,
    a random op (the generator's state moves as in eager), an integer or bool output (an
    index must stay in range), small inputs (too cheap to ask), no meta kernel, or
    PT2ONNX_CAPTURE=eager."""
    if _compute_real() or not tensors or any(t.device.type != "cpu" for t in tensors):
        return None
    if max(t.numel() * t.element_size() for t in tensors) < LEAN_BYTES:
        return None
    tags = getattr(func, "tags", ())
    if func not in _LEAN_OPS and torch.Tag.pointwise not in tags:
        return None
    schema = getattr(func, "_schema", None)
    if schema is None or schema.is_mutable or any(
            r.alias_info is not None for r in schema.returns) or \
            torch.Tag.nondeterministic_seeded in tags:
        return None
    try:
        meta = func(*fake(tuple(args)), **fake(dict(kwargs)))
    except Exception:  # no meta kernel, or one that refuses meta tensors: compute it
        return None
    outs = [t for t in torch.utils._pytree.tree_leaves(meta) if isinstance(t, torch.Tensor)]
    if not outs or any(not (t.dtype.is_floating_point or t.dtype.is_complex) for t in outs):
        return None
    if sum(t.numel() * t.element_size() for t in outs) < LEAN_BYTES:
        return None
    return _zeros_like_meta(meta)


# In-place ops that write values only, beside those tagged pointwise (``transpose_``,
# ``squeeze_`` and ``resize_`` change the tensor's shape: they always run).
_LEAN_WRITES = {
    aten.copy_.default, aten.fill_.Scalar, aten.fill_.Tensor, aten.zero_.default,
    aten.masked_fill_.Scalar, aten.masked_fill_.Tensor, aten.gelu_.default,
    aten.threshold_.default, aten.index_put_.default,
}


def lean_write(func: Any, target: Any) -> bool:
    """Whether a lean recording may skip ``func``'s in-place write into ``target``: a
    large floating tensor from the inputs, whose values nothing reads, and an op that
    changes values only."""
    return (isinstance(target, torch.Tensor) and not _compute_real()
            and (func in _LEAN_WRITES or torch.Tag.pointwise in getattr(func, "tags", ()))
            and (target.dtype.is_floating_point or target.dtype.is_complex)
            and target.numel() * target.element_size() >= LEAN_BYTES)
