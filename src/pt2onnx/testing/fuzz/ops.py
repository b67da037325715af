"""The statements the generator draws: each function adds one statement to a Builder
(or draws nothing). Ops are chosen from pt2onnx's supported set."""

from __future__ import annotations

import random
from collections.abc import Callable

import torch

from pt2onnx.testing.fuzz.generator import ALL_DTYPES, FLOATS, INTS, Builder, Rejected, Var
from pt2onnx.testing.fuzz.ops_common import _mask, _neg, _operand, _slice_src
from pt2onnx.testing.fuzz.program import Leaf, Shape

# Functions of x that are continuous (safe on float16-rounded values) and bounded enough.
FLOAT_UNARY = [
    "torch.neg({x})", "torch.abs({x})", "torch.relu({x})", "torch.sigmoid({x})",
    "torch.tanh({x})", "torch.sin({x})", "torch.cos({x})", "torch.erf({x})",
    "torch.sqrt(torch.abs({x}))", "torch.log1p(torch.abs({x}))", "torch.exp({x}.clamp(max=4))",
    "torch.square({x})", "1 / ({x}.abs() + 1)", "F.gelu({x})", "F.silu({x})",
    "F.leaky_relu({x}, 0.1)", "F.hardtanh({x})", "torch.rsqrt({x}.abs() + 1)",
    "torch.clamp({x}, -1.5, 2)", "torch.nan_to_num({x})", "F.elu({x})", "F.softplus({x})",
    "{x} * 0.5", "{x} - 1", "2 ** {x}.clamp(-3, 3)", "torch.atan({x})",
]
# Discontinuous: not on float16-rounded values (a 1-ulp difference flips them).
STEP_UNARY = ["torch.floor({x})", "torch.ceil({x})", "torch.round({x})", "torch.sign({x})",
              "torch.trunc({x})", "{x}.to(torch.int64)", "{x}.to(torch.int32)",
              "{x}.to(torch.bool)", "({x} > 0)", "torch.isnan({x})"]
INT_UNARY = ["torch.neg({x})", "torch.abs({x})", "torch.sign({x})", "torch.bitwise_not({x})",
             "torch.clamp({x}, -3, 3)", "{x} * 2", "{x} + 1", "{x}.to(torch.float32)",
             "{x}.to(torch.float16)", "{x}.to(torch.int64)", "{x}.to(torch.int32)",
             "{x}.to(torch.bool)", "torch.square({x})", "{x} // 2", "{x} % 3", "{x} / 2",
             "({x} >= 1)"]
BOOL_UNARY = ["torch.logical_not({x})", "torch.bitwise_not({x})", "{x}.to(torch.float32)",
              "{x}.to(torch.int64)", "{x}.to(torch.int32)", "{x} + 1", "{x} * 1.5",
              "{x}.to(torch.float16)"]


def _dims(g: Builder, v: Var) -> int:
    if not v.rank:
        raise Rejected("rank 0")
    return g.rng.randrange(v.rank)


def _step_ok(v: Var) -> bool:
    return not (v.half and v.dtype in FLOATS)


def unary(g: Builder) -> None:
    v = g.pick()
    if v is None:
        raise Rejected("no value")
    if v.dtype in FLOATS:
        pool = FLOAT_UNARY + (STEP_UNARY if _step_ok(v) else [])
    else:
        pool = INT_UNARY if v.dtype in INTS else BOOL_UNARY
    expr = g.rng.choice(pool).format(x=v.ref)
    out = g.fresh("v")
    g.add(f"{out} = {expr}", expr.split("(")[0], [v.name], out)


BINARY = ["torch.add({a}, {b})", "torch.sub({a}, {b})", "torch.mul({a}, {b})",
          "{a} + {b}", "{a} * {b}", "{a} - {b}", "torch.add({a}, {b}, alpha=2)",
          "torch.maximum({a}, {b})", "torch.minimum({a}, {b})",
          "torch.div({a}, {b}.abs() + 1)", "torch.atan2({a}, {b})",
          "torch.where({a} > {b}, {a}, {b})", "torch.hypot({a}, {b})"]
STEP_BINARY = ["torch.eq({a}, {b})", "torch.lt({a}, {b})", "torch.ge({a}, {b})",
               "torch.ne({a}, {b})", "torch.remainder({a}, {b}.abs() + 1)",
               "torch.floor_divide({a}, {b}.abs() + 1)", "torch.fmod({a}, {b}.abs() + 1)"]
LOGIC_BINARY = ["torch.logical_and({a}, {b})", "torch.logical_or({a}, {b})",
                "torch.logical_xor({a}, {b})", "torch.bitwise_and({a}, {b})",
                "torch.bitwise_or({a}, {b})", "torch.bitwise_xor({a}, {b})"]


def binary(g: Builder) -> None:
    v = g.pick()
    if v is None:
        raise Rejected("no value")
    b, uses, leaves = _operand(g, v.shape)
    pool = BINARY + (STEP_BINARY if _step_ok(v) else [])
    if v.dtype in (torch.bool, *INTS):
        pool = pool + LOGIC_BINARY * 2
    tmpl = g.rng.choice(pool)
    a_ref, b_ref = (v.ref, b) if g.rng.random() < 0.7 else (b, v.ref)
    if b_ref[0].isdigit() or b_ref[0] in "-T":  # a scalar first: only where torch takes it
        a_ref, b_ref = v.ref, b
    out = g.fresh("v")
    expr = tmpl.format(a=a_ref, b=b_ref)
    g.add(f"{out} = {expr}", tmpl.split("(")[0], [v.name, *uses], out, leaves)


def reduce(g: Builder) -> None:
    rng = g.rng
    v = g.pick()
    if v is None:
        raise Rejected("no value")
    fn = rng.choice(["sum", "sum", "mean", "amax", "amin", "prod", "var", "std", "logsumexp",
                     "all", "any", "argmax", "argmin", "sum_dtype", "norm"])
    if fn in ("argmax", "argmin") and not _step_ok(v):
        raise Rejected("argmax of float16-rounded values")
    keep = rng.random() < 0.4
    if v.rank == 0 or (rng.random() < 0.15 and fn not in ("logsumexp",)):
        dim_src = ""
    elif rng.random() < 0.3 and v.rank >= 2 and fn not in ("argmax", "argmin"):
        dims = sorted(rng.sample(range(v.rank), 2))
        dim_src = f"({_neg(g, dims[0], v.rank)}, {dims[1]})"
    else:
        dim_src = str(_neg(g, _dims(g, v), v.rank))
    args = dim_src + (f", keepdim={keep}" if dim_src else "")
    if fn == "sum_dtype":
        expr = f"{v.ref}.sum({args}{', ' if args else ''}dtype=torch.float32)"
    elif fn == "norm":
        expr = f"torch.linalg.vector_norm({v.ref}{', ' + args if args else ''})"
    elif fn == "var" or fn == "std":
        expr = f"torch.{fn}({v.ref}{', ' + args if args else ''}, correction=0)"
    else:
        expr = f"torch.{fn}({v.ref}{', ' + args if args else ''})"
    out = g.fresh("v")
    g.add(f"{out} = {expr}", fn, [v.name], out)


def matmul(g: Builder) -> None:
    rng = g.rng
    v = g.pick(lambda w: w.rank >= 1 and w.dtype in FLOATS + INTS)
    if v is None:
        raise Rejected("no value")
    k = v.shape[-1]
    r = rng.random()
    if r < 0.3 and v.dtype in FLOATS:
        m = rng.randint(1, 4)
        w = g.leaf(((0, m), k), v.dtype, kind="p")
        bias = g.leaf(((0, m),), v.dtype, kind="p") if rng.random() < 0.5 else None
        extra = f", {bias.ref}" if bias else ""
        out = g.fresh("v")
        g.add(f"{out} = F.linear({v.ref}, {w.ref}{extra})", "linear", [v.name], out,
              [w] + ([bias] if bias else []))
        return
    cols: Shape = ((0, rng.randint(1, 4)),) if rng.random() < 0.8 else ()
    if k[0] and rng.random() < 0.5:
        cols = ((1, 0),)  # B x B
    other_shape: Shape = (k, *cols)
    if rng.random() < 0.3 and v.rank >= 3:
        other_shape = v.shape[:-2] + other_shape
    dtype = v.dtype if rng.random() < 0.9 else rng.choice(FLOATS)
    same = [w for w in g.vars.values() if w.shape == other_shape and w.dtype == dtype]
    leaves: list[Leaf] = []
    if same and rng.random() < 0.5:
        pick = rng.choice(same)
        ref, uses = pick.ref, [pick.name]
    else:
        leaf = g.leaf(other_shape, dtype)
        ref, uses, leaves = leaf.ref, [], [leaf]
    out = g.fresh("v")
    form = rng.choice(["torch.matmul({a}, {b})", "{a} @ {b}"])
    g.add(f"{out} = {form.format(a=v.ref, b=ref)}", "matmul", [v.name, *uses], out, leaves)


def view(g: Builder) -> None:
    rng = g.rng
    v = g.pick(lambda w: w.rank >= 1)
    if v is None:
        raise Rejected("no value")
    d = _dims(g, v)
    kind = rng.choice(["slice", "slice", "transpose", "permute", "reshape", "view", "unsqueeze",
                       "squeeze", "expand", "narrow", "select", "flatten", "unflatten",
                       "movedim", "index", "split", "chunk", "t", "contiguous", "diagonal"])
    ref, rank = v.ref, v.rank
    writable = True
    if kind == "slice":
        parts = [":"] * rank
        parts[d] = _slice_src(g, v, d)
        if rng.random() < 0.3 and rank > 1:
            d2 = (d + 1) % rank
            parts[d2] = _slice_src(g, v, d2)
        expr = f"{ref}[{', '.join(parts)}]"
    elif kind == "index":
        size = g.min_size(v.shape[d])
        if size == 0:
            raise Rejected("empty dim")
        i = rng.randint(-size, size - 1)
        parts = [":"] * d + [str(i)]
        expr = f"{ref}[{', '.join(parts)}]" if rng.random() < 0.5 else f"{ref}[..., None, {i}]"
    elif kind == "transpose":
        expr = f"{ref}.transpose({_neg(g, d, rank)}, {rng.randrange(rank)})"
    elif kind == "permute":
        perm = list(range(rank))
        rng.shuffle(perm)
        expr = f"{ref}.permute({', '.join(map(str, perm))})"
    elif kind in ("reshape", "view"):
        expr = f"{ref}.{kind}({_reshape_target(g, v)})"
    elif kind == "unsqueeze":
        expr = f"{ref}.unsqueeze({rng.randint(-rank - 1, rank)})"
    elif kind == "squeeze":
        ones = [i for i, s in enumerate(v.shape) if s == (0, 1)]
        expr = f"{ref}.squeeze({rng.choice(ones) if ones else d})" if rng.random() < 0.8 \
            else f"{ref}.squeeze()"
    elif kind == "expand":
        sizes = [str(rng.randint(2, 3)) if s == (0, 1) and rng.random() < 0.7 else "-1"
                 for s in v.shape]
        if rng.random() < 0.3:
            sizes.insert(0, str(rng.randint(1, 3)))
        expr = f"{ref}.expand({', '.join(sizes)})"
        writable = False
    elif kind == "narrow":
        size = g.min_size(v.shape[d])
        start = rng.randint(0, size)
        expr = f"{ref}.narrow({_neg(g, d, rank)}, {start}, {rng.randint(0, size - start)})"
    elif kind == "select":
        size = g.min_size(v.shape[d])
        if size == 0:
            raise Rejected("empty dim")
        expr = f"{ref}.select({d}, {rng.randint(-size, size - 1)})"
    elif kind == "flatten":
        expr = f"{ref}.flatten({rng.choice(['', '1', '0, -1', '-2'])})"
    elif kind == "unflatten":
        c, size = v.shape[d]
        f = rng.choice([x for x in (1, 2, 3) if (size % x == 0 if not c else c % x == 0 and size % x == 0)] or [1])
        expr = f"{ref}.unflatten({d}, ({f}, -1))"
    elif kind == "movedim":
        expr = f"torch.movedim({ref}, {d}, {rng.randrange(rank)})"
    elif kind == "split":
        expr = f"torch.split({ref}, {rng.randint(1, 3)}, {d})[0]"
    elif kind == "chunk":
        expr = f"torch.chunk({ref}, {rng.randint(1, 3)}, {d})[-1]"
    elif kind == "t":
        expr = f"{ref}.mT" if rank >= 2 else f"{ref}.t()"
    elif kind == "diagonal":
        expr = f"torch.diagonal({ref}, {rng.randint(-1, 1)}, {d}, {rng.randrange(rank)})"
    else:
        expr = f"{ref}.contiguous()"
    out = g.fresh("v")
    g.add(f"{out} = {expr}", kind, [v.name], out, view_of=v.name, writable=writable)


def _reshape_target(g: Builder, v: Var) -> str:
    rng = g.rng
    sym = [i for i, (c, _) in enumerate(v.shape) if c]
    numel_static = 1
    for c, s in v.shape:
        if not c:
            numel_static *= s
    if sym:
        # keep the symbolic part as -1 and refactor the static part
        parts = _factor(rng, numel_static)
        parts.insert(rng.randint(0, len(parts)), -1)
        return ", ".join(map(str, parts))
    if numel_static == 0:
        return ", ".join(str(s) for _, s in v.shape[::-1]) or "0"
    parts = _factor(rng, numel_static)
    if parts and rng.random() < 0.4:
        parts[rng.randrange(len(parts))] = -1
    return ", ".join(map(str, parts)) if parts else "()"


def _factor(rng: random.Random, n: int) -> list[int]:
    if n <= 0:
        raise Rejected("no factors of an empty size")
    out = []
    for p in (2, 3, 5, 7):
        while n % p == 0:
            out.append(p)
            n //= p
    if n > 1:
        out.append(n)
    rng.shuffle(out)
    merged: list[int] = []
    for x in out:
        if merged and rng.random() < 0.5:
            merged[-1] *= x
        else:
            merged.append(x)
    if rng.random() < 0.3:
        merged.insert(rng.randint(0, len(merged)), 1)
    return merged


def cat_stack(g: Builder) -> None:
    rng = g.rng
    v = g.pick(lambda w: w.rank >= 1)
    if v is None:
        raise Rejected("no value")
    d = rng.randrange(v.rank)
    stack = rng.random() < 0.3
    others, uses, leaves = [], [v.name], []
    for _ in range(rng.randint(1, 2)):
        if stack:
            shape = v.shape
        else:
            shape = tuple((0, rng.randint(0, 3)) if i == d and rng.random() < 0.6 else s
                          for i, s in enumerate(v.shape))
        same = [w for w in g.vars.values() if w.shape == shape]
        if same and rng.random() < 0.6:
            w = rng.choice(same)
            others.append(w.ref)
            uses.append(w.name)
        elif g.can_leaf(shape):
            leaf = g.leaf(shape, v.dtype if rng.random() < 0.7 else rng.choice(ALL_DTYPES))
            others.append(leaf.ref)
            leaves.append(leaf)
        else:
            others.append(v.ref)
    items = [v.ref, *others]
    rng.shuffle(items)
    fn = "torch.stack" if stack else "torch.cat"
    out = g.fresh("v")
    g.add(f"{out} = {fn}([{', '.join(items)}], {_neg(g, d, v.rank)})", fn[6:], uses, out, leaves)


def where(g: Builder) -> None:
    v = g.pick()
    if v is None:
        raise Rejected("no value")
    mask, mu, ml = _mask(g, v.shape)
    b, bu, bl = _operand(g, v.shape)
    out = g.fresh("v")
    args = [v.ref, b] if g.rng.random() < 0.5 else [b, v.ref]
    if args[0][0].isdigit() or args[0][0] in "-T":
        args = [v.ref, b]
    g.add(f"{out} = torch.where({mask}, {args[0]}, {args[1]})", "where", [v.name, *mu, *bu],
          out, ml + bl)


def scan(g: Builder) -> None:
    rng = g.rng
    v = g.pick(lambda w: w.rank >= 1)
    if v is None:
        raise Rejected("no value")
    d = _neg(g, rng.randrange(v.rank), v.rank)
    fn = rng.choice(["cumsum", "cumsum", "softmax", "log_softmax", "cumprod", "logcumsumexp",
                     "cummax"])
    if fn in ("softmax", "log_softmax"):
        expr = f"torch.{fn}({v.ref}, {d})" if rng.random() < 0.5 else f"F.{fn}({v.ref}, dim={d})"
    elif fn == "cummax":
        expr = f"torch.cummax({v.ref}, {d}).values"
    elif fn == "cumprod":
        expr = f"torch.cumprod({v.ref}.clamp(-2, 2), {d})"
    else:
        expr = f"torch.{fn}({v.ref}, {d})"
    out = g.fresh("v")
    g.add(f"{out} = {expr}", fn, [v.name], out)


def constant(g: Builder) -> None:
    """Values made in forward: constants, factories (folding opportunities)."""
    rng = g.rng
    out = g.fresh("v")
    v = g.pick(lambda w: w.rank >= 1)
    r = rng.random()
    if r < 0.3:
        n = rng.randint(1, 4)
        vals = [rng.randint(-3, 3) for _ in range(n)]
        dt = rng.choice(["torch.float32", "torch.int64", "torch.int32", "torch.float16"])
        expr = f"torch.tensor({vals}, dtype={dt})"
    elif r < 0.5 and v is not None:
        d = rng.randrange(v.rank)
        expr = f"torch.arange({v.ref}.shape[{d}])"
    elif r < 0.7 and v is not None:
        fn = rng.choice(["torch.ones_like({x})", "torch.zeros_like({x})",
                         "torch.full_like({x}, 2)", "torch.empty_like({x}).fill_(1)"])
        expr = fn.format(x=v.ref)
    elif v is not None:
        expr = f"torch.full(({v.ref}.shape[0], {rng.randint(1, 3)}), {rng.choice([1, 0.5, -2])})"
    else:
        expr = f"torch.arange({rng.randint(0, 5)})"
    g.add(f"{out} = {expr}", expr.split("(")[0], [v.name] if v and v.ref in expr else [], out)


def clone(g: Builder) -> None:
    v = g.pick()
    if v is None:
        raise Rejected("no value")
    out = g.fresh("v")
    form = g.rng.choice(["{x}.clone()", "{x} + 0", "{x}.clone().contiguous()", "{x}.detach().clone()"])
    g.add(f"{out} = {form.format(x=v.ref)}", "clone", [v.name], out)


def misc(g: Builder) -> None:
    rng = g.rng
    v = g.pick(lambda w: w.rank >= 1)
    if v is None:
        raise Rejected("no value")
    d = rng.randrange(v.rank)
    out = g.fresh("v")
    leaves: list[Leaf] = []
    kind = rng.choice(["flip", "roll", "tril", "triu", "pad", "repeat", "sort", "topk",
                       "layer_norm", "masked_fill", "clamp_t", "lerp", "addcmul", "tile"])
    ref = v.ref
    if kind == "flip":
        expr = f"torch.flip({ref}, ({d},))"
    elif kind == "roll":
        expr = f"torch.roll({ref}, {rng.randint(-3, 3)}, {d})"
    elif kind in ("tril", "triu"):
        expr = f"torch.{kind}({ref}, {rng.randint(-1, 1)})"
    elif kind == "pad":
        expr = f"F.pad({ref}, ({rng.randint(-1, 2)}, {rng.randint(0, 2)}), value={rng.choice([0, 1.5])})"
    elif kind == "repeat":
        expr = f"{ref}.repeat({', '.join(str(rng.randint(1, 2)) for _ in range(v.rank))})"
    elif kind == "tile":
        expr = f"torch.tile({ref}, ({rng.randint(1, 3)},))"
    elif kind == "sort":
        if not _step_ok(v):
            raise Rejected("sort of float16")
        expr = f"torch.sort({ref}, {d}, descending={rng.choice([True, False])}).values"
    elif kind == "topk":
        if not _step_ok(v):
            raise Rejected("topk of float16")
        k = rng.randint(0, max(0, g.min_size(v.shape[d])))
        expr = f"torch.topk({ref}, {k}, {d}).values"
    elif kind == "layer_norm":
        n = v.shape[-1]
        if n[0]:
            raise Rejected("dynamic normalized shape")
        w = g.leaf((n,), v.dtype, kind="p") if v.dtype in FLOATS else None
        leaves = [w] if w else []
        expr = f"F.layer_norm({ref}, ({n[1]},), {w.ref if w else 'None'})"
    elif kind == "masked_fill":
        mask, mu, leaves = _mask(g, v.shape)
        expr = f"{ref}.masked_fill({mask}, {rng.choice(['0', '1.5', '-1'])})"
        g.add(f"{out} = {expr}", kind, [v.name, *mu], out, leaves)
        return
    elif kind == "clamp_t":
        b, bu, leaves = _operand(g, v.shape, scalar_ok=False)
        g.add(f"{out} = torch.clamp({ref}, min={b})", kind, [v.name, *bu], out, leaves)
        return
    elif kind in ("lerp", "addcmul"):
        b, bu, leaves = _operand(g, v.shape, dtype=v.dtype, scalar_ok=False)
        expr = (f"torch.lerp({ref}, {b}, 0.3)" if kind == "lerp"
                else f"torch.addcmul({ref}, {b}, {b}, value=0.5)")
        g.add(f"{out} = {expr}", kind, [v.name, *bu], out, leaves)
        return
    g.add(f"{out} = {expr}", kind, [v.name], out, leaves)


WEIGHTS: list[tuple[Callable[[Builder], None], int]] = [
    (unary, 14), (binary, 16), (reduce, 7), (matmul, 5), (view, 18), (cat_stack, 5), (where, 4), (scan, 4), (constant, 3), (clone, 5),
    (misc, 6),
]
