"""Whether a function has run a thread_local's initialization by the time it returns.

A thread_local's initialization (``__tls_init``, ``_ZTH<var>``) runs once per thread: it tests its guard byte
(``cmp byte ptr fs:[X], 0``), returns when it is set, and sets it before the initialization's reads. A later
initializer reaching it reads nothing only where an earlier one ran it for sure -- on every path to its return:
a call to it, the guard set in its own code (GCC and clang inline a unit's ``__tls_init`` into the unit's
initializers), or the way out of a test of that guard taken when it is set. Reaching it on some path only
(``if (...) use(t)``) proves nothing. The guard is the byte the initialization tests before it sets it, never a
``thread_local bool`` its constructor merely stores ``true`` into (x86-64: ``fs:[X]``; AArch64: the byte at
an offset from ``tpidr_el0``, a64_tls_bytes)."""
from __future__ import annotations

import re
from typing import Any, Callable, NamedTuple

from elfpatch.elf.const import EM_AARCH64
from elfpatch.inits.disasm import Decoded, Disassembler
from elfpatch.inits.image import Image
from elfpatch.inits.isa import X86_WIDTH

_SET = re.compile(r"byte ptr fs:\[(0x[0-9a-f]+)\], 1")
_TEST = re.compile(r"byte ptr fs:\[(0x[0-9a-f]+)\], 0")  # cmp byte ptr fs:[X], 0
_LOAD = re.compile(r"[a-z0-9]+, byte ptr fs:\[(0x[0-9a-f]+)\]")  # movzx eax, byte ptr fs:[X] (-O0's test)
_SLOT_TEST = re.compile(r"qword ptr \[rip ([+-] 0x[0-9a-f]+)\], 0")
_SELF_TEST = re.compile(r"(r[a-z0-9]+), \1")
_LEA = re.compile(r"(r[a-z0-9]+), (?:qword ptr )?\[rip ([+-] 0x[0-9a-f]+)\]")
_NONZERO_WAY = {"je": False, "jne": True}  # the way (taken or not) je/jne go after a compare with 0 of a non-0
_ARG_TEST = re.compile(r"(dword ptr \[rbp - (?:0x[0-9a-f]+|[0-9]+)\]), (0x[0-9a-f]+|[0-9]+)")
_FRAME = re.compile(r"(?:([a-z]+) ptr )?\[rbp - (0x[0-9a-f]+|[0-9]+)\]")
_IMM = re.compile(r"[a-z0-9]+, (0x[0-9a-f]+|[0-9]+)")
_FORMS = {"edi": ("rdi", "edi", "di", "dil"), "esi": ("rsi", "esi", "si", "sil")}
DEPTH = 4  # calls followed below the initializer: its constructor, a wrapper (_ZTW), the initialization
# AArch64: the thread pointer read (mrs), moved by immediates (add ..., #imm[, lsl #12]), then a byte loaded or
# stored through it: ldrb w0, [x3] / strb w4, [x3] (with mov w4, #0x1 before)
_A64_TP = re.compile(r"(x\d+), tpidr_el0")
_A64_ADD = re.compile(r"(x\d+), (x\d+), #(0x[0-9a-f]+|\d+)(?:, lsl #(\d+))?")
# (the base's offset: [x3, #8] and pre-indexed [x3, #8]!; post-indexed [x3], #8 accesses x3 itself)
_A64_BYTE = re.compile(r"(w\d+), \[(x\d+)(?:, #(0x[0-9a-f]+|\d+))?\]!?(?:, #(?:0x[0-9a-f]+|\d+))?")
_A64_COPY = re.compile(r"(x\d+), (x\d+)")  # mov x20, x2: the thread-pointer offset moves with it
_A64_ONE = re.compile(r"(w\d+), #(?:0x1|1)")
_A64_BRANCH = re.compile(r"(w\d+), (0x[0-9a-f]+)")  # cbz/cbnz wN, target
_A64_SET_WAY = {"cbz": False, "cbnz": True}  # the way a test of the loaded guard byte takes when it is set
_A64_COND = ("b.", "cbz", "cbnz", "tbz", "tbnz")


def a64_tls_bytes(dec: Decoded) -> dict[int, tuple[str, int, str]]:
    """Per instruction index, the thread-pointer offset an AArch64 ``ldrb`` loads ("load") or an ``strb`` of a
    register holding 1 stores ("set"), with the byte register: the registers' thread-pointer offsets (and
    which hold 1) propagated over the blocks, a value kept at a join only where every way in agrees."""
    preds: dict[int, list[int]] = {}
    for p, edges in dec.succs.items():
        for q, _taken in edges:
            preds.setdefault(q, []).append(p)
    ends: dict[int, dict[str, object]] = {}
    out: dict[int, tuple[str, int, str]] = {}
    for _ in range(8):  # to a fixpoint: loops nest far less deep
        changed = False
        for p, (first, last) in enumerate(dec.blocks):
            ins = [ends[q] for q in preds.get(p, ()) if q in ends]
            st = dict(ins[0]) if ins and p else {}
            for other in ins[1:] if p else ():
                st = {r: v for r, v in st.items() if other.get(r) == v}
            for n in range(first, last + 1):
                _a64_step(dec.insns[n], n, st, out)
            if ends.get(p) != st:
                ends[p], changed = st, True
        if not changed:
            return out
    return {}  # not settled: nothing known (proves nothing)


def _a64_reg(name: str) -> str:
    return "r" + name[1:] if name[:1] in "wx" and name[1:].isdigit() else name


def _a64_step(insn: tuple, n: int, st: dict[str, object], out: dict[int, tuple[str, int, str]]) -> None:
    """One instruction's effect on the known registers (a thread-pointer offset, or 1), and the TLS byte it
    loads or sets."""
    _a, _size, mnem, op = insn
    if _a64_value(mnem, op, st):
        return
    if mnem in ("ldrb", "strb") and (m := _A64_BYTE.fullmatch(op)):
        base = st.get(_a64_reg(m.group(2)))
        if isinstance(base, tuple):
            at = base[1] + int(m.group(3) or "0", 0)
            if mnem == "ldrb":
                out[n] = ("load", at, m.group(1))
            elif st.get(_a64_reg(m.group(1))) == 1:
                out[n] = ("set", at, m.group(1))
    for r in _a64_written(mnem, op, st):
        st.pop(r, None)


def _a64_value(mnem: str, op: str, st: dict[str, object]) -> bool:
    """The instructions that give a register a value followed here: the thread pointer read, moved by an
    immediate, and a 1 (True: done)."""
    if mnem == "mrs" and (m := _A64_TP.fullmatch(op)):
        st[_a64_reg(m.group(1))] = ("tp", 0)
    elif mnem == "add" and (m := _A64_ADD.fullmatch(op)):
        base = st.get(_a64_reg(m.group(2)))
        st.pop(_a64_reg(m.group(1)), None)
        if isinstance(base, tuple):
            st[_a64_reg(m.group(1))] = ("tp", base[1] + (int(m.group(3), 0) << int(m.group(4) or 0)))
    elif mnem == "mov" and (m := _A64_ONE.fullmatch(op)):
        st[_a64_reg(m.group(1))] = 1
    elif mnem == "mov" and (m := _A64_COPY.fullmatch(op)):
        base = st.get(_a64_reg(m.group(2)))
        st.pop(_a64_reg(m.group(1)), None)
        if isinstance(base, tuple):
            st[_a64_reg(m.group(1))] = base
    else:
        return False
    return True


def _a64_written(mnem: str, op: str, st: dict[str, object]) -> list[str]:
    """The registers (as _a64_reg names them) an instruction may change: a call's caller-saved ones, a load's
    destinations, most instructions' first operand, a pre- or post-indexed access's base."""
    if mnem.startswith(("bl", "blr")) or mnem == "svc":
        return [r for r in st if r[1:].isdigit() and (int(r[1:]) <= 18 or r == "r30")]
    ops = op.split(", ")
    if mnem.startswith(("st", "cmp", "cmn", "tst", "b", "cb", "tb", "ret", "nop", "prfm", "dmb", "dsb", "isb")):
        written: list[str] = []
    elif mnem.startswith(("ldp", "ldnp", "ldxp", "ldaxp")):
        written = ops[:2]
    else:
        written = ops[:1]
    if "]!" in op or "], #" in op:  # pre- or post-index: the base moves
        written.append(op[op.index("[") + 1:].split("]")[0].split(",")[0])
    return [_a64_reg(r.strip()) for r in written]


def once_key(guard: int) -> int:
    """The key an inlined thread_local initialization is known by, for its guard byte's thread-pointer offset:
    a negative int, never a function's address (the keys of the initializations called: _ZTH, __tls_init)."""
    return -1 - guard


def once_blocks(dec: Decoded, machine: int) -> dict[int, int]:
    """Block position -> once_key of the inlined thread_local initialization the block lies in: the blocks
    dominated by the way a test of guard byte X takes when it is clear, where that way leads to a block that
    only the test reaches and that sets X (GCC and clang inline a unit's ``__tls_init``, or a variable's
    wrapper, into the unit's initializers). Such a block runs only in the first such run in a thread: not at
    all when an earlier initializer set X for sure (OnceRuns.runs). The innermost region wins."""
    tls = a64_tls_bytes(dec) if machine == EM_AARCH64 else None
    if tls is None and not any("fs:" in i[3] for i in dec.insns) or tls is not None and not tls:
        return {}
    preds: dict[int, list[int]] = {}
    for p, edges in dec.succs.items():
        for q, _taken in edges:
            preds.setdefault(q, []).append(p)
    out: dict[int, int] = {}
    for p, (first, last) in enumerate(dec.blocks):
        clear = _clear_way(dec, p, first, last, tls)
        if clear is None:
            continue
        guard, head = clear
        if preds.get(head) != [p] or not _sets(dec, head, guard, tls):
            continue
        for q in _dominated(dec, preds, head):
            out[q] = once_key(guard)
    return out


def _clear_way(dec: Decoded, p: int, first: int, last: int,
               tls: dict[int, tuple[str, int, str]] | None) -> tuple[int, int] | None:
    """(guard, block) when block ``p`` ends in a test of a TLS guard byte: the block its clear way leads to."""
    if tls is None:
        what = _tested(dec, first, last)
        nonzero = _NONZERO_WAY.get(dec.insns[last][2])
        if what is None or what[0] != "guard" or nonzero is None:
            return None
        guard, set_way = what[1], nonzero
    else:
        loads = [tls[i] for i in range(first, last) if i in tls and tls[i][0] == "load"]
        if not loads:
            return None
        guard = loads[-1][1]
        way = _a64_settled_way(dec, first, last, guard, tls)
        if way is None:
            return None
        set_way = way
    heads = [s for s, taken in dec.succs.get(p, ()) if taken is (not set_way)]
    return (guard, heads[0]) if len(heads) == 1 else None


def _sets(dec: Decoded, p: int, guard: int, tls: dict[int, tuple[str, int, str]] | None) -> bool:
    """Whether block ``p`` sets the guard byte."""
    first, last = dec.blocks[p]
    if tls is not None:
        return any(tls.get(i, ("", -1, ""))[:2] == ("set", guard) for i in range(first, last + 1))
    return any(mnem == "mov" and (m := _SET.fullmatch(op)) is not None and int(m.group(1), 16) == guard
               for _a, _size, mnem, op in dec.insns[first:last + 1])


def _dominated(dec: Decoded, preds: dict[int, list[int]], head: int) -> list[int]:
    """The blocks every path from the entry to which passes through ``head`` (a greatest fixpoint: loops
    inside the region stay in it)."""
    inside = {q for q in range(len(dec.blocks)) if q and q in preds}
    inside.add(head)
    changed = True
    while changed:
        changed = False
        for q in sorted(inside):
            if q != head and not all(r in inside for r in preds.get(q, ())):
                inside.discard(q)
                changed = True
    return sorted(inside)


class OnceRuns:
    """Per function and thread_local initialization, whether the function runs it on every path (cached)."""

    def __init__(self, dis: Disassembler, image: Image,
                 resolve: Callable[[int], int | None] = lambda target: target) -> None:
        """``resolve``: the function a call target runs here (through a PLT stub whose slot is bound to a
        function of this file), None when not known to be one here."""
        self.dis = dis
        self.image = image
        self.got = image.got
        self.resolve = resolve
        self._guard: dict[int, int | None] = {}
        self._runs: dict[tuple, bool] = {}

    def guard(self, once: int) -> int | None:
        """The thread-pointer offset of the guard byte the initialization at ``once`` tests in its entry block
        and sets (a byte its constructors test later is no guard); an inlined one's key names its guard."""
        if once < 0:
            return once_key(once)  # its own inverse
        if once not in self._guard and self.dis.machine == EM_AARCH64:
            dec = self.dis.decode(once, self.image.function_end(once))
            first, last = dec.blocks[0] if dec.blocks else (0, -1)
            tls = a64_tls_bytes(dec)
            tested = {tls[i][1] for i in range(first, last + 1) if i in tls and tls[i][0] == "load"}
            self._guard[once] = next((at for _i, (kind, at, _r) in sorted(tls.items())
                                      if kind == "set" and at in tested), None)
        if once not in self._guard:
            dec = self.dis.decode(once, self.image.function_end(once))
            first, last = dec.blocks[0] if dec.blocks else (0, -1)
            tested = {int(m.group(1), 16) for _a, _size, mnem, op in dec.insns[first:last + 1]
                      if mnem in ("cmp", "movzx") and (m := (_TEST if mnem == "cmp" else _LOAD).fullmatch(op))}
            sets = [int(m.group(1), 16) for _a, _size, mnem, op in dec.insns
                    if mnem == "mov" and (m := _SET.fullmatch(op))]
            self._guard[once] = next((x for x in sets if x in tested), None)
        return self._guard[once]

    def sets_guard(self, fn: int, once: int) -> bool:
        """The function's own code sets the guard of the initialization at ``once`` (a unit's inlined copy)."""
        guard = self.guard(once)
        dec = self.dis.decode(fn, self.image.function_end(fn))
        if guard is not None and self.dis.machine == EM_AARCH64:
            return any(kind == "set" and at == guard for kind, at, _r in a64_tls_bytes(dec).values())
        return guard is not None and any(
            mnem == "mov" and (m := _SET.fullmatch(op)) is not None and int(m.group(1), 16) == guard
            for _a, _size, mnem, op in dec.insns)

    def runs(self, fn: int, once: int, depth: int = DEPTH, args: tuple = ()) -> bool:
        """Whether the function at ``fn`` has run the initialization at ``once`` whenever it returns, called
        with ``args`` ((register, constant) pairs the caller set: GCC -O0's __static_initialization_and_
        destruction_0(1, 0xffff) tests them)."""
        if fn == once:
            return True
        key = (fn, once, args)
        if key not in self._runs:
            self._runs[key] = False  # a recursive call proves nothing
            if depth > 0:
                self._runs[key] = self._every_path(_Walk(fn, self.image.function_end(fn), once, self.guard(once),
                                                         depth), dict(args))
        return self._runs[key]

    def _every_path(self, w: _Walk, args: dict[str, int]) -> bool:
        """No path from the entry to a return (a block without successors) avoids the initialization."""
        dec = self.dis.decode(w.fn, w.end)
        if not dec.blocks:
            return False
        slots = _arg_slots(dec, args)
        tls = a64_tls_bytes(dec) if self.dis.machine == EM_AARCH64 else None
        seen = {0}
        todo = [0]
        while todo:
            p = todo.pop()
            first, last = dec.blocks[p]
            if any(self._covers(dec, i, first, w, tls) for i in range(first, last + 1)):
                continue
            edges = dec.succs.get(p, ())
            if not edges:
                return False  # a return, a tail call that does not run it, or a jump the walk cannot follow
            skip = self._settled_way(dec, first, last, w.guard, slots) if tls is None else \
                _a64_settled_way(dec, first, last, w.guard, tls)
            if skip is not True and _jumps_out(dec.insns[last], w):
                return False  # a conditional jump out of the function (a conditional tail call): its way out
            for s, taken in edges:
                if (skip is None or taken is not skip) and s not in seen:
                    seen.add(s)
                    todo.append(s)
        return True

    def _settled_way(self, dec: Decoded, first: int, last: int, guard: int | None,
                     slots: dict[str, int]) -> bool | None:
        """The way out of a block (taken: True/False) no path needs to follow: the way a test of the guard takes
        when it is set (the initialization ran), the way a test of a non-zero word takes when it is 0 (never:
        the wrapper's test of a weak initialization's address, which this file defines), the way a compare
        of an argument the caller set to a constant does not take. None: none."""
        what = _tested(dec, first, last)
        nonzero = _NONZERO_WAY.get(dec.insns[last][2])
        if what is None or nonzero is None:
            return None
        kind, where = what
        if kind == "guard":
            return nonzero if where == guard else None
        if kind == "argument":
            slot, value = where
            return None if slot not in slots else (slots[slot] == value) is nonzero
        word: Any = self.got(where) if kind == "slot" else where
        return (not nonzero) if isinstance(word, int) and word != 0 and self.image.function_start(word) else None

    def _covers(self, dec: Decoded, i: int, first: int, w: _Walk,
                tls: dict[int, tuple[str, int, str]] | None = None) -> bool:
        """Instruction ``i`` runs the initialization: sets its guard, or calls (or tail-calls: a jump out of the
        function) a function that runs it. ``tls``: AArch64's TLS bytes (a64_tls_bytes), None on x86-64."""
        _a, _size, mnem, op = dec.insns[i]
        word = mnem.rsplit(" ", 1)[-1]
        if tls is not None and i in tls:
            kind, at, _reg = tls[i]
            return kind == "set" and at == w.guard
        if word == "mov" and w.guard is not None and (m := _SET.fullmatch(op)):
            return int(m.group(1), 16) == w.guard
        if word not in ("call", "jmp", "bl", "b"):
            return False
        try:
            target = int(op.lstrip("#"), 16)
        except ValueError:
            return False  # through a register or memory: not known
        if word in ("jmp", "b") and w.fn <= target < w.end:
            return False  # a jump inside the function: one of its blocks' edges
        where = self.resolve(target)
        return where is not None and self.image.function_start(where) and self.runs(
            where, w.once, w.depth - 1, _constant_args(dec, i, first) if tls is None else ())


def _a64_settled_way(dec: Decoded, first: int, last: int, guard: int | None,
                     tls: dict[int, tuple[str, int, str]]) -> bool | None:
    """AArch64: the way out of a block no path needs to follow -- the way ``cbz``/``cbnz`` of the guard byte
    loaded in the block takes when it is set (the initialization ran). None: none."""
    mnem, op = dec.insns[last][2], dec.insns[last][3]
    m = _A64_BRANCH.fullmatch(op.replace("#", ""))
    if guard is None or mnem not in _A64_SET_WAY or m is None:
        return None
    loads = [tls[i] for i in range(first, last) if i in tls and tls[i][0] == "load"]
    return _A64_SET_WAY[mnem] if loads and loads[-1][1] == guard and loads[-1][2] == m.group(1) else None


def _jumps_out(insn: tuple, w: _Walk) -> bool:
    """A conditional jump whose target is not inside the function (the blocks have no edge for that way)."""
    word = insn[2].rsplit(" ", 1)[-1]
    if word.startswith(_A64_COND):  # b.eq #0x..., cbz w0, #0x..., tbz w0, #0, #0x...
        target = insn[3].rsplit(", ", 1)[-1].lstrip("#")
    elif not word.startswith(("j", "loop")) or word == "jmp":
        return False
    else:
        target = insn[3]
    try:
        return not w.fn <= int(target, 16) < w.end
    except ValueError:
        return True


class _Walk(NamedTuple):
    fn: int
    end: int
    once: int
    guard: int | None
    depth: int


def _constant_args(dec: Decoded, call: int, first: int) -> tuple:
    """The argument registers (edi, esi) the block sets to a constant before the call at index ``call``."""
    out = []
    for reg in ("edi", "esi"):
        for _a, _size, mnem, op in reversed(dec.insns[first:call]):
            dst = op.split(",", 1)[0]
            if mnem.endswith("call"):
                break  # a call before clobbers it
            if dst in _FORMS[reg]:
                m = _IMM.fullmatch(op)
                if mnem == "mov" and dst == reg and m:
                    out.append((reg, int(m.group(1), 0)))
                break
    return tuple(out)


def _arg_slots(dec: Decoded, args: dict[str, int]) -> dict[str, int]:
    """The frame slots that hold a constant argument: stored from its register in the entry block (-O0) and
    named by no other instruction of the function than compares (never written, its address never taken)."""
    if not args:
        return {}
    first, last = dec.blocks[0]
    slots = {}
    for _a, _size, mnem, op in dec.insns[first:last + 1]:
        dst, _, src = op.partition(", ")
        if mnem == "mov" and src in args and dst.startswith("dword ptr [rbp - "):
            slots[dst] = args[src]
    # a slot only compared keeps its value: no other access overlaps its 4 bytes (an address taken: 64 bytes)
    used = [(int(n, 0), X86_WIDTH.get(w, 64)) for _a, _size, mnem, op in dec.insns if mnem != "cmp"
            for w, n in _FRAME.findall(op)]
    return {slot: v for slot, v in slots.items()
            if sum(_overlap(int(_FRAME.findall(slot)[0][1], 0), n, w) for n, w in used) == 1}


def _overlap(slot: int, n: int, width: int) -> bool:
    """[rbp - n] of ``width`` bytes overlaps the 4 bytes at [rbp - slot]."""
    return n > slot - 4 and n < slot + width


def _rip(insn: tuple, disp: str) -> int:
    """The address ``[rip + disp]`` names (``disp``: "+ 0x10" or "- 0x10")."""
    return int(insn[0] + insn[1] + int(disp.replace(" ", ""), 16))


def _tested(dec: Decoded, first: int, last: int) -> tuple[str, Any] | None:
    """What a block's closing compare tests: ("argument", (slot, C)) for ``cmp dword ptr [rbp - N], C``;
    with 0: ("guard", X) for ``cmp byte ptr fs:[X], 0``, ("slot", A)
    for ``cmp qword ptr [rip + D], 0`` or ``mov R, qword ptr [rip + D]; test R, R`` (a GOT slot's word),
    ("address", A) for ``lea R, [rip + D]; test R, R`` (clang's tests of a weak function's address)."""
    cmp = dec.insns[last - 1] if last > first else None
    if cmp is None:
        return None
    if cmp[2] == "cmp" and (m := _TEST.fullmatch(cmp[3])):
        return "guard", int(m.group(1), 16)
    if cmp[2] == "cmp" and (m := _ARG_TEST.fullmatch(cmp[3])):
        return "argument", (m.group(1), int(m.group(2), 0))
    if cmp[2] == "cmp" and (m := _SLOT_TEST.fullmatch(cmp[3])):
        return "slot", _rip(cmp, m.group(1))
    if cmp[2] == "test" and last - 2 >= first and (m := _SELF_TEST.fullmatch(cmp[3])):
        load = dec.insns[last - 2]
        n = _LEA.fullmatch(load[3]) if load[2] in ("lea", "mov") else None
        if n and n.group(1) == m.group(1):
            return ("address" if load[2] == "lea" else "slot"), _rip(load, n.group(2))
    return None
