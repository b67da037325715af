"""In-place updates (through views), gather/scatter and indexing: the statements that
write into values or read them through index tensors."""

from __future__ import annotations

import torch

from pt2onnx.testing.fuzz.generator import ALL_DTYPES, Builder, Rejected, Var
from pt2onnx.testing.fuzz.ops_common import _mask, _neg, _operand, _slice_src
from pt2onnx.testing.fuzz.program import Leaf, Shape


def shape_of(g: Builder, expr: str) -> Shape:
    """The affine shape of an expression over existing values (meta evaluation)."""
    shapes = []
    try:
        for env in g.envs:
            shapes.append(tuple(eval(expr, dict(env)).shape))
    except Exception as e:
        raise Rejected(str(e)) from None
    shape = g._affine(shapes)
    if shape is None:
        raise Rejected("not affine")
    return shape


def _target(g: Builder) -> tuple[Var, str]:
    """A value to update in place, maybe through a view of it."""
    rng = g.rng
    v = g.pick(lambda w: w.writable and not w.leaf)
    if v is None:
        raise Rejected("nothing writable")
    ref = v.ref
    if v.rank and rng.random() < 0.6:
        d = rng.randrange(v.rank)
        r = rng.random()
        if r < 0.5:
            parts = [":"] * v.rank
            parts[d] = _slice_src(g, v, d)
            ref = f"{ref}[{', '.join(parts)}]"
        elif r < 0.75 and g.min_size(v.shape[d]) > 0:
            ref = f"{ref}.select({d}, {rng.randint(0, g.min_size(v.shape[d]) - 1)})"
        elif v.rank >= 2:
            ref = f"{ref}.transpose(0, {v.rank - 1})"
    return v, ref


def inplace(g: Builder) -> None:
    rng = g.rng
    v, tgt = _target(g)
    shape = shape_of(g, tgt)
    kind = rng.choice(["add_", "sub_", "mul_", "div_", "clamp_", "masked_fill_", "copy_",
                       "setitem", "index_put_", "fill_", "zero_", "relu_", "iadd", "scatter_",
                       "scatter_add_", "index_put_acc", "neg_"])
    uses = [v.name]
    leaves: list[Leaf] = []
    if kind in ("add_", "sub_", "mul_", "div_", "copy_", "setitem", "iadd"):
        b, more, leaves = _operand(g, shape, scalar_ok=kind not in ("copy_",),
                                   avoid_base=v.base)
        if kind == "div_":
            b = f"({b}.abs() + 1)" if not b[0].isdigit() and b[0] not in "-T" else "2"
        uses += more
        code = {"setitem": f"{tgt}[...] = {b}", "iadd": f"{tgt} += {b}"}.get(
            kind, f"{tgt}.{kind}({b})")
        if kind == "iadd" and not tgt.isidentifier():
            code = f"{tgt}.add_({b})"
    elif kind == "clamp_":
        code = f"{tgt}.clamp_({rng.choice(['-1', '0', 'min=-2'])}, {rng.choice(['2', '3'])})"
    elif kind == "masked_fill_":
        mask, more, leaves = _mask(g, shape, v.base)
        uses += more
        code = f"{tgt}.masked_fill_({mask}, {rng.choice(['0', '1', '-3', 'True'])})"
    elif kind == "fill_":
        code = f"{tgt}.fill_({rng.choice(['0', '2', '-1', 'True'])})"
    elif kind in ("zero_", "relu_", "neg_"):
        code = f"{tgt}.{kind}()"
    elif kind in ("index_put_", "index_put_acc"):
        if not shape:
            raise Rejected("rank 0")
        bound = shape[0]
        if bound[0] and bound != (1, 0):
            raise Rejected("bound")
        k = rng.randint(0, max(0, min(3, g.min_size(bound))))
        acc = kind == "index_put_acc"
        idx = g.leaf(((0, k),), torch.int64, data="index", bound=bound,
                     unique_dim=None if acc else 0)
        val, more, vleaves = _operand(g, ((0, k), *shape[1:]), avoid_base=v.base)
        uses += more
        leaves = [idx, *vleaves]
        if acc:
            code = f"{tgt}.index_put_(({idx.ref},), torch.as_tensor({val}), accumulate=True)"
        else:
            code = f"{tgt}[{idx.ref}] = {val}"
    else:  # scatter_, scatter_add_
        if not shape:
            raise Rejected("rank 0")
        d = rng.randrange(len(shape))
        idx, ishape = _index_for(g, shape, d, unique=kind == "scatter_")
        src = g.leaf(ishape, rng.choice(ALL_DTYPES)) if g.can_leaf(ishape) else None
        if src is None:
            raise Rejected("src")
        leaves = [idx, src]
        code = f"{tgt}.{kind}({d}, {idx.ref}, {src.ref}.to({tgt}.dtype))"
    g.add(code, kind, uses, None, leaves)


def _index_for(g: Builder, shape: Shape, d: int, unique: bool) -> tuple[Leaf, Shape]:
    """An index leaf for dim d of a tensor of ``shape`` (gather/scatter layout)."""
    rng = g.rng
    bound = shape[d]
    if bound[0] and bound != (1, 0):
        raise Rejected("bound")
    mins = g.min_size(bound)
    k = rng.randint(0, max(0, min(mins, 4))) if unique else rng.randint(0, 4)
    if not unique and mins == 0:
        k = 0
    ishape = tuple((0, k) if i == d else s if rng.random() < 0.8 or s[0] else (0, min(1, s[1]))
                   for i, s in enumerate(shape))
    if not g.can_leaf(ishape):
        raise Rejected("index shape")
    return g.leaf(ishape, torch.int64, data="index", bound=bound,
                  unique_dim=d if unique else None), ishape


def gather_scatter(g: Builder) -> None:
    rng = g.rng
    v = g.pick(lambda w: w.rank >= 1)
    if v is None:
        raise Rejected("no value")
    d = rng.randrange(v.rank)
    kind = rng.choice(["gather", "scatter", "scatter_value", "scatter_add", "scatter_reduce",
                       "index_select", "index_add", "take_along_dim", "index"])
    out = g.fresh("v")
    dn = _neg(g, d, v.rank)
    if kind in ("index_select", "index_add", "index"):
        bound = v.shape[d]
        if bound[0] and bound != (1, 0):
            raise Rejected("bound")
        k = rng.randint(0, 4) if g.min_size(bound) else 0
        idx = g.leaf(((0, k),), torch.int64, data="index", bound=bound)
        if kind == "index_select":
            g.add(f"{out} = torch.index_select({v.ref}, {dn}, {idx.ref})", kind, [v.name], out,
                  [idx])
        elif kind == "index":
            g.add(f"{out} = {v.ref}[{', '.join([':'] * d + [idx.ref])}]", kind, [v.name], out,
                  [idx])
        else:
            src_shape = tuple((0, k) if i == d else s for i, s in enumerate(v.shape))
            src = g.leaf(src_shape, v.dtype)
            g.add(f"{out} = torch.index_add({v.ref}, {dn}, {idx.ref}, {src.ref})", kind,
                  [v.name], out, [idx, src])
        return
    idx, ishape = _index_for(g, v.shape, d, unique=kind in ("scatter", "scatter_value"))
    if kind in ("gather", "take_along_dim"):
        fn = "torch.gather" if kind == "gather" else "torch.take_along_dim"
        g.add(f"{out} = {fn}({v.ref}, {dn}, {idx.ref})" if kind == "gather" else
              f"{out} = {fn}({v.ref}, {idx.ref}, {dn})", kind, [v.name], out, [idx])
        return
    if kind == "scatter_value":
        g.add(f"{out} = torch.scatter({v.ref}, {dn}, {idx.ref}, {rng.choice(['1.5', '-2', '0'])})",
              kind, [v.name], out, [idx])
        return
    src = g.leaf(ishape, v.dtype)
    if kind == "scatter_reduce":
        red = rng.choice(["sum", "prod", "amax", "amin", "mean"])
        incl = rng.choice([True, False])
        g.add(f"{out} = torch.scatter_reduce({v.ref}, {dn}, {idx.ref}, {src.ref}, "
              f"'{red}', include_self={incl})", f"scatter_reduce.{red}", [v.name], out,
              [idx, src])
        return
    fn = "torch.scatter" if kind == "scatter" else "torch.scatter_add"
    g.add(f"{out} = {fn}({v.ref}, {dn}, {idx.ref}, {src.ref})", kind, [v.name], out, [idx, src])
