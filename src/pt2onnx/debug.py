"""Debugging tools: named intermediate outputs, node annotations, shareable repros.

- :func:`as_output` makes an intermediate value of ``forward`` a named graph output.
- :func:`annotate` attaches metadata to every ONNX node produced inside a block.
- :func:`save_testcase` writes a model with ONNX backend-test input/output files.
- :func:`strip` / :func:`unstrip` drop large weights for a statistics record and
  bring back random weights with the same statistics.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import torch
import torch.fx.traceback as fx_traceback

from pt2onnx.errors import InvalidInputError
from pt2onnx.frontends import as_output_op

ANNOTATE_KEY = "pt2onnx.annotate"
STRIPPED_KEY = "pt2onnx.stripped"
# Initializers with at least this many elements are stripped (float dtypes only:
# integer tensors are usually indices or shapes that a repro needs exactly).
STRIP_MIN_ELEMENTS = 1024


def as_output(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """Marks ``tensor`` as an extra graph output called ``name``; returns it unchanged.

    Call it inside ``forward``. In eager PyTorch it is the identity; the
    exported ONNX model gets one more output, after the model's own outputs.

    Example:
        >>> import torch, pt2onnx
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         h = pt2onnx.as_output(x * 2, "doubled")
        ...         return h + 1
        >>> prog = pt2onnx.export(M(), (torch.ones(2),))
        >>> [v.name for v in prog.model.graph.outputs]
        ['output', 'doubled']
    """
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"as_output needs a non-empty string name, got {name!r}.")
    if not isinstance(tensor, torch.Tensor):
        raise InvalidInputError(
            f"as_output({name!r}) got a {type(tensor).__name__}; only tensors can become "
            "ONNX outputs."
        )
    return as_output_op(tensor, name)


@contextlib.contextmanager
def annotate(**attrs: Any) -> Iterator[None]:
    """Attaches ``attrs`` (as strings) to the metadata_props of each ONNX node made inside.

    Blocks nest; an inner block adds to (and may override) the outer one's keys.

    Example:
        >>> import torch, pt2onnx
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         with pt2onnx.annotate(stage="head"):
        ...             return torch.relu(x)
        >>> prog = pt2onnx.export(M(), (torch.ones(2),))
        >>> [n.metadata_props["stage"] for n in prog.model.graph]
        ['head']
    """
    current = fx_traceback.current_meta.get("custom", {}).get(ANNOTATE_KEY, {})
    merged = {**current, **{k: str(v) for k, v in attrs.items()}}
    with fx_traceback.annotate({ANNOTATE_KEY: merged}):
        yield


def preserving_meta() -> contextlib.AbstractContextManager[Any]:
    """What capture runs under so that :func:`annotate` reaches the FX nodes."""
    return fx_traceback.preserve_node_meta()


# -- test cases -------------------------------------------------------------
def save_testcase(
    model: ir.Model, directory: str | os.PathLike[str], inputs: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
) -> Path:
    """Writes ``model.onnx`` and ``test_data_set_0/{input,output}_N.pb`` under directory."""
    from onnx import numpy_helper

    from pt2onnx.save import save_model

    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise InvalidInputError(f"{root} exists and is not a directory.")
    data = root / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    graph = model.graph
    if len(inputs) != len(graph.inputs) or len(outputs) != len(graph.outputs):
        raise InvalidInputError(
            f"the model has {len(graph.inputs)} inputs and {len(graph.outputs)} outputs, "
            f"but {len(inputs)} and {len(outputs)} arrays were given."
        )
    for kind, values, arrays in (("input", graph.inputs, inputs),
                                 ("output", graph.outputs, outputs)):
        for i, (value, array) in enumerate(zip(values, arrays)):
            proto = numpy_helper.from_array(np.asarray(array), name=value.name or "")
            (data / f"{kind}_{i}.pb").write_bytes(proto.SerializeToString())
    return save_model(model, root / "model.onnx")


# -- stripping weights ----------------------------------------------------
def _stats(array: np.ndarray) -> dict[str, str]:
    a = array.astype(np.float64)
    return {
        STRIPPED_KEY: "1",
        "mean": repr(float(a.mean())), "std": repr(float(a.std())),
        "min": repr(float(a.min())), "max": repr(float(a.max())),
        "shape": "x".join(str(d) for d in array.shape) or "scalar",
        "dtype": str(array.dtype),
    }


def _strippable(value: ir.Value, min_elements: int) -> bool:
    tensor = value.const_value
    return (
        tensor is not None
        and tensor.dtype in (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.DOUBLE,
                             ir.DataType.BFLOAT16)
        and tensor.size >= min_elements
    )


def stripped_proto(model: ir.Model, min_elements: int = STRIP_MIN_ELEMENTS) -> onnx.ModelProto:
    """The model as a proto whose large float initializers hold statistics, not data."""
    swapped: dict[str, tuple[ir.Value, Any, dict[str, str]]] = {}
    try:
        for name, value in model.graph.initializers.items():
            if not _strippable(value, min_elements):
                continue
            tensor = value.const_value
            assert tensor is not None
            stats = _stats(tensor.numpy())
            tiny = np.zeros((1,), dtype=tensor.dtype.numpy())
            swapped[name] = (value, tensor, stats)
            value.const_value = ir.Tensor(tiny, name=name)
        proto = ir.to_proto(model)
    finally:
        for value, tensor, _ in swapped.values():
            value.const_value = tensor
    for init in proto.graph.initializer:
        if init.name not in swapped:
            continue
        value, tensor, stats = swapped[init.name]
        dtype = init.data_type
        init.Clear()
        init.name, init.data_type = value.name or "", dtype
        init.dims.extend(int(d) for d in tensor.shape)
        for key, text in stats.items():
            init.metadata_props.add(key=key, value=text)
    return proto


def strip(model: ir.Model, path: str | os.PathLike[str],
          min_elements: int = STRIP_MIN_ELEMENTS) -> Path:
    """Saves ``model`` to ``path`` with large weights replaced by their statistics."""
    from pt2onnx.save import check_path

    p = check_path(path)
    _atomic_write(p, stripped_proto(model, min_elements).SerializeToString())
    return p


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _random_like(meta: dict[str, str], shape: tuple[int, ...], np_dtype: Any,
                 rng: np.random.Generator) -> np.ndarray:
    mean, std = float(meta["mean"]), float(meta["std"])
    lo, hi = float(meta["min"]), float(meta["max"])
    data = rng.normal(mean, std, size=shape) if std > 0 else np.full(shape, mean)
    return np.clip(data, lo, hi).astype(np_dtype)


def unstrip(path_in: str | os.PathLike[str], path_out: str | os.PathLike[str],
            seed: int = 0) -> Path:
    """Restores stripped weights with random values of the recorded mean, std and range."""
    from onnx import helper, numpy_helper

    from pt2onnx.save import check_path

    out = check_path(path_out)
    proto = onnx.load(str(path_in), load_external_data=False)
    rng = np.random.default_rng(seed)
    restored = 0
    for init in proto.graph.initializer:
        meta = {p.key: p.value for p in init.metadata_props}
        if meta.get(STRIPPED_KEY) != "1":
            continue
        np_dtype = helper.tensor_dtype_to_np_dtype(init.data_type)
        array = _random_like(meta, tuple(init.dims), np_dtype, rng)
        filled = numpy_helper.from_array(array, name=init.name)
        init.CopyFrom(filled)
        restored += 1
    if not restored:
        raise InvalidInputError(
            f"{path_in} has no stripped weights. Next step: write one with "
            "OnnxProgram.save(path, strip_weights=True)."
        )
    _atomic_write(out, proto.SerializeToString())
    return out
