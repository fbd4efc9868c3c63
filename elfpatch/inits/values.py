"""The values the walk's abstract state holds (see disasm.py): a link-time address in this file (int), an
address somewhere inside one global object (Within), an external symbol's name (str), or a pointer known only by
its provenance (Ptr)."""
from __future__ import annotations

from typing import NamedTuple, Union

# A register's known value: a link-time address in this file (int), an external symbol's name (str), a pointer
# known by its provenance (Ptr), or an address somewhere inside one object (Within).
Value = Union[int, str, "Ptr", "Within"]


class Within:
    """An address somewhere inside the global object that starts at ``start``: where a loop's moving pointer, or
    an address plus an unknown index, points. Its accesses are the object's; it decides no compare. Not an int:
    it never compares equal to an address (Within(x) != x), so no dict, set or cache takes one for the other."""

    __slots__ = ("start",)
    start: int

    def __init__(self, start: int) -> None:
        object.__setattr__(self, "start", start)

    def __setattr__(self, _name: str, _value: object) -> None:
        raise AttributeError("Within is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is Within and other.start == self.start

    def __hash__(self) -> int:
        return hash((Within, self.start))

    def __repr__(self) -> str:
        return f"Within({self.start:#x})"


class Ptr(NamedTuple):
    """A pointer whose provenance is known though its address is not: the function's own stack frame
    ("frame"), memory an allocation call returned ("alloc"), or what the caller passed in argument register
    ``n`` ("arg"). Never an int: it never compares equal to an address."""

    kind: str
    n: int = 0


FRAME, ALLOC = Ptr("frame"), Ptr("alloc")


def address_of(v: object) -> int | None:
    """The address a value names: an int is one; a Within names its object's start (what its accesses, calls
    and registrations are judged by); anything else (a symbol, a Ptr, None) none."""
    if isinstance(v, Within):
        return v.start
    return v if isinstance(v, int) else None


def plain(v: Value | None) -> Value | None:
    """``v`` with a Within replaced by its object's start: the value as what the walk reports sees it."""
    return v.start if isinstance(v, Within) else v


def same(a: Value, b: Value) -> bool:
    """The same known value (Within(x) is not x: one is exact, the other is not)."""
    return a == b and type(a) is type(b)


# What a load of a word of another module's object yields: "*<symbol>+<offset>", the pointer that word holds
# (a reference global, a pointer global, a pointer table's entry, a function pointer the other module defines).
# A str, like a symbol name, so that an access through it is another module's (Deref base) and the whole load
# can follow the word (inits.crossload); never a symbol: no mangled name holds "*" or "+".
HELD = "*"


def held(symbol: str, offset: int) -> str:
    """The value a load of the word at ``symbol`` + ``offset`` (another module's object) gives."""
    return f"{HELD}{symbol}+{offset}"


def held_by(value: object) -> tuple[str, int] | None:
    """(symbol, offset) of the word whose pointer ``value`` is (see held), or None."""
    if not isinstance(value, str) or not value.startswith(HELD):
        return None
    name, _, offset = value[len(HELD):].rpartition("+")
    return (name, int(offset)) if name and offset.lstrip("-").isdigit() else None
