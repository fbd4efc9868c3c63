"""The walk's abstract state (see disasm.py): a dict from a register name ("rax", "x0"), a stack slot ("m:...")
or the last compare's operands ("cmp") to the Value it is known to hold; a key absent is unknown. The fixpoint
in disasm.py joins states at block heads with meet() (what both agree on, addresses in one object widened to
Within it), compares them with equal() (the lattice's equality: Within(x) is not x) and keeps each state's size
constant with bound(); a loop head's state only loses keys or widens, so the passes settle."""
from __future__ import annotations

from typing import Callable

from elfpatch.inits.budget import STATE_SLOTS
from elfpatch.inits.values import Within, address_of, same

State = dict  # register / slot / "cmp" -> Value
FRAME_ONLY: dict = {}  # marker: _walk_blocks's cases before any jump start from the frame alone


def meet(a: dict | None, b: dict, object_of: Callable[[int], int | None]) -> dict:
    """What two states agree on (``a`` None: no state yet, ``b`` alone): equal values, and addresses inside one
    global object as ``Within`` it."""
    if a is None:
        out = dict(b)  # a copy at C speed, less the compare's outcome
        out.pop("cmp", None)
        return out
    out = {}
    for k, v in a.items():
        w = b.get(k)
        if w is None or k == "cmp":
            continue
        if same(v, w):
            out[k] = v
        else:  # two addresses (exact, or Within an object: its start) in one object: Within it
            x, y = address_of(v), address_of(w)
            if x is not None and y is not None:
                o = object_of(x)
                if o is not None and o == object_of(y):
                    out[k] = Within(o)
    return out


def head_state(fwd: dict | None, assumed: dict | None, object_of: Callable[[int], int | None]) -> dict:
    """A loop head's starting state: what its forward edges agree on, met with what its back edges brought in
    the pass before (None: not known yet, or no forward edge)."""
    if assumed is None:
        return dict(fwd or {})
    if fwd is None:
        return dict(assumed)
    return meet(fwd, assumed, object_of)


def bound(st: dict) -> None:
    """Forgets the oldest stack slots past STATE_SLOTS (see budget.py): a state's size stays constant."""
    if len(st) > STATE_SLOTS + 64:  # checked by size alone (cheap per block); registers are never dropped
        slots = [k for k in st if k.startswith("m:")]
        for k in slots[: len(slots) - STATE_SLOTS]:
            del st[k]


def with_more(st: dict | None, more: dict | None, object_of: Callable[[int], int | None]) -> dict | None:
    """``st`` met with ``more`` (None: nothing more); ``more`` alone when ``st`` is None."""
    return st if more is None else meet(st, more, object_of)


def case_base(preset: dict | None, jumps: dict | None, frame: dict) -> dict | None:
    """What a possible case of a jump table is met with (see Disassembler._walk_blocks): the jumps' state from
    the walk before, else what the jumps walked so far agree on; before any jump nothing (its edges alone, a
    walk that is done again) or, under FRAME_ONLY, the frame."""
    if preset is not None and preset is not FRAME_ONLY:
        return preset
    if jumps is None and preset is FRAME_ONLY:
        return frame
    return jumps


def case_state(st: dict | None, has_pred: bool, base: dict | None,
                object_of: Callable[[int], int | None]) -> dict | None:
    """A possible case's starting state: its edges' (``st``) met with ``base``; ``base`` alone for a block no
    edge reaches (only the table does)."""
    if base is None:
        return st
    return meet(None, base, object_of) if st is None or not has_pred else meet(st, base, object_of)


def equal(a: dict | None, b: dict | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
