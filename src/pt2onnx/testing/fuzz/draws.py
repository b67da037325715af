"""The table of what the generator draws, and how often: registered into the generator
when the fuzz package is imported (the generator imports no op table)."""

from __future__ import annotations

import random
from collections.abc import Callable

from pt2onnx.testing.fuzz import generator, ops, ops_layers, ops_sizes, ops_update
from pt2onnx.testing.fuzz.generator import Builder


def draw(rng: random.Random) -> Callable[[Builder], None]:
    weights: list[tuple[Callable[[Builder], None], int]] = [
        *ops.WEIGHTS, (ops_update.inplace, 14), (ops_update.gather_scatter, 7),
        (ops_layers.embedding_bag, 2), (ops_layers.rnn, 2), (ops_layers.outer, 3)]
    fns = [f for f, _ in weights]
    return rng.choices(fns, [w for _, w in weights])[0]


generator.register_draw(draw, ops_sizes.grow)
