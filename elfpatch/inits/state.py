"""The walk's abstract state (see disasm.py): a State holds a dict from a register name ("rax", "x0"), a stack
slot ("m:...") or the last compare's operands ("cmp") to the Value it is known to hold; a key absent is unknown.
The ISAs' transfer functions update that dict in place, at C speed. The fixpoint in disasm.py joins states at
block heads (what both agree on, addresses in one object widened to Within it), compares them with the
lattice's equality (Within(x) is not x) and keeps each state's size constant with bound(); a loop head's state
only loses keys or widens, so the passes settle."""
from __future__ import annotations

from typing import Callable

from elfpatch.inits.budget import STATE_SLOTS
from elfpatch.inits.values import FRAME, Value, Within, address_of, same, widened


class State:
    """One program point's abstract state: ``values`` maps a register, a stack slot or "cmp" to its Value."""

    __slots__ = ("values",)

    def __init__(self, values: dict | None = None) -> None:
        self.values: dict = {} if values is None else values

    def __repr__(self) -> str:
        return f"State({self.values!r})"

    def copy(self) -> State:
        return State(dict(self.values))

    def fresh(self) -> State:
        """A copy without the compare's outcome (which held on one edge only): a join with nothing yet."""
        out = dict(self.values)  # a copy at C speed, less the compare's outcome
        out.pop("cmp", None)
        return State(out)

    def join(self, other: State, object_of: Callable[[int], int | None]) -> State:
        """What the two states agree on: equal values, and addresses inside one global object as ``Within``
        it. Commutative and idempotent (less the compare's outcome, which no join keeps)."""
        b = other.values
        out = {}
        for k, v in self.values.items():
            w = b.get(k)
            if w is None or k == "cmp":
                continue
            if v == w and type(v) is type(w):  # values.same, in line (called for every key of every join)
                out[k] = v
            else:  # two addresses (exact, or Within an object: its start) in one object: Within it
                x, y = address_of(v), address_of(w)
                if x is not None and y is not None:
                    o = object_of(x)
                    if o is not None and o == object_of(y):
                        out[k] = Within(o)
                elif (u := widened(v, w)) is not None:  # another module's object at two offsets: at one not known
                    out[k] = u
        return State(out)

    def __eq__(self, other: object) -> bool:
        """The lattice's equality: the same keys, each the same value (Within(x) is not x)."""
        if not isinstance(other, State):
            return NotImplemented
        a, b = self.values, other.values
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())

    __hash__ = None  # type: ignore[assignment]  # mutable

    def bound(self) -> None:
        """Forgets the oldest stack slots past STATE_SLOTS (see budget.py): a state's size stays constant."""
        st = self.values
        if len(st) > STATE_SLOTS + 64:  # checked by size alone (cheap per block); registers are never dropped
            slots = [k for k in st if k.startswith("m:")]
            for k in slots[: len(slots) - STATE_SLOTS]:
                del st[k]


# Stack slots. A slot's key names its base register, its offset and, for 4 bytes, its width ("m:rbp-8",
# "m:sp+16/4"); only 8-byte and 4-byte slots at offsets of their own alignment hold a value (a 4-byte one an
# int alone: the priority an -O0 initializer spills), so a store's overlaps are a few keys known per plan.
SLOTS = "m:"  # every slot's key starts so; a prefix alone ("m:rsp") in a clobber list forgets all of a base's


def slot_key(base: str, offset: int, width: int | None) -> str | None:
    """The key of the slot of ``width`` bytes at ``base`` + ``offset`` that can hold a value (None: none)."""
    if width == 8 and offset % 8 == 0:
        return f"m:{base}{offset:+d}"
    if width == 4 and offset % 4 == 0:
        return f"m:{base}{offset:+d}/4"
    return None


def slot_clobbers(base: str, offset: int, width: int | None) -> tuple[str, ...]:
    """The keys of the slots a store of ``width`` bytes at ``base`` + ``offset`` overwrites in part or whole,
    but its own (``width`` None, not known: every slot of the base)."""
    if width is None:
        return (SLOTS + base,)
    own = slot_key(base, offset, width)
    keys = [slot_key(base, o, 8) for o in range(offset - offset % 8, offset + width, 8)]
    keys += [slot_key(base, o, 4) for o in range(offset - offset % 4, offset + width, 4)]
    return tuple(k for k in keys if k is not None and k != own)


def forget_slots(values: dict, prefix: str = SLOTS) -> None:
    """Forgets every slot whose key starts with ``prefix`` (all of them by default)."""
    for k in [k for k in values if k.startswith(prefix)]:
        del values[k]


def clobber(values: dict, keys: tuple[str, ...]) -> None:
    """Forgets the slots of ``keys`` (see slot_clobbers), a base's prefix every slot of that base."""
    for k in keys:
        if "+" in k or "-" in k:  # a slot's key has its signed offset; a base's prefix has none
            values.pop(k, None)
        else:
            forget_slots(values, k)


def overwrite(values: dict, keys: tuple[str, ...], other: str | None, pointer: str) -> None:
    """A store's other slots forgotten: ``keys`` (slot_clobbers), and the other frame base's (``other``, a
    prefix: the same bytes may have both names). The frame pointer's (``pointer``: rbp, x29) only while it
    is the frame: otherwise none of its slots is read before it is the frame again, which forgets them."""
    if keys:
        clobber(values, keys)
    if other is not None and (other != SLOTS + pointer or values.get(pointer) == FRAME):
        forget_slots(values, other)


def narrowed(value: Value | None, width: int | None) -> Value | None:
    """What a slot of ``width`` bytes keeps of a value stored: the whole of 8; of 4 an int's low half (as a
    4-byte load gives it back, zero extended), nothing of an address or pointer."""
    if width == 8:
        return value
    return value & 0xFFFFFFFF if type(value) is int else None


def frame_held(values: dict, args: tuple) -> tuple:
    """The values the frame's slots hold when a call is handed a pointer into the frame: another module's
    function may read the addresses among them (``writev``'s iovec, ``sendmsg``'s msghdr)."""
    return tuple(v for k, v in values.items() if k.startswith(SLOTS) and v is not None) if FRAME in args else ()


def frame_handed(values: dict, args: tuple) -> None:
    """A call handed a pointer into the frame (``pick(&p)``, ``memcpy(&p, ...)``): it may store into any of the
    frame's slots (which one the pointer names is not kept), so none keeps its value."""
    if FRAME in args:
        forget_slots(values)


FRAME_ONLY = State()  # marker: _walk_blocks's cases before any jump start from the frame alone


def join(a: State | None, b: State, object_of: Callable[[int], int | None]) -> State:
    """``a`` joined with ``b`` (``a`` None: no state yet, ``b`` alone, less the compare's outcome)."""
    return b.fresh() if a is None else a.join(b, object_of)


def equal(a: State | None, b: State | None) -> bool:
    """The lattice's equality, None (no state) equal to None alone."""
    if a is None or b is None:
        return a is b
    return a == b


def head_state(fwd: State | None, assumed: State | None, object_of: Callable[[int], int | None]) -> State:
    """A loop head's starting state: what its forward edges agree on, joined with what its back edges brought
    in the pass before (None: not known yet, or no forward edge)."""
    if assumed is None:
        return fwd.copy() if fwd is not None else State()
    if fwd is None:
        return assumed.copy()
    return fwd.join(assumed, object_of)


def with_more(st: State | None, more: State | None, object_of: Callable[[int], int | None]) -> State | None:
    """``st`` joined with ``more`` (None: nothing more); ``more`` alone when ``st`` is None."""
    return st if more is None else join(st, more, object_of)


def case_base(preset: State | None, jumps: State | None, frame: State) -> State | None:
    """What a possible case of a jump table is joined with (see Disassembler._walk_blocks): the jumps' state
    from the walk before, else what the jumps walked so far agree on; before any jump nothing (its edges alone,
    a walk that is done again) or, under FRAME_ONLY, the frame."""
    if preset is not None and preset is not FRAME_ONLY:
        return preset
    if jumps is None and preset is FRAME_ONLY:
        return frame
    return jumps


def case_state(st: State | None, has_pred: bool, base: State | None,
               object_of: Callable[[int], int | None]) -> State | None:
    """A possible case's starting state: its edges' (``st``) joined with ``base``; ``base`` alone for a block
    no edge reaches (only the table does)."""
    if base is None:
        return st
    return base.fresh() if st is None or not has_pred else st.join(base, object_of)
