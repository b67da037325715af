"""Minimization: drop statements and shrink shapes while the same failure class persists;
then write a standalone reproduction."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from pt2onnx.testing.fuzz.generator import check_eager
from pt2onnx.testing.fuzz.oracle import Outcome, check
from pt2onnx.testing.fuzz.program import C_DIM, Leaf, Program, Stmt


def _drop(p: Program, i: int) -> Program | None:
    """p without statement i and every statement that depends on its value."""
    gone: set[str] = set()
    keep: list[Stmt] = []
    for j, s in enumerate(p.stmts):
        if j == i or gone.intersection(s.uses):
            if s.out:
                gone.add(s.out)
            continue
        keep.append(s)
    if not keep:
        return None
    outputs = [o for o in p.outputs if o not in gone]
    if not outputs:
        outs = [s.out for s in keep if s.out]
        if not outs:
            return None
        outputs = [outs[-1]]
    return p.replace(stmts=keep, outputs=outputs)


def _variants(p: Program) -> list[Program]:
    """Smaller programs, the biggest reductions first."""
    out: list[Program] = []
    if p.b is not None:  # a static program is simpler
        b0 = p.b[0]
        c0 = b0 if p.c == "b" or not isinstance(p.c, int) else p.c  # C's example size
        leaves = [dataclasses.replace(
            x, shape=tuple((0, c0) if (c, d) == C_DIM else (0, c * b0 + d)
                           for c, d in x.shape),
            bound=(0, x.bound[0] * b0 + x.bound[1])) for x in p.leaves]
        out.append(p.replace(b=None, c=None, leaves=leaves))
    if len(p.outputs) > 1:
        out += [p.replace(outputs=[o]) for o in p.outputs]
    for i in reversed(range(len(p.stmts))):
        q = _drop(p, i)
        if q is not None:
            out.append(q)
    for k, leaf in enumerate(p.leaves):
        for d, (c, size) in enumerate(leaf.shape):
            if c or size <= 1:
                continue
            for new in sorted({1, size // 2, size - 1}):
                shape = leaf.shape[:d] + ((0, new),) + leaf.shape[d + 1:]
                leaves = list(p.leaves)
                leaves[k] = dataclasses.replace(leaf, shape=shape)
                out.append(p.replace(leaves=leaves))
    return out


def minimize(p: Program, exporter: str, cls: str, max_checks: int = 300,
             same: Callable[[Outcome], bool] | None = None) -> Program:
    """The smallest program found that still fails with ``cls``."""
    def still(q: Program) -> bool:
        if check_eager(q) is not None:
            return False
        o = check(q, exporter)
        return o.cls == cls and (same is None or same(o))

    checks = 0
    progress = True
    while progress and checks < max_checks:
        progress = False
        for q in _variants(p):
            checks += 1
            if still(q):
                p = q
                progress = True
                break
            if checks >= max_checks:
                break
    p.half = any(x.dtype.is_floating_point and x.dtype.itemsize == 2 for x in p.used_leaves()) \
        or (p.half and any("float16" in s.code for s in p.stmts))
    return p


FOOTER = '''

# Found by the differential fuzzer (pt2onnx.testing.fuzz): {cls} with {exporter}.
# {detail}
EXPORTER = {exporter!r}
FOUND = {cls!r}
XFAIL = None  # or the reason, for a bug not fixed yet (a strict xfail in test_corpus)


if __name__ == "__main__":
    from pt2onnx.testing.fuzz.oracle import check_namespace

    print(check_namespace(globals(), EXPORTER))
'''


def save(p: Program, outcome: Outcome, exporter: str, directory: str | Path) -> Path:
    """Writes the reproduction ``<class>_<seed>.py`` under directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tag = "" if exporter == "pt2onnx" else "torch_onnx_"
    path = directory / f"{tag}{outcome.cls}_{p.seed}.py"
    detail = " ".join(outcome.detail.split())[:300]
    path.write_text(p.source() + FOOTER.format(cls=outcome.cls, exporter=exporter,
                                               detail=detail))
    return path


def leaves_used(p: Program) -> list[Leaf]:
    return p.used_leaves()
