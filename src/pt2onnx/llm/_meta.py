"""export-llm from the meta device: the weights streamed from the checkpoint.

A checkpoint folder is not loaded with ``from_pretrained``. The model is built from
its config with every parameter on the meta device (buffers real: they are small,
and the rotary tables, embedding scales and position tables among them are computed
rather than stored), captured from there, and each weight of the graph becomes a
lazy initializer that reads its tensor from the checkpoint's safetensors files and
converts it to the export's dtype when the writer gets to it (a tensor kept as stored
is copied through a small buffer; one to convert, transpose, join or quantize is
mapped from the file while it is used). So the process holds about one weight at a
time plus the graph, not the model, whatever the precision.

Where a checkpoint can't go this way (``.bin`` weights, tensors transformers converts
as it loads, a family that keeps some weights in float32, a forward that makes data on
the model's device, torch < 2.13), export-llm loads the model with ``from_pretrained``
as before, with the reason in ``LLMExport.warnings``.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import onnx_ir as ir
import torch

from pt2onnx import _compat
from pt2onnx.errors import SaveError
from pt2onnx.save import Safetensors, WeightSource, is_meta
from pt2onnx.translate import torch_dtype

ENV = "PT2ONNX_LLM_META"  # "0": load with from_pretrained instead
_WRAPPER = "model."  # the export wrapper holds the transformers model as .model
_INDEX = "model.safetensors.index.json"


class NotStreamable(Exception):
    """The checkpoint can't be exported from the meta device; the message says why."""


class Checkpoint(WeightSource):
    """A checkpoint's tensors by the model's state_dict names, read one at a time.

    Also the ``weights=`` source the export is saved with: its initializers ask for
    the wrapper's names (``model.<name>``), each in the dtype :func:`attach` noted.
    """

    def __init__(self, source: Safetensors, names: dict[str, str]) -> None:
        self.source = source
        self.names = names  # the model's name -> the checkpoint's (tied names share one)
        self.dtypes: dict[str, torch.dtype] = {}  # the graph's dtype of each name
        # Buffers the model computes at init (not in the checkpoint), kept here while the
        # model captures with them on the meta device (see buffers_to_meta).
        self.computed: dict[str, torch.Tensor] = {}

    def has(self, name: str) -> bool:
        return name in self.names or name in self.computed

    def load(self, name: str, dtype: torch.dtype) -> torch.Tensor:
        """The tensor the model calls ``name``, as ``dtype``: its bytes mapped from the
        file (private copy-on-write: never written back), converted if need be. The
        map goes when the tensor does, so the pages stay resident only meanwhile."""
        if name in self.computed:
            return self.computed[name].to(dtype)
        stored_dtype = self.source.index[self.names[name]][1]
        if stored_dtype != dtype:
            # Read-only where only the conversion reads it: such a map is not private
            # memory (RLIMIT_DATA leaves it out); a tensor handed on is copy-on-write.
            return self._map(name, mmap.ACCESS_READ).to(dtype)
        return self._map(name, mmap.ACCESS_COPY)

    def stored(self, name: str) -> torch.Tensor:
        """The initializer ``name`` (the wrapper's name) as stored: see :meth:`mapped`."""
        return self.mapped(_unwrapped(name))

    def mapped(self, name: str) -> torch.Tensor:
        """The tensor the model calls ``name`` as stored, mapped read-only from the file
        (no copy, no conversion): for a writer or quantizer that converts it a block at
        a time."""
        if name in self.computed:
            return self.computed[name]
        return self._map(name, mmap.ACCESS_READ)

    def _map(self, name: str, access: int) -> torch.Tensor:
        path, stored_dtype, shape, offset, length = self.source.index[self.names[name]]
        if not length:
            return torch.empty(shape, dtype=stored_dtype)
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        with open(path, "rb") as f:
            mapped = mmap.mmap(f.fileno(), length + offset - start, offset=start,
                               access=access)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "not writable": never written
            return torch.frombuffer(mapped, dtype=stored_dtype,
                                    count=length // stored_dtype.itemsize,
                                    offset=offset - start).reshape(shape)

    def tensor(self, name: str) -> torch.Tensor:
        name = _unwrapped(name)
        return self.load(name, self.dtypes[name])

    def copy_into(self, name: str, out: BinaryIO, dtype: torch.dtype,
                  shape: tuple[int, ...]) -> int:
        if _unwrapped(name) in self.computed:
            return super().copy_into(name, out, dtype, shape)
        path, stored_dtype, stored_shape, offset, length = self.source.index[
            self.names[_unwrapped(name)]]
        convert = stored_dtype != dtype
        if convert and (tuple(stored_shape) != tuple(shape) or not (
                stored_dtype.is_floating_point and dtype.is_floating_point)):
            return super().copy_into(name, out, dtype, shape)
        # Copied through in pieces, each converted on the way where the dtypes differ:
        # never the whole tensor in memory, in either dtype.
        scratch = _scratch()
        written = 0
        with open(path, "rb", buffering=0) as f:
            f.seek(offset)
            left = length
            while left:
                n = min(len(scratch), left)
                _read_exactly(f, scratch[:n])
                if convert:
                    piece = torch.frombuffer(scratch[:n], dtype=stored_dtype).to(dtype)
                    data = piece.view(torch.uint8).numpy().data
                else:
                    data = scratch[:n]
                out.write(data)
                written += len(data)
                left -= n
        return written


_SCRATCH_BYTES = 8 * 2**20
_local = threading.local()


def _scratch() -> memoryview:
    """This thread's read buffer (reused: a fresh one would be faulted in every time)."""
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = memoryview(bytearray(_SCRATCH_BYTES))
    return buf


def _read_exactly(f: Any, view: memoryview) -> None:
    done = 0
    while done < len(view):
        n = f.readinto(view[done:])
        if not n:
            raise SaveError(f"{f.name} ends before its tensors do (truncated?)")
        done += n


def _unwrapped(name: str) -> str:
    return name[len(_WRAPPER):] if name.startswith(_WRAPPER) else name


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def load(folder: Path, config: Any, dtype: torch.dtype) -> tuple[torch.nn.Module, Checkpoint]:
    """The model built on the meta device (buffers real) and where its weights are.

    Raises NotStreamable when the checkpoint must be loaded with from_pretrained.
    """
    if not _compat.META_DEVICE_EXPORT:
        raise NotStreamable(f"torch {_compat.TORCH_VERSION_STRING} can't capture a model on "
                            "the meta device (2.13 or later can)")
    files = _safetensors_files(folder)
    if getattr(config, "quantization_config", None) is not None:
        raise NotStreamable("the checkpoint is quantized (its config has a "
                            "quantization_config), and transformers converts it as it loads")
    from pt2onnx.llm._families import auto_class

    with params_on_meta():
        try:
            model = auto_class(config).from_config(config, dtype=dtype)
        except TypeError:  # transformers < 4.56 names it torch_dtype
            model = auto_class(config).from_config(config, torch_dtype=dtype)
    keep = [*(getattr(model, "_keep_in_fp32_modules", None) or []),
            *(getattr(model, "_keep_in_fp32_modules_strict", None) or [])]
    if keep and dtype != torch.float32:
        raise NotStreamable(f"{type(model).__name__} keeps {', '.join(keep)} in float32 "
                            "when loaded in half precision")
    source = Safetensors(files)
    checkpoint = Checkpoint(source, _resolve(model, source.index))
    _fill_buffers(model, checkpoint)
    _generation_config(model, folder)
    return model.eval(), checkpoint


def _safetensors_files(folder: Path) -> list[Path]:
    index = folder / _INDEX
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        files = [folder / s for s in shards]
        missing = [str(f.name) for f in files if not f.is_file()]
        if missing:
            raise NotStreamable(f"{_INDEX} names shards that are not there: {missing[:3]}")
        return files
    if (folder / "model.safetensors").is_file():
        return [folder / "model.safetensors"]
    found = sorted(p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth"))
    raise NotStreamable("the checkpoint has no safetensors weights"
                        + (f" (it has {', '.join(found[:3])})" if found else ""))


@contextlib.contextmanager
def params_on_meta() -> Iterator[None]:
    """Every parameter registered meanwhile goes to the meta device; buffers stay real.

    A module's parameter is made (empty, untouched) on the CPU, then moved here as it is
    registered, so its memory is never written; initialisers then run on meta tensors.
    """
    original = torch.nn.Module.register_parameter

    def register(self: torch.nn.Module, name: str, param: Any) -> None:
        if param is not None and not param.is_meta:
            param = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        original(self, name, param)

    torch.nn.Module.register_parameter = register  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = original  # type: ignore[method-assign]


def _resolve(model: torch.nn.Module, index: dict[str, Any]) -> dict[str, str]:
    """The checkpoint name of each parameter and persistent buffer, tied ones included."""
    persistent = set(model.state_dict(keep_vars=True))
    groups: dict[int, list[str]] = {}
    tensors: dict[int, torch.Tensor] = {}
    named = [*model.named_parameters(remove_duplicate=False),
             *((n, b) for n, b in model.named_buffers(remove_duplicate=False) if n in persistent)]
    for name, t in named:
        groups.setdefault(id(t), []).append(name)
        tensors[id(t)] = t
    renamed = _renamings(model, index, persistent)
    names: dict[str, str] = {}
    for key, aliases in groups.items():
        t = tensors[key]
        stored = next((a for a in aliases if a in index), None)
        if stored is None:
            stored = next((renamed[a] for a in aliases if a in renamed), None)
        if stored is None:
            if not t.is_meta:
                continue  # a buffer the checkpoint leaves out keeps its computed value
            raise NotStreamable(
                f"the checkpoint has no tensor {aliases[0]!r} (it names its tensors otherwise "
                "than the model, and transformers converts them as it loads)")
        _, got_dtype, got_shape, _, _ = index[stored]
        if got_shape != tuple(t.shape):
            raise NotStreamable(f"{stored} is {list(got_shape)} in the checkpoint, "
                                f"{list(t.shape)} in the model")
        if got_dtype != t.dtype and not (got_dtype.is_floating_point and t.is_floating_point()):
            raise NotStreamable(f"{stored} is {got_dtype} in the checkpoint, {t.dtype} in the "
                                "model")
        for alias in aliases:
            names[alias] = stored
    return names


def _renamings(model: torch.nn.Module, index: dict[str, Any], state: set[str],
               ) -> dict[str, str]:
    """The model's name -> the checkpoint's, for tensors transformers only renames as it
    loads (GPT-NeoX's embed_out is lm_head); empty where transformers has no such table
    (before 5.0). Tensors it converts (experts joined into one) are left out."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightRenaming, rename_source_key

        renamings = [t for t in get_model_conversion_mapping(model)  # type: ignore[arg-type]
                     if isinstance(t, WeightRenaming)]
        if not renamings:
            return {}
        meta = dict.fromkeys(state, True)
        prefix = getattr(model, "base_model_prefix", None) or None
        out: dict[str, str] = {}
        for stored in index:
            name, _ = rename_source_key(stored, renamings, [], prefix, meta)
            if name != stored:
                out[name] = stored
        return out
    except Exception:  # another transformers: only the names as they are
        return {}


def _fill_buffers(model: torch.nn.Module, checkpoint: Checkpoint) -> None:
    """Persistent buffers from the checkpoint; the computed ones as from_pretrained
    leaves them (transformers 5 computes them again with its weight init, outside the
    dtype it builds the model in: GPT-J's sinusoids are float32 from there)."""
    init = getattr(model, "_init_weights", None)
    for module in model.modules():
        if module._non_persistent_buffers_set and callable(init):
            with contextlib.suppress(Exception):  # a model whose init needs real weights
                init(module)
    for name, buf in model.named_buffers(remove_duplicate=False):
        if name in checkpoint.names and not buf.is_meta:
            buf.copy_(checkpoint.load(name, buf.dtype))


def buffers_to_meta(model: torch.nn.Module, checkpoint: Checkpoint) -> int:
    """Moves the model's real buffers to the meta device, keeping their values in
    ``checkpoint.computed``, so that they are attached like weights after the capture
    (:func:`attach`) and streamed when the file is written. For a forward that indexes
    a buffer with the meta inputs (GPT-J's ``embed_positions[position_ids]`` on
    transformers 5.24) instead of moving it to the inputs' device first. Returns how
    many buffers moved."""
    moved = 0
    for module_name, module in model.named_modules(remove_duplicate=False):
        for name, buf in list(module._buffers.items()):
            if buf is None or buf.is_meta:
                continue
            full = f"{module_name}.{name}" if module_name else name
            checkpoint.computed.setdefault(full, buf.detach().clone())
            module._buffers[name] = buf.to("meta")
            moved += 1
    return moved


def _generation_config(model: torch.nn.Module, folder: Path) -> None:
    if not (folder / "generation_config.json").is_file():
        return
    from transformers import GenerationConfig

    with contextlib.suppress(Exception):  # from_config's default stays
        setattr(model, "generation_config", GenerationConfig.from_pretrained(folder))  # noqa: B010


def example(model: torch.nn.Module, args: Any) -> Any:
    """The capture's example inputs, on the meta device where the model is: the model's
    own code moves tensors to its activations' device, and meta beside CPU tensors
    fails there."""
    if not any(p.is_meta for p in model.parameters()):
        return args
    return _to_meta(args)


def _to_meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to("meta")
    if isinstance(x, (list, tuple)):
        return type(x)(_to_meta(v) for v in x)
    return x


def attach(graph_model: ir.Model, checkpoint: Checkpoint) -> int:
    """Points each meta initializer of the export at its checkpoint tensor; returns how
    many. Raises NotStreamable for one that is not a checkpoint tensor (a constant the
    forward made on the meta device holds no data).

    Each stays a meta initializer, which ``save(weights=checkpoint)`` streams (as stored,
    in pieces; or converted, one tensor at a time; transposed block by block). Its
    value becomes a lazy read for the passes that compute from it (q/k/v joined into
    one MatMul, int4), and ``pt2onnx.rows`` reads it as Linear's ``[N, K]``.
    """
    count = 0
    for value in list(graph_model.graph.initializers.values()):
        if not is_meta(value):
            continue
        tensor = value.const_value
        assert tensor is not None
        dtype, shape = torch_dtype(tensor.dtype), tuple(tensor.shape.numpy())
        transposed = value.meta.get("pt2onnx.transpose_of")
        key = str(transposed if transposed is not None
                  else value.meta.get("pt2onnx.weight", value.name))
        name = _unwrapped(key)
        if not checkpoint.has(name):
            raise NotStreamable(f"initializer {value.name} comes from {key}, which is not a "
                                "checkpoint tensor")
        if checkpoint.dtypes.setdefault(name, dtype) != dtype:
            raise NotStreamable(f"{key} is read as {checkpoint.dtypes[name]} and as {dtype}")
        read = _reader(checkpoint, name, dtype)
        if transposed is not None:
            make = _transposed(read)
            value.meta.pop("pt2onnx.transpose_src", None)  # the meta tensor
            value.meta["pt2onnx.rows"] = read
        else:
            make = read
            if len(shape) == 2:
                value.meta["pt2onnx.rows"] = _transposed(read)
        value.meta["pt2onnx.meta"] = True
        value.const_value = ir.LazyTensor(_adapter(make, value.name or name),
                                          dtype=tensor.dtype, shape=ir.Shape(shape),
                                          name=value.name)
        count += 1
    return count


class _Read:
    """A checkpoint tensor in the graph's dtype, read when called; ``stored()`` gives it
    as stored, mapped (the int4 quantizer converts it a block of rows at a time)."""

    def __init__(self, checkpoint: Checkpoint, name: str, dtype: torch.dtype,
                 transpose: bool = False) -> None:
        self.checkpoint, self.name, self.dtype, self.transpose = (
            checkpoint, name, dtype, transpose)

    def __call__(self) -> torch.Tensor:
        t = self.checkpoint.load(self.name, self.dtype)
        return t.t() if self.transpose else t

    def stored(self) -> torch.Tensor:
        t = self.checkpoint.mapped(self.name)
        return t.t() if self.transpose else t


def _reader(checkpoint: Checkpoint, name: str, dtype: torch.dtype) -> _Read:
    return _Read(checkpoint, name, dtype)


def _transposed(read: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    if isinstance(read, _Read):
        return _Read(read.checkpoint, read.name, read.dtype, not read.transpose)
    return lambda: read().t()


def _adapter(make: Callable[[], torch.Tensor], name: str) -> Callable[[], ir.TensorProtocol]:
    return lambda: ir.tensor_adapters.TorchTensor(make().contiguous(), name=name)


_STAND_IN_VOCAB = 1024


def stand_in(model: torch.nn.Module, layout: Any, dtype: torch.dtype) -> tuple[Any, Any]:
    """``(model, layout)`` as they are when the model has its weights; for a model on the
    meta device, a model of the same config with random weights, cut to the fewest first
    layers that hold every kind of layer it has (at least 2), and its layout. For checks
    that compare values (the fused attention's): they depend on the architecture, not on
    the weights."""
    if not any(p.is_meta for p in model.parameters()):
        return model, layout
    import copy
    import dataclasses

    from pt2onnx.llm._families import auto_class

    cut: Any = copy.deepcopy(getattr(model, "config"))  # noqa: B009
    text = cut.get_text_config() if hasattr(cut, "get_text_config") else cut
    n = layout.num_layers
    lists = {k: v for k, v in vars(text).items() if isinstance(v, (list, tuple)) and len(v) == n}
    keep = 2
    for v in lists.values():
        seen: list[Any] = []
        for i, kind in enumerate(v):
            if kind not in seen:
                seen.append(kind)
                keep = max(keep, i + 1)
    keep = min(keep, n)
    for k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        if isinstance(vars(text).get(k), int):
            setattr(text, k, keep)
    for k, v in lists.items():
        setattr(text, k, type(v)(v[:keep]))
    # The check compares the decoder layers' outputs; a smaller vocabulary leaves those
    # as they are and spares drawing random embedding and LM-head weights (0.6 s of a
    # 7 s export at 32,000 x 768). The check's token ids are below 1,000.
    vocab = vars(text).get("vocab_size")
    if isinstance(vocab, int) and vocab > _STAND_IN_VOCAB:
        text.vocab_size = vocab = _STAND_IN_VOCAB
        for k in ("pad_token_id", "bos_token_id", "eos_token_id"):
            ids = vars(text).get(k)
            if isinstance(ids, int) and ids >= vocab:
                setattr(text, k, None)
            elif isinstance(ids, list):
                setattr(text, k, [i for i in ids if i < vocab] or None)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        try:
            real = auto_class(cut).from_config(cut, dtype=dtype)
        except TypeError:  # transformers < 4.56 names it torch_dtype
            real = auto_class(cut).from_config(cut, torch_dtype=dtype)
    return real.eval(), dataclasses.replace(layout, num_layers=keep,
                                            vocab_size=min(layout.vocab_size, _STAND_IN_VOCAB),
                                            layer_kinds=tuple(layout.layer_kinds[:keep]))
