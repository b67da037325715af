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
GAPS: dict[str, tuple[str, str]] = {
    'chalf': ('complex',
        'complex32 (chalf) has no ONNX type, not even as a (real, imag) pair of float16 that onnxruntime could run; cast to complex64 first'),
    'hash_tensor': ('onnx',
        "aten::hash_tensor xors the raw bits of every element; reading a float's bits needs BitCast, which ONNX has only from opset 26"),
    'jiterator_2inputs_2outputs': ('gpu',
        "torch's jiterator compiles CUDA kernels at run time; eager fails on a CPU-only machine"),
    'jiterator_4inputs_with_extra_args': ('gpu',
        "torch's jiterator compiles CUDA kernels at run time; eager fails on a CPU-only machine"),
    'jiterator_binary': ('gpu',
        "torch's jiterator compiles CUDA kernels at run time; eager fails on a CPU-only machine"),
    'jiterator_binary_return_by_ref': ('gpu',
        "torch's jiterator compiles CUDA kernels at run time; eager fails on a CPU-only machine"),
    'jiterator_unary': ('gpu',
        "torch's jiterator compiles CUDA kernels at run time; eager fails on a CPU-only machine"),
    'linalg.eig': ('iterative',
        'general eigendecomposition (aten::linalg_eig, complex output): iterative QR algorithm, no exact ONNX formulation'),
    'linalg.eigh': ('iterative',
        'needs a symmetric eigendecomposition (aten::_linalg_eigh): iterative, no exact ONNX formulation'),
    'linalg.eigvals': ('iterative',
        'general eigendecomposition (aten::linalg_eig, complex output): iterative QR algorithm, no exact ONNX formulation'),
    'linalg.eigvalsh': ('iterative',
        'needs a symmetric eigendecomposition (aten::_linalg_eigh): iterative, no exact ONNX formulation'),
    'linalg.householder_product': ('todo',
        "aten::linalg_householder_product (orgqr): a Loop of Householder reflections like the QR rule's; not done yet"),
    'linalg.lstsq': ('iterative',
        "aten::linalg_lstsq's default driver (gelsy) uses rank-revealing QR with column pivoting and a rank cutoff; its minimum-norm solution needs an SVD"),
    'linalg.lstsq.grad_oriented': ('iterative',
        "aten::linalg_lstsq's default driver (gelsy) uses rank-revealing QR with column pivoting and a rank cutoff; its minimum-norm solution needs an SVD"),
    'linalg.matrix_rank.hermitian': ('iterative',
        'needs a symmetric eigendecomposition (aten::_linalg_eigh): iterative, no exact ONNX formulation'),
    'linalg.pinv': ('iterative',
        'aten::linalg_pinv is computed from an SVD (or eigh for hermitian): iterative, no exact ONNX formulation'),
    'linalg.pinv.hermitian': ('iterative',
        'aten::linalg_pinv is computed from an SVD (or eigh for hermitian): iterative, no exact ONNX formulation'),
    'linalg.pinv.singular': ('iterative',
        'aten::linalg_pinv is computed from an SVD (or eigh for hermitian): iterative, no exact ONNX formulation'),
    'linalg.svd': ('iterative',
        "needs singular vectors (U and Vh of aten::_linalg_svd): their signs, and their order within ties, follow LAPACK's algorithm; pt2onnx exports singular values only (one-sided Jacobi)"),
    'matrix_exp': ('todo',
        "aten::linalg_matrix_exp: torch's scaling-and-squaring picks the Pade degree from the matrix norm at run time; expressible with If/Loop, not done yet"),
    'nn.functional.ctc_loss': ('todo',
        'aten::_ctc_loss: the forward (alpha) recursion over time as an ONNX Loop with log-sum-exp; not done yet'),
    'ormqr': ('todo',
        "aten::ormqr: applying geqrf's reflections to another matrix, a Loop like the QR rule's; not done yet"),
    'pca_lowrank': ('iterative',
        "needs singular vectors (U and Vh of aten::_linalg_svd): their signs, and their order within ties, follow LAPACK's algorithm; pt2onnx exports singular values only (one-sided Jacobi) (after a randomized range finder)"),
    'pinverse': ('iterative',
        'aten::linalg_pinv is computed from an SVD: iterative, no exact ONNX formulation'),
    'sparse.mm.reduce': ('sparse',
        "sparse CSR input; the OpInfo harness cannot even wrap it (torch: 'Sparse CSR tensors do not have is_contiguous')"),
    'sparse.sampled_addmm': ('sparse',
        "sparse CSR input; the OpInfo harness cannot even wrap it (torch: 'Sparse CSR tensors do not have is_contiguous')"),
    'svd': ('iterative',
        "needs singular vectors (U and Vh of aten::_linalg_svd): their signs, and their order within ties, follow LAPACK's algorithm; pt2onnx exports singular values only (one-sided Jacobi)"),
    'svd_lowrank': ('iterative',
        "needs singular vectors (U and Vh of aten::_linalg_svd): their signs, and their order within ties, follow LAPACK's algorithm; pt2onnx exports singular values only (one-sided Jacobi) (after a randomized range finder)"),
    'to_sparse': ('sparse',
        'returns a sparse COO tensor (aten::_to_sparse); ONNX has no sparse graph values'),
}

MEASURED = (
    "On torch 2.13.0 (677 entries, opset 21, one run, both exporters on the same samples) "
    "pt2onnx passes 648 (95.7%) and torch.onnx (dynamo) 486 (71.8%); no entry that "
    "torch.onnx passes fails in pt2onnx. The float16 column (`--dtypes float32,float16`, "
    "the 546 entries with float16 on CPU, tolerance 1e-2): pt2onnx 531 (97.3%), torch.onnx "
    "439 (80.4%); pt2onnx's float16 failures beyond the float32 ones below are ties in "
    "`sort`/`argsort` (onnxruntime's TopK orders equal float16 values differently), "
    "`complex`/`view_as_complex` (complex32) and `nn.functional.soft_margin_loss` "
    "(an overflow to inf where torch stays finite). On torch 2.15.0 (678 entries, "
    "`benchmarks/results/opinfo_all_torch2.15.json`) pt2onnx passes 643 (94.8%): the same "
    "failures, less `cholesky` and `qr` (gone from op_db), plus `linalg.matrix_sqrth` and "
    "`linalg.polar`, which need an eigen or singular value decomposition."
)
