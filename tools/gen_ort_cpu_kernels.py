"""Writes src/pt2onnx/passes/ort_cpu_kernels.json: the types onnxruntime's CPU build has
kernels for, per ONNX op, read from the installed onnxruntime's kernel registry.

Run it with the onnxruntime pinned in constraints.txt; tests/test_ort_cpu_types.py
checks the table against the installed onnxruntime.

    python tools/gen_ort_cpu_kernels.py > src/pt2onnx/passes/ort_cpu_kernels.json
"""

from __future__ import annotations

import json

import onnx
import onnxruntime
from onnxruntime.capi import onnxruntime_pybind11_state as C

FIRST_OPSET, LAST_OPSET = 17, onnx.defs.onnx_opset_version()


def _since_versions(op: str) -> set[int]:
    """The schema versions a node of ``op`` can have at the opsets pt2onnx writes."""
    out = set()
    for opset in range(FIRST_OPSET, LAST_OPSET + 1):
        try:
            out.add(onnx.defs.get_schema(op, opset, "").since_version)
        except onnx.defs.SchemaError:
            pass
    return out


def _merge(defs: list[dict[str, frozenset[str]]]) -> list[dict[str, frozenset[str]]]:
    """Kernel defs that differ in one constraint's types only become one."""
    defs = list(defs)
    changed = True
    while changed:
        changed = False
        for i in range(len(defs)):
            for j in range(i + 1, len(defs)):
                a, b = defs[i], defs[j]
                if a.keys() != b.keys():
                    continue
                differ = [k for k in a if a[k] != b[k]]
                if len(differ) <= 1:
                    merged = dict(a)
                    for k in differ:
                        merged[k] = a[k] | b[k]
                    defs[i] = merged
                    del defs[j]
                    changed = True
                    break
            if changed:
                break
    return defs


def main() -> None:
    table: dict[str, list[tuple[int, int, dict[str, str]]]] = {}
    grouped: dict[tuple[str, int, int], list[dict[str, frozenset[str]]]] = {}
    for k in C.get_all_opkernel_def():
        if k.provider != "CPUExecutionProvider" or k.domain != "":
            continue
        start, end = k.version_range
        if not any(start <= v <= end for v in _since_versions(k.op_name)):
            continue
        types = {name: frozenset(t.removeprefix("tensor(").removesuffix(")") for t in ts
                                 if t.startswith("tensor("))
                 for name, ts in k.type_constraints.items()}
        grouped.setdefault((k.op_name, start, end), []).append(types)
    for (op, start, end), defs in sorted(grouped.items()):
        for d in _merge(defs):
            table.setdefault(op, []).append(
                (start, min(end, 10_000), {n: " ".join(sorted(ts)) for n, ts in sorted(d.items())}))
    print(dump(onnxruntime.__version__, table), end="")


def dump(version: str, table: dict[str, list[tuple[int, int, dict[str, str]]]]) -> str:
    """The JSON text of the table: one op a line, so that a new onnxruntime's diff is
    read op by op."""
    rows = ",\n".join(f"  {json.dumps(op)}: {json.dumps(table[op], sort_keys=True)}"
                      for op in sorted(table))
    return f'{{"onnxruntime": {json.dumps(version)},\n "kernels": {{\n{rows}\n}}}}\n'


if __name__ == "__main__":
    main()
