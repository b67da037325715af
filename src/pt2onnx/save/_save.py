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
from pt2onnx.save import _pages
from pt2onnx.save import _weights as _weights_mod
from pt2onnx.save._wire import splice_inline
from pt2onnx.translate import torch_dtype

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
    return memoryview(tensor.tobytes())


def _buffers(tensor: ir.TensorProtocol) -> Iterator[Any]:
    """An initializer's bytes as buffers, in order. A LazyTensor whose function has
    ``blocks`` (a folded conv weight, passes/fold_batch_norm.py) is written a block of
    rows at a time, and never made whole."""
    blocks = getattr(tensor.raw, "blocks", None) if isinstance(tensor, ir.LazyTensor) else None
    if blocks is None:
        yield _torch_bytes(tensor)
        return
    for block in blocks():
        yield _tensor_buffer(block)


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
        for buffer in _buffers(tensor):
            f.write(buffer)
        return
    dtype = torch_dtype(tensor.dtype)
    shape = tuple(tensor.shape.numpy())  # initializers are static
    key = value.meta.get("pt2onnx.transpose_of")
    try:
        if key is not None:
            # Stored transposed for MatMul: one tensor is read, transposed and written;
            # a source that maps it as stored (export-llm's checkpoint) has it converted
            # a block at a time on the way.
            stored = getattr(source, "stored", None)
            t = (stored(key) if stored is not None else source.tensor(key)).t()
            convert = stored is not None and t.dtype.is_floating_point and (
                dtype.is_floating_point)
            if (t.dtype != dtype and not convert) or tuple(t.shape) != shape:
                raise SaveError(
                    f"weight {key!r} is {t.dtype} {list(t.shape)} (transposed) in the weights "
                    f"given, but the model expects {dtype} {list(shape)}."
                )
            if hasattr(f, "write_transposed"):
                f.write_transposed(t.t(), dtype)
            else:
                f.write(_tensor_buffer(t.to(dtype)))
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


# Files are written from page-aligned stage buffers of this size, two of them: a
# thread fills one (copies, transposes) while the other is written.
_STAGE_BYTES = 4 * 2**20
# A data file at least this large is written with O_DIRECT where the system has it:
# the page cache would take a second copy of every byte (in the kernel, on the
# writing thread) for data that will not be read back soon. Measured on a VM,
# 2 GB: buffered 3.2-6.6 s of system time, O_DIRECT 0.4 s of CPU time in all.
_DIRECT_MIN_BYTES = 64 * 2**20
_DIRECT_ALIGN = 4096


def _byte_view(t: torch.Tensor) -> Any:
    return t.reshape(-1).view(torch.uint8).numpy().data


def _write_transposed(f: Any, w: torch.Tensor, chunk_bytes: int = 16 * 2**20,
                     dtype: torch.dtype | None = None) -> None:
    """Writes w.t() (converted to ``dtype``, default w's) block by block, so only one
    block is ever copied in memory."""
    w = _cpu_plain(w.detach())
    out_dtype = w.dtype if dtype is None or dtype == torch.bool else dtype
    rows, cols = w.shape
    step = max(1, chunk_bytes // max(1, rows * out_dtype.itemsize))
    for i in range(0, cols, step):
        f.write(_byte_view(w[:, i:i + step].t().to(out_dtype).contiguous()))


def _bytes_2d(w: torch.Tensor) -> np.ndarray:
    """A 2-D tensor's bytes as a (rows, cols * itemsize) uint8 array, without a copy."""
    if w.stride(1) != 1:
        w = w.contiguous()
    return w.view(torch.uint8).numpy()


def _cpu_plain(w: torch.Tensor) -> torch.Tensor:
    if w.device.type != "cpu":
        w = w.cpu()
    return w.to(torch.uint8) if w.dtype == torch.bool else w


class _Abort(Exception):
    pass


class _StagedFile:
    """A file-like sink that a producer thread fills; full stage buffers go to the
    writing thread through a queue, so producing and writing overlap.

    ``write_transposed`` transposes a 2-D weight straight into the stage: a block
    of w.t()'s rows (a block of w's columns) is gathered into a contiguous buffer
    with row copies, then transposed whole, which takes torch's blocked
    transpose (several times faster than a strided copy)."""

    def __init__(self, stages: list[Any]) -> None:
        import queue

        self._free: queue.Queue[Any] = queue.Queue()
        self.full: queue.Queue[Any] = queue.Queue()
        for stage in stages:
            self._free.put(stage)
        self._stage: Any = None
        self._fill = 0
        self._gather: np.ndarray | None = None

    def _current(self) -> Any:
        if self._stage is None:
            stage = self._free.get()
            if stage is None:
                raise _Abort
            self._stage, self._fill = stage, 0
        return self._stage

    def _ship(self) -> None:
        self.full.put((self._stage, self._fill))
        self._stage = None

    def release(self, stage: Any) -> None:
        self._free.put(stage)

    def write(self, data: Any) -> int:
        mv = memoryview(data).cast("B")
        done = 0
        while done < len(mv):
            stage = self._current()
            n = min(len(mv) - done, len(stage) - self._fill)
            stage[self._fill:self._fill + n] = mv[done:done + n]
            self._fill += n
            done += n
            if self._fill == len(stage):
                self._ship()
        return done

    def write_transposed(self, w: torch.Tensor, dtype: torch.dtype | None = None) -> None:
        """Writes ``w.t()``, converted to ``dtype`` (default: ``w``'s) block by block."""
        w = _cpu_plain(w.detach())
        out_dtype = w.dtype if dtype is None or dtype == torch.bool else dtype
        rows, cols = w.shape
        row_bytes = rows * out_dtype.itemsize
        i = 0
        while i < cols:
            stage = self._current()
            n = min(cols - i, (len(stage) - self._fill) // row_bytes)
            if n == 0:  # not one row of w.t() fits: that row spans two stages
                self.write(_byte_view(w[:, i].to(out_dtype).contiguous()))
                i += 1
                continue
            part = w[:, i:i + n]
            if n < cols or not w.is_contiguous():
                el = w.element_size()
                if self._gather is None or len(self._gather) < n * rows * el:
                    # n rows fit in one stage: a stage's worth in w's own dtype
                    self._gather = np.empty(max(len(stage), n * rows * el), dtype=np.uint8)
                # Row copies in numpy, on bytes: one thread, any dtype. (torch.copy_
                # splits this small copy across its threads and spends far more CPU.)
                gathered = self._gather[: n * rows * el].reshape(rows, n * el)
                np.copyto(gathered, _bytes_2d(w)[:, i * el:(i + n) * el])
                part = torch.from_numpy(gathered).view(w.dtype)
            out = torch.frombuffer(stage, dtype=torch.uint8, count=n * row_bytes,
                                   offset=self._fill).view(out_dtype).view(n, rows)
            out.copy_(part.t())
            self._fill += n * row_bytes
            i += n
            if self._fill == len(stage):
                self._ship()

    def finish(self) -> None:
        if self._stage is not None and self._fill:
            self._ship()
        self.full.put(None)


class _FileSink:
    """A sink that writes straight to the file on the calling thread: for a buffered
    file the page cache's copy is the only one, so a stage buffer would add a copy
    (and a thread handoff per stage) without overlapping anything."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.size = 0

    def write(self, data: Any) -> int:
        mv = memoryview(data).cast("B")
        _write_all(self._fd, mv, False)
        self.size += len(mv)
        return len(mv)

    def write_transposed(self, w: torch.Tensor, dtype: torch.dtype | None = None) -> None:
        _write_transposed(self, w, _STAGE_BYTES, dtype)


def _emit(sink: _StagedFile | _FileSink, parts: list[Any], source: Any) -> None:
    """Each part's bytes in order: bytes as they are, a (value, tensor) item as its data
    (a weight mapped from a file then handed back, see _pages)."""
    pages = _pages.FilePages()
    for part in parts:
        if isinstance(part, (bytes, bytearray)):
            sink.write(part)
            continue
        value, tensor = part
        if source is not None and is_meta(value):
            _write_tensor(value, tensor, sink, source)  # from the source, in pieces
        elif (src := _transpose_source(value)) is not None:
            sink.write_transposed(src)
            pages.release(src)
        else:
            for buffer in _buffers(tensor):
                sink.write(buffer)
            if not isinstance(tensor, ir.LazyTensor):
                pages.release(getattr(tensor, "raw", None))


def _produce(sink: _StagedFile, parts: list[Any], source: Any) -> None:
    """``_emit`` on the producer thread; an error goes to the writing thread."""
    try:
        _emit(sink, parts, source)
        sink.finish()
    except _Abort:
        pass
    except BaseException as exc:
        sink.full.put(exc)


def _open_data(path: Path, direct: bool) -> tuple[int, bool]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
    if direct and hasattr(os, "O_DIRECT"):
        try:
            return os.open(path, flags | os.O_DIRECT, 0o666), True
        except OSError:
            pass  # the file system has no direct I/O (tmpfs, some network file systems)
    return os.open(path, flags, 0o666), False


def _stream(path: Path, parts: list[Any], source: Any = None, direct: bool = False) -> None:
    """Writes parts to path in order. With direct I/O a thread makes the bytes (copies,
    transposes, folded weights) into one stage buffer while this thread writes the
    other; a buffered file is written from the tensors' own memory (``_FileSink``)."""
    import mmap
    import threading

    fd, direct = _open_data(path, direct)
    try:
        if not direct:
            _emit(_FileSink(fd), parts, source)
            return
        stage_bytes = -(-_STAGE_BYTES // _DIRECT_ALIGN) * _DIRECT_ALIGN
        stages = [mmap.mmap(-1, stage_bytes) for _ in range(2)]  # page-aligned
        sink = _StagedFile(stages)
        producer = threading.Thread(target=_produce, args=(sink, parts, source), daemon=True)
        producer.start()
        size = 0
        try:
            while True:
                item = sink.full.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                stage, n = item
                if direct and n % _DIRECT_ALIGN:  # the last, short stage: pad, truncate after
                    pad = (-n) % _DIRECT_ALIGN
                    stage[n:n + pad] = bytes(pad)
                    direct = _write_all(fd, memoryview(stage)[: n + pad], direct)
                else:
                    direct = _write_all(fd, memoryview(stage)[:n], direct)
                size += n
                sink.release(stage)
        finally:
            sink.release(None)  # wakes the producer if it still waits for a stage
            producer.join()
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def _write_all(fd: int, data: Any, direct: bool) -> bool:
    """Writes all of data; if direct I/O turns out not to work here, writes buffered."""
    done = 0
    while done < len(data):
        try:
            done += os.write(fd, data[done:])
        except OSError as exc:
            import errno
            import fcntl

            if not direct or exc.errno != errno.EINVAL:
                raise
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_DIRECT)
            direct = False
    return direct


@contextlib.contextmanager
def _placeholders(
    items: list[tuple[ir.Value, Any]], location: str, offsets: list[int], base_dir: str
) -> Iterator[None]:
    """Points each initializer at external data while the block runs, then restores it."""
    swapped: list[tuple[ir.Value, Any]] = []
    try:
        for (value, tensor), offset in zip(items, offsets):
            value.const_value = ir.ExternalTensor(
                location, offset, tensor.nbytes, tensor.dtype, shape=ir.Shape(tensor.shape),
                name=value.name or "", base_dir=base_dir,
            )
            swapped.append((value, tensor))
        yield
    finally:
        for value, tensor in swapped:
            value.const_value = tensor


@contextlib.contextmanager
def _external(model: ir.Model, path: Path, data_file: Path, source: Any = None) -> Iterator[None]:
    """Streams large initializers to data_file and points the model at them."""
    items = [
        (value, value.const_value) for value in model.graph.initializers.values()
        if value.const_value is not None
        and (value.const_value.nbytes >= EXTERNAL_MIN_BYTES or is_meta(value))
    ]
    parts: list[Any] = []
    offsets: list[int] = []
    offset = 0
    for item in items:
        pad = (-offset) % _ALIGN
        if pad:
            parts.append(b"\0" * pad)
            offset += pad
        parts.append(item)
        offsets.append(offset)
        offset += item[1].nbytes
    _stream(data_file, parts, source, direct=offset >= _DIRECT_MIN_BYTES)
    with _placeholders(items, path.name + ".data", offsets, str(path.parent)):
        yield


# -- inline weights, streamed into the protobuf file ----------------------------------
#
# ir.to_proto would copy every weight into the ModelProto and SerializeToString
# would copy it again. Instead the model is serialized without the big weights'
# bytes and they are spliced in as it is written: the file is byte for byte what
# SerializeToString writes (fields in number order), with one weight in memory.

_DATA_LOCATION_FIELDS = ("external_data", "data_location")


def _streamable(value: ir.Value, tensor: Any) -> bool:
    """Whether an inline initializer's bytes can be spliced in as it is written."""
    return (
        tensor is not None
        and tensor.nbytes >= EXTERNAL_MIN_BYTES
        and isinstance(tensor, (ir.tensor_adapters.TorchTensor, ir.LazyTensor))
        and tensor.dtype != ir.DataType.STRING
        and not tensor.doc_string
        and not tensor.metadata_props
    )


def _write_inline(model: ir.Model, path: Path) -> None:
    items = [(v, v.const_value) for v in model.graph.initializers.values()
             if _streamable(v, v.const_value)]
    with _placeholders(items, "", [0] * len(items), ""):
        proto = ir.to_proto(model)
    by_name = {value.name or "": (value, tensor) for value, tensor in items}
    for tp in proto.graph.initializer:
        if tp.name in by_name:
            for name in _DATA_LOCATION_FIELDS:
                tp.ClearField(name)
    model_bytes = proto.SerializeToString()
    del proto
    _stream(path, splice_inline(model_bytes, by_name))


def save_model(
    model: ir.Model, path: str | os.PathLike[str], external_data: bool | None = None,
    weights: Any = None,
) -> Path:
    """Writes model to path atomically; a failure leaves no file behind.

    ``weights`` supplies the data of initializers whose model was on the meta
    device (safetensors files, a mapping or a callable; see ``_weights``).
    """
    p = check_path(path)
    # Last, so that what works on the in-memory graph (export-llm's layer stamping) sees
    # it as translated: a graph output read inside the graph gets its own Identity.
    from pt2onnx.passes import outputs_not_read

    outputs_not_read.apply(model)
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
            proto = None
        if proto is None:
            _write_inline(model, tmp_model)
        else:
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
