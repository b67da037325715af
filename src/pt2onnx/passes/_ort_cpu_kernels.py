"""The types onnxruntime's CPU build has kernels for, per ONNX op (default domain):
op -> [(first version, last version, {type constraint: space-separated types})], one
entry per kernel. The table is data, ``ort_cpu_kernels.json`` beside this file, written
by tools/gen_ort_cpu_kernels.py from the onnxruntime pinned in constraints.txt; do not
edit it by hand."""

from __future__ import annotations

import json
from pathlib import Path

_DATA = json.loads((Path(__file__).with_name("ort_cpu_kernels.json")).read_text())

ORT_VERSION: str = _DATA["onnxruntime"]

KERNELS: dict[str, list[tuple[int, int, dict[str, str]]]] = {
    op: [(first, last, types) for first, last, types in kernels]
    for op, kernels in _DATA["kernels"].items()}
