"""Builds random valid programs by construction.

Every statement is evaluated on meta tensors as it is drawn, at the dynamic dim's
minimum, its example size and its second size; a statement that torch refuses, or whose
output shape is not affine in ``B``, is not kept. A program with a dynamic dim also
evaluates each statement on fake tensors whose dim is a symbol ranging over
``[B_MIN, B_MAX]``, as torch.export will: a statement that adds a guard false somewhere
in that range (it fixes ``B`` or narrows its range) is not kept either. Shapes, dtypes
and aliasing (which values are views of which, which may be written in place) are
tracked per value.
"""

from __future__ import annotations

import math
import random
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from pt2onnx import _compat
from pt2onnx.testing.fuzz.program import (
    B_MAX,
    B_MIN,
    C_DIM,
    Dim,
    Leaf,
    Program,
    Shape,
    Stmt,
    at,
    load,
)

FLOATS = (torch.float32, torch.float16)
INTS = (torch.int64, torch.int32)
ALL_DTYPES = (torch.float32, torch.float32, torch.float32, torch.float16, torch.int64,
              torch.int32, torch.bool)


@dataclass
class Var:
    name: str
    shape: Shape
    dtype: torch.dtype
    base: str  # the value whose storage this one shares
    writable: bool  # may be updated in place (a value computed here, not an expand)
    half: bool  # float16 rounding reached it
    leaf: bool = False

    @property
    def ref(self) -> str:
        return f"self.{self.name}" if self.name[0] in "pbm" else self.name

    @property
    def rank(self) -> int:
        return len(self.shape)


class Rejected(Exception):
    pass


class _State(types.SimpleNamespace):
    """``self`` of the statements on meta values: attributes, and buffers registered
    as ``nn.Module`` does (the state a cache keyed by shape keeps)."""

    def register_buffer(self, name: str, value: Any, persistent: bool = True) -> None:
        setattr(self, name, value)


# What to draw next: set by pt2onnx.testing.fuzz.draws (the op tables register here).
_DRAW: Callable[[random.Random], Callable[[Builder], None]] | None = None
# What version 2 appends to a drawn program (ops_sizes.grow), also registered there.
_GROW: Callable[[Builder, Program], Program] | None = None
# The generator's versions. 1: the programs of the campaigns up to seed 2613. 2: the
# same programs, some of them followed by Python arithmetic on sizes and a cache keyed
# by shape (ops_sizes.py), drawn from a stream of their own.
VERSION = 2


def register_draw(draw: Callable[[random.Random], Callable[[Builder], None]],
                  grow: Callable[[Builder, Program], Program] | None = None) -> None:
    global _DRAW, _GROW
    _DRAW = draw
    _GROW = grow


class Builder:
    def __init__(self, seed: int, dynamic: bool | None = None, max_ops: int = 30) -> None:
        self.seed = seed
        self.rng = rng = random.Random(seed)
        if dynamic is None:
            dynamic = rng.random() < 0.35
        self.b: tuple[int, int] | None = None
        if dynamic:
            b0 = rng.choice((5, 6))
            self.b = (b0, b0 + rng.choice((2, 3, 5)))
        self.points: list[int] = [B_MIN, *self.b] if self.b else [5]
        self.leaves: list[Leaf] = []
        self.stmts: list[Stmt] = []
        self.vars: dict[str, Var] = {}
        self.envs = [self._env() for _ in self.points]
        self.symbolic = _Symbolic(self.b[0]) if self.b else None
        self.n = 0
        self.target = rng.randint(3, max_ops)

    @staticmethod
    def _env() -> dict[str, Any]:
        return {"torch": torch, "F": F, "math": math, "self": _State()}

    def init_state(self, lines: Sequence[str]) -> None:
        """Runs lines of ``__init__`` (``self.k = torch.empty(0)``) on every env."""
        for env in self.envs:
            with torch.device("meta"):
                for line in lines:
                    exec(line, {"torch": torch, "self": env["self"]})

    # -- names and leaves ------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def can_leaf(self, shape: Shape) -> bool:
        return all(d == (0, d[1]) or d == (1, 0) for d in shape)

    def leaf(self, shape: Shape, dtype: torch.dtype, kind: str | None = None,
             data: str | None = None, bound: Dim = (0, 1),
             unique_dim: int | None = None) -> Leaf:
        """A new input, parameter or buffer (not yet added: see ``add``)."""
        rng = self.rng
        dynamic = any(c for c, _ in shape)
        if dynamic and not self.can_leaf(shape):
            raise Rejected("no leaf of this shape")
        if bound[0] and not (bound == (1, 0)):
            raise Rejected("index bound must be B or static")
        if kind is None:
            choices = ["x", "x", "b"] + (["p"] if dtype in FLOATS else [])
            kind = "x" if dynamic or bound[0] else rng.choice(choices)
        if data is None:
            data = "normal" if dtype in FLOATS else "bool" if dtype == torch.bool else "int"
        return Leaf(self.fresh(kind), shape, dtype, data, bound, unique_dim)

    def _meta(self, leaf: Leaf, b: int) -> Any:
        if leaf.ctor:
            with torch.device("meta"):
                return eval(leaf.ctor, {"torch": torch})
        t = torch.empty(at(leaf.shape, b), dtype=leaf.dtype, device="meta")
        return torch.nn.Parameter(t) if leaf.name.startswith("p") else t

    # -- statements -------------------------------------------------------------------
    def add(self, code: str, label: str, uses: Sequence[str], out: str | None = None,
            leaves: Sequence[Leaf] = (), view_of: str | None = None,
            writable: bool = True, free: bool = False) -> Var | None:
        """Evaluates the statement on meta values at every size; keeps it when torch
        accepts it everywhere and its output shape is affine in B.

        ``free``: a statement whose sizes are Python arithmetic on sizes, or that keeps
        state keyed by shape (ops_sizes.py). It is kept whatever guards torch.export
        would add (eager runs at every size: a guard is the capture's, not the
        model's), and its output may have any shape; one that is not affine in B is
        not a value later statements pick."""
        shapes: list[tuple[int, ...]] = []
        dtype = None
        try:
            for b, env in zip(self.points, self.envs):
                scope = dict(env)
                scope["self"] = _State(**vars(env["self"]))
                for leaf in leaves:
                    target = vars(scope["self"]) if leaf.name[0] in "pbm" else scope
                    target[leaf.name] = self._meta(leaf, b)
                with torch.no_grad():
                    exec(code, scope)
                if out is not None:
                    value = scope[out]
                    if not isinstance(value, torch.Tensor):
                        return None
                    if dtype is not None and value.dtype != dtype:
                        return None
                    dtype = value.dtype
                    shapes.append(tuple(value.shape))
                    if value.numel() > 4096:
                        return None
        except Exception:
            return None
        shape = self._affine(shapes) if out is not None else ()
        if shape is None and not free:
            return None
        stmt = Stmt(code, out, tuple(uses) + tuple(x.name for x in leaves), label,
                    view_of is not None)
        if self.symbolic is not None and not free and not self.symbolic.keeps_range(
                code, leaves) and not self._export_keeps_range(stmt, leaves):
            return None
        # Commit: the new leaves, the statement, and its output on every env.
        for leaf in leaves:
            self.leaves.append(leaf)
            if leaf.ctor:  # a submodule: not a value to pick
                continue
            self.vars[leaf.name] = Var(leaf.name, leaf.shape, leaf.dtype, leaf.name, False,
                                       leaf.dtype == torch.float16, leaf=True)
        for b, env in zip(self.points, self.envs):
            for leaf in leaves:
                target = vars(env["self"]) if leaf.name[0] in "pbm" else env
                target[leaf.name] = self._meta(leaf, b)
        self.stmts.append(stmt)
        if self.symbolic is not None and not free:
            self.symbolic.commit(code, leaves)
        if out is None:
            return None
        # Re-run on the real envs so that later statements see this value.
        for env in self.envs:
            with torch.no_grad():
                exec(code, env)
        half = dtype == torch.float16 or any(
            self.vars[u].half for u in uses if u in self.vars)
        half = half or any(x.dtype == torch.float16 for x in leaves)
        assert dtype is not None
        if shape is None:  # a free statement's output whose shape is not affine in B
            return Var(out, (), dtype, out, False, half)
        if view_of is not None:
            src = self.vars[view_of]
            var = Var(out, shape, dtype, src.base, src.writable and writable, half)
        else:
            var = Var(out, shape, dtype, out, writable, half)
        self.vars[out] = var
        return var

    def _export_keeps_range(self, stmt: Stmt, leaves: Sequence[Leaf]) -> bool:
        """torch.export's word on a statement the fake-tensor check refused: the bare
        fake-tensor run takes torch's C++ paths, which guard (or fail on a symbolic size)
        where export's traced decompositions do not. Whether the program so far plus
        the statement exports, size-obliviously as pt2onnx captures, without a
        constraint violation (B fixed or its range narrowed)."""
        import warnings

        from pt2onnx.capture import is_constraint_violation

        outs = [stmt.out] if stmt.out else [stmt.uses[0]]
        trial = Program(self.seed, [*self.leaves, *leaves], [*self.stmts, stmt], outs, self.b)
        assert self.b is not None
        try:
            ns = load(trial.source())
            torch.manual_seed(0)
            module = ns["Program"]().eval()
            args = ns["make_inputs"](self.b[0])
            with warnings.catch_warnings(), _compat.size_oblivious(), _as_pt2onnx_captures(
                    [*self.leaves, *leaves]):
                warnings.simplefilter("ignore")
                torch.export.export(module, args, dynamic_shapes=ns["dynamic_shapes"](),
                                    strict=False)
        except Exception as e:
            return not is_constraint_violation(e)
        return True

    def _affine(self, shapes: list[tuple[int, ...]]) -> Shape | None:
        if len({len(s) for s in shapes}) != 1:
            return None
        if len(shapes) == 1:
            return tuple((0, s) for s in shapes[0])
        (p0, p1, p2), out = self.points, []
        for s0, s1, s2 in zip(*shapes):
            c, rem = divmod(s1 - s0, p1 - p0)
            d = s0 - c * p0
            if rem or c < 0 or c * p2 + d != s2:
                return None
            if c and c * p0 + d < 2:  # torch.export specialises a dim that may be 0 or 1
                return None
            out.append((c, d))
        return tuple(out)

    # -- picking ------------------------------------------------------------------------
    def pick(self, ok: Callable[[Var], bool] = lambda v: True) -> Var | None:
        cands = [v for v in self.vars.values() if ok(v)]
        if not cands:
            return None
        recent = cands[-3:]
        return self.rng.choice(recent if self.rng.random() < 0.6 else cands)

    def min_size(self, dim: Dim) -> int:
        return dim[0] * self.points[0] + dim[1]

    def size(self, dim: Dim) -> int:
        """The size at the example B."""
        return dim[0] * self.points[1 if self.b else 0] + dim[1]

    def rand_shape(self, rank: int | None = None, dynamic: bool = False) -> Shape:
        rng = self.rng
        rank = rng.choice((0, 1, 1, 2, 2, 2, 3, 3, 4)) if rank is None else rank
        dims: list[Dim] = []
        for _ in range(rank):
            r = rng.random()
            dims.append((0, 0) if r < 0.04 else (0, 1) if r < 0.22 else (0, rng.randint(2, 5)))
        if dynamic and dims:
            dims[rng.randrange(len(dims))] = (1, 0)
        return tuple(dims)

    def partner_shape(self, shape: Shape) -> Shape:
        """A shape that broadcasts with ``shape`` (maybe to a larger one)."""
        rng = self.rng
        dims = [(0, 1) if rng.random() < 0.25 else d for d in shape]
        while dims and rng.random() < 0.25:
            dims.pop(0)
        if rng.random() < 0.1:
            dims.insert(0, (0, rng.randint(1, 3)))
        return tuple(dims)

    # -- the program ----------------------------------------------------------------
    def start(self) -> None:
        """One or two inputs to begin with."""
        for i in range(self.rng.choice((1, 1, 2))):
            dynamic = self.b is not None and (i == 0 or self.rng.random() < 0.5)
            shape = self.rand_shape(rank=self.rng.choice((1, 2, 2, 3, 3, 4)), dynamic=dynamic)
            dtype = self.rng.choice(ALL_DTYPES)
            leaf = self.leaf(shape, dtype, kind="x")
            self.add(f"{leaf.name}_ = {leaf.name}", "input", (), out=None, leaves=[leaf])

    def build(self) -> Program:
        if _DRAW is None:
            raise RuntimeError("no op table registered: import pt2onnx.testing.fuzz")
        self.start()
        self.stmts.clear()  # the inputs' placeholder statements
        tries = 0
        while len(self.stmts) < self.target and tries < self.target * 20:
            tries += 1
            gen = _DRAW(self.rng)
            try:
                gen(self)
            except Rejected:
                pass
        if not self.stmts:
            raise Rejected("no statement could be drawn")
        return Program(self.seed, self.leaves, self.stmts, self._outputs(), self.b,
                       half=any(v.half for v in self.vars.values()))

    def _outputs(self) -> list[str]:
        used = {u for s in self.stmts for u in s.uses}
        outs = [s.out for s in self.stmts if s.out and s.out not in used]
        last = next(s.out for s in reversed(self.stmts) if s.out) if any(
            s.out for s in self.stmts) else None
        if last is None:  # only in-place statements: return what they updated
            last = self.stmts[-1].uses[0]
        picked = self.rng.sample(outs, min(len(outs), 3)) if outs else []
        return sorted(set(picked) | {last}, key=lambda n: int(n[1:]))


def _as_pt2onnx_captures(leaves: Sequence[Leaf]) -> Any:
    """pt2onnx captures a plain RNN submodule with dynamic shapes as one op of any
    length (``_packed_rnn``); torch's own RNN kernels guard on the number of steps. So
    a program with an RNN leaf is checked with that substitution in place."""
    import contextlib

    if not any(leaf.ctor for leaf in leaves):
        return contextlib.nullcontext()
    from pt2onnx.frontends import packed_rnn_substitutions

    return packed_rnn_substitutions([], plain=True)


class _Symbolic:
    """The statements so far on fake tensors whose dynamic dim is one symbol with the
    range torch.export is given, to find the statements that guard on it."""

    def __init__(self, example: int) -> None:
        self.example = example
        self.history: list[tuple[str, Sequence[Leaf]]] = []
        self.verdicts: dict[Any, bool] = {}
        self.lost = False
        self._reset()

    def _reset(self) -> None:
        from torch._dynamo.source import ConstantSource
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        self.shape_env = ShapeEnv(prefer_deferred_runtime_asserts_over_guards=True)
        self.mode = FakeTensorMode(shape_env=self.shape_env, export=True)
        self.symbol = self.shape_env.create_symbol(self.example, ConstantSource("B"))
        self.b = self.shape_env.create_symintnode(self.symbol, hint=self.example)
        self.shape_env.constrain_symbol_range(self.symbol, compiler_min=B_MIN,
                                              compiler_max=B_MAX)
        self.env = Builder._env()
        for code, leaves in self.history:
            try:
                self._run(code, self.env, leaves)
            except Exception:
                self.lost = True
                return

    def _leaf(self, leaf: Leaf) -> Any:
        if leaf.ctor:
            with self.mode:
                return eval(leaf.ctor, {"torch": torch})
        sizes = [self.b if c else d for c, d in leaf.shape]  # a leaf's dims are B or static
        with self.mode:
            t = torch.empty(sizes, dtype=leaf.dtype)
        return torch.nn.Parameter(t) if leaf.name.startswith("p") else t

    def _run(self, code: str, scope: dict[str, Any], leaves: Sequence[Leaf]) -> None:
        for leaf in leaves:
            target = vars(scope["self"]) if leaf.name[0] in "pbm" else scope
            target[leaf.name] = self._leaf(leaf)
        # As pt2onnx captures: size-obliviously, so that a branch torch takes on the
        # example's value (a view that splits B when it divides) does not guard.
        with _compat.size_oblivious(), self.mode, torch.no_grad(), _as_pt2onnx_captures(
                leaves if "self.m" in code else ()):
            exec(code, scope)

    def _holds(self, expr: Any) -> bool:
        """Whether a guard holds for every B in the range."""
        if self.symbol not in expr.free_symbols:
            return True
        if expr not in self.verdicts:
            try:
                self.verdicts[expr] = all(bool(expr.subs(self.symbol, b))
                                          for b in range(B_MIN, B_MAX + 1))
            except TypeError:  # another free symbol: not decidable here
                self.verdicts[expr] = False
        return self.verdicts[expr]

    def keeps_range(self, code: str, leaves: Sequence[Leaf]) -> bool:
        """Whether the statement leaves B free over its whole range (False also when
        the fake-tensor run cannot tell)."""
        if self.lost:
            return False
        guards = len(self.shape_env.guards)
        scope = dict(self.env)
        scope["self"] = types.SimpleNamespace(**vars(self.env["self"]))
        try:
            self._run(code, scope, leaves)
            ok = self.symbol not in self.shape_env.replacements and all(
                self._holds(g.expr) for g in self.shape_env.guards[guards:])
        except Exception:  # what the concrete sizes accept, a symbolic size may not
            ok = False
        if not ok:  # the refused statement's guards and facts stay in the shape env
            self._reset()
        return ok

    def commit(self, code: str, leaves: Sequence[Leaf]) -> None:
        """Adds a kept statement. One the fake-tensor run refuses (kept on torch.export's
        word) leaves later statements to torch.export alone."""
        self.history.append((code, leaves))
        try:
            self._run(code, self.env, leaves)
        except Exception:
            self.lost = True


def check_eager(program: Program) -> str | None:
    """Runs the program in eager PyTorch at every size; returns why it is invalid, or None.
    Catches what meta tensors cannot see (index values, kernels missing for a dtype)."""
    from pt2onnx.testing.fuzz.oracle import make_inputs, run_points

    try:
        ns = load(program.source())
        sizes = program.b if program.b else (5,)
        for b, c in run_points(ns, list(sizes)):
            module = ns["Program"]()
            if ns.get("WARMUP") is not None:  # the stale state the export will see
                module(*make_inputs(ns, ns["WARMUP"]))
            args = make_inputs(ns, b, c)
            out = module(*args)
            for t in out:
                if not isinstance(t, torch.Tensor):
                    return "output is not a tensor"
    except Exception as e:  # any failure makes the program invalid
        return f"{type(e).__name__}: {e}"
    return None


def with_edges(program: Program) -> Program:
    """Half the dynamic programs declare B down to 1, and half of those take B = 1 as
    their example: the edge where size-oblivious capture is most often wrong. Their
    statements were drawn over [B_MIN, B_MAX]; the oracle runs them at 1 too, where
    eager accepts them there. Drawn from its own stream, so the program itself is the
    one the seed always gave."""
    if program.b is None:
        return program
    rng = random.Random(program.seed * 2654435761 % 2**32)
    if rng.random() < 0.5:
        return program
    edge = program.replace(b_min=1)
    if rng.random() < 0.5:
        at_one = edge.replace(b=(1, program.b[1]))
        if check_eager(at_one) is None:
            return at_one
    return edge


# The second dim's broadcasts: an op of an input with a B dim and a new input whose
# dim there is C (1 or B at run time), by the input's kind of dtype.
_BROADCASTS = {
    "float": ["{x} + {y}", "{x} * {y}", "torch.maximum({x}, {y})", "{x} - {y}",
              "torch.where({y} > 0, {x}, {y})", "torch.atan2({x}, {y})"],
    "int": ["{x} + {y}", "{x} * {y}", "torch.maximum({x}, {y})", "{x} - {y}"],
    "bool": ["{x} | {y}", "{x} & {y}", "torch.logical_xor({x}, {y})"],
}


def with_second_dim(program: Program) -> Program:
    """A quarter of the dynamic programs also broadcast an input that has the dim ``B``
    against a new input whose dim there is a second symbol ``C`` (declared [1, B_MAX]),
    and return the result: its example is 1 or B's, and the oracle runs it at C = 1 and
    C = B (issue 26: broadcasting between two dynamic dims, either side 1 at run time).
    Drawn from its own stream, so the program's own statements are the ones the seed
    always gave."""
    if program.b is None:
        return program
    rng = random.Random(program.seed * 3266489917 % 2**32)
    if rng.random() >= 0.25:
        return program
    inputs = [x for x in program.inputs() if (1, 0) in x.shape and x.dtype != torch.float16]
    if not inputs:
        return program
    x = rng.choice(inputs)
    axis = rng.choice([i for i, d in enumerate(x.shape) if d == (1, 0)])
    # The other dims: the same, or 1 (they broadcast too); a leading dim may go.
    dims = [C_DIM if i == axis else (d if d[0] or rng.random() < 0.7 else (0, 1))
            for i, d in enumerate(x.shape)]
    while axis > 0 and rng.random() < 0.2 and dims[0][0] == 0:
        dims.pop(0)
        axis -= 1
    kind = "bool" if x.dtype == torch.bool else "float" if x.dtype in FLOATS else "int"
    y = Leaf(f"x{max(int(v.name[1:]) for v in program.leaves) + 1}", tuple(dims), x.dtype,
             "bool" if kind == "bool" else "normal" if kind == "float" else "int")
    form = rng.choice(_BROADCASTS[kind])
    if rng.random() < 0.5:
        form = form.replace("{x}", "{t}").replace("{y}", "{x}").replace("{t}", "{y}")
    out = f"v{max([int(s.out[1:]) for s in program.stmts if s.out] + [0]) + 1}"
    stmt = Stmt(f"{out} = {form.format(x=x.name, y=y.name)}", out, (x.name, y.name),
                "broadcast_c")
    grown = program.replace(leaves=[*program.leaves, y], stmts=[*program.stmts, stmt],
                            outputs=[*program.outputs, out], c=rng.choice([1, 1, "b"]))
    return grown if check_eager(grown) is None else program


def generate(seed: int, dynamic: bool | None = None, max_ops: int = 30,
             version: int = VERSION) -> Program:
    """The program of ``seed``: built by construction, then checked once in eager (a
    program eager refuses is drawn again from a derived seed, at most 20 times).
    ``version`` 1 gives the programs of the campaigns before generator version 2."""
    if version not in (1, 2):
        raise ValueError(f"no generator version {version}: 1 or 2")
    last = ""
    for attempt in range(20):
        sub = seed if attempt == 0 else seed * 7919 + attempt
        try:
            builder = Builder(sub, dynamic, max_ops)
            program = builder.build()
        except Rejected as e:
            last = str(e)
            continue
        program.seed = sub
        why = check_eager(program)
        if why is None:
            program.notes["attempts"] = attempt + 1
            if version >= 2 and _GROW is not None:
                grown = _GROW(builder, program)
                if grown is not program and check_eager(grown) is None:
                    program = grown
            return with_second_dim(with_edges(program))
        last = why
    raise RuntimeError(f"no valid program from seed {seed}: {last}")
