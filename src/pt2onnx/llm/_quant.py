"""Weight-only int4 (MatMulNBits) for the Linear layers of an exported decoder.

Round to nearest, symmetric, one scale per block of 32 weights along the input
dim. The scale of a block is its largest-magnitude weight divided by -8, so that
weight is exactly -8 steps and the 16 levels -8..7 span the block; onnxruntime's
``com.microsoft::MatMulNBits`` computes ``A @ ((q - 8) * scale)ᵀ`` with its
default zero point of 8.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir
import torch

BLOCK = 32
BITS = 4
MS_DOMAIN = "com.microsoft"


def quantize_rtn(weight: torch.Tensor, block: int = BLOCK, dequantize: bool = True,
                 ) -> tuple[np.ndarray, np.ndarray, torch.Tensor | None]:
    """A Linear weight ``[N, K]`` -> (packed ``uint8 [N, blocks, block/2]``, scales
    ``[N, blocks]``, the dequantized weight ``[N, K]`` that MatMulNBits computes with,
    or None with ``dequantize=False``).

    ``K`` is zero-padded to whole blocks; the padding dequantizes to zero. Rows are
    quantized a group at a time, each converted to float32 only then: a weight mapped
    from a checkpoint in bfloat16 is never held whole in float32.
    """
    n, k = weight.shape
    blocks = -(-k // block)
    packed = np.empty((n, blocks, block // 2), dtype=np.uint8)
    scales = np.empty((n, blocks), dtype=np.float32)
    dequant = torch.empty((n, k), dtype=weight.dtype) if dequantize else None
    step = max(1, _ROWS_ELEMENTS // max(1, blocks * block))
    for r in range(0, n, step):
        p, sc, d = _quantize_rows(weight[r:r + step], block, dequantize)
        packed[r:r + step], scales[r:r + step] = p, sc
        if dequant is not None and d is not None:
            dequant[r:r + step] = d
    return packed, scales, dequant


_ROWS_ELEMENTS = 4 * 2**20  # float32 elements quantized at once (16 MB)


def _quantize_rows(weight: torch.Tensor, block: int, dequantize: bool,
                   ) -> tuple[np.ndarray, np.ndarray, torch.Tensor | None]:
    w = weight.detach().to(torch.float32)
    n, k = w.shape
    blocks = -(-k // block)
    if k % block:
        padded = torch.zeros(n, blocks * block, dtype=torch.float32)
        padded[:, :k] = w
        w = padded
    grouped = w.contiguous().reshape(n, blocks, block)
    high, low = grouped.amax(dim=-1, keepdim=True), grouped.amin(dim=-1, keepdim=True)
    # The largest-magnitude weight, with its sign (the larger one on a tie).
    scale = torch.where(high >= -low, high, low) / -8.0
    # An all-zero block: any scale works; 1 keeps the division finite.
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    steps = grouped / safe  # then in place: one temporary for the rows
    q = steps.round_().clamp_(-8, 7).add_(8).to(torch.uint8)
    del steps
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).numpy()
    dequant = None
    if dequantize:
        dequant = ((q.to(torch.float32) - 8) * scale).reshape(n, blocks * block)[:, :k]
        dequant = dequant.to(weight.dtype)
    return packed, scale.reshape(n, blocks).numpy(), dequant


def quantize_model(model: ir.Model, block: int = BLOCK, accuracy_level: int = 0) -> list[str]:
    """Replaces each MatMul by a constant ``[K, N]`` float32 weight with MatMulNBits;
    returns the names of the weights it quantized."""
    graph = model.graph
    done: list[str] = []
    made: dict[str, tuple[ir.Value, ir.Value]] = {}
    for node in list(graph):
        if node.op_type != "MatMul" or node.domain:
            continue
        a, b = node.inputs
        if a is None or b is None or b.const_value is None or b.dtype != ir.DataType.FLOAT:
            continue
        if b.shape is None or len(b.shape) != 2 or a.dtype != ir.DataType.FLOAT:
            continue
        k, n = b.const_value.shape.numpy()
        if k < block or n < 1 or graph.outputs.count(b) or not _only_matmuls(b):
            continue
        name = b.name or f"w{len(done)}"
        if name not in made:
            # Quantized when saved (in the writer's thread), from the [N, K] rows.
            job = _Job(_rows(b), block)
            blocks = -(-int(k) // block)
            made[name] = (
                _lazy_initializer(graph, f"{name}.int4", job.packed,
                                  ir.DataType.UINT8, (int(n), blocks, block // 2)),
                _lazy_initializer(graph, f"{name}.scales", job.scales,
                                  ir.DataType.FLOAT, (int(n), blocks)))
            done.append(name)
        packed_v, scales_v = made[name]
        new = ir.node("MatMulNBits", [a, packed_v, scales_v],
                      {"K": k, "N": n, "bits": BITS, "block_size": block,
                       "accuracy_level": accuracy_level},
                      domain=MS_DOMAIN, name=f"{node.name or name}_nbits")
        out = new.outputs[0]
        old = node.outputs[0]
        out.name, out.dtype, out.shape = old.name, ir.DataType.FLOAT, old.shape
        old.name = None
        graph.insert_before(node, new)
        ir.convenience.replace_all_uses_with(old, out, replace_graph_outputs=True)
        graph.remove(node, safe=True)
    for name in done:  # the float weights are no longer read
        if name in graph.initializers and not graph.initializers[name].uses():
            del graph.initializers[name]
    if done:
        graph.opset_imports[MS_DOMAIN] = 1
        model.opset_imports[MS_DOMAIN] = 1
    return done


class _Job:
    """One weight's quantization, run once for its two initializers (packed, scales)."""

    def __init__(self, rows: Callable[[], torch.Tensor], block: int) -> None:
        self.rows, self.block = rows, block
        self.result: tuple[np.ndarray, np.ndarray] | None = None
        self.taken: set[int] = set()

    def __call__(self) -> tuple[np.ndarray, np.ndarray]:
        if self.result is None:
            packed, scales, _ = quantize_rtn(self.rows(), self.block, dequantize=False)
            self.result = (packed, scales.astype(np.float32))
        return self.result

    def _take(self, i: int) -> np.ndarray:
        out = self()[i]
        self.taken.add(i)
        if len(self.taken) == 2:  # both written: not kept (a later save computes it again)
            self.result, self.taken = None, set()
        return out

    def packed(self) -> np.ndarray:
        return self._take(0)

    def scales(self) -> np.ndarray:
        return self._take(1)


def _rows(b: ir.Value) -> Callable[[], torch.Tensor]:
    """The MatMul weight ``[K, N]`` as Linear's ``[N, K]``: the parameter itself where
    the graph holds its lazy transpose, the parameters joined where _fuse joined them."""
    src = b.meta.get("pt2onnx.transpose_src")
    if isinstance(src, torch.Tensor):
        return lambda: src.detach()
    rows = b.meta.get("pt2onnx.rows")
    stored = getattr(rows, "stored", None)
    if callable(stored):  # export-llm's checkpoint: as stored, converted by rows
        return stored
    if callable(rows):
        return rows
    tensor = b.const_value
    assert tensor is not None
    return lambda: torch.from_numpy(np.ascontiguousarray(tensor.numpy())).t()


def _lazy_initializer(graph: ir.Graph, name: str, make: Callable[[], np.ndarray],
                      dtype: ir.DataType, shape: tuple[int, ...]) -> ir.Value:
    lazy = ir.LazyTensor(lambda: ir.tensor(make(), name=name), dtype=dtype,
                         shape=ir.Shape(shape), name=name)
    value = ir.Value(name=name, const_value=lazy)
    value.dtype, value.shape = dtype, ir.Shape(shape)
    graph.register_initializer(value)
    return value


def _only_matmuls(value: ir.Value) -> bool:
    return all(user.op_type == "MatMul" and not user.domain and idx == 1
               for user, idx in value.uses())
