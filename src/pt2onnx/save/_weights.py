"""Weights for models exported from the meta device, read one tensor at a time.

``OnnxProgram.save(path, weights=...)`` takes safetensors file(s), a
``state_dict``-like mapping, or a callable ``name -> Tensor``. Safetensors
files are read with plain file I/O (no mmap), so a tensor's pages do not stay
resident after it has been written: peak memory is about one tensor.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import torch

from pt2onnx.errors import SaveError

_ST_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
_CHUNK = 64 * 2**20

WeightsSpec = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Mapping[str, torch.Tensor] | Callable[[str], torch.Tensor]


class WeightSource:
    """Looks up a tensor by its state_dict name."""

    def tensor(self, name: str) -> torch.Tensor:
        raise NotImplementedError

    def copy_into(self, name: str, out: BinaryIO, dtype: torch.dtype,
                  shape: tuple[int, ...]) -> int:
        """Writes the tensor's bytes to ``out``; returns how many were written."""
        t = self.tensor(name)
        _check(name, t.dtype, tuple(t.shape), dtype, shape)
        data = t.detach().contiguous().reshape(-1)
        if data.dtype == torch.bool:
            data = data.to(torch.uint8)
        view = data.view(torch.uint8).numpy()
        out.write(view.data)
        return view.nbytes


def _check(name: str, got_dtype: torch.dtype, got_shape: tuple[int, ...],
           dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    if got_dtype != dtype or got_shape != shape:
        raise SaveError(
            f"weight {name!r} is {got_dtype} {list(got_shape)} in the weights given, but the "
            f"model expects {dtype} {list(shape)}. Next step: pass the weights of this model."
        )


class _Mapping(WeightSource):
    def __init__(self, mapping: Mapping[str, torch.Tensor]) -> None:
        self.mapping = mapping

    def tensor(self, name: str) -> torch.Tensor:
        if name not in self.mapping:
            raise KeyError(name)
        return self.mapping[name]


class _Callable(WeightSource):
    def __init__(self, fn: Callable[[str], torch.Tensor]) -> None:
        self.fn = fn

    def tensor(self, name: str) -> torch.Tensor:
        return self.fn(name)


class Safetensors(WeightSource):
    """Reads tensors from safetensors files by offset, without mapping the files."""

    def __init__(self, files: Sequence[Path]) -> None:
        self.index: dict[str, tuple[Path, torch.dtype, tuple[int, ...], int, int]] = {}
        for path in files:
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
            base = 8 + n
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                begin, end = info["data_offsets"]
                dtype = _ST_DTYPES.get(info["dtype"])
                if dtype is None:
                    raise SaveError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
                self.index[name] = (path, dtype, tuple(info["shape"]), base + begin, end - begin)

    def tensor(self, name: str) -> torch.Tensor:
        path, dtype, shape, offset, length = self.index[name]
        buf = bytearray(length)
        with open(path, "rb") as f:
            f.seek(offset)
            f.readinto(buf)
        return torch.frombuffer(buf, dtype=dtype).reshape(shape) if length else torch.empty(
            shape, dtype=dtype)

    def copy_into(self, name: str, out: BinaryIO, dtype: torch.dtype,
                  shape: tuple[int, ...]) -> int:
        path, got_dtype, got_shape, offset, length = self.index[name]
        _check(name, got_dtype, got_shape, dtype, shape)
        with open(path, "rb") as f:
            f.seek(offset)
            left = length
            while left:
                chunk = f.read(min(_CHUNK, left))
                out.write(chunk)
                left -= len(chunk)
        return length


def weight_source(weights: Any) -> WeightSource:
    """The source for a ``weights=`` argument."""
    if isinstance(weights, WeightSource):
        return weights
    if isinstance(weights, Mapping):
        return _Mapping(weights)
    if callable(weights):
        return _Callable(weights)
    files = [weights] if isinstance(weights, (str, os.PathLike)) else list(weights)
    paths = [Path(p) for p in files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise SaveError(f"weights file(s) not found: {missing}")
    return Safetensors(paths)


def write_safetensors(path: str | os.PathLike[str], tensors: Mapping[str, Any],
                      fill: Callable[[str, torch.Tensor], torch.Tensor] | None = None) -> None:
    """Writes a safetensors file tensor by tensor (``tensors`` may hold meta tensors).

    With ``fill``, each entry's data is ``fill(name, meta_or_real_tensor)``; only
    one tensor is materialised at a time. Used by benchmarks and tests.
    """
    names = list(tensors)
    codes = {v: k for k, v in _ST_DTYPES.items()}
    header: dict[str, Any] = {}
    offset = 0
    for name in names:
        t = tensors[name]
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((-len(raw)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name in names:
            t = tensors[name] if fill is None else fill(name, tensors[name])
            data = t.detach().contiguous().reshape(-1)
            if data.dtype == torch.bool:
                data = data.to(torch.uint8)
            f.write(data.view(torch.uint8).numpy().data)
