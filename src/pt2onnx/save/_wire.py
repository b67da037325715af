"""The protobuf wire format, as far as writing a model with its weights spliced in
needs it: a ModelProto's bytes, serialized without the large initializers' raw_data,
become a list of parts in which each such initializer's bytes sit where
SerializeToString puts them, so the file is written one weight in memory at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pt2onnx.errors import SaveError

_GRAPH = 7  # ModelProto.graph
_INITIALIZER = 5  # GraphProto.initializer
_NAME = 8  # TensorProto.name
_RAW_DATA = 9  # TensorProto.raw_data


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, tag start, payload start, end) of each field in buf[start:end]."""
    pos = start
    while pos < end:
        tag_start = pos
        key, pos = _read_varint(buf, pos)
        wire = key & 7
        if wire == 0:
            _, pos = _read_varint(buf, pos)
            payload = pos
        elif wire == 2:
            size, payload = _read_varint(buf, pos)
            pos = payload + size
        elif wire in (1, 5):
            payload = pos
            pos += 8 if wire == 1 else 4
        else:
            raise SaveError(f"unexpected protobuf wire type {wire} while writing the model")
        yield key >> 3, tag_start, payload, pos


def _key(field: int) -> bytes:
    return _varint((field << 3) | 2)


def splice_inline(model_bytes: bytes, items: dict[str, Any]) -> list[Any]:
    """The file as parts: model_bytes with each named initializer's raw_data put back
    where SerializeToString puts it (after the fields numbered below 9)."""
    mb = model_bytes
    parts: list[Any] = []
    for field, tag, payload, end in _fields(mb, 0, len(mb)):
        if field != _GRAPH:
            parts.append(mb[tag:end])
            continue
        graph: list[Any] = []
        size = 0
        for gfield, gtag, gpayload, gend in _fields(mb, payload, end):
            item = None
            if gfield == _INITIALIZER:
                name = next((mb[p:e].decode() for f, _, p, e in _fields(mb, gpayload, gend)
                             if f == _NAME), None)
                item = items.get(name) if name is not None else None
            if item is None:
                graph.append(mb[gtag:gend])
                size += gend - gtag
                continue
            split = next((t for f, t, _, _ in _fields(mb, gpayload, gend) if f > _RAW_DATA), gend)
            nbytes = item[1].nbytes
            head = mb[gpayload:split] + _key(_RAW_DATA) + _varint(nbytes)
            tail = mb[split:gend]
            inner = len(head) + nbytes + len(tail)
            head = _key(_INITIALIZER) + _varint(inner) + head
            graph += [head, item, tail]
            size += len(head) + nbytes + len(tail)
        parts.append(_key(_GRAPH) + _varint(size))
        parts += graph
    merged: list[Any] = []
    for part in parts:  # adjacent protobuf bytes as one write
        if isinstance(part, bytes) and merged and isinstance(merged[-1], bytearray):
            merged[-1] += part
        else:
            merged.append(bytearray(part) if isinstance(part, bytes) else part)
    return merged
