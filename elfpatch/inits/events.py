"""What a sweep of one function yields, in code order (see disasm.py): global accesses, calls, loads and stores
through pointers not resolved, returns, traps."""
from __future__ import annotations

from typing import NamedTuple, Union

from elfpatch.inits.values import Ptr, Value, Within


class Access(NamedTuple):
    address: int | Within  # link-time address of the global memory touched, or Within the object touched
    write: bool
    insn: int = -1  # the instruction's address (inits.filled asks which instruction stores what)


class Call(NamedTuple):
    target: Value | None  # address called, or an external symbol's name; None for an unknown target
    slot: int | None  # the GOT slot an indirect call or jump goes through, when known
    args: tuple  # known values of the first argument registers (None where unknown)
    tail: bool
    at: int = -1  # the call instruction's address (one registration site is one call instruction)
    looped: bool = False  # the call lies in a loop: it may run many times (a registration in a loop)
    held: tuple = ()  # addresses the frame's slots hold when the call is handed a pointer into the frame


class Deref(NamedTuple):
    """A load or store through a pointer the sweep could not resolve to an address: ``base`` is the argument
    register it came from (Ptr "arg"), another module's object (str: the GOT said so), or None (a pointer of
    unknown provenance: loaded from memory, returned by a call, computed)."""

    insn: int  # the instruction's address
    base: Ptr | str | None
    write: bool
    # a negative displacement or an index not known: it may reach memory below the pointer, as ``end[-1]``
    # through a pointer one past an array's end does
    below: bool = False


class Ret(NamedTuple):
    """A return: what the result register holds there (a getter returning a reference to a global)."""

    value: Value | None
    insn: int = -1  # the return instruction's address


class Stash(NamedTuple):
    """A store of an address of this file's code or vtables (a callback, a vptr) into memory another module may
    reach it through: ``dest`` is where (Ptr "frame"/"alloc"/"arg", a global's address, another module's object
    by name, or None: a pointer not known)."""

    dest: object
    # what was stored when it is no callback itself (None: a callback or vptr): the address of memory the walk
    # allocated (ALLOC) or of an object of this file, which carries the callbacks or vptrs stored into it, if
    # any (``Iface* g = new Impl;``, ``lib_obj = &g_impl;``)
    carried: object = None


class Trap(NamedTuple):
    """An instruction that raises a signal or enters the kernel (``ud2``, ``int3``, ``syscall``; AArch64's
    ``brk``, ``udf``, ``svc``): a signal handler another initializer installed may run here."""

    insn: int
    # a system call's arguments, the known values of its argument registers: the kernel reads or writes the
    # memory they point to (``write(fd, &g, n)`` made with a raw ``syscall``), as another module's function would
    args: tuple = ()
    held: tuple = ()  # what the frame's slots hold when one of them points into the frame (an iovec)


class Once(NamedTuple):
    """The events that follow, up to the next Once, lie in blocks only the first run of an inlined
    ``thread_local`` initialization reaches (``key``: inits.tlsonce.once_key of its guard byte), or in none
    (None)."""

    key: int | None


# Events a sweep yields, in code order.
Event = Union[Access, Call, Deref, Ret, Stash, Once, Trap]
