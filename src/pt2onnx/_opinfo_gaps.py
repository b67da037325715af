"""The OpInfo entries pt2onnx does not pass, each with its cause and reason.

``benchmarks/opinfo_compare.py --all`` runs every entry of torch's ``op_db`` (first two
float32 samples, default opset); its latest result is kept in
``benchmarks/results/opinfo_all.json``, and tests/test_docs_ops.py checks that the
entries failing there are exactly the ones listed here. docs/ops.md prints this list,
grouped by cause.
"""

from __future__ import annotations

CAUSES: dict[str, str] = {
    "complex": "Complex dtypes: onnxruntime has no complex tensor kernels and ONNX has no "
               "complex arithmetic ops.",
    "random": "Random output that the OpInfo check cannot compare.",
    "sparse": "Sparse layouts: ONNX tensors are dense; torch.export captures no sparse "
              "tensors.",
    "gpu": "GPU-only: the op runs only on CUDA or ROCm devices.",
    "iterative": "Not expressible in ONNX as an exact graph: iterative eigen/singular value "
                 "solvers (LAPACK's gesdd, geev, syevd) have no closed form; an ONNX Loop "
                 "would converge differently from LAPACK (signs, order, accuracy).",
    "onnx": "Not expressible in ONNX for another reason, given with the entry.",
    "todo": "Expressible, not done yet.",
}

# OpInfo entry name -> (cause, reason).
GAPS: dict[str, tuple[str, str]] = {}

MEASURED = ""
