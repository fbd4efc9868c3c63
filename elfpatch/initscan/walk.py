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

from elfpatch.initscan.budget import ARG_TUPLES
from elfpatch.initscan.bytescan import Skim, patterns, skim
from elfpatch.initscan.disasm import EM_X86_64, Access, Call, Disassembler, Value
from elfpatch.initscan.image import Image

SINKS = {"__cxa_atexit": "atexit", "atexit": "atexit_c", "__cxa_thread_atexit": "thread_atexit",
         "__cxa_thread_atexit_impl": "thread_atexit"}
GUARD_ACQUIRE, GUARD_RELEASE = "__cxa_guard_acquire", "__cxa_guard_release"
_TU_HELPER = re.compile(r"__static_initialization_and_destruction_0|__cxx_global_var_init|_GLOBAL__sub_I_"
                        r"|_GLOBAL__I_\d|__tls_init")
_CTOR = re.compile(r"C[1-5]E")  # Itanium: <nested-name> C1/C2/... E <params>
_SYMBOL_VERSION = re.compile(r"@.*$")
# Names the walk acts on contain one of these in their first bytes (SINKS, guards, the unit helpers, even
# mangled: _Z41__static_initialization_and_destruction_0ii); other defined functions' names are not decoded.
_NAME_MARKERS = (b"atexit", b"__cxa_", b"__static_initialization_and_destruction_0", b"__cxx_global_var_init",
                 b"_GLOBAL__", b"__tls_init")
# Helpers cost no depth: a file could chain thousands of them. Past this many nested calls, stop (and say so).
# Each level's summary holds its subtree's reads with their call paths, so memory grows with this bound times
# the objects read: 16 (real initializers nest 2-3 helpers, plus --depth calls) keeps that linear in practice.
MAX_CHAIN = 16


class Registration(NamedTuple):
    kind: str
    dtor: Value | None
    obj: Value | None
    guard: int | None  # the guard variable the registration runs under, if any
    site: int | None = None  # the function whose call registers: one site, one entry (see analysis)


# A read found by skimming bytes: its via path ends here and the last function must be decoded to confirm it.
UNCONFIRMED = ("?",)


class Summary(NamedTuple):
    registrations: list  # [Registration] in order
    constructs: dict  # object start -> strong (True: ctor call or __cxa_atexit object; False: a store)
    reads: dict  # object start -> via (tuple of function addresses from the walked function down)
    indirect: int
    depth_limited: int
    unresolved: int  # registrations whose destructor could not be told
    # object start -> skimmed functions that reference it: each may store into it (a skim cannot tell a load
    # from a store); `Walker.writes` decodes one to know, when the answer matters.
    maybe_stores: dict


EMPTY = Summary([], {}, {}, 0, 0, 0, {})


def is_constructor(name: str) -> bool:
    return name.startswith("_ZN") and bool(_CTOR.search(name))


# Placement new, operator new(size_t, void*) and new[] (size_t is m on LP64, j on ILP32): an out-of-line call at
# -O0, whose second argument is the storage an object is then built in (the constructor gets it back as the
# call's result, which the decoder does not follow).
_PLACEMENT_NEW = frozenset({"_ZnwmPv", "_ZnamPv", "_ZnwjPv", "_ZnajPv"})


def constructed_argument(name: str | None) -> int | None:
    """Which argument of a call to ``name`` is the object it constructs: a constructor's ``this`` (0), placement
    new's storage (1); None for any other function (its global arguments are reads)."""
    if not name:
        return None
    if name in _PLACEMENT_NEW:
        return 1
    return 0 if is_constructor(name) else None


class Walker:
    def __init__(self, image: Image, dis: Disassembler) -> None:
        self.image = image
        self.dis = dis
        self._memo: dict[tuple, Summary] = {}
        self._callee: dict[Value, tuple[int | None, str | None]] = {}
        self._skims: dict[int, tuple[Skim, list | None]] = {}
        self._helper: dict[str, bool] = {}
        self._plain: dict[int, list] = {}  # function -> its events with no argument known (touches)
        self._tuples: dict[int, set] = {}  # function -> the argument tuples it was walked with (ARG_TUPLES)
        lo = min((a for a, _ in image.code), default=0)
        hi = max((b for _, b in image.code), default=0)
        self._patterns = patterns(lo, hi, *image.data_span)

    def is_helper(self, name: str | None) -> bool:
        """A translation unit's own initializer helper (followed without costing depth)."""
        if not name:
            return False
        hit = self._helper.get(name)
        if hit is None:
            hit = self._helper[name] = bool(_TU_HELPER.search(name))
        return hit

    def callee(self, target: Value) -> tuple[int | None, str | None]:
        """(address here or None, symbol name) of a call target, seeing through PLT stubs. The name is "" for
        a function defined here whose name matters to no rule (decoding 100k long C++ names costs seconds)."""
        hit = self._callee.get(target)
        if hit is not None:
            return hit
        if isinstance(target, str):
            out: tuple[int | None, str | None] = (None, _SYMBOL_VERSION.sub("", target))
        else:
            image = self.image
            name = image.call_name(target, _NAME_MARKERS)
            out = (target, name)
            if name is None or not image.is_function(target):
                # Only a PLT stub jumps through a slot (any code when the file has no section headers to say).
                stub = image.in_plt(target) if image.plt else image.in_code(target)
                slot = self.dis.stub_slot(target, image.function_end(target)) if stub else None
                bound = image.got(slot) if slot is not None else None
                if isinstance(bound, str):
                    out = (None, _SYMBOL_VERSION.sub("", bound))
                elif isinstance(bound, int) and bound != target:
                    out = (bound, image.call_name(bound, _NAME_MARKERS))
        self._callee[target] = out
        return out

    def named(self, target: Value) -> tuple[int | None, str | None]:
        """callee(), with the name of a function defined here even when no rule of the walk needed it (a
        constructor check does)."""
        where, name = self.callee(target)
        if name == "" and where is not None:
            name = self.image.function_name(where)
        return where, name

    def walk(self, addr: int, args: tuple, depth: int, stack: frozenset = frozenset(),
             exact: bool = True) -> Summary:
        """What the function at ``addr`` (and what it calls, ``depth`` calls deep) registers, constructs and
        reads. ``exact``: decode every instruction (initializers and their own helpers); otherwise skim the
        bytes first (x86-64) and decode only when a registration is in sight."""
        key = (addr, args, depth)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        image = self.image
        end = image.function_end(addr)
        if exact or self.dis.machine != EM_X86_64:
            out = self._exact(addr, end, args, depth, stack | {addr})
        else:
            sk, targets = self._skim(addr, end)
            if targets is None:  # a registration in sight: decode it
                out = self._exact(addr, end, args, depth, stack | {addr})
            else:
                out = self._skimmed(addr, sk, targets, depth, stack | {addr})
        self._memo[key] = out
        return out

    def _skim(self, addr: int, end: int) -> tuple[Skim, list | None]:
        """The skim of a function and its resolved call targets (None when it calls a registration function
        or a guard: then it must be decoded), once per function."""
        hit = self._skims.get(addr)
        if hit is not None:
            return hit
        image = self.image
        size = self.dis.budget.skim(addr, end - addr)
        sk = skim(image.read_code(addr, size), addr, image.is_call_target, *image.data_span, self._patterns)
        # A function pointer loaded from the GOT is as good as a call site (clang calls a thread_local's
        # initializer so, after testing the weak symbol).
        loaded = [(a, t, False, True) for a, t in sk.loads
                  if isinstance(v := image.got(t), int) and image.is_function(v)]
        sites = sorted([(a, t, tail, False) for a, t, tail in sk.calls]
                       + [(a, slot, tail, True) for a, slot, tail in sk.slots] + loaded)
        targets: list | None = []
        for _a, t, _tail, via_slot in sites:
            target = image.got(t) if via_slot else t
            if target is None:
                continue
            where, name = self.callee(target)
            if name in SINKS:
                targets = None
                break
            if where is not None and targets is not None:
                targets.append((where, self.is_helper(name)))
        self._skims[addr] = (sk, targets)
        return sk, targets

    def _skimmed(self, addr: int, sk: Skim, targets: list, depth: int, stack: frozenset) -> Summary:
        image = self.image
        reads: dict[int, tuple] = {}
        maybe_stores: dict[int, tuple] = {}
        for _site, target, _imm in sk.data:
            value = image.got(target)
            obj = image.object_at(value if isinstance(value, int) else target)
            if obj is not None:
                reads.setdefault(obj[0], UNCONFIRMED)
                maybe_stores[obj[0]] = (addr,)
        sub_regs: list = []
        constructs: dict[int, bool] = {}
        indirect, depth_limited, unresolved = sk.indirect, 0, 0
        for where, helper in targets:
            if where in stack:
                continue
            if (depth <= 0 and not helper) or len(stack) >= MAX_CHAIN:
                depth_limited += 1
                continue
            sub = self.walk(where, (), depth if helper else depth - 1, stack, exact=helper)
            if sub is EMPTY:
                continue
            self._merge(sub, where, None, sub_regs, constructs, reads, maybe_stores)
            indirect += sub.indirect
            depth_limited += sub.depth_limited
            unresolved += sub.unresolved
        if not (sub_regs or constructs or reads or indirect or depth_limited or unresolved):
            return EMPTY
        return Summary(sub_regs, constructs, reads, indirect, depth_limited, unresolved, maybe_stores)

    @staticmethod
    def _merge(sub: Summary, where: int, guard: int | None, regs_out: list, constructs: dict, reads: dict,
               maybe_stores: dict) -> None:
        listed = set(regs_out) if sub.registrations else ()  # one site once: a call tree reaching it 2^k ways
        for r in sub.registrations:
            r = r if r.guard is not None or guard is None else r._replace(guard=guard)
            if r not in listed:
                regs_out.append(r)
                listed.add(r)
        for o, strong in sub.constructs.items():
            constructs[o] = strong or constructs.get(o, False)
        for o, via in sub.reads.items():
            if o not in reads:
                reads[o] = (where, *via)
        for o, functions in sub.maybe_stores.items():
            known = maybe_stores.get(o)
            maybe_stores[o] = functions if known is None else known + tuple(f for f in functions if f not in known)

    def _exact(self, addr: int, end: int, args: tuple, depth: int, stack: frozenset) -> Summary:
        regs = {r: v for r, v in zip(self.dis.arg_registers, args) if v is not None}
        events = self.dis.sweep(addr, end, regs)
        regs_out: list = []
        constructs: dict[int, bool] = {}
        reads: dict[int, tuple] = {}
        maybe_stores: dict[int, tuple] = {}
        indirect = depth_limited = unresolved = 0
        guard: int | None = None
        for ev in events:
            if isinstance(ev, Access):
                guard = self._access(ev, guard, constructs, reads)
                continue
            target = self._call_target(ev)
            if target is None:
                indirect += 1  # a register or slot whose value is not known here: not a call we can follow
                continue
            where, name = self.named(target)
            if name in SINKS:
                unresolved += self._register(SINKS[name], ev.args, guard, regs_out, constructs, addr)
                continue
            if name == GUARD_ACQUIRE:
                guard = ev.args[0] if isinstance(ev.args[0], int) else guard
                continue
            if name == GUARD_RELEASE:
                continue
            self._arguments(name, ev.args, constructs, reads)
            if where is None or where in stack:
                continue  # another object's function: it cannot see this file's globals but through us
            sub = self._follow(where, name, ev.args, depth, stack)
            if sub is None:
                depth_limited += 1
                continue
            self._merge(sub, where, guard, regs_out, constructs, reads, maybe_stores)
            indirect += sub.indirect
            depth_limited += sub.depth_limited
            unresolved += sub.unresolved
        return Summary(regs_out, constructs, reads, indirect, depth_limited, unresolved, maybe_stores)

    def _access(self, ev: Access, guard: int | None, constructs: dict, reads: dict) -> int | None:
        """Notes a load or store of a global; returns the guard what follows runs under."""
        obj = self.image.object_at(ev.address)
        if obj is None:
            if ev.write and self.image.is_guard(ev.address):
                return ev.address  # an inline variable's guard set: what follows runs once
            return guard
        if ev.write:
            constructs.setdefault(obj[0], False)
        else:
            reads.setdefault(obj[0], ())
        return guard

    def _call_target(self, ev: Call) -> Value | None:
        """Where a call goes, or None when it is not a call we can follow (an unknown register or slot)."""
        target = ev.target
        if target is None and ev.slot is not None:
            target = self.image.got(ev.slot)
        if target is None or (isinstance(target, int) and not self.image.in_code(target)):
            return None
        return target

    def _register(self, kind: str, args: tuple, guard: int | None, regs_out: list, constructs: dict,
                  site: int) -> int:
        """Records a call to a registration function (SINKS); returns 1 when its destructor is not known."""
        dtor, obj = args[0], (args[1] if kind != "atexit_c" else None)
        regs_out.append(Registration(kind, dtor, obj, guard, site))
        if isinstance(obj, int):
            o = self.image.object_at(obj)
            if o is not None:
                constructs[o[0]] = True  # the object whose destructor is registered was just built
        return 1 if dtor is None else 0

    def _arguments(self, name: str | None, args: tuple, constructs: dict, reads: dict) -> None:
        """Globals passed to a call: the object a constructor or placement new builds is constructed, any other
        one is read."""
        built = constructed_argument(name)
        for i, v in enumerate(args):
            if not isinstance(v, int):
                continue
            o = self.image.object_at(v)
            if o is None:
                continue
            if i == built:
                constructs[o[0]] = True
            else:
                reads.setdefault(o[0], ())

    def _follow(self, where: int, name: str | None, args: tuple, depth: int, stack: frozenset) -> Summary | None:
        """The callee's summary, or None when the depth (or the helper chain) ends here."""
        helper = self.is_helper(name)
        if (depth <= 0 and not helper) or len(stack) >= MAX_CHAIN:
            return None
        # The unit's own helpers get the arguments (GCC -O0 passes the priority); others are summarized
        # once, whatever their caller passes.
        specialized = helper or self._unnamed_callee(where, name, stack)
        return self.walk(where, self._capped(where, tuple(args)) if specialized else (),
                         depth if helper else depth - 1, stack, exact=helper)

    def _unnamed_callee(self, where: int, name: str | None, stack: frozenset) -> bool:
        """In a stripped file a unit's helpers have no name: a function that is not exported and that the
        initializer itself calls gets the arguments too (GCC -O0's ``__static_initialization_and_destruction_0(1,
        priority)`` then runs only its priority's branch; libc_nonshared's local ``atexit(fn)`` stub passes
        ``fn`` on to ``__cxa_atexit``). It still costs depth, and is decoded only when it registers."""
        return self.image.stripped and not name and len(stack) == 1 and not self.image.is_function(where)

    def _capped(self, where: int, args: tuple) -> tuple:
        """``args``, unless ``where`` was already walked with ARG_TUPLES others: then no argument is known (a
        superset of what each tuple runs), so a chain passing ``2a`` and ``2a+1`` costs linear work."""
        seen = self._tuples.setdefault(where, set())
        if args in seen or len(seen) < ARG_TUPLES:
            seen.add(args)
            return args
        self.dis.budget.widened.add(where)
        return ()

    def _events(self, addr: int) -> list:
        """The decoded function's events with no argument known, one sweep per function."""
        events = self._plain.get(addr)
        if events is None:
            events = self._plain[addr] = self.dis.sweep(addr, self.image.function_end(addr), {})
        return events

    def writes(self, addr: int, obj: int) -> bool:
        """Whether the decoded function at ``addr`` stores into object ``obj`` or builds it (a constructor or
        placement new called on it): confirms a store a skim could only suspect."""
        image = self.image
        for ev in self._events(addr):
            if isinstance(ev, Access):
                if ev.write and (o := image.object_at(ev.address)) is not None and o[0] == obj:
                    return True
                continue
            if not any(isinstance(v, int) and (o := image.object_at(v)) is not None and o[0] == obj
                       for v in ev.args):
                continue  # decoding names only when the object is among the arguments
            target = self._call_target(ev)
            built = constructed_argument(self.named(target)[1]) if target is not None else None
            if built is not None and built < len(ev.args) and isinstance(v := ev.args[built], int) \
                    and (o := image.object_at(v)) is not None and o[0] == obj:
                return True
        return False

    def touches(self, addr: int, obj: int) -> bool:
        """Whether the decoded function at ``addr`` loads, stores or passes the address of object ``obj``
        (confirms what a skim found)."""
        image = self.image
        for ev in self._events(addr):
            values = [ev.address] if isinstance(ev, Access) else [v for v in ev.args if isinstance(v, int)]
            for v in values:
                o = image.object_at(v)
                if o is not None and o[0] == obj:
                    return True
        return False
