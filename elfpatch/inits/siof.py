"""The SIOF rule: the static-initialization-order verdict on each read an initializer makes of a global.

A read of object O by initializer R is judged against O's constructor C, the first initializer (in this
file's run order) that calls a constructor on O or registers O's destructor, else the first that stores into
it (a constant-initialized global that an initializer overwrites):
``before-construction`` when R runs before C; ``order-dependent`` when R runs after C but only link order
decides it (same priority); ``priority-ordered`` when priorities fix it. Function-local statics, guarded
(inline and template) variables, objects R itself constructs and objects no initializer touches are safe.
"""
from __future__ import annotations

from elfpatch.elf.symbols import guard_variable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from elfpatch.inits.walk import Summary

VERDICTS = ("before-construction", "order-dependent")  # the statuses that are findings


def constructors(summaries: list) -> dict[int, int]:
    """object -> position (in entries) of its constructor: the first initializer that constructs it strongly
    (a constructor call or a registered destructor), else the first that stores into it, else the first that
    passes its address to a function that stores through it (``init(&g)``)."""
    constructor: dict[int, int] = {}
    for pos, s in enumerate(summaries):
        for o, strong in s.constructs.items() if s is not None else ():
            if strong and o not in constructor:
                constructor[o] = pos
    for pos, s in enumerate(summaries):
        for o in s.constructs if s is not None else ():
            constructor.setdefault(o, pos)
    for pos, s in enumerate(summaries):  # else the first whose callee stores into it through its address
        for o in sorted(s.call_stores) if s is not None else ():
            constructor.setdefault(o, pos)
    return constructor


def read_status(o: int, name: str, pos: int, s: Summary, constructor: dict[int, int], guards: dict[str, int],
                entries: list[dict], strong: set[int], sure: frozenset[int] = frozenset()) -> tuple[int | None, str]:
    """(constructor position, status) of a read of ``o`` by the initializer at ``pos``; ``sure``: the objects
    some initializer builds for sure (a constructor call, a registered destructor)."""
    c = constructor.get(o)
    if name.startswith("_ZZ"):
        return c, "function-local-static"
    if c == pos and o in s.early:
        return c, "before-construction"  # read, then built, by the same initializer (a unit read before it)
    if c is not None and c != pos and o in sure and s.constructs.get(o) is False:
        # plain stores (into one member, or a reset after a load) do not build what another initializer
        # constructs: the reader's order against that constructor decides
        return c, order_verdict(pos, c, entries)
    if o in s.constructs or (o in s.call_stores and o not in strong):
        return c, "own"  # a shared helper that builds it on first use, whichever initializer runs first
    guard = guard_variable(name)
    if guard in guards:  # an inline or template variable: safe once its guarded initialization has run
        g = guards[guard]
        return (g, "guarded") if g <= pos else (g, order_verdict(pos, g, entries))
    if c is None:
        return c, "constant"
    if c == pos:
        return c, "own"
    return c, order_verdict(pos, c, entries)


def order_verdict(pos: int, c: int, entries: list[dict]) -> str:
    """The verdict on a read by the initializer at ``pos`` of an object the one at ``c`` builds, from their run
    order and priorities."""
    reader, ctor = entries[pos], entries[c]
    if entries[pos]["address"] == entries[c]["address"]:
        return "own"
    if pos < c:
        return "before-construction"
    # the loader runs a program's preinit_array before DT_INIT (the legacy .ctors list) and the init_array:
    # across two kinds the order is fixed, as init priorities fix it within one
    if (reader["priority"] or 65535) != (ctor["priority"] or 65535) or reader.get("kind") != ctor.get("kind"):
        return "priority-ordered"
    return "order-dependent"
