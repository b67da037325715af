"""Serialization: atomic writes, external data streamed from torch storage."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from pt2onnx import _weights as _weights_mod
from pt2onnx._builder import torch_dtype
from pt2onnx.errors import SaveError

# With external_data=None, weights above this total go to <file>.data: writing
# them inline costs two extra copies in protobuf, and the 2 GB protobuf limit
# makes external data necessary above PROTO_LIMIT_BYTES anyway.
EXTERNAL_DATA_AUTO_BYTES = 256 * 2**20
PROTO_LIMIT_BYTES = 2_000_000_000
# Tensors smaller than this stay inline even with external data.
EXTERNAL_MIN_BYTES = 1024
_ALIGN = 64


def check_path(path: str | os.PathLike[str]) -> Path:
    """Validates an output path before any work is done."""
    p = Path(path)
    if p.is_dir():
        raise SaveError(
            f"cannot write the model to {p}: it is an existing directory. "
            f"Next step: give a file name such as {p / 'model.onnx'}."
        )
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise SaveError(
            f"cannot write the model to {p}: the directory {parent} does not exist. "
            "Next step: create it first (mkdir -p) or choose another path."
        )
    if not os.access(parent, os.W_OK):
        raise SaveError(
            f"cannot write the model to {p}: the directory {parent} is not writable. "
            "Next step: choose a path you can write to."
        )
    return p


def initializer_bytes(model: ir.Model) -> int:
    total = 0
    for value in model.graph.initializers.values():
        if value.const_value is not None:
            total += value.const_value.nbytes
    return total


def _tensor_buffer(t: torch.Tensor) -> Any:
    """A buffer over a torch tensor's bytes; no copy when it is contiguous on the CPU."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.view(torch.uint8).numpy().data


def _torch_bytes(tensor: ir.TensorProtocol) -> Any:
    """A buffer over an initializer's bytes, straight from torch storage when possible."""
    if isinstance(tensor, ir.LazyTensor):
        tensor = tensor.raw()  # a LazyTensor's raw is the function that makes the tensor
    raw = getattr(tensor, "raw", None)
    if isinstance(raw, torch.Tensor):
        return _tensor_buffer(raw)
    return memoryview(np.frombuffer(tensor.tobytes(), dtype=np.uint8))


def is_meta(value: ir.Value) -> bool:
    """Whether an initializer holds no data (its model was on the meta device)."""
    if value.meta.get("pt2onnx.meta"):
        return True
    raw = getattr(value.const_value, "raw", None)
    return isinstance(raw, torch.Tensor) and raw.is_meta


def meta_initializers(model: ir.Model) -> list[str]:
    return [name for name, v in model.graph.initializers.items() if is_meta(v)]


def _write_tensor(value: ir.Value, tensor: ir.TensorProtocol, f: Any, source: Any) -> None:
    if source is None or not is_meta(value):
        f.write(_torch_bytes(tensor))
        return
    dtype = torch_dtype(tensor.dtype)
    shape = tuple(int(d) for d in tensor.shape)  # type: ignore[arg-type]  (initializers are static)
    key = value.meta.get("pt2onnx.transpose_of")
    try:
        if key is not None:
            # Stored transposed for MatMul: one tensor is read, transposed and written.
            t = source.tensor(key).t()
            if t.dtype != dtype or tuple(t.shape) != shape:
                raise SaveError(
                    f"weight {key!r} is {t.dtype} {list(t.shape)} (transposed) in the weights "
                    f"given, but the model expects {dtype} {list(shape)}."
                )
            f.write(_tensor_buffer(t))
        else:
            source.copy_into(value.meta.get("pt2onnx.weight", value.name), f, dtype, shape)
    except KeyError as exc:
        raise SaveError(
            f"the weights given have no tensor named {exc.args[0]!r}, which the model needs "
            f"for initializer {value.name!r}. Next step: pass the files or state_dict that "
            "belong to this model."
        ) from None


def _transpose_source(value: ir.Value) -> torch.Tensor | None:
    """The real 2-D tensor an initializer is the transpose of, if it is one."""
    src = value.meta.get("pt2onnx.transpose_src")
    return src if isinstance(src, torch.Tensor) and not src.is_meta else None


def _write_transposed(f: Any, w: torch.Tensor, chunk_bytes: int = 16 * 2**20) -> None:
    """Writes w.t() row by row block, so only one block is ever copied in memory."""
    rows = w.shape[1]
    step = max(1, chunk_bytes // max(1, w.shape[0] * w.element_size()))
    for i in range(0, rows, step):
        f.write(_tensor_buffer(w[:, i:i + step].t()))


@contextlib.contextmanager
def _external(model: ir.Model, path: Path, data_file: Path, source: Any = None) -> Iterator[None]:
    """Streams large initializers to data_file and points the model at them."""
    swapped: list[tuple[ir.Value, ir.TensorProtocol]] = []
    location = path.name + ".data"
    try:
        items = [
            (value, value.const_value) for value in model.graph.initializers.values()
            if value.const_value is not None
            and (value.const_value.nbytes >= EXTERNAL_MIN_BYTES or is_meta(value))
        ]

        def prepare(i: int) -> Any:
            value, tensor = items[i]
            if (source is not None and is_meta(value)) or _transpose_source(value) is not None:
                return None  # written in pieces below, never whole in memory
            return _torch_bytes(tensor)

        # One tensor ahead: the next buffer (a transpose, say) is made in a thread
        # while this one is written; both release the GIL.
        with open(data_file, "wb") as f, ThreadPoolExecutor(1) as pool:
            offset = 0
            ahead = pool.submit(prepare, 0) if items else None
            for i, (value, tensor) in enumerate(items):
                buf = ahead.result() if ahead is not None else None
                ahead = pool.submit(prepare, i + 1) if i + 1 < len(items) else None
                pad = (-offset) % _ALIGN
                if pad:
                    f.write(b"\0" * pad)
                    offset += pad
                if buf is not None:
                    f.write(buf)
                    del buf
                elif (src := _transpose_source(value)) is not None:
                    _write_transposed(f, src)
                else:
                    _write_tensor(value, tensor, f, source)
                length = tensor.nbytes
                ext = ir.ExternalTensor(
                    location, offset, length, tensor.dtype, shape=ir.Shape(tensor.shape),
                    name=value.name or "", base_dir=str(path.parent),
                )
                offset += length
                swapped.append((value, tensor))
                value.const_value = ext
        yield
    finally:
        for value, tensor in swapped:
            value.const_value = tensor


def save_model(
    model: ir.Model, path: str | os.PathLike[str], external_data: bool | None = None,
    weights: Any = None,
) -> Path:
    """Writes model to path atomically; a failure leaves no file behind.

    ``weights`` supplies the data of initializers whose model was on the meta
    device (safetensors files, a mapping or a callable; see ``_weights``).
    """
    p = check_path(path)
    missing = meta_initializers(model)
    source = _weights_mod.weight_source(weights) if weights is not None else None
    if missing and source is None:
        raise SaveError(
            f"{len(missing)} weights (e.g. {missing[0]!r}) are on the meta device, so there "
            "is no data to write. Next step: pass weights= (safetensors file(s), a "
            "state_dict or a callable name -> tensor) to export() or OnnxProgram.save()."
        )
    if missing and external_data is False:
        raise SaveError("weights streamed from weights= always go to external data; "
                        "leave external_data unset or pass True.")
    use_external = bool(missing) or (
        external_data
        if external_data is not None
        else initializer_bytes(model) > EXTERNAL_DATA_AUTO_BYTES
    )
    suffix = f".tmp-{os.getpid()}"
    tmp_model = p.with_name(p.name + suffix)
    data_path = p.with_name(p.name + ".data")
    tmp_data = p.with_name(p.name + ".data" + suffix)
    try:
        if use_external:
            with _external(model, p, tmp_data, source):
                proto = ir.to_proto(model)
        else:
            if initializer_bytes(model) > PROTO_LIMIT_BYTES:
                raise SaveError(
                    f"the weights ({initializer_bytes(model) / 1e9:.1f} GB) do not fit in one "
                    "protobuf file. Next step: pass external_data=True."
                )
            proto = ir.to_proto(model)
        with open(tmp_model, "wb") as f:
            f.write(proto.SerializeToString())
        if use_external:
            os.replace(tmp_data, data_path)
        elif data_path.exists():
            # An older export's weights would otherwise sit beside a new inline model.
            data_path.unlink()
        os.replace(tmp_model, p)
    except BaseException:
        for leftover in (tmp_model, tmp_data):
            with contextlib.suppress(OSError):
                leftover.unlink()
        raise
    return p
