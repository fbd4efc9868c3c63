"""The blocks in a loop's body (a registration there may run many times): every node that reaches itself, on
random graphs against a plain reachability search."""
from __future__ import annotations

import random

from elfpatch.inits.disasm import _cyclic


def _reached(succs: dict[int, list[int]], a: int) -> set[int]:
    seen: set[int] = set()
    todo = list(succs[a])
    while todo:
        x = todo.pop()
        if x not in seen:
            seen.add(x)
            todo += succs[x]
    return seen


def test_the_nodes_in_a_cycle_are_those_that_reach_themselves() -> None:
    rng = random.Random(7)
    for _ in range(500):
        n = rng.randint(1, 14)
        succs = {v: [rng.randrange(n) for _ in range(rng.randint(0, 3))] for v in range(n)}
        assert sorted(_cyclic(succs, n)) == sorted(v for v in range(n) if v in _reached(succs, v)), succs
