"""Follow one initializer through its calls: the exit-time destructors it registers, in order, and the
global objects it constructs and reads, with the call path to each read.

Depth counts calls into other functions; the translation unit's own initializer helpers (GCC's
``__static_initialization_and_destruction_0``, clang's ``__cxx_global_var_init.N``) cost nothing, so that -O0
and -O2 builds look alike. Calls through the PLT or the GOT that bind to this file's own definitions are
followed like direct calls (a -fPIC library reaches its exported functions so).
"""
from __future__ import annotations

import re
from typing import NamedTuple

from elfpatch.initscan.disasm import Access, Call, Disassembler, Value
from elfpatch.initscan.image import Image

SINKS = {"__cxa_atexit": "atexit", "atexit": "atexit_c", "__cxa_thread_atexit": "thread_atexit",
         "__cxa_thread_atexit_impl": "thread_atexit"}
GUARD_ACQUIRE, GUARD_RELEASE = "__cxa_guard_acquire", "__cxa_guard_release"
_TU_HELPER = re.compile(r"__static_initialization_and_destruction_0|__cxx_global_var_init|_GLOBAL__sub_I_"
                        r"|_GLOBAL__I_\d|__tls_init")
_CTOR = re.compile(r"C[1-5]E")  # Itanium: <nested-name> C1/C2/... E <params>
_SYMBOL_VERSION = re.compile(r"@.*$")


class Registration(NamedTuple):
    kind: str
    dtor: Value | None
    obj: Value | None
    guard: int | None  # the guard variable the registration runs under, if any


class Summary(NamedTuple):
    registrations: list  # [Registration] in order
    constructs: dict  # object start -> strong (True: ctor call or __cxa_atexit object; False: a store)
    reads: dict  # object start -> via (tuple of function addresses from the walked function down)
    indirect: int
    depth_limited: int
    unresolved: int  # registrations whose destructor could not be told


def is_constructor(name: str) -> bool:
    return name.startswith("_ZN") and bool(_CTOR.search(name))


class Walker:
    def __init__(self, image: Image, dis: Disassembler) -> None:
        self.image = image
        self.dis = dis
        self._memo: dict[tuple, Summary] = {}
        self._callee: dict[Value, tuple[int | None, str | None]] = {}

    def callee(self, target: Value) -> tuple[int | None, str | None]:
        """(address here or None, symbol name) of a call target, seeing through PLT stubs."""
        hit = self._callee.get(target)
        if hit is not None:
            return hit
        if isinstance(target, str):
            out: tuple[int | None, str | None] = (None, _SYMBOL_VERSION.sub("", target))
        else:
            image = self.image
            name = image.function_name(target)
            out = (target, name)
            if name is None or not image.is_function(target):
                slot = self.dis.stub_slot(target, image.function_end(target)) if image.in_code(target) else None
                bound = image.got(slot) if slot is not None else None
                if isinstance(bound, str):
                    out = (None, _SYMBOL_VERSION.sub("", bound))
                elif isinstance(bound, int) and bound != target:
                    out = (bound, image.function_name(bound))
        self._callee[target] = out
        return out

    def walk(self, addr: int, args: tuple, depth: int, stack: frozenset = frozenset()) -> Summary:
        key = (addr, args, depth)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        image = self.image
        regs = {r: v for r, v in zip(self.dis.arg_registers, args) if v is not None}
        events = self.dis.sweep(addr, image.function_end(addr), regs)
        regs_out: list = []
        constructs: dict[int, bool] = {}
        reads: dict[int, tuple] = {}
        indirect = depth_limited = unresolved = 0
        guard: int | None = None
        stack = stack | {addr}
        for ev in events:
            if isinstance(ev, Access):
                obj = image.object_at(ev.address)
                if obj is None:
                    if ev.write and image.is_guard(ev.address):
                        guard = ev.address  # an inline variable's guard set: what follows runs once
                    continue
                start = obj[0]
                if ev.write:
                    constructs.setdefault(start, False)
                else:
                    reads.setdefault(start, ())
                continue
            assert isinstance(ev, Call)
            target = ev.target
            if target is None and ev.slot is not None:
                target = image.got(ev.slot)
            if target is None:
                indirect += 1
                continue
            if isinstance(target, int) and not image.in_code(target):
                indirect += 1  # a register value that is no code address: not a call we can follow
                continue
            where, name = self.callee(target)
            if name in SINKS:
                dtor, obj = ev.args[0], (ev.args[1] if SINKS[name] != "atexit_c" else None)
                if dtor is None:
                    unresolved += 1
                regs_out.append(Registration(SINKS[name], dtor, obj, guard))
                if isinstance(obj, int):
                    o = image.object_at(obj)
                    if o is not None:
                        constructs[o[0]] = True
                continue
            if name == GUARD_ACQUIRE:
                guard = ev.args[0] if isinstance(ev.args[0], int) else guard
                continue
            if name == GUARD_RELEASE:
                continue
            ctor = bool(name) and is_constructor(name)
            for i, v in enumerate(ev.args):
                if not isinstance(v, int):
                    continue
                o = image.object_at(v)
                if o is None:
                    continue
                if i == 0 and ctor:
                    constructs[o[0]] = True
                else:
                    reads.setdefault(o[0], ())
            if where is None:
                continue  # another object's function: cannot see this file's globals but through us
            helper = bool(name) and bool(_TU_HELPER.search(name))
            if where in stack:
                continue
            if depth <= 0 and not helper:
                depth_limited += 1
                continue
            sub = self.walk(where, tuple(ev.args), depth if helper else depth - 1, stack)
            for r in sub.registrations:
                regs_out.append(r if r.guard is not None or guard is None else r._replace(guard=guard))
            for o, strong in sub.constructs.items():
                if strong or o not in constructs:
                    constructs[o] = strong or constructs.get(o, False)
            for o, via in sub.reads.items():
                if o not in reads:
                    reads[o] = (where, *via)
            indirect += sub.indirect
            depth_limited += sub.depth_limited
            unresolved += sub.unresolved
        out = Summary(regs_out, constructs, reads, indirect, depth_limited, unresolved)
        self._memo[key] = out
        return out
