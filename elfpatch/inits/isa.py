"""What the x86-64 (x86.py) and AArch64 (a64.py) transfer functions share: the protocol the decoder (disasm.py)
calls them by, and the moves of known values both make."""
from __future__ import annotations

import re
from typing import Callable, Protocol, overload

from elfpatch.inits.values import Inside, Ptr, Value, Within, held_by, named_address, returned_by, symbol_moved

HEX = re.compile(r"^-?(?:0x[0-9a-f]+|\d+)$")


def no_result(_target: Value | None, _args: tuple) -> Value | None:
    return None


# x86-64's operand sizes as capstone's text names them ("dword ptr [...]"), in bytes.
X86_WIDTH = {"byte": 1, "word": 2, "dword": 4, "qword": 8, "xmmword": 16, "ymmword": 32, "zmmword": 64}


def put(st: dict, key: str, value: Value | None) -> None:
    """Sets a register's (or stack slot's) known value; None forgets it."""
    if value is None:
        st.pop(key, None)
    else:
        st[key] = value


@overload
def moved(base: int | Within, delta: int | None, object_of: Callable[[int], int | None]) -> int | Within | None: ...
@overload
def moved(base: Value | None, delta: int | None, object_of: Callable[[int], int | None]) -> Value | None: ...
def moved(base: Value | None, delta: int | None, object_of: Callable[[int], int | None]) -> Value | None:
    """A known address moved by ``delta`` (None: by an unknown amount, an index). C's rule that pointer
    arithmetic stays inside its object (or one past its end) keeps an unknown move Within the object; anything
    else is unknown.
    Another module's object's address moved is still that object's, at the offset moved (see values.Inside):
    a word loaded through it is the one at that offset, or one not known."""
    if named_address(base):
        return symbol_moved(base, delta)
    if isinstance(base, Ptr):  # a pointer moved stays inside what it points into: its provenance holds
        return base._replace(below=True) if base.kind == "arg" and (delta is None or delta < 0) else base
    if isinstance(base, str):
        return base
    if isinstance(base, Within):
        return base  # still somewhere in its object
    if not isinstance(base, int):
        return None
    if delta is not None:
        return base + delta
    # C allows a pointer one past an object's end: where no object starts there, moved back by an unknown
    # amount (``end[-i]``) it reaches that object
    o = object_of(base)
    if o is None:
        o = object_of(base - 1)
    return Within(o) if o is not None else None


def moved_by(mnem: str, base: Value | None, imm: int | None, object_of: Callable[[int], int | None]) -> Value | None:
    """``add``/``sub`` of an immediate (``imm``) or of a register (None) to a known address. Subtracting a
    register may be a pointer difference (``end - begin``): an integer, not an address in the object."""
    if mnem == "sub":
        return moved(base, -imm, object_of) if imm is not None else None
    return moved(base, imm, object_of)


def decides(left: Value | None, right: Value | None) -> bool:
    """Whether a compare of these two values has a known outcome: both known, neither Within an object nor a
    pointer known only by its provenance, a word loaded or another module's function's result (null or not)."""
    return left is not None and right is not None and not isinstance(left, (Within, Ptr, Inside)) \
        and not isinstance(right, (Within, Ptr, Inside)) \
        and held_by(left) is None and held_by(right) is None and returned_by(left) is None \
        and returned_by(right) is None


def imm(text: str) -> int | None:
    text = text.strip().lstrip("#")
    if HEX.match(text):
        return int(text, 0)
    return None


class Isa(Protocol):
    """One ISA's transfer functions, as disasm.Disassembler calls them: ``plans`` works out once what each
    decoded instruction is (its control flow first: ``(kind, target)``, ``("none", None)`` for none), ``run``
    walks a block's instructions over a state (a dict: see state.py), appending events, ``step`` one of them;
    ``args`` are the argument registers; ``result`` says what a call leaves in the result register."""

    args: tuple
    result: Callable[[Value | None, tuple], Value | None]
    handed: Callable[[object], bool]  # a value stored is this file's code or vtable address (Stash events)

    def plans(self, insns: list) -> list: ...

    def step(self, insn: tuple, plan: tuple, st: dict, out: list, start: int, end: int, /) -> None: ...

    def run(self, insns: list, plans: list, first: int, last: int, st: dict, out: list, start: int, end: int,
            /) -> None: ...
