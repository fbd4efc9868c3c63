"""The values the walk's abstract state holds (see disasm.py): a link-time address in this file (int), an
address somewhere inside one global object (Within), an external symbol's name (str), or a pointer known only by
its provenance (Ptr)."""
from __future__ import annotations

from typing import NamedTuple, Union

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import TypeGuard  # typing's own from Python 3.10 on

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
    ``n`` ("arg"). Never an int: it never compares equal to an address. ``below``: moved back from where it
    came by an amount, or by one not known (``end - 1``): it may point below the pointer the caller passed."""

    kind: str
    n: int = 0
    below: bool = False


FRAME, ALLOC = Ptr("frame"), Ptr("alloc")


class _Carried:
    """A vector register (or pair) loaded from words of which one is this file's code or vtable address: a
    store of it stores a callback or vptr (a Stash), as when a struct of callbacks is copied from constant
    data by one vector move. Never an address: everything else takes it for a value not known."""

    def __repr__(self) -> str:
        return "CARRIED"


CARRIED = _Carried()


class Words:
    """A vector register loaded from constant data whose words (None: not known) include an address of this
    file's object (clang builds ``struct iovec v = {&g, 4}`` by one vector move): a store of it into the frame
    puts each word in its slot, where a call handed the frame finds it (state.frame_held). Never an address
    itself: everything else takes it for a value not known."""

    __slots__ = ("words",)
    words: tuple

    def __init__(self, words: tuple) -> None:
        object.__setattr__(self, "words", words)

    def __setattr__(self, _name: str, _value: object) -> None:
        raise AttributeError("Words is immutable")  # a register's value, shared by the states that hold it

    def __eq__(self, other: object) -> bool:
        return type(other) is Words and other.words == self.words

    def __hash__(self) -> int:
        return hash(self.words)

    def __repr__(self) -> str:
        return f"Words{self.words}"


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
    """The same known value (Within(x) is not x: one is exact, the other is not; nor is Inside(s, d) s)."""
    return a == b and type(a) is type(b)


class Inside(str):
    """Another module's object's address (a symbol the GOT gave) moved by ``offset`` bytes (None: by an amount
    not known, a loop's moving pointer or an index). A str equal to the symbol's name, so that every access,
    call argument or store through it is that object's as the symbol's are; only the word a load through it
    names (see held) and the lattice tell it from the symbol: it never compares equal to the symbol, so no
    state, dict or cache takes one for the other (str(value) is the name alone, what a report lists)."""

    offset: int | None

    def __new__(cls, name: str, offset: int | None) -> Inside:
        self = super().__new__(cls, name)
        self.offset = offset
        return self

    def __eq__(self, other: object) -> bool:
        return type(other) is Inside and str.__eq__(self, other) and other.offset == self.offset

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((Inside, str(self), self.offset))

    def __getnewargs__(self) -> tuple[str, int | None]:  # type: ignore[override]
        return str(self), self.offset

    def __repr__(self) -> str:
        return f"Inside({str(self)!r}, {self.offset})"


def symbol_moved(name: str, delta: int | None) -> str:
    """Another module's object's address ``name`` (a symbol, or one already moved) moved by ``delta`` (None:
    an amount not known)."""
    base = name.offset if isinstance(name, Inside) else 0
    offset = None if delta is None or base is None else base + delta
    return str(name) if offset == 0 else Inside(str(name), offset)  # back at the start: the symbol itself


def offset_of(value: str) -> int | None:
    """How far a symbol's address was moved (0: not moved; None: by an amount not known)."""
    return value.offset if isinstance(value, Inside) else 0


def widened(a: object, b: object) -> Value | None:
    """What two different values of the same other module's object join to (see state.State.join): addresses
    in it at an offset not known (Inside), or a word of it at an offset not known (held); None for any other
    pair (the join forgets it)."""
    if not isinstance(a, str) or not isinstance(b, str):
        return None
    wa, wb = held_by(a), held_by(b)
    if wa is not None and wb is not None:
        return held(wa[0], None) if wa[0] == wb[0] else None
    if wa is None and wb is None and str(a) == str(b) and returned_by(a) is None:
        return Inside(a, None)  # equal names: the same object, moved differently
    return None


# What a load of a word of another module's object yields: "*<symbol>+<offset>", the pointer that word holds
# (a reference global, a pointer global, a pointer table's entry, a function pointer the other module defines).
# A str, like a symbol name, so that an access through it is another module's (Deref base) and the whole load
# can follow the word (inits.crossload); never a symbol: no mangled name holds "*" or "+".
HELD = "*"


UNKNOWN = "?"  # the offset of a word loaded through a pointer moved by an amount not known


def held(symbol: str, offset: int | None) -> str:
    """The value a load of the word at ``symbol`` + ``offset`` (another module's object; None: at an offset
    not known, "*<symbol>+?") gives."""
    return f"{HELD}{symbol}+{UNKNOWN if offset is None else offset}"


def held_by(value: object) -> tuple[str, int | None] | None:
    """(symbol, offset: None when not known) of the word whose pointer ``value`` is (see held), or None."""
    if not isinstance(value, str) or not value.startswith(HELD):
        return None
    name, _, offset = value[len(HELD):].rpartition("+")
    if not name:
        return None
    if offset == UNKNOWN:
        return name, None
    return (name, int(offset)) if offset.lstrip("-").isdigit() else None


# What a call into another module's function returns: "<name>()", a value no rule of this file can resolve (null
# or not: a compare with it decides nothing); an access through it is unproven, named so that the whole load can
# judge it (inits.crossload).
RETURNED = "()"


def returned_by(value: object) -> str | None:
    """The function of another module whose result ``value`` is, or None."""
    return value[: -len(RETURNED)] if isinstance(value, str) and value.endswith(RETURNED) else None


def named_address(value: object) -> TypeGuard[str]:
    """Whether ``value`` is an address of another module's symbol, as the GOT gives it (a name): not a word
    loaded through one (values.held) nor another module's function's result (returned_by)."""
    return isinstance(value, str) and held_by(value) is None and returned_by(value) is None
