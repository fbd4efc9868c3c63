"""Function-local statics used on a path that skips their guard.

A function-local static with dynamic initialization (``static Obj o;``) is built by the first call that passes
its declaration: the code loads the guard byte (``_ZGVZ...``), and on 0 runs ``__cxa_guard_acquire``, the
constructor and ``__cxa_guard_release``. A read of it is safe because every path to it checks the guard first.
C++ lets a ``goto`` (or a ``case`` label) jump past the declaration of a static -- only automatic variables
may not be skipped -- and then the object is used unbuilt (the run printed 0). So such a use (a load or store,
or a return of its address) is proven safe only where every path from the function's entry to it passes a
check of its guard: an instruction that touches the guard, or a call of a function that checks it on every
path to its return (a getter GCC's IPA lets its caller read through: ``call get; mov o(%rip), %eax``). A
must-analysis over the function's decoded blocks decides both."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Callable

from elfpatch.elf.symbols import guard_variable
from elfpatch.inits.disasm import Decoded


def static_base(name: str) -> str:
    """A function-local static's name less the suffix a compiler's pass gave its copy (clang's SRA:
    ``_ZZL3getvE1o.0``): the name its guard is named after."""
    return name.split(".", 1)[0]


def guarded_static(name: str, guarded: Callable[[str], bool]) -> str | None:
    """The guard variable's name of a function-local static that has one (None: another object, or a local
    static with constant initialization, which has no guard and is never unbuilt)."""
    base = static_base(name)
    return guard_variable(base) if name.startswith("_ZZ") and guarded(base) else None


def checked_at(dec: Decoded, checks: dict[str, list[int]],
               ends: frozenset[int] = frozenset()) -> Callable[[str, int, bool], bool]:
    """A predicate on (guard, instruction address, inclusive): whether every path from the function's entry
    to that instruction passes one of ``checks[guard]`` (instruction addresses) before it (or at it, when
    ``inclusive``: a tail call of a function that checks it). An instruction the blocks do not hold is not.
    ``ends``: call instructions that never return (a function of this file that throws: the code after it is
    not where the call goes on)."""
    index = {insn[0]: i for i, insn in enumerate(dec.insns)}
    block_of: dict[int, int] = {}
    for b, (first, last) in enumerate(dec.blocks):
        for i in range(first, last + 1):
            block_of[i] = b
    live = _live(dec)
    preds: dict[int, list[int]] = {}
    for b, edges in dec.succs.items():
        if b in live and dec.insns[dec.blocks[b][1]][0] not in ends:
            for s, _taken in edges:
                preds.setdefault(s, []).append(b)
    into: dict[str, list[bool]] = {}
    at_index = {g: {index[a] for a in addrs if a in index} for g, addrs in checks.items()}

    def checked(guard: str, addr: int, inclusive: bool) -> bool:
        i = index.get(addr)
        if i is None or i not in block_of:
            return False
        here = at_index.get(guard, set())
        if guard not in into:
            into[guard] = _into(dec, preds, live, here)
        b = block_of[i]
        first = dec.blocks[b][0]
        return into[guard][b] or any(first <= j < i or (inclusive and j == i) for j in here)

    return checked


def checked_on_exit(checked: Callable[[str, int, bool], bool], guards: Iterable[str], exits: list[int]) -> set[str]:
    """Those of ``guards`` that every path to every exit (return, tail call) checks (a getter's)."""
    return {g for g in guards if all(checked(g, x, True) for x in exits)} if exits else set()


def _live(dec: Decoded) -> set[int]:
    """The blocks a run may reach: those the entry reaches, and those after an unresolved jump table (any of
    them may be a case); other blocks no edge leads to are padding or dead code."""
    live, todo = {0} if dec.blocks else set(), [0] if dec.blocks else []
    while todo:
        for s, _taken in dec.succs.get(todo.pop(), ()):
            if s not in live:
                live.add(s)
                todo.append(s)
    live |= {b for b, (first, _last) in enumerate(dec.blocks) if first > dec.table}
    return live


def _into(dec: Decoded, preds: dict[int, list[int]], live: set[int], checks: set[int]) -> list[bool]:
    """Per block (in dec.blocks' order), whether every path from the entry to its first instruction passed
    one of ``checks`` (instruction indexes). The entry, and a live block no edge leads to (a possible case of a
    table not read), start unchecked."""
    n = len(dec.blocks)
    has = [any(first <= j <= last for j in checks) for first, last in dec.blocks]
    into = [b != 0 and b in preds for b in range(n)]  # optimistic for the blocks edges lead to
    changed = True
    while changed:  # a must-analysis: values only turn from True to False, so it settles
        changed = False
        for b in range(1, n):
            if not into[b]:
                continue
            if not all(into[p] or has[p] for p in preds[b]):
                into[b] = False
                changed = True
    return [v or b not in live for b, v in enumerate(into)]
