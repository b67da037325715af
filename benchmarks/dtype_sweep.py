"""Every OpInfo entry of tests/rules/opinfo_table.py in the narrow dtypes the table does
not test (int8, int16, uint8, bfloat16, bool; those torch supports for the op on CPU):
sample 0 of each, exported with pt2onnx, loaded and run in onnxruntime (CPU), compared
with eager. Prints one line per failure and a count per outcome.

    PYTHONPATH=src:tests/rules python benchmarks/dtype_sweep.py [--only NAME ...]
        [--masks] [--dtypes bfloat16 float16] [--samples N] [--precision]

``--masks`` sweeps the entries whose ops take or make a mask (attention, masked_fill,
where, the masked.* reductions, ...; issue 39); ``--dtypes`` picks the dtypes (default:
int8 int16 uint8 bfloat16 bool); ``--samples`` runs the first N samples of each entry,
not only sample 0 (sdpa's first sample has no mask); ``--precision`` exports a floating
sample with ``precision=`` its dtype (so softmax, the norms and the reductions compute in
float32, as a converted model's do). A dtype the table itself tests for an entry is
skipped.

Outcomes: ok, eager (eager itself fails on the sample: not counted), type (the export's
type check refuses: a node breaks its ONNX schema's type constraints), export (pt2onnx
refuses otherwise), load (onnxruntime will not load the file: a missing kernel or an
invalid type), run (onnxruntime fails at run time), mismatch.
"""

from __future__ import annotations

import argparse
import collections
import signal
import sys
import warnings

import opinfo_harness as harness
import opinfo_table
import torch

import pt2onnx

DTYPES = (torch.int8, torch.int16, torch.uint8, torch.bfloat16, torch.bool)
# OpInfo entries whose ops take or make a mask, or fill with a dtype's extreme (issue 39).
MASKS = (
    "nn.functional.scaled_dot_product_attention", "nn.functional.multi_head_attention_forward",
    "masked_fill", "masked_scatter", "masked_select", "where", "index_put", "tril", "triu",
    "_unsafe_masked_index", "_unsafe_masked_index_put_accumulate", "masked.amax",
    "masked.amin", "masked.argmax", "masked.argmin", "masked.cumsum", "masked.log_softmax",
    "masked.logaddexp", "masked.logsumexp", "masked.mean", "masked.prod", "masked.softmax",
    "masked.softmin", "masked.std", "masked.sum", "masked.var", "softmax", "log_softmax",
    "cummax", "cummin", "logcumsumexp", "nn.functional.embedding_bag", "scatter_reduce.amax",
    "scatter_reduce.amin", "nanmedian", "nn.functional.max_pool2d",
    "nn.functional.pad.constant", "constant_pad_nd",
)


def _float32_inputs(proto: object) -> object:
    """A copy of ``proto`` whose bfloat16 inputs are fed as float32 (onnxruntime's
    Python API takes no bfloat16 arrays) and cast inside; exact for bfloat16 values."""
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(proto)  # type: ignore[arg-type]
    casts = []
    for inp in model.graph.input:
        if inp.type.tensor_type.elem_type != onnx.TensorProto.BFLOAT16:
            continue
        inner = f"{inp.name}__bfloat16"
        for node in model.graph.node:
            node.input[:] = [inner if i == inp.name else i for i in node.input]
        casts.append(onnx.helper.make_node("Cast", [inp.name], [inner],
                                           to=onnx.TensorProto.BFLOAT16))
        inp.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    for c in reversed(casts):
        model.graph.node.insert(0, c)
    return model


class _Timeout(Exception):
    pass


def _alarm(*_: object) -> None:
    raise _Timeout


def one(info: object, dtype: torch.dtype, case: object, sample: object,
        precision: bool = False) -> tuple[str, str]:
    module, tensors = harness.wrap_sample(info.op, sample)  # type: ignore[attr-defined]
    try:
        expected = harness.eager(module, tensors)
    except Exception as e:
        return "eager", f"{type(e).__name__}: {str(e)[:80]}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog = pt2onnx.export(module, tensors, precision=dtype if precision
                                  and dtype.is_floating_point else "keep")
    except pt2onnx.TypeConstraintError as e:
        return "type", " ".join(str(e).splitlines()[1:3])[:200]
    except Exception as e:
        return "export", f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    import onnxruntime as ort

    proto = _float32_inputs(prog.model_proto)
    if dtype == torch.bfloat16:
        tensors = tuple(t.float() if t.dtype == torch.bfloat16 else t for t in tensors)
    try:
        ort.InferenceSession(harness.float32_outputs(proto).SerializeToString(),
                             providers=["CPUExecutionProvider"])
    except Exception as e:
        return "load", str(e).splitlines()[0][-160:]
    try:
        actual = harness.run_onnx(proto, tensors)
    except Exception as e:
        return "run", str(e).splitlines()[0][-160:]
    atol, rtol = case.tolerance(dtype)  # type: ignore[attr-defined]
    if dtype == torch.bfloat16:
        atol, rtol = max(atol, 1e-2), max(rtol, 2e-2)
    outcome = harness.compare_outputs(expected, actual, atol, rtol,
                                      shape_only=case.shape_only)  # type: ignore[attr-defined]
    return ("ok", "") if outcome.ok else ("mismatch", outcome.message[:160])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--masks", action="store_true", help="the entries of MASKS")
    parser.add_argument("--dtypes", nargs="*", help="torch dtype names")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--precision", action="store_true",
                        help="export with precision= the sample's dtype")
    ns = parser.parse_args()
    dtypes = tuple(getattr(torch, d) for d in ns.dtypes) if ns.dtypes else DTYPES
    only = set(ns.only or ()) | (set(MASKS) if ns.masks else set())
    signal.signal(signal.SIGALRM, _alarm)
    counts: collections.Counter[str] = collections.Counter()
    db = harness.op_db_by_name()
    for case in opinfo_table.CASES:
        if only and case.name not in only:
            continue
        info = db.get(case.name)
        if info is None:
            continue
        supported = info.supported_dtypes("cpu")
        for dtype in dtypes:
            if dtype in case.dtypes or dtype not in supported:
                continue
            try:
                drawn = list(harness.samples(info, dtype, ns.samples))
            except Exception as e:
                drawn, counts["eager"] = [], counts["eager"] + 1
                print(f"eager    {case.name} {dtype}: sample: {type(e).__name__}")
            for i, sample in enumerate(drawn):
                signal.alarm(ns.timeout)
                try:
                    kind, detail = one(info, dtype, case, sample, ns.precision)
                except _Timeout:
                    kind, detail = "timeout", f"over {ns.timeout}s"
                finally:
                    signal.alarm(0)
                counts[kind] += 1
                if kind != "ok":
                    print(f"{kind:8} {case.name} {str(dtype).removeprefix('torch.')} "
                          f"#{i}: {detail}", flush=True)
    total = sum(counts.values())
    print(f"total {total} (op, dtype) pairs: " + ", ".join(
        f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
