"""What the load initializes before a file (`inits --deps`): the symbols its earlier objects define.

A library's dependencies run their initializers before it, and a program's libraries before the program
(glibc's order, elfpatch.elf.loadorder). An object another module defines and one of those earlier objects exports
has been through its initializers when this file's run: a read of it is ordered by the load.
"""
from __future__ import annotations

from typing import Callable, FrozenSet, Iterable, Optional

from elfpatch.inits.crossload import Symbols, load_symbols

TYPE_CHECKING = False
if TYPE_CHECKING:
    from elfpatch.elf.loadorder import Load

Names = Optional[FrozenSet[str]]


def load_names(load: Load) -> tuple[Names, Names, Names]:
    """From one read of each object's ``.dynsym`` (the caller resolves the load once: `inits --deps` lists it
    too), each None where an object it needs could not be read (nothing is then taken as settled):

    - the symbols the objects ``load`` initializes before its root define: reads of those are ordered;
    - the symbols some object of the load defines: a function the root calls that none defines is its loader's
      (a program that dlopens it, with -rdynamic) or no one's;
    - the symbols the objects other than the root import: the root's exported objects their code may read."""
    symbols = load_symbols(load)
    order = list(load.init_order)
    earlier = [symbols[i] for i in order[: order.index(0)]] if 0 in order else []
    return (_union(earlier, lambda s: s.defined.keys()), _union(symbols, lambda s: s.defined.keys()),
            _union(symbols[1:], lambda s: s.imported))


def _union(symbols: list[Symbols | None], names: Callable[[Symbols], Iterable[str]]) -> Names:
    if any(s is None for s in symbols):
        return None
    return frozenset(n for s in symbols if s is not None for n in names(s))
