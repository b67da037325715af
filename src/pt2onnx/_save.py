"""Serialization: atomic writes, external data streamed from torch storage."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

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


def _torch_bytes(tensor: ir.TensorProtocol) -> Any:
    """A buffer over the tensor's bytes; no copy for contiguous torch tensors."""
    if isinstance(tensor, ir.LazyTensor):
        tensor = tensor.raw()  # a LazyTensor's raw is the function that makes the tensor
    raw = getattr(tensor, "raw", None)
    if isinstance(raw, torch.Tensor):
        t = raw.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous().reshape(-1)
        if t.dtype == torch.bool:
            t = t.to(torch.uint8)
        return t.view(torch.uint8).numpy().data
    return memoryview(np.frombuffer(tensor.tobytes(), dtype=np.uint8))


@contextlib.contextmanager
def _external(model: ir.Model, path: Path, data_file: Path) -> Iterator[None]:
    """Streams large initializers to data_file and points the model at them."""
    swapped: list[tuple[ir.Value, ir.TensorProtocol]] = []
    location = path.name + ".data"
    try:
        with open(data_file, "wb") as f:
            offset = 0
            for value in model.graph.initializers.values():
                tensor = value.const_value
                if tensor is None or tensor.nbytes < EXTERNAL_MIN_BYTES:
                    continue
                pad = (-offset) % _ALIGN
                if pad:
                    f.write(b"\0" * pad)
                    offset += pad
                buf = _torch_bytes(tensor)
                f.write(buf)
                length = tensor.nbytes
                ext = ir.ExternalTensor(
                    location, offset, length, tensor.dtype, shape=tensor.shape,
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
    model: ir.Model, path: str | os.PathLike[str], external_data: bool | None = None
) -> Path:
    """Writes model to path atomically; a failure leaves no file behind."""
    p = check_path(path)
    use_external = (
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
            with _external(model, p, tmp_data):
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
