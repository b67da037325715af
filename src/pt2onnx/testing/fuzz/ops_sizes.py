"""Python arithmetic on sizes, and state caches keyed by shape (generator version 2).

Models compute sizes in Python: ``math.ceil((t - right) / segment)`` (torchaudio's
Emformer), ``x[:, :int(x.size(1) / 2)]``, a reshape to ``t // k`` segments of ``k``.
And they keep state keyed by shape: ultralytics' Detect head refills
``self.anchors`` when ``self.shape != x.shape``; a rotary embedding grows its cos /
sin cache when a longer sequence comes. torch.export guards on such Python values and
may bake one capture's constant; the file must compute them at run time.

``grow`` appends such statements to a drawn program, from a stream of its own, so the
statements before them are the ones the seed always gave (and ``generate(seed,
version=1)`` is that program unchanged). The statements are kept whatever guards
torch.export adds (``Builder.add(free=True)``): eager runs them at every size of the
program's range, checked on meta values at each size from 1 to 24 and at ``B_MAX``.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from pt2onnx.testing.fuzz.generator import Builder, Rejected, Var
from pt2onnx.testing.fuzz.program import B_MAX, B_MIN, Program

# The chance that a dynamic / static program gets size arithmetic, and a shape cache.
SIZE_RATE = {True: 0.45, False: 0.1}
CACHE_RATE = {True: 0.25, False: 0.08}


# -- sizes and their arithmetic ----------------------------------------------------------
def _candidates(g: Builder, used: set[str]) -> list[Var]:
    """The values a new statement may read: computed ones, and the leaves in use (a
    leaf no statement reads stays out, so the program's inputs are unchanged)."""
    return [v for v in g.vars.values() if v.rank >= 1 and (not v.leaf or v.name in used)]


def _sized(g: Builder, cands: list[Var]) -> tuple[Var, int]:
    """A value and one of its dims, mostly a dynamic one."""
    rng = g.rng
    dyn = [(v, d) for v in cands for d, (c, _) in enumerate(v.shape) if c]
    if dyn and rng.random() < 0.85:
        return rng.choice(dyn)
    v = rng.choice(cands)
    return v, rng.randrange(v.rank)


def _size_src(g: Builder, v: Var, d: int) -> str:
    """Python source reading dim d of v: ``x.size(1)``, ``x.shape[-2]``, ``len(x)``."""
    rng = g.rng
    dn = d - v.rank if rng.random() < 0.3 else d
    forms = [f"{v.ref}.size({dn})", f"{v.ref}.shape[{dn}]"] + ([f"len({v.ref})"] if d == 0
                                                               else [])
    return rng.choice(forms)


def _other(g: Builder, cands: list[Var], uses: list[str]) -> str:
    """A second operand: a constant, or another size (of the same value or another)."""
    rng = g.rng
    if rng.random() < 0.5:
        return str(rng.randint(2, 6))
    w, e = _sized(g, cands)
    uses.append(w.name)
    return _size_src(g, w, e)


def bounded(rng: random.Random, s: str, t: str) -> str:
    """An int ``n`` with ``0 <= n <= s`` for every size ``s`` (and ``t >= 0``)."""
    k, j = rng.randint(2, 4), rng.randint(1, 3)
    return rng.choice([
        f"{s} // {k}", f"math.floor({s} / {k})", f"math.ceil({s} / {k})",
        f"int({s} / {k})", f"round({s} / {k})", f"{s} % {k}", f"min({s}, {k})",
        f"max({s} - {j}, 0)", f"min({s}, {t})", f"{s} // {k} * {k}",
        f"max(math.ceil(({s} - {j}) / {k}), 0)", f"int({s} * 0.5)", f"{s} - {s} // {k}",
        f"math.floor({s} * 2 / 3)", f"max(min({s}, {t}) - {j}, 0)",
        f"min(max({s} // {k}, 1), {s})", f"{s} - {s} % {k}"])


def unbounded(rng: random.Random, s: str, t: str) -> str:
    """Any int (a slice bound clamps): negative, or past the size."""
    k = rng.randint(2, 4)
    return rng.choice([
        bounded(rng, s, t), f"{s} * 2 // {k}", f"max({s}, {t})", f"{s} + {t}",
        f"math.ceil({s} * 1.5)", f"-({s} // {k})", f"{s} - {k}", f"-math.ceil({s} / {k})",
        f"round({s} / {k}) * {k}", f"{s} % {k} - {k}", f"max({s} // {k}, {t} % {k})",
        f"{s} // -{k}", f"-{s} % {k}", f"int(-{s} / {k})"])


def small(rng: random.Random, s: str, t: str) -> str:
    """A count from 0 to about 4 (a repeat)."""
    return rng.choice([
        f"{s} % 3 + 1", f"min({s}, 2)", f"math.ceil({s} / 32)", f"max(1, {s} // 16)",
        f"round({s} / 24) + 1", f"int({s} / 40) + 1", f"min({s} // max({t}, 1), 3)",
        f"2 - {s} % 2"])


def _view(rank: int, d: int) -> str:
    """View sizes putting a 1-D tensor along dim d of a rank-``rank`` value."""
    return ", ".join("-1" if i == d else "1" for i in range(rank))


def _pad(rank: int, d: int, extra: str) -> str:
    """``F.pad``'s pads adding ``extra`` at the end of dim d."""
    return "(" + "0, 0, " * (rank - 1 - d) + f"0, {extra})"


def _split_shape(v: Var, d: int, a: str, b: str) -> str:
    """Sizes of v with dim d split into (a, b)."""
    before = f"*{v.ref}.shape[:{d}], " if d else ""
    after = f", *{v.ref}.shape[{d + 1}:]" if d < v.rank - 1 else ""
    return f"{before}{a}, {b}{after}"


def size_stmt(g: Builder, used: set[str]) -> Var | None:
    """One statement that uses Python arithmetic on sizes the way models do."""
    rng = g.rng
    cands = _candidates(g, used)
    if not cands:
        raise Rejected("no value")
    v, d = _sized(g, cands)
    uses = [v.name]
    s = _size_src(g, v, d)
    t = _other(g, cands, uses)
    dn = d - v.rank if rng.random() < 0.3 else d
    ref, dev = v.ref, f"{v.ref}.device"
    kind = rng.choice(["slice"] * 4 + ["narrow"] * 2 + ["split"] * 2 + ["reshape"] * 3
                      + ["factory"] * 2 + ["scale"] * 2 + ["repeat"] * 2 + ["mask"])
    if kind == "slice":
        w, e = v, d
        if rng.random() < 0.4:  # another value's dim, sliced by this size
            w = rng.choice(cands)
            e = rng.randrange(w.rank)
            uses.append(w.name)
        form = rng.choice(["{n}:", ":{n}", ":{n}", "{n}:{m}", "::{step}", "{n}::{step}"])
        k = rng.randint(2, 4)
        sl = form.format(n=unbounded(rng, s, t), m=unbounded(rng, s, t),
                         step=rng.choice([f"max(1, {s} // {k})", f"{s} % 3 + 1",
                                          f"math.ceil({s} / 16)"]))
        parts = [":"] * e + [sl]
        index = (f"..., {sl}" if e == w.rank - 1 and e and rng.random() < 0.5
                 else ", ".join(parts))
        expr = f"{w.ref}[{index}]"
    elif kind == "narrow":
        n = bounded(rng, s, t)
        expr = rng.choice([f"{ref}.narrow({dn}, 0, {n})",
                           f"{ref}.narrow({dn}, {s} - ({n}), {n})",
                           f"{ref}.narrow({dn}, {n}, {s} - ({n}))",
                           f"torch.narrow({ref}, {dn}, 0, {n})"])
    elif kind == "split":
        n = bounded(rng, s, t)
        expr = rng.choice([f"torch.split({ref}, [{n}, {s} - ({n})], {dn})[{rng.randint(0, 1)}]",
                           f"{ref}.split([{s} - ({n}), {n}], {dn})[{rng.randint(0, 1)}]",
                           f"torch.split({ref}, max({unbounded(rng, s, t)}, 1), {dn})[0]",
                           f"{ref}.split(max({n}, 1), {dn})[-1]"])
    elif kind == "reshape":
        k = rng.randint(2, 4)
        r = rng.random()
        if r < 0.4:  # pad to a multiple of k, then k-long segments (Emformer)
            m = rng.choice([f"math.ceil({s} / {k})", f"-(-{s} // {k})",
                            f"({s} + {k - 1}) // {k}"])
            fn = rng.choice(["view", "reshape"])
            expr = (f"F.pad({ref}, {_pad(v.rank, d, f'{m} * {k} - {s}')})"
                    f".{fn}({_split_shape(v, d, m, str(k))})")
        elif r < 0.75:  # cut to a multiple of k
            m = rng.choice([f"{s} // {k}", f"math.floor({s} / {k})", f"int({s} / {k})"])
            expr = (f"{ref}.narrow({d}, 0, {m} * {k})"
                    f".reshape({_split_shape(v, d, m, str(k))})")
        else:  # sizes read back: (x.size(0), -1), or the dims around d merged
            if v.rank >= 2 and rng.random() < 0.5:
                expr = f"{ref}.reshape({ref}.size(0), -1)"
            else:
                sizes = [f"{ref}.size({i})" for i in range(v.rank)]
                if v.rank >= 2:
                    i = min(d, v.rank - 2)
                    sizes[i:i + 2] = [f"{sizes[i]} * {sizes[i + 1]}"]
                expr = f"{ref}.reshape({', '.join(sizes)})"
    elif kind == "factory":
        n = bounded(rng, s, t)
        expr = rng.choice([
            f"torch.zeros({n}, device={dev})", f"torch.arange({n}, device={dev})",
            f"torch.ones({n}, {rng.randint(1, 3)}, device={dev})",
            f"{ref}.new_zeros(({n}, {rng.randint(1, 3)}))",
            f"torch.full(({n},), {s} / {rng.randint(2, 4)}, device={dev})",
            f"torch.arange({n}, device={dev}) * {ref}.float().sum()",
            f"torch.arange({s}, device={dev}) < {n}"])
    elif kind == "scale":
        k = rng.randint(2, 4)
        expr = rng.choice([f"{ref} * ({s} / {k})", f"{ref} / math.sqrt({s} + 1)",
                           f"{ref} * max({s}, 1) ** -0.5", f"{ref} + {bounded(rng, s, t)}",
                           f"{ref} * round({s} / {k})", f"{ref} - {s} % {k}",
                           f"{ref} * min({s}, {t}) / max({s}, {t}, 1)"])
    elif kind == "repeat":
        c = small(rng, s, t)
        r = rng.random()
        if r < 0.4:
            counts = ["1"] * v.rank
            counts[rng.randrange(v.rank)] = c
            expr = f"{ref}.repeat({', '.join(counts)})"
        elif r < 0.7:
            expr = f"{ref}.repeat_interleave({c}, dim={dn})"
        elif r < 0.85:
            expr = f"torch.tile({ref}, ({c},))"
        else:
            expr = f"{ref}.unsqueeze(0).expand({c}, *{ref}.shape)"
    else:  # mask: positions at or past n along d
        n = unbounded(rng, s, t)
        expr = (f"{ref}.masked_fill(torch.arange({s}, device={dev}).view("
                f"{_view(v.rank, d)}) >= {n}, {rng.choice(['0', '1', 'True'])})")
    out = g.fresh("v")
    return g.add(f"{out} = {expr}", f"size.{kind}", uses, out, free=True)


# -- state keyed by shape --------------------------------------------------------------
def cache_stmt(g: Builder, used: set[str], state: list[str]) -> Var | None:
    """A cache the module refills when the input's shape changes (ultralytics' anchors:
    ``if self.shape != x.shape``), or grows when a longer input comes (a rotary cos /
    sin cache sliced to the length); the statement's value uses it. Its ``__init__``
    lines go to ``state``."""
    rng = g.rng
    cands = _candidates(g, used)
    if not cands:
        raise Rejected("no value")
    v, d = _sized(g, cands)
    ref = v.ref if v.dtype == torch.float32 else f"{v.ref}.float()"
    dev = f"{v.ref}.device"
    size = f"{v.ref}.shape[{d}]"
    k = g.fresh("k")
    c1, c2 = rng.choice(["0.5", "0.25", "-1.5"]), rng.choice(["0", "1", "0.125"])
    arange = f"torch.arange({{n}}, device={dev}, dtype=torch.float32)"
    # What is cached: a line of positions along d; a (d, last) table of cos (rotary,
    # d second last); a grid over the last two dims (anchors).
    shapes = ["line"] + (["rotary"] if v.rank >= 2 and d == v.rank - 2 else []) + (
        ["grid"] if v.rank >= 2 and d >= v.rank - 2 else [])
    what = rng.choice(shapes)
    # A grown cache is keyed by dim d alone: only where nothing else it reads can change.
    grows = what == "line" or (what == "rotary" and not v.shape[-1][0])
    kind = rng.choice(["shape", "buffer"] + (["grow"] if grows else []))

    def make(n: str) -> str:
        if what == "line":
            return f"{arange.format(n=n)} * {c1} + {c2}"
        if what == "rotary":
            last = f"{v.ref}.shape[-1]"
            return (f"torch.cos({arange.format(n=n)}[:, None] * ("
                    f"{arange.format(n=last)} + 1) * {c1})")
        return (f"{arange.format(n=f'{v.ref}.shape[-2]')}[:, None] * {c1} + "
                f"{arange.format(n=f'{v.ref}.shape[-1]')} * {c2}")

    op = rng.choice(["+", "*"])
    out = g.fresh("v")
    tensor = "torch.empty(0)"
    if kind == "grow":
        init = [f"self.{k} = {tensor}", f"self.{k}_len = 0"]
        cached = f"self.{k}[:{size}]" + (f".view({_view(v.rank, d)})" if what == "line" else "")
        code = (f"if self.{k}_len < {size}:\n    self.{k} = {make(size)}\n"
                f"    self.{k}_len = {size}\n{out} = {ref} {op} {cached}")
    else:
        key = rng.choice([f"{v.ref}.shape", f"tuple({v.ref}.shape)"] + (
            [size] if what == "line" else [f"{v.ref}.shape[-2:]"]))
        first = (f'self.register_buffer("{k}", {tensor}, persistent=False)' if kind == "buffer"
                 else f"self.{k} = {tensor}")
        init = [first, f"self.{k}_shape = None"]
        made = make(size) + (f").view({_view(v.rank, d)})" if what == "line" else "")
        if what == "line":
            made = "(" + made
        code = (f"if self.{k}_shape != {key}:\n    self.{k} = {made}\n"
                f"    self.{k}_shape = {key}\n{out} = {ref} {op} self.{k}")
    saved = [vars(env["self"]).copy() for env in g.envs]
    g.init_state(init)
    var = g.add(code, f"cache.{kind}.{what}", [v.name], out, free=True)
    if var is None:  # the state goes with the statement
        for env, before in zip(g.envs, saved):
            vars(env["self"]).clear()
            vars(env["self"]).update(before)
        return None
    state += init
    return var


# -- the post-pass ---------------------------------------------------------------------
# The sizes of B at which a grown program is checked: every residue of the small
# divisors the statements use, from 1 up, and the largest declared.
CHECKED = [*range(1, 25), B_MAX - 1, B_MAX]


def _runs_at(g: Builder, first: int, state: list[str]) -> list[int] | None:
    """The sizes of B (of CHECKED) at which the program runs on meta values; None when
    a statement from ``first`` on fails at a size where the ones before it run."""
    sizes = []
    for b in CHECKED if g.b else [5]:
        env: dict[str, Any] = g._env()
        with torch.device("meta"):
            for line in state:
                exec(line, {"torch": torch, "self": env["self"]})
        for leaf in g.leaves:
            target = vars(env["self"]) if leaf.name[0] in "pbm" else env
            target[leaf.name] = g._meta(leaf, b)
        for i, stmt in enumerate(g.stmts):
            try:
                with torch.no_grad():
                    exec(stmt.code, env)
            except Exception:
                if i >= first:
                    return None
                break
        else:
            sizes.append(b)
    return sizes


def grow(g: Builder, program: Program) -> Program:
    """``program`` (the one ``g`` built) followed, for some seeds, by 1 to 3 statements
    of arithmetic on sizes and by one cache keyed by shape; a program with a cache may
    be called once by eager before the export (``warmup``: at the example's size, or at
    another, which leaves the cache stale)."""
    rng = random.Random(program.seed * 2246822519 % 2**32)
    dynamic = program.b is not None
    sizes_wanted = rng.random() < SIZE_RATE[dynamic]
    cache_wanted = rng.random() < CACHE_RATE[dynamic]
    if not (sizes_wanted or cache_wanted):
        return program
    g.rng = rng
    g.stmts = list(g.stmts)  # the program keeps its own list
    g.leaves = list(g.leaves)
    first = len(g.stmts)
    used = {u for s in g.stmts for u in s.uses}
    state: list[str] = []
    outs: list[str] = []
    draws = (["size"] * rng.randint(1, 3) if sizes_wanted else []) + (
        ["cache"] if cache_wanted else [])
    for draw in draws:
        for _ in range(10):
            try:
                var = cache_stmt(g, used, state) if draw == "cache" else size_stmt(g, used)
            except Rejected:
                continue
            if var is not None:
                outs.append(var.name)
                break
    if not outs:
        return program
    runs = _runs_at(g, first, state)
    if runs is None:
        return program
    warmup = None
    if state and rng.random() < 0.7:
        example = program.b[0] if program.b else 5
        others = [b for b in runs if b >= B_MIN and b != example]
        warmup = example if not others or rng.random() < 0.4 else rng.choice(others)
    return program.replace(stmts=g.stmts, leaves=g.leaves, outputs=[*program.outputs, *outs],
                           state=state, warmup=warmup)
