"""A fuzz program: leaves (inputs, parameters, buffers), statements, outputs.

A program renders to a standalone Python source string (``Program`` module,
``make_inputs(b)``, ``dynamic_shapes()``), so a failure reproduces from its text.
A dim is an affine pair ``(c, d)``: ``c * B + d`` with ``B`` the program's one dynamic
dim (``c == 0`` for a static dim).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

Dim = tuple[int, int]
Shape = tuple[Dim, ...]

DTYPES = {
    torch.float32: "torch.float32", torch.float16: "torch.float16",
    torch.int64: "torch.int64", torch.int32: "torch.int32", torch.bool: "torch.bool",
}
B_MIN, B_MAX = 4, 64
# A dim that is the second symbol C (an input that broadcasts against B: C is 1 or B at
# run time; generator.with_second_dim).
C_DIM: Dim = (-1, 0)


def at(shape: Shape, b: int) -> tuple[int, ...]:
    """The concrete shape at ``B = b``."""
    return tuple(c * b + d for c, d in shape)


def static(*sizes: int) -> Shape:
    return tuple((0, s) for s in sizes)


def dim_src(dim: Dim) -> str:
    c, d = dim
    if dim == C_DIM:
        return "c"
    if c == 0:
        return str(d)
    text = "b" if c == 1 else f"{c} * b"
    return text + (f" + {d}" if d > 0 else f" - {-d}" if d < 0 else "")


def shape_src(shape: Shape) -> str:
    inner = ", ".join(dim_src(x) for x in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


@dataclass
class Leaf:
    """An input, parameter, buffer or submodule. ``kind`` of data: normal, int, bool, or
    index (int64 in ``[0, bound)``; unique along ``unique_dim`` when set). A submodule
    (``m``) is built by ``ctor``, Python source such as ``torch.nn.GRU(4, 3)``; its
    shape and dtype are unused."""

    name: str  # x0 (input), p0 (parameter), b0 (buffer), m0 (submodule)
    shape: Shape
    dtype: torch.dtype
    data: str = "normal"
    bound: Dim = (0, 1)
    unique_dim: int | None = None
    ctor: str = ""

    @property
    def ref(self) -> str:
        return self.name if self.name.startswith("x") else f"self.{self.name}"

    @property
    def dynamic(self) -> bool:
        return any(c for c, _ in self.shape)

    def make_src(self, sizes: bool = True) -> str:
        shape = shape_src(self.shape) if sizes else shape_src(self.shape).replace("b", "3")
        dt = DTYPES[self.dtype]
        if self.data == "index":
            return f"_index({shape}, {dim_src(self.bound)}, {self.unique_dim}, g)"
        return f"_{self.data}({shape}, {dt}, g)"


@dataclass
class Stmt:
    """One line of ``forward``: ``code`` uses the names in ``uses`` and defines ``out``
    (None for an in-place update). ``label`` names the op for coverage."""

    code: str
    out: str | None
    uses: tuple[str, ...]
    label: str
    view: bool = False


@dataclass
class Program:
    seed: int
    leaves: list[Leaf]
    stmts: list[Stmt]
    outputs: list[str]
    b: tuple[int, int] | None = None  # (example, second) sizes of B; None when static
    # The smallest size declared for B. At 1 (the edge programs, see generator.py's
    # with_edges) the program is also run with B = 1, and its example may be 1.
    b_min: int = B_MIN
    half: bool = False  # float16 values flow through: looser tolerances
    # The second symbol's example: None (no C), 1, or "b" (the same size as B).
    c: int | str | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    # Lines of ``__init__`` that set up state the statements keep between calls (a
    # cache keyed by shape: generator version 2, ops_sizes.py).
    state: list[str] = field(default_factory=list)
    # A size of B at which eager calls the model once before the export (a stale
    # cache); None: the export gets the model as built.
    warmup: int | None = None

    @property
    def dynamic(self) -> bool:
        return self.b is not None

    def replace(self, **kw: Any) -> Program:
        return dataclasses.replace(self, **kw)

    def used_leaves(self) -> list[Leaf]:
        used = {u for s in self.stmts for u in s.uses} | set(self.outputs)
        return [leaf for leaf in self.leaves if leaf.name in used]

    def inputs(self) -> list[Leaf]:
        return [x for x in self.used_leaves() if x.name.startswith("x")]

    def source(self) -> str:
        return render(self)


HELPERS = '''
def _normal(shape, dtype, g):
    return (torch.randn(shape, generator=g) * 2).to(dtype)


def _int(shape, dtype, g):
    return torch.randint(-5, 6, shape, generator=g).to(dtype)


def _bool(shape, dtype, g):
    return torch.rand(shape, generator=g) < 0.5


def _index(shape, bound, unique_dim, g):
    """int64 indices in [0, bound), distinct along unique_dim when it is set."""
    if unique_dim is None:
        return torch.randint(0, max(bound, 1), shape, generator=g) if bound else torch.zeros(
            shape, dtype=torch.int64)
    full = list(shape)
    full[unique_dim] = bound
    perm = torch.argsort(torch.rand(full, generator=g), dim=unique_dim)
    return perm.narrow(unique_dim, 0, shape[unique_dim])
'''


def render(p: Program) -> str:
    used = p.used_leaves()
    inputs = [x for x in used if x.name.startswith("x")]
    lines = [f'"""pt2onnx fuzz program (seed {p.seed})."""', ""]
    if any("math." in s.code for s in p.stmts):
        lines.append("import math")
    lines += ["import torch", "import torch.nn.functional as F  # noqa: F401", ""]
    lines.append(f"SEED = {p.seed}")
    lines.append(f"B = {p.b!r}  # (example, second) size of the dynamic dim; None: static")
    lines.append(f"HALF = {p.half!r}  # float16 values flow through (looser tolerance)")
    lines.append(f"B_MIN = {p.b_min!r}  # the smallest declared size of B (1: also run at 1)")
    if p.c is not None:
        lines.append(f"C = {p.c!r}  # the example of the second dynamic dim: 1, or 'b' (= B)")
    if p.warmup is not None:
        lines.append(f"WARMUP = {p.warmup!r}  # eager calls the model once at B = WARMUP before "
                     "the export")
    lines += HELPERS.splitlines()
    lines += ["", "", "class Program(torch.nn.Module):", "    def __init__(self):",
              "        super().__init__()", "        g = torch.Generator().manual_seed(SEED + 1)"]
    for leaf in used:
        if leaf.name.startswith("p"):
            lines.append(f"        self.{leaf.name} = torch.nn.Parameter({leaf.make_src()})")
        elif leaf.name.startswith("b"):
            lines.append(f'        self.register_buffer("{leaf.name}", {leaf.make_src()})')
        elif leaf.name.startswith("m"):
            lines.append(f"        torch.manual_seed(SEED + {leaf.name[1:]})")
            lines.append(f"        self.{leaf.name} = {leaf.ctor}")
    lines += [f"        {line}" for line in p.state]
    args = ", ".join(["self"] + [x.name for x in inputs])
    lines += ["", f"    def forward({args}):"]
    for s in p.stmts:
        lines += [f"        {line}" for line in s.code.split("\n")]
    outs = ", ".join(p.outputs) + ("," if len(p.outputs) == 1 else "")
    lines += [f"        return ({outs})", "", ""]
    b0 = p.b[0] if p.b else 5
    if p.c is None:
        lines += [f"def make_inputs(b={b0}):", "    g = torch.Generator().manual_seed(SEED)"]
    else:  # C is 1 or B at run time; the example's by default
        lines += [f"def make_inputs(b={b0}, c=None):",
                  "    c = (b if C == 'b' else C) if c is None else c",
                  "    g = torch.Generator().manual_seed(SEED)"]
    for x in inputs:
        lines.append(f"    {x.name} = {x.make_src()}")
    names = ", ".join(x.name for x in inputs) + ("," if len(inputs) == 1 else "")
    lines += [f"    return ({names})", "", ""]
    lines += ["def dynamic_shapes():", "    if B is None:", "        return None",
              f'    b = torch.export.Dim("B", min=B_MIN, max={B_MAX})']
    if p.c is not None:
        lines.append(f'    c = torch.export.Dim("C", min=1, max={B_MAX})')
    specs = []
    for x in inputs:
        axes = {i: ("c" if dim == C_DIM else "b") for i, dim in enumerate(x.shape) if dim[0]}
        specs.append("{" + ", ".join(f"{i}: {n}" for i, n in axes.items()) + "}"
                     if axes else "None")
    inner = ", ".join(specs) + ("," if len(specs) == 1 else "")
    lines += [f"    return ({inner})", ""]
    return "\n".join(lines)


def load(source: str) -> dict[str, Any]:
    """Executes a program's source; returns its namespace (Program, make_inputs, ...)."""
    namespace: dict[str, Any] = {"__name__": "pt2onnx_fuzz_program"}
    exec(compile(source, "<fuzz program>", "exec"), namespace)
    return namespace
