"""Statements beyond single ops: embedding bags, recurrent layers (a submodule leaf),
and the outer broadcast of two values that may both carry the dynamic dim. Each is a
place where the size 1 of a dynamic dim has its own meaning (one bag, one step, a
broadcast where both sides may be 1)."""

from __future__ import annotations

import torch

from pt2onnx.testing.fuzz.generator import Builder, Rejected
from pt2onnx.testing.fuzz.program import Leaf


def embedding_bag(g: Builder) -> None:
    """``F.embedding_bag`` in every mode: 2-D indices, or 1-D indices with literal
    offsets or one bag per index (the number of bags follows the dynamic dim)."""
    rng = g.rng
    num, width = rng.randint(2, 6), rng.randint(1, 4)
    weight = g.leaf(((0, num), (0, width)), torch.float32, kind="p")
    n = (1, 0) if g.b is not None and rng.random() < 0.7 else (0, rng.randint(1, 6))
    mode = rng.choice(["sum", "mean", "max"])
    last = rng.random() < 0.3
    if rng.random() < 0.4:  # 2-D: one bag per row
        shape: tuple[tuple[int, int], ...] = (n, (0, rng.randint(1, 3)))
        offsets = "None"
        last = False
    else:
        shape = (n,)
        if n[0] or rng.random() < 0.5:
            offsets = None  # set below, from the indices' own length
        else:  # bags cut inside the indices; with include_last_offset, n ends the last
            cuts = sorted(rng.sample(range(1, n[1]), rng.randint(0, min(3, n[1] - 1))))
            offsets = f"torch.tensor({[0, *cuts, *([n[1]] if last else [])]})"
    idx = g.leaf(shape, torch.int64, data="index", bound=(0, num))
    if offsets is None:  # one bag per index (torch 2.13 crashes on 0 bags in max mode)
        offsets = f"torch.arange({idx.ref}.shape[0]{' + 1' if last else ''})"
    leaves: list[Leaf] = [weight, idx]
    weights = "None"
    if mode == "sum" and rng.random() < 0.5:
        per_sample = g.leaf(shape, torch.float32, kind="x")
        leaves.append(per_sample)
        weights = per_sample.ref
    padding = rng.randrange(num) if rng.random() < 0.3 else None
    out = g.fresh("v")
    g.add(f"{out} = F.embedding_bag({idx.ref}, {weight.ref}, {offsets}, mode='{mode}', "
          f"per_sample_weights={weights}, include_last_offset={last}, "
          f"padding_idx={padding})", f"embedding_bag.{mode}", [], out, leaves)


def rnn(g: Builder) -> None:
    """A plain (not packed) ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` on a float32 value of
    rank 2 (unbatched) or 3, whose steps or batch may be the dynamic dim."""
    rng = g.rng
    v = g.pick(lambda w: w.dtype == torch.float32 and w.rank in (2, 3)
               and w.shape[-1][0] == 0 and 1 <= w.shape[-1][1] <= 6)
    if v is None:
        raise Rejected("no sequence")
    kind = rng.choice(["LSTM", "GRU", "RNN"])
    hidden = rng.randint(1, 4)
    batch_first = v.rank == 3 and rng.random() < 0.5
    ctor = (f"torch.nn.{kind}({v.shape[-1][1]}, {hidden}, num_layers={rng.randint(1, 2)}, "
            f"bidirectional={rng.random() < 0.4}, batch_first={batch_first})")
    module = g.leaf((), torch.float32, kind="m")
    module.ctor = ctor
    which = rng.choice(["[0]", "[1]"] if kind != "LSTM" else ["[0]", "[1][0]", "[1][1]"])
    out = g.fresh("v")
    g.add(f"{out} = {module.ref}({v.ref}){which}", f"rnn.{kind}", [v.name], out, [module])


def outer(g: Builder) -> None:
    """``a[..., :, None] + b[..., None, :]`` or the flat outer product: two values
    that may both carry the dynamic dim, broadcast against each other (at B = 1 both
    sides of a broadcast can be 1)."""
    rng = g.rng
    dyn = [w for w in g.vars.values() if w.rank >= 1 and any(c for c, _ in w.shape)]
    v = rng.choice(dyn) if dyn and rng.random() < 0.7 else g.pick(lambda w: w.rank >= 1)
    w = g.pick(lambda u: u.rank >= 1)
    if v is None or w is None:
        raise Rejected("no value")
    a, b = (f"{v.ref}.flatten()", f"{w.ref}.flatten()") if rng.random() < 0.5 else (
        v.ref, w.ref)
    fn = rng.choice(["torch.add", "torch.mul", "torch.maximum"])
    out = g.fresh("v")
    g.add(f"{out} = {fn}({a}.unsqueeze(-1), {b}.unsqueeze(-2))", "outer", [v.name, w.name],
          out)

