"""AArch64's transfer functions (the Isa of isa.py): the walk of a block over the abstract state."""
from __future__ import annotations

import re
from typing import Callable

from elfpatch.inits.events import Access, Call, Deref, Ret, Stash, Trap
from elfpatch.inits.isa import decides as _decides
from elfpatch.inits.isa import imm as _imm
from elfpatch.inits.isa import moved as _moved
from elfpatch.inits.isa import moved_by as _moved_by
from elfpatch.inits.isa import no_result as _no_result
from elfpatch.inits.isa import put as _put
from elfpatch.inits.jumptable import A64_TABLE_JUMP, TABLE_LOAD
from elfpatch.inits.state import (
    SLOTS,
    forget_slots,
    frame_handed,
    frame_held,
    narrowed,
    overwrite,
    slot_clobbers,
    slot_key,
)
from elfpatch.inits.values import ALLOC, CARRIED, FRAME, Ptr, Value, Within, held, named_address, offset_of, plain

# -- AArch64 ---------------------------------------------------------------------------------------------

A64_ARGS = tuple(f"x{i}" for i in range(8))
A64_CLOBBER = tuple(f"x{i}" for i in range(19)) + ("x30",)
# [base], [base, #imm], [base, #imm]! (pre-index), [base, index{, extend #amount}]; a post-index "#imm" follows.
_A64_MEM = re.compile(r"\[(\w+)(?:, #(-?(?:0x[0-9a-f]+|\d+))|, ([wx]\d+)[^\]]*)?\](!?)(?:, #(-?(?:0x[0-9a-f]+|\d+)))?")
# The state's key of the frame pointer's distance above sp (x29 = sp + it), while both are the frame's: a slot
# of either base then has one key, by sp (-O0 clang spills by both: [x29, #-4] and [sp, #8] are other words).
FP_SP = "fp:sp"
_A64_COND = ("b.", "cbz", "cbnz", "tbz", "tbnz")
_A64_INDIRECT = ("blr", "br", "blraa", "braa", "blraaz", "braaz")
# Instructions that raise a signal (a breakpoint, an undefined instruction) or enter the kernel, which may send one.
A64_TRAPS = frozenset({"brk", "udf", "hlt", "svc", "hvc", "smc"})
_A64_QUIET = ("nop", "hint", "bti", "paciasp", "autiasp", "pacibsp", "autibsp", "prfm", "dmb", "dsb", "isb")


def _a64_accesses(a: int | Within, mnem: str, is_store: bool, insn: int) -> list[Access]:
    """The global accesses of a load or store at ``a`` by the instruction at ``insn`` (atomics read, then
    write)."""
    if not is_store:
        return [Access(a, False, insn)]
    if mnem.startswith("st"):
        return [Access(a, True, insn)]
    return [Access(a, False, insn), Access(a, True, insn)]


_A64_WIDTH = {"x": 8, "w": 4, "q": 16, "d": 8, "s": 4, "h": 2, "b": 1}


def _a64_width(mnem: str, ops: list) -> int | None:
    """The bytes a load or store moves: its register's (both of a pair), a byte or halfword form's (None: not
    known)."""
    if mnem[-1] == "b" and mnem.startswith(("strb", "ldrb", "sturb", "ldurb", "ldrsb")):
        return 1
    if mnem[-1] == "h" and mnem.startswith(("strh", "ldrh", "sturh", "ldurh", "ldrsh")):
        return 2
    reg = ops[0] if ops else ""
    width = _A64_WIDTH.get(reg[:1]) if reg[1:].isdigit() or reg in ("xzr", "wzr") else None
    if width is not None and mnem.startswith(("stp", "ldp", "stnp", "ldnp")):
        return 2 * width
    return width if mnem.startswith(("st", "ld")) else None


def _a64(reg: str) -> str:
    if reg[:1] == "w" and reg[1:].isdigit():
        return "x" + reg[1:]
    return reg


def _a64_get(st: dict, reg: str) -> Value | None:
    """A register's known value; the stack pointer always points into the frame."""
    return FRAME if reg in ("sp", "wsp") else st.get(reg)


def _a64_word(base: object, m: re.Match | None, mnem: str, ops: list) -> str | None:
    """What ``ldr xN, [xM, #d]`` gives when xM holds another module's object's address (a symbol the GOT
    gave): the word at that symbol + d (values.held); None for any other load."""
    if m is None or mnem != "ldr" or not ops[0].startswith("x") or m.group(3) or m.group(4) or m.group(5):
        return None
    if not named_address(base):
        return None
    moved = offset_of(base)  # a symbol moved: the word at its offset plus d, or one not known
    return held(base, None if moved is None else moved + (int(m.group(2), 0) if m.group(2) else 0))


class _A64:
    args = A64_ARGS

    def __init__(self, got: Callable[[int], Value | None], object_of: Callable[[int], int | None]) -> None:
        self.got = got
        self.object_of = object_of
        self.result: Callable[[Value | None, tuple], Value | None] = _no_result
        # whether a value is an address of this file's code or vtables (the walker knows the image)
        self.handed: Callable[[object], bool] = lambda _v: False

    def plans(self, insns: list) -> list:
        """Each instruction's plan: its control flow alone (the AArch64 walk parses as it goes)."""
        flow = self.flow
        return [(flow(i[2], i[3]),) for i in insns]

    def flow(self, mnem: str, op: str) -> tuple[str, int | None]:
        if mnem == "b":
            return "jmp", _imm(op)
        if mnem.startswith(_A64_COND):
            return "cond", _imm(op.rsplit(", ", 1)[-1])
        if mnem == A64_TABLE_JUMP:
            return "table", None  # a switch's `br` whose table was read (jumptable.py): stays inside
        if mnem in ("br", "braa", "braaz"):
            return "out", None
        if mnem in ("ret", "retaa", "brk", "udf"):
            return "end", None
        return "none", None

    def run(self, insns: list, plans: list, first: int, last: int, st: dict, out: list, start: int,
            end: int) -> None:
        """step() over the instructions [first, last) of a block."""
        for n in range(first, last):
            self.step(insns[n], plans[n], st, out, start, end)

    def step(self, insn: tuple, _plan: tuple, st: dict, out: list, start: int, end: int) -> None:
        addr, _size, mnem, op = insn
        cmp = st.pop("cmp", None)  # a compare's outcome lives one instruction: up to the branch after it
        if self._branch(addr, mnem, op, st, out, start, end, cmp):
            return
        if mnem.endswith(TABLE_LOAD):  # a switch's entry, read inside its bound (jumptable.py): no object
            self._set(st, _a64(op.split(", ")[0]), None)
            return
        ops = op.split(", ")
        dst = _a64(ops[0]) if ops else ""
        if self._compare(mnem, ops, st) or self._constant(mnem, ops, dst, st):
            return
        if "[" in op:
            self._memory(addr, mnem, op, ops, dst, st, out)
            return
        if mnem == "ldr" and len(ops) == 2 and ops[1].startswith("#"):  # a literal load
            a = _imm(ops[1])
            if a is not None:
                out.append(Access(a, False, addr))
        if dst:
            self._set(st, dst, None)

    def _branch(self, addr: int, mnem: str, op: str, st: dict, out: list, start: int, end: int,
                cmp: bool | None) -> bool:
        """Returns, calls, jumps and hints (True: handled)."""
        if mnem in ("ret", "retaa"):
            out.append(Ret(st.get("x0"), addr))
        elif mnem in ("bl", "b"):
            if not self._call(addr, mnem, op, st, out, start, end):
                st["cmp"] = cmp
        elif mnem == A64_TABLE_JUMP:
            pass  # control flow to the cases, no call
        elif mnem in _A64_INDIRECT:
            self._indirect(addr, mnem, op, st, out)
        elif mnem in A64_TRAPS:
            args = tuple(st.get(r) for r in A64_ARGS[:6]) if mnem == "svc" else ()  # a system call's: x0-x5
            out.append(Trap(addr, args, frame_held(st, args)))
            frame_handed(st, args)
            self._set(st, "x0", None)  # a system call's result
        else:
            return mnem.startswith(_A64_COND) or mnem in _A64_QUIET
        return True

    def _call(self, addr: int, mnem: str, op: str, st: dict, out: list, start: int, end: int) -> bool:
        """``bl``, or a ``b`` out of the function (a tail call): records it. False for a ``b`` inside the
        function (control flow, not a call) or to an unknown target."""
        target = _imm(op)
        if target is None or (mnem == "b" and start <= target < end):
            return False
        args = tuple(st.get(r) for r in A64_ARGS)
        out.append(Call(target, None, args, mnem == "b", addr, held=frame_held(st, args)))
        frame_handed(st, args)
        self._clobber(st)
        self._set(st, "x0", self.result(target, args))  # what the callee returns, when the walker knows it
        return True

    def _indirect(self, addr: int, mnem: str, op: str, st: dict, out: list) -> None:
        """A call or jump through a register: known when it was loaded from the GOT (its slot too)."""
        reg = op.split(",")[0]
        slot = st.get("slot:" + reg)
        args = tuple(st.get(r) for r in A64_ARGS)
        target = plain(st.get(reg))  # Within an object: a call to its start
        out.append(Call(target, slot if isinstance(slot, int) else None, args, mnem.startswith("br"), addr,
                        held=frame_held(st, args)))
        frame_handed(st, args)
        self._clobber(st)
        self._set(st, "x0", self.result(target, args))

    @staticmethod
    def _clobber(st: dict) -> None:
        for r in A64_CLOBBER:
            st.pop(r, None)
            st.pop("slot:" + r, None)

    @staticmethod
    def _compare(mnem: str, ops: list, st: dict) -> bool:
        """A ``cmp`` (True when it is one): two known values decide the ``b.eq``/``b.ne`` after it."""
        if mnem != "cmp" or len(ops) != 2:
            return False
        left = st.get(_a64(ops[0]))
        right = _imm(ops[1]) if ops[1].startswith("#") else st.get(_a64(ops[1]))
        if isinstance(left, int) and isinstance(right, int) and _decides(left, right):
            st["cmp"] = left == right
        return True

    def _constant(self, mnem: str, ops: list, dst: str, st: dict) -> bool:
        """``adrp``/``adr``, ``add #imm`` and ``mov``: the register holds the address or value when it is
        known (True when the instruction is one of these)."""
        if mnem in ("adrp", "adr") and len(ops) == 2:
            self._set(st, dst, _imm(ops[1]))
        elif mnem in ("add", "sub") and len(ops) >= 3 and not ops[1].startswith("#"):
            imm = _imm(ops[2]) if ops[2].startswith("#") and len(ops) == 3 else None
            self._set(st, dst, _moved_by(mnem, _a64_get(st, _a64(ops[1])), imm, self.object_of))
            if dst == "x29" and ops[1] == "sp" and imm is not None:
                st[FP_SP] = imm if mnem == "add" else -imm
        elif mnem in ("mov", "movz") and len(ops) == 2:
            src = _a64_get(st, _a64(ops[1]))
            self._set(st, dst, src if src is not None else _imm(ops[1]))
            if dst == "x29" and ops[1] == "sp":
                st[FP_SP] = 0
        else:
            return False
        return True

    def _stash(self, mnem: str, ops: list, m: re.Match | None, frame: bool, st: dict, out: list) -> None:
        """A store of a callback or vptr (a Stash event: where it went)."""
        if m is None or not mnem.startswith(("str", "stur", "stp")):
            return
        values = [st.get(_a64(r)) for r in (ops[:2] if mnem.startswith("stp") else ops[:1])]
        handed = any(v is CARRIED or self.handed(v) for v in values)
        carried = None if handed or frame else next(  # see events.Stash.carried
            (v for v in values if v == ALLOC or type(v) is int and self.object_of(v) is not None), None)
        if handed or carried is not None:
            base = FRAME if frame else self._address(m, st)
            out.append(Stash(base.start if isinstance(base, Within) else base if base is not None
                             else st.get(_a64(m.group(1))), carried))

    def _memory(self, addr: int, mnem: str, op: str, ops: list, dst: str, st: dict, out: list) -> None:
        """A load or store: a stack slot, a GOT load, an access to global memory, or one through a pointer
        not resolved here (a Deref); then the registers it writes."""
        m = _A64_MEM.search(op)
        is_store = mnem.startswith(("st", "cas", "swp", "ldadd", "ldset", "ldclr", "ldeor"))
        frame = m is not None and (m.group(1) == "sp" or m.group(1) == "x29" and st.get("x29") == FRAME)
        self._stash(mnem, ops, m, frame, st, out)
        if frame and m is not None:
            if self._frame_access(mnem, ops, m, is_store, dst, st):
                return
        elif is_store and m is not None and _a64_get(st, _a64(m.group(1))) == FRAME:
            forget_slots(st)  # a store through a pointer into the frame: which slot is not known
        a = self._address(m, st)
        word = None  # a pointer loaded from another module's object: that word's value (values.held)
        if a is not None:
            if not is_store and mnem == "ldr" and len(ops) >= 2 and self._pointer_load(addr, a, ops[0], dst, st, out):
                return
            out.extend(_a64_accesses(a, mnem, is_store, addr))
        elif not mnem.startswith("prf"):  # an operand the pattern does not parse is not resolved either
            word = self._through(addr, m, mnem, ops, is_store, st, out)
        if not is_store:
            self._loaded(mnem, ops, a, dst, word, st)
        if m and (m.group(4) or m.group(5)):  # pre/post-index by an immediate writes the moved base back
            reg = _a64(m.group(1))
            step = _imm(m.group(2) if m.group(4) else m.group(5))
            self._set(st, reg, _moved(st.get(reg), step, self.object_of))
        elif m and op[m.end():].strip():  # post-index by a register: the base moved by an unknown amount
            self._set(st, _a64(m.group(1)), None)

    def _loaded(self, mnem: str, ops: list, a: int | Within | None, dst: str, word: str | None, st: dict) -> None:
        """The registers a load writes: not known, but another module's word (``word``) or CARRIED words."""
        for r in ops[:2] if mnem.startswith("ldp") else ops[:1]:
            self._set(st, _a64(r), None)
        if word is not None:
            self._set(st, dst, word)
        if isinstance(a, int):
            self._carried(mnem, ops, a, st)

    def _carried(self, mnem: str, ops: list, a: int, st: dict) -> None:
        """A load of vector registers (``ldr q0``, ``ldp q0, q1``) from words of which one is a callback or vptr
        holds CARRIED; ``ldp x0, x1`` of such words holds them."""
        regs = ops[:2] if mnem.startswith("ldp") else ops[:1]
        width = {"q": 16, "x": 8}.get(regs[0][:1] if regs else "", 0)
        for n, r in enumerate(regs if width else ()):
            words = [self.got(w) for w in range(a + n * width, a + (n + 1) * width, 8)]
            if any(type(w) is int and self.handed(w) for w in words):
                self._set(st, _a64(r), CARRIED if width == 16 else words[0])

    @staticmethod
    def _through(addr: int, m: re.Match | None, mnem: str, ops: list, is_store: bool, st: dict,
                 out: list) -> str | None:
        """An access through a pointer whose address is not known (a Deref, unless the pointer is the frame's
        or memory allocated); returns what a load of another module's word gives (see _a64_word)."""
        base = _a64_get(st, _a64(m.group(1))) if m is not None else None
        if not (isinstance(base, Ptr) and base.kind != "arg"):
            # below the base: a negative displacement (pre-index too) or an index register
            below = m is None or bool(m.group(2) and m.group(2).startswith("-") or m.group(3)) \
                or isinstance(base, Ptr) and base.below
            out.append(Deref(addr, base if isinstance(base, (Ptr, str)) else None, is_store, below))
        return _a64_word(base, m, mnem, ops) if not is_store else None

    def _frame_access(self, mnem: str, ops: list, m: re.Match, is_store: bool, dst: str, st: dict) -> bool:
        """A load or store in the frame (True: done). A stack slot: -O0 spills its arguments there, so a known
        value stored is known when loaded back (state.slot_key: 8 bytes, or 4 of an int); a store forgets
        every slot whose bytes it may overwrite: those it overlaps, the other frame base's (``[x29, #-8]``
        and ``[sp, #24]`` may be one word), all at an index not known."""
        base, index = m.group(1), m.group(3)
        other: str | None = SLOTS + ("x29" if base == "sp" else "sp")
        width = _a64_width(mnem, ops)
        offset = 0 if m.group(5) or not m.group(2) else _imm(m.group(2))  # post-index: the base itself
        above = st.get(FP_SP)
        if above is not None and offset is not None and not index:  # x29 is sp + above: one name for the bytes
            other = None
            if base == "x29":
                base, offset = "sp", offset + above
        if is_store:
            overwrite(st, (SLOTS,) if index or offset is None else slot_clobbers(base, offset, width), other, "x29")
        if index or m.group(4) or m.group(5) or offset is None or mnem not in ("str", "stur", "ldr", "ldur"):
            return False  # the rest as any access (a moved base written back; the registers a load writes)
        key = slot_key(base, offset, width)
        if is_store:
            if key is not None:
                _put(st, key, narrowed(st.get(dst), width))
        else:
            self._set(st, dst, st.get(key) if key is not None else None)
        return True

    def _address(self, m: re.Match | None, st: dict) -> int | Within | None:
        """The address a ``[base, #offset]`` or ``[base, index]`` operand names, when the base register's
        value is known (a post-index access uses the base as it is)."""
        if not m:
            return None
        base = st.get(_a64(m.group(1)))
        if not isinstance(base, (int, Within)):
            return None  # unknown, or a pointer whose provenance (not address) is known
        if m.group(3):  # a register index (maybe extended or shifted): some element of the object
            return _moved(base, None, self.object_of)
        return _moved(base, int(m.group(2), 0) if m.group(2) else 0, self.object_of)

    def _pointer_load(self, insn: int, a: int | Within, reg: str, dst: str, st: dict, out: list) -> bool:
        """An ``ldr`` of a 64-bit word whose relocated value is known (see _got_load); a pointer global's
        load-time value is still a read of the global. Within an object (an index not known) the word loaded
        is not known: never the one at its start."""
        at = a if isinstance(a, int) else None
        if at is None or not reg.startswith("x") or not self._got_load(at, dst, st):
            return False
        out.extend(_a64_accesses(a, "ldr", False, insn))  # a GOT slot too: the walk asks whose name it holds
        return True

    def _got_load(self, a: int, dst: str, st: dict) -> bool:
        """An ``ldr`` from a GOT slot: the register holds the object's address, and remembers the slot (for a
        ``br`` through it). False: not a GOT slot."""
        value = self.got(a)
        if value is None:
            return False
        self._set(st, dst, value)
        st["slot:" + dst] = a
        return True

    @staticmethod
    def _set(st: dict, reg: str, value: object) -> None:
        if reg == "sp" or reg == "x29":  # the stack pointer moved, or a frame pointer set anew: its slots' offsets
            forget_slots(st, SLOTS + reg)  # name other bytes
            st.pop(FP_SP, None)
        st.pop("slot:" + reg, None)
        if value is None:
            st.pop(reg, None)
        else:
            st[reg] = value
