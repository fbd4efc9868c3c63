"""The values the walk's abstract state holds (see disasm.py): a link-time address in this file (int), an
address somewhere inside one global object (Within), an external symbol's name (str), or a pointer known only by
its provenance (Ptr)."""
from __future__ import annotations

from typing import NamedTuple, Union

# A register's known value: a link-time address in this file (int) or an external symbol's name (str).
Value = Union[int, str, "Ptr"]


class Within(int):
    """An address somewhere inside the global object that starts here: where a loop's moving pointer, or an
    address plus an unknown index, points. Its accesses are the object's; it decides no compare."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Within({int(self):#x})"


class Ptr(NamedTuple):
    """A pointer whose provenance is known though its address is not: the function's own stack frame
    ("frame"), memory an allocation call returned ("alloc"), or what the caller passed in argument register
    ``n`` ("arg"). Never an int: it never compares equal to an address."""

    kind: str
    n: int = 0


FRAME, ALLOC = Ptr("frame"), Ptr("alloc")


def same(a: Value, b: Value) -> bool:
    """The same known value (Within(x) is not x: one is exact, the other is not)."""
    return a == b and type(a) is type(b)
