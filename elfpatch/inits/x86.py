"""x86-64's transfer functions (the Isa of isa.py): instruction plans worked out once per text, and the walk
of a block over the abstract state."""
from __future__ import annotations

import re
from typing import Callable

from elfpatch.inits.events import Access, Call, Deref, Ret, Stash, Trap
from elfpatch.inits.isa import X86_WIDTH
from elfpatch.inits.isa import decides as _decides
from elfpatch.inits.isa import imm as _imm
from elfpatch.inits.isa import moved as _moved
from elfpatch.inits.isa import moved_by as _moved_by
from elfpatch.inits.isa import no_result as _no_result
from elfpatch.inits.isa import put as _put
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
from elfpatch.inits.values import (
    ALLOC,
    CARRIED,
    FRAME,
    Ptr,
    Value,
    Within,
    Words,
    held,
    named_address,
    offset_of,
    plain,
)

# -- x86-64 ----------------------------------------------------------------------------------------------

_X86_ALIAS = {}
for _r in "abcd":
    _X86_ALIAS.update({f"e{_r}x": f"r{_r}x", f"r{_r}x": f"r{_r}x"})
for _r in ("si", "di", "bp", "sp"):
    _X86_ALIAS.update({f"e{_r}": f"r{_r}", f"r{_r}": f"r{_r}"})
for _n in range(8, 16):
    _X86_ALIAS.update({f"r{_n}d": f"r{_n}", f"r{_n}": f"r{_n}"})
_X86_PARTIAL = {f"{r}l": f"r{r}x" for r in "abcd"}
_X86_PARTIAL.update({f"{r}x": f"r{r}x" for r in "abcd"})
_X86_PARTIAL.update({"sil": "rsi", "dil": "rdi", "si": "rsi", "di": "rdi"})
_X86_PARTIAL.update({f"r{n}{w}": f"r{n}" for n in range(8, 16) for w in "bw"})
X86_ARGS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
# Instructions that raise a signal (a trap, an interrupt, a privileged hlt) or enter the kernel, which may send one.
X86_TRAPS = frozenset({"ud0", "ud1", "ud2", "int", "int1", "int3", "into", "hlt", "syscall", "sysenter"})
# The registers the kernel takes a system call's arguments in: x86-64's syscall (and sysenter), and the i386
# ABI of ``int $0x80``, which a 64-bit process may use too.
_SYSCALL_ARGS = ("rdi", "rsi", "rdx", "r10", "r8", "r9")
_KERNEL_ARGS = {"syscall": _SYSCALL_ARGS, "sysenter": _SYSCALL_ARGS, "int": ("rbx", "rcx", "rdx", "rsi", "rdi", "rbp")}
X86_CLOBBER = ("rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11")
_X86_MEM = re.compile(r"(?:(\w+):)?\[([^\]]*)\]")
# What an instruction does to its memory operand, by its semantics (capstone's detailed operand access is the
# reference: tests/siof/test_operand_access.py checks this table against it). A memory operand that is not the
# first operand is a source (read), but for the exchanges. A first operand is read and written (add, inc,
# shl, xadd, ...) unless the mnemonic says otherwise.
_X86_FIRST_READ = ("cmp", "test", "bt", "ucomis", "comis", "vucomis", "vcomis", "push", "div", "idiv", "mul",
                   "imul", "fild", "fld", "fcom", "ficom", "fadd", "fiadd", "fsub", "fisub", "fmul", "fimul",
                   "fdiv", "fidiv", "fbld", "ldmxcsr", "vldmxcsr", "fxrstor", "xrstor", "frstor", "fldenv",
                   "call", "jmp", "ptest", "vptest", "verr", "verw", "lods", "scas", "kortest", "ktest")
_X86_FIRST_WRITE = ("mov", "vmov", "kmov", "stos", "set", "fst", "fist", "fnst", "fbstp", "fxsave", "xsave",
                    "stmxcsr", "vstmxcsr", "fsave", "fnsave", "pop", "pextr", "vpextr", "extractps", "vextract",
                    "vcvtps2ph", "vpmov", "vcompress", "vpcompress", "vmaskmov", "vpmaskmov", "vscatter",
                    "vpscatter", "maskmov", "vmaskmovdqu", "sgdt", "sidt", "sldt")
_X86_NO_ACCESS = ("lea", "nop", "prefetch", "clflush", "clwb", "clflushopt", "cldemote", "endbr", "invlpg",
                  "bnd")
# Instructions that write no register operand (bt's siblings btc/btr/bts do: not here).
_X86_NO_WRITE = frozenset({"cmp", "test", "bt", "ucomiss", "ucomisd", "comiss", "comisd", "vucomiss", "vucomisd",
                           "vcomiss", "vcomisd", "push", "nop", "endbr64"})
# Instructions that write registers not named in their operands: those registers become unknown.
# Registers instructions write without naming them: these become unknown (what each writes, no more: a
# `rep stosq` must not forget the rbp that holds an object's address).
_X86_IMPLICIT = {"div": ("rax", "rdx"), "idiv": ("rax", "rdx"), "mul": ("rax", "rdx"), "cqo": ("rdx",),
                 "cdq": ("rdx",), "cwd": ("rdx",), "cpuid": ("rax", "rbx", "rcx", "rdx"), "rdtsc": ("rax", "rdx"),
                 "rdtscp": ("rax", "rcx", "rdx"), "syscall": ("rax", "rcx", "r11"), "rdpid": ("rax",),
                 "xgetbv": ("rax", "rdx"), "cmpxchg": ("rax",)}
_X86_STRING = {"stos": ("rdi", "rcx"), "movs": ("rdi", "rsi", "rcx"), "lods": ("rax", "rsi", "rcx"),
               "scas": ("rdi", "rcx"), "cmps": ("rdi", "rsi", "rcx")}


def _x86_implicit(mnem: str, ops: list) -> tuple:
    """The registers an instruction writes that its operands do not name (one-operand imul/mul/div write rax
    and rdx; string instructions move rsi/rdi/rcx; xchg and xadd write both operands)."""
    if mnem == "imul" and len(ops) == 1:
        return "rax", "rdx"
    if mnem[:4] in _X86_STRING and len(mnem) == 5 and mnem[4] in "bwdq":
        return _X86_STRING[mnem[:4]]
    if mnem in ("xchg", "xadd", "cmpxchg") and len(ops) == 2:
        second = _X86_ALIAS.get(ops[1]) or _X86_PARTIAL.get(ops[1])
        return _X86_IMPLICIT.get(mnem, ()) + ((second,) if second else ())
    return _X86_IMPLICIT.get(mnem, ())
_PREFIXES = ("bnd ", "notrack ", "rep ", "repe ", "repne ", "lock ", "addr32 ", "data16 ")


def x86_memory_access(mnem: str, first: bool) -> tuple[bool, bool] | None:
    """(read, write) for a memory operand of ``mnem`` (prefixes stripped), the first operand or not; None for
    an instruction that touches no memory through it (lea, multi-byte nop, prefetch)."""
    if mnem.startswith(_X86_NO_ACCESS):
        return None
    if mnem.startswith(("cmpxchg", "xadd", "xchg")):
        return True, True
    if not first:
        return True, False
    if mnem.startswith(_X86_FIRST_READ) and not mnem.startswith(("btc", "btr", "bts")):
        return True, False
    if mnem.startswith(_X86_FIRST_WRITE):
        return False, True
    return True, True  # read-modify-write


def _x86_accesses(a: int | Within, rw: tuple[bool, bool], insn: int) -> list[Access]:
    """The global accesses of a memory operand at ``a`` that reads and/or writes (``rw``), by the instruction
    at ``insn``."""
    return [Access(a, w, insn) for w, on in ((False, rw[0]), (True, rw[1])) if on]


def _x86_parse(inner: str) -> tuple[tuple, tuple]:
    """The terms of ``[base + index*scale + disp]``, parsed once per operand text: (code, value, scale, scaled)
    with code 0 rip, 1 a signed displacement, 2 a register (its full name); and the unscaled registers (where
    a pointer of unknown address gets its provenance)."""
    terms: list[tuple] = []
    bases = []
    sign = 1
    for tok in inner.split():
        if tok in "+-":
            sign = 1 if tok == "+" else -1
            continue
        if tok == "rip":
            terms.append((0, 0, 1, False))
            continue
        imm = _imm(tok)
        if imm is not None:
            terms.append((1, sign * imm, 1, False))
            continue
        reg, _, times = tok.partition("*")
        full = _X86_ALIAS.get(reg, reg)
        terms.append((2, full, _imm(times) if times else 1, bool(times)))
        if not times:
            bases.append(full)
    return tuple(terms), tuple(bases)


def _x86_terms(terms: tuple, st: dict, ip_next: int) -> tuple[Within | None, int, bool, bool, bool]:
    """The terms of ``[base + index*scale + disp]``: a moving base (Within an object: it decides the address
    alone), else the sum of the known terms, whether any register or rip was known, and whether an unknown
    unscaled register or a scaled index register takes part."""
    total = 0
    known = index = scaled = based = False
    for code, value, scale, times in terms:
        if code == 1:
            total += value
            continue
        if code == 0:
            total += ip_next
            known = True
            continue
        based = based or not times
        value = st.get(value)
        if isinstance(value, Within) and scale == 1:
            return value, total, known, index, scaled
        if isinstance(value, int) and scale is not None:
            total += value * scale  # `rcx + rdx*1` puts the base in the index: its value counts as well
            known = known or scale == 1
        elif times:  # a scaled index register: the element is unknown, the object is not
            scaled = True
        else:
            index = True
    return None, total, known or not based, index, scaled  # no base register: an absolute address (non-PIE)


def _x86_provenance(bases: tuple, st: dict) -> Ptr | str | None:
    """Where the pointer of a memory operand whose address is not known comes from (``bases``: its unscaled
    registers): the stack pointer or a register holding a pointer of known provenance (Ptr), another module's
    object (str), or None (unknown)."""
    found: Ptr | str | None = None
    unknown = False
    for r in bases:
        if r == "rsp":
            return FRAME
        v = st.get(r)
        if isinstance(v, (Ptr, str)) and not (isinstance(found, Ptr) and found.kind != "arg"):
            found = v
        elif not isinstance(v, (int, Within)):  # an address, exact or Within an object, is a known register
            unknown = True
    if isinstance(found, Ptr) and found.kind != "arg":
        return found  # frame or allocated memory plus an index: still there
    return None if unknown else found


# What a decoded instruction is to the x86-64 walk, worked out once per distinct (mnemonic, operands) text (a
# plan): its control flow, then one of these kinds and the operands it needs, already parsed. The walk then
# does no string work; the same text at another address (a register move, a stack slot) reuses the plan.
_K_CALL, _K_COND, _K_RET, _K_LEA, _K_MEM, _K_REG, _K_TRAP = range(7)
# Register-only instructions (_K_REG): what they do to the register written.
_R_NONE, _R_MOV, _R_ZERO, _R_MOVE, _R_FORGET = range(5)
# A stack slot operand (_K_MEM): what the instruction does to it.
_S_NONE, _S_STORE, _S_FORGET, _S_LOAD, _S_CLOBBER = range(5)
# A vector move (movups, vmovdqu, movq xmm...) between memory and a vector register: what it does to the
# register (_V_LOAD: with the width loaded) or to memory (_V_STORE). A struct of callbacks copied from constant
# data by a vector load and store is a stash of those callbacks (CARRIED).
_V_LOAD, _V_STORE = range(2)
_VECTOR = re.compile(r"[xyz]mm\d+")
_VECTOR_WIDTH = re.compile(r"(\w+) ptr")


MAX_PLANS = 1 << 18  # distinct texts planned per file before the table starts over (bounds its memory)


def _x86_source(text: str) -> tuple[bool, object]:
    """Where an operand's value comes from: (True, a constant: an immediate, the frame, or None) or (False, the
    state key: a register or a stack slot)."""
    reg = _X86_ALIAS.get(text)
    if reg == "rsp":
        return True, FRAME
    if reg is not None:
        return False, reg
    m = _X86_MEM.search(text)
    if m:
        key = None if m.group(1) else _x86_slot(_x86_parse(m.group(2))[0], _x86_width(text))[0]
        return (True, None) if key is None else (False, key)
    return True, _imm(text)


def _x86_width(text: str) -> int | None:
    """The bytes an operand's text names: ``dword ptr [...]`` or a register (None: not known)."""
    m = _VECTOR_WIDTH.match(text)
    if m:
        return X86_WIDTH.get(m.group(1))
    full = _X86_ALIAS.get(text)
    if full is not None:
        return 8 if full == text else 4
    part = _X86_PARTIAL.get(text)
    if part is not None:
        return 1 if text[-1] in "lb" else 2
    return None


# The stack pointer moves (a push, pop, sub rsp...): its slots' offsets name other bytes from then on.
_RSP_MOVES = frozenset({"push", "pop", "pushfq", "popfq", "leave", "enter"})
_RSP_SLOTS, _RBP_SLOTS = SLOTS + "rsp", SLOTS + "rbp"  # a frame base's prefix (see state.clobber)


def _x86_slot(terms: tuple, width: int | None) -> tuple[str | None, tuple[str, ...], str | None]:
    """A stack operand's slot (see state.slot_key; None: no value is kept there), the other slots a store to it
    overwrites, and the other frame base's prefix, whose slots may be the same bytes: ``[rbp - 8]`` and
    ``[rsp + 0x18]`` may name one word, and an index not known may name any slot."""
    at = _frame_offset(terms)
    if at is not None:
        base, d = at
        return slot_key(base, d, width), slot_clobbers(base, d, width), _RBP_SLOTS if base == "rsp" else _RSP_SLOTS
    return None, (SLOTS,), None


def _below(terms: tuple) -> bool:
    """Whether an operand may reach memory below its base register: a negative displacement, or an index."""
    return any(t[0] == 1 and t[1] < 0 for t in terms) or sum(1 for t in terms if t[0] == 2) > 1


def _frame_offset(terms: tuple) -> tuple[str, int] | None:
    """(rsp or rbp, displacement) of a stack operand ``[rsp + d]``, ``[rbp - d]`` (None: an index, another base)."""
    head = terms[0] if terms else None
    if head is not None and head[0] == 2 and head[2] == 1 and not head[3] and head[1] in ("rsp", "rbp") \
            and (len(terms) == 1 or len(terms) == 2 and terms[1][0] == 1):
        return head[1], terms[1][1] if len(terms) == 2 else 0
    return None


def _x86_flow(mnem: str, op: str) -> tuple[str, int | None]:
    """("cond"|"jmp"|"out"|"table"|"end"|"none", target) for one instruction."""
    table = mnem.startswith("notrack ")
    while mnem.startswith(_PREFIXES):
        mnem = mnem.split(" ", 1)[1]
    if mnem == "jmp":
        if table:
            return "table", None  # a jump table (-fcf-protection marks them): stays inside
        t = _imm(op)
        return ("jmp", t) if t is not None else ("out", None)
    if mnem[0] == "j":
        return "cond", _imm(op)
    if mnem in _X86.ends:
        return "end", None
    return "none", None


def _x86_drops(mnem: str, ops: list, dreg: str | None) -> tuple:
    """The registers an instruction leaves unknown besides what its plan sets: the one it writes (a partial
    register forgets its full one) and those it writes without naming them; then the frame bases' slots
    (a prefix, see state.clobber) when it moves the stack pointer or writes rbp."""
    own: tuple = (dreg,) if dreg else ((_X86_PARTIAL[ops[0]],) if ops[0] in _X86_PARTIAL else ())
    return own + tuple(_x86_implicit(mnem, ops)) + _x86_frame_moves(mnem, dreg)


def _x86_frame_moves(mnem: str, dreg: str | None) -> tuple:
    """The frame bases' prefixes whose slots an instruction leaves meaningless: rsp's when it moves the stack
    pointer, rbp's when it writes rbp (a frame pointer set anew is another frame's: none of its slots known)."""
    out: tuple = ()
    if mnem in _RSP_MOVES or dreg == "rsp":
        out += (_RSP_SLOTS,)
    if dreg == "rbp" or mnem in ("leave", "enter"):
        out += (_RBP_SLOTS,)
    return out


def _drop(st: dict, drops: tuple, keep: str | None = None) -> None:
    """Forgets the registers of ``drops`` but ``keep``, and the slots of the frame bases' prefixes in it."""
    for r in drops:
        if r[:2] == SLOTS:
            forget_slots(st, r)
        elif r != keep:
            st.pop(r, None)


def _rip_relative(terms: tuple) -> int | None:
    """d for ``[rip + d]`` (the address is then the next instruction's plus d, whatever the state), else None."""
    if len(terms) == 2 and terms[0][0] == 0 and terms[1][0] == 1:
        return terms[1][1]
    return None


def _based(terms: tuple) -> tuple[str, int] | None:
    """(reg, d) for ``[reg]`` and ``[reg + d]`` with reg not the stack pointer (the commonest operand: its
    address is the register's value moved by d), else None."""
    if not terms or terms[0][0] != 2 or terms[0][3] or terms[0][2] != 1 or terms[0][1] == "rsp":
        return None
    if len(terms) == 1:
        return terms[0][1], 0
    if len(terms) == 2 and terms[1][0] == 1:
        return terms[0][1], terms[1][1]
    return None


def _x86_operand(m: re.Match, mnem: str, ops: list, dreg: str | None) -> tuple | None:
    """One memory operand's plan: (first, rw, stack: 0 never, 1 always, 2 when rbp is the frame, slot key, slot
    action, its source, parsed terms, whether a load from it may be a GOT load); None when it touches no
    memory the walk cares about (lea-like, or the thread's own block: TLS, the stack guard)."""
    first = m.start() < len(ops[0])
    rw = x86_memory_access(mnem, first)
    seg, inner = m.group(1), m.group(2)
    if rw is None or seg in ("fs", "gs"):
        return None
    stack = 0
    if seg is None and "rip" not in inner:
        stack = 1 if "rsp" in inner else 2 if "rbp" in inner else 0
    action, source = _S_NONE, (True, None)  # type: tuple[int, tuple[bool, object]]
    if first and mnem == "mov" and len(ops) == 2:
        action, source = _S_STORE, _x86_source(ops[1])
    elif rw[1]:  # written (an exchange's second operand too)
        action = _S_FORGET
    elif dreg and not first:
        action = _S_LOAD if mnem == "mov" else _S_CLOBBER
    parsed = _x86_parse(inner)
    width = _x86_width(ops[0] if first else ops[-1])
    slot, clobbers, cross = _x86_slot(parsed[0], width) if stack else (None, (), None)
    return (first, rw, stack, slot, action, source, parsed,
            bool(not first and mnem == "mov" and dreg and dreg == ops[0]),  # a 64-bit register: a pointer
            _rip_relative(parsed[0]), _based(parsed[0]), clobbers, cross, width)


_X86_JUMPS = frozenset({"jmp", "je", "jne", "jb", "jae", "ja", "jbe", "jl", "jle", "jg", "jge", "js", "jns", "jo",
                        "jno", "jp", "jnp", "jrcxz", "jecxz"})
_RIP_LEA = re.compile(r"(\w+), \[rip ([+-]) (0x[0-9a-f]+|\d+)\]")


def _x86_quick_plan(mnem: str, op: str) -> tuple | None:
    """The plans of the texts that are nearly all distinct (a jump to an address, ``lea reg, [rip + d]``),
    made without the general parse: the same tuples _x86_plan gives them (None: not one of these)."""
    if mnem in _X86_JUMPS and op[:2] == "0x":
        t = int(op, 16)
        if mnem == "jmp":
            return ("jmp", t), _K_CALL, True, t, False, None, _X86_ALIAS.get(op, op), False
        return ("cond", t), _K_COND, t
    if mnem == "lea":
        m = _RIP_LEA.fullmatch(op)
        if m is not None:
            d = int(m.group(3), 0)
            terms = ((0, 0, 1, False), (1, d if m.group(2) == "+" else -d, 1, False))
            return _NO_FLOW, _K_LEA, _X86_ALIAS.get(m.group(1)), (terms, ()), terms[1][1]
    return None


_NO_FLOW = ("none", None)


def _x86_plan(mnem: str, op: str) -> tuple:
    """The plan of one instruction text (see _K_CALL): (flow, kind, ...)."""
    quick = _x86_quick_plan(mnem, op)
    if quick is not None:
        return quick
    flow = _x86_flow(mnem, op)
    notrack = mnem.startswith("notrack")
    while mnem.startswith(_PREFIXES):
        mnem = mnem.split(" ", 1)[1]
    if mnem in ("call", "jmp"):
        m = _X86_MEM.search(op) if "[" in op else None
        inner = _x86_parse(m.group(2))[0] if m and not m.group(1) else None
        return flow, _K_CALL, mnem == "jmp", _imm(op), "[" in op, inner, _X86_ALIAS.get(op, op), notrack
    if mnem[0] == "j":
        return flow, _K_COND, _imm(op)
    if mnem == "ret":
        return flow, _K_RET
    ops = op.split(", ", 1)
    dreg = _X86_ALIAS.get(ops[0])
    if mnem == "lea":
        m = _X86_MEM.search(ops[1]) if len(ops) == 2 else None
        parsed = _x86_parse(m.group(2)) if m and not m.group(1) else None
        return flow, _K_LEA, dreg, parsed, _rip_relative(parsed[0]) if parsed is not None else None
    if mnem in X86_TRAPS:  # the kernel's argument registers, a register plan (syscall's clobbers), a Trap event
        return (flow, _K_TRAP, _KERNEL_ARGS.get(mnem)) + _x86_register(mnem, ops, dreg)
    cmp = _x86_cmp(ops) if mnem == "cmp" and len(ops) == 2 else None
    if "[" in op:
        operands = tuple(p for p in (_x86_operand(m, mnem, ops, dreg) for m in _X86_MEM.finditer(op))
                         if p is not None)
        # A spill to the stack or a load back from it (-O0 code is full of them): done in line by run().
        slot = operands[0] if len(operands) == 1 and operands[0][2] == 1 and cmp is None else None
        spill = (slot[4], slot[3], slot[5], slot[10], slot[11], slot[12]) \
            if slot is not None and slot[4] in (_S_STORE, _S_LOAD) else None
        return flow, _K_MEM, cmp, operands, _x86_drops(mnem, ops, dreg), dreg, spill, _x86_vector(mnem, ops)
    return (flow, _K_REG, cmp) + _x86_register(mnem, ops, dreg)


def _x86_cmp(ops: list) -> tuple:
    """A compare's plan part: its two sources, the mask of its width (its outcome is of that many bytes: a
    dword -1 is 0xffffffff stored), and whether a source is an rbp slot (known only while rbp is the frame)."""
    width = _x86_width(ops[0]) or _x86_width(ops[1]) or 8
    sources = (_x86_source(ops[0]), _x86_source(ops[1]))
    rbp = any(not known and str(key).startswith(_RBP_SLOTS) for known, key in sources)
    return sources[0], sources[1], (1 << 8 * min(width, 8)) - 1, rbp


def _x86_vector(mnem: str, ops: list) -> tuple | None:
    """A vector move's plan part (see _V_LOAD), None for any other instruction."""
    if len(ops) != 2 or not mnem.lstrip("v").startswith(("mov", "lddqu")):
        return None
    if _VECTOR.fullmatch(ops[0]) and "[" in ops[1]:
        m = _VECTOR_WIDTH.match(ops[1])
        return _V_LOAD, ops[0], X86_WIDTH.get(m.group(1), 64) if m else 64
    if _VECTOR.fullmatch(ops[1]) and "[" in ops[0]:
        return _V_STORE, ops[1]
    return None


def _x86_register(mnem: str, ops: list, dreg: str | None) -> tuple:
    """A register-only instruction's plan tail: (action, register, its argument, registers dropped)."""
    if mnem in _X86_NO_WRITE:
        return _R_NONE, None, None, _x86_frame_moves(mnem, None)
    implicit = tuple(_x86_implicit(mnem, ops))
    if not dreg:
        return _R_NONE, None, None, _x86_drops(mnem, ops, dreg)
    if mnem in ("mov", "movabs") and len(ops) == 2:  # movabs: a 64-bit immediate (clang -O0 non-PIE)
        return _R_MOV, dreg, _x86_source(ops[1]), implicit
    if mnem == "xor" and len(ops) == 2 and ops[0] == ops[1]:
        return _R_ZERO, dreg, None, implicit
    if mnem in ("add", "sub") and len(ops) == 2:
        imm = _imm(ops[1])
        return _R_MOVE, dreg, (mnem, imm), implicit
    return _R_FORGET, dreg, None, implicit


def _get(st: dict, source: tuple) -> Value | None:
    return source[1] if source[0] else st.get(source[1])


class _X86:
    args = X86_ARGS
    ends = ("ret", "hlt", "ud2", "int3")

    def __init__(self, got: Callable[[int], Value | None], object_of: Callable[[int], int | None]) -> None:
        self.got = got
        self.object_of = object_of
        self.result: Callable[[Value | None, tuple], Value | None] = _no_result
        self.kept: Callable[[int], frozenset] = lambda _target: frozenset()  # registers a direct call keeps
        # whether a value is an address of this file's code or vtables (the walker knows the image)
        self.handed: Callable[[object], bool] = lambda _v: False
        self._plans: dict[tuple[str, str], tuple] = {}

    def plans(self, insns: list) -> list:
        """Each instruction's plan (cached by its text); a plan's first item is its control flow."""
        get, new = self._plans.get, self._plan
        return [get(i[2:]) or new(i[2], i[3]) for i in insns]

    def _plan(self, mnem: str, op: str) -> tuple:
        quick = _x86_quick_plan(mnem, op)
        if quick is not None:  # nearly every such text is met once: made again rather than held
            return quick
        if len(self._plans) >= MAX_PLANS:
            self._plans.clear()
        plan = self._plans[(mnem, op)] = _x86_plan(mnem, op)
        return plan

    def _mem(self, terms: tuple, st: dict, ip_next: int) -> tuple[int | Within | None, bool]:
        """The address a memory operand names: exact, Within an object (a moving pointer, or a known address
        plus an unknown index register), or None; and whether it is exact. A known address plus an unknown
        scaled index outside any object (a constant table) is that table's start, not exact: what it reads
        is no object, and no word of it is known to be the one loaded."""
        moving, total, known, index, scaled = _x86_terms(terms, st, ip_next)
        if moving is not None:
            return moving, False
        if not known:
            return None, False
        if index or scaled:
            inside = _moved(total, None, self.object_of)
            if inside is not None:
                return inside, False
        return (None, False) if index else (total, not scaled)  # unscaled: which register is the base is not known

    def run(self, insns: list, plans: list, first: int, last: int, st: dict, out: list, start: int,
            end: int) -> None:
        """step() over the instructions [first, last) of a block, the commonest plans done in line (a register
        move, lea of a rip-relative address): one call per block, not one per instruction."""
        step, pop, get, register, memory = self.step, st.pop, st.get, self._register, self._memory
        for n in range(first, last):
            plan = plans[n]
            kind = plan[1]
            if kind == _K_REG and plan[3] == _R_MOV and plan[2] is None and not plan[6]:
                pop("cmp", None)
                arg = plan[5]
                value = arg[1] if arg[0] else get(arg[1])
                if value is None:
                    pop(plan[4], None)
                else:
                    st[plan[4]] = value
            elif kind == _K_LEA and plan[4] is not None and plan[2]:
                pop("cmp", None)
                insn = insns[n]
                st[plan[2]] = insn[0] + insn[1] + plan[4]
            elif kind == _K_MEM and plan[6] is not None:  # a stack slot stored or loaded (_x86_stack_slot)
                pop("cmp", None)
                self._spill(plan, st, out)
            elif kind == _K_REG and plan[2] is None:  # no compare: its register alone (or nothing: a test)
                pop("cmp", None)
                if plan[3] != _R_NONE or plan[6]:
                    register(plan, st)
            elif kind == _K_MEM and plan[2] is None:
                pop("cmp", None)
                memory(insns[n], plan, st, out)
            else:
                step(insns[n], plan, st, out, start, end)

    def _spill(self, plan: tuple, st: dict, out: list) -> None:
        """A store into a stack slot or a load back from it (a plan's spill part, see _x86_stack_slot)."""
        action, slot, source, clobbers, cross, width = plan[6]
        if action == _S_STORE:
            value = source[1] if source[0] else st.get(source[1])
            if type(value) is int and self.handed(value):
                out.append(Stash(FRAME))  # a callback or vptr stored in the frame
            overwrite(st, clobbers, cross, "rbp")
            if slot is not None:
                _put(st, slot, narrowed(value, width))
        else:
            _put(st, plan[5], st.get(slot) if slot is not None else None)

    def step(self, insn: tuple, plan: tuple, st: dict, out: list, start: int, end: int) -> None:
        cmp = st.pop("cmp", None)  # a compare's outcome lives one instruction: up to the branch after it
        kind = plan[1]
        if kind == _K_REG:
            if plan[2] is not None:
                self._compare(plan[2], st)
            self._register(plan, st)
        elif kind == _K_MEM:
            if plan[2] is not None:
                self._compare(plan[2], st)
            self._memory(insn, plan, st, out)
        elif kind == _K_LEA:
            self._lea(plan, st, insn[0] + insn[1])
        elif kind == _K_CALL:
            if not self._call(insn, plan, st, out, start, end):
                st["cmp"] = cmp
        elif kind == _K_COND:
            target = plan[2]
            if target is not None and not start <= target < end:  # a conditional tail call (or a .cold part)
                out.append(Call(target, None, _x86_args(st), True, insn[0]))
            st["cmp"] = cmp
        else:
            self._end(insn, plan, st, out)

    def _end(self, insn: tuple, plan: tuple, st: dict, out: list) -> None:
        """A trap (its registers, as a register plan's) or a return."""
        if plan[1] == _K_TRAP:
            args = tuple(st.get(r) for r in plan[2]) if plan[2] else ()
            out.append(Trap(insn[0], args, frame_held(st, args)))
            frame_handed(st, args)
            self._register(plan, st)
        else:
            out.append(Ret(st.get("rax"), insn[0]))

    def _call(self, insn: tuple, plan: tuple, st: dict, out: list, start: int, end: int) -> bool:
        """A call, or a jmp out of the function (a tail call): records it and clobbers the caller-saved
        registers. False for a jmp inside the function: control flow, not a call."""
        _flow, _kind, tail, target, memory, terms, reg, notrack = plan
        get = st.get
        args = get("rdi"), get("rsi"), get("rdx"), get("rcx"), get("r8"), get("r9")  # _x86_args, in line
        if target is not None:  # an immediate
            if tail and start <= target < end:
                return False
            out.append(Call(target, None, args, tail, insn[0], held=frame_held(st, args)))
        elif memory and not (tail and notrack):  # notrack jmp [T + rI*8]: a switch's table (jumptable.py)
            at, exact = self._mem(terms, st, insn[0] + insn[1]) if terms is not None else (None, False)
            slot = at if exact and isinstance(at, int) else None  # a table's entry at an index not known: none
            word = _word_of(st, _based(terms)) if slot is None and terms is not None else None
            # word: a function pointer another module's object holds
            out.append(Call(word, slot, args, tail, insn[0], held=frame_held(st, args)))
            target = self.got(slot) if isinstance(slot, int) else None
        elif not (tail and notrack):  # through a register: known when from the GOT
            target = plain(st.get(reg))  # Within an object: a call to its start
            out.append(Call(target, None, args, tail, insn[0], held=frame_held(st, args)))
        frame_handed(st, args)
        kept = self.kept(target) if isinstance(target, int) and not tail else None
        pop = st.pop
        for r in X86_CLOBBER if not kept else [r for r in X86_CLOBBER if r not in kept]:  # rax among them
            pop(r, None)
        value = self.result(target, args)  # what the callee returns, when the walker knows it
        if value is not None:
            st["rax"] = value
        return True

    def _lea(self, plan: tuple, st: dict, nxt: int) -> None:
        """``lea``: the register holds the address computed, when it is known."""
        _flow, _kind, dreg, parsed, rip = plan
        a: Value | None = None
        if rip is not None:  # [rip + d]: the address, whatever the state
            a = nxt + rip
        elif parsed is not None:
            a, exact = self._mem(parsed[0], st, nxt)
            if not exact and not isinstance(a, Within):
                a = None  # plus an index not known, outside any object: not an address known
            if a is None:
                a = _x86_provenance(parsed[1], st)  # an address inside the frame, an allocation or an argument
            if isinstance(a, str):  # inside another module's object: [reg + d] moves it by d, an index by any
                based = _based(parsed[0])
                a = _moved(a, based[1] if based is not None and st.get(based[0]) is a else None, self.object_of)
        if dreg:
            _put(st, dreg, a)

    @staticmethod
    def _compare(sources: tuple | None, st: dict) -> None:
        """A ``cmp`` of two known values: its outcome decides the ``je``/``jne`` after it (see sweep)."""
        if sources is None:
            return
        if sources[3] and st.get("rbp") != FRAME:
            return  # an rbp slot while rbp is no frame pointer: not the slot's value
        left = _get(st, sources[0])
        right = _get(st, sources[1])
        if _decides(left, right):
            st["cmp"] = (left - right) & sources[2] == 0 if type(left) is int and type(right) is int \
                else left == right

    def _memory(self, insn: tuple, plan: tuple, st: dict, out: list) -> None:
        """An instruction with memory operands: a stack slot, a GOT load, an access to global memory, or one
        through a pointer not resolved here (a Deref: the walker decides whether its provenance is proven)."""
        vector = plan[7]
        words = self._vector(insn, plan[3], vector, st, out) if vector is not None else None
        for operand in plan[3]:
            if self._operand(insn, operand, plan[5], st, out):
                _drop(st, plan[4], plan[5])  # what it writes besides the register loaded (a div's rax, rdx)
                break
        else:
            _drop(st, plan[4])
        if words:
            st.update(words)  # after the store forgot the slots it overwrites

    def _vector(self, insn: tuple, operands: tuple, vector: tuple, st: dict, out: list) -> dict | None:
        """A vector move: a store of a register that CARRIED words holding a callback or vptr is a Stash where it
        goes; a load from an address known gives CARRIED when one of the words it loads is one, else Words
        when one is an address of an object of this file. Returns the frame slots a store of Words fills."""
        if not operands:
            return None
        operand = operands[0]
        frame = operand[2] == 1 or operand[2] == 2 and st.get("rbp") == FRAME
        if vector[0] == _V_STORE:
            value = st.get(vector[1])
            if value is CARRIED:
                if frame:
                    out.append(Stash(FRAME))
                else:
                    a, base, _exact = self._address(operand, st, insn[0] + insn[1])
                    out.append(Stash(a.start if isinstance(a, Within) else a if a is not None else base))
            at = _frame_offset(operand[6][0]) if frame and type(value) is Words else None
            if at is not None:
                assert isinstance(value, Words)
                return {key: w for n, w in enumerate(value.words)
                        if w is not None and (key := slot_key(at[0], at[1] + 8 * n, 8)) is not None}
            return None
        st.pop(vector[1], None)
        a, _base, exact = self._address(operand, st, insn[0] + insn[1]) if operand[2] == 0 else (None, None, False)
        if exact and isinstance(a, int):
            words = tuple(w if type(w) is int else None for w in map(self.got, range(a, a + vector[2], 8)))
            if any(w is not None and self.handed(w) for w in words):
                st[vector[1]] = CARRIED
            elif any(w is not None and self.object_of(w) is not None for w in words):
                st[vector[1]] = Words(words)
        return None

    def _operand(self, insn: tuple, operand: tuple, dreg: str | None, st: dict, out: list) -> bool:
        """One memory operand; True when the instruction is fully handled (a stack slot or a GOT load)."""
        _first, rw, stack, _slot, action, source, _parsed, got_load = operand[:8]
        stored = _get(st, source) if action == _S_STORE else None
        handed = type(stored) is int and self.handed(stored)  # a callback or vptr stored
        if stack == 1 or stack == 2 and st.get("rbp") == FRAME:
            if handed:
                out.append(Stash(FRAME))
            _x86_stack_slot(operand, dreg, st)
            return True
        a, base, exact = self._address(operand, st, insn[0] + insn[1])
        if handed or stored == ALLOC or type(stored) is int and self.object_of(stored) is not None:
            out.append(Stash(a.start if isinstance(a, Within) else a if a is not None else base,
                             None if handed else stored))
        if a is not None:
            # Within an object, or plus an index not known: which word is loaded is not known, so the word at
            # the start says nothing of the register (a loop over a pointer table reads every entry)
            at = a.start if isinstance(a, Within) else a
            if got_load and dreg and exact and self._got_load(at, dreg, st):
                # a pointer global's initial value: still a read of it; a GOT slot's load: the walk asks
                # whether it names one of the file's own interposable definitions
                out.extend(_x86_accesses(a, rw, insn[0]))
                return True
            out.extend(_x86_accesses(a, rw, insn[0]))
            return False
        if base == FRAME and rw[1]:
            forget_slots(st)  # a store through a pointer into the frame (``rep stos``): which slot is not known
        if not (isinstance(base, Ptr) and base.kind != "arg"):
            out.append(Deref(insn[0], base, rw[1],
                             _below(operand[6][0]) or isinstance(base, Ptr) and base.below))
            word = _word_of(st, operand[9]) if got_load and dreg else None
            if word is not None:  # a pointer loaded from another module's object: that word's value
                st[dreg] = word  # got_load only with a register written
                return True
        return False

    def _address(self, operand: tuple, st: dict,
                 nxt: int) -> tuple[int | Within | None, Ptr | str | None, bool]:
        """(the address a memory operand names, None: not known; then where its pointer comes from; and whether
        the address is exact). The two commonest forms are done without the general terms: ``[rip + d]`` and
        ``[reg + d]`` (the same results as _mem and _x86_provenance give them)."""
        parsed, rip, based = operand[6], operand[8], operand[9]
        if rip is not None:
            return nxt + rip, None, True
        if based is not None:
            v = st.get(based[0])
            if isinstance(v, Within):
                return v, None, False
            if isinstance(v, int):
                return v + based[1], None, True
            return None, v if isinstance(v, (Ptr, str)) else None, False
        a, exact = self._mem(parsed[0], st, nxt)
        return a, (_x86_provenance(parsed[1], st) if a is None else None), exact

    def _got_load(self, a: int, dreg: str, st: dict) -> bool:
        """A load from a GOT slot: the register now holds the object's address (False: not a GOT slot)."""
        value = self.got(a)
        if value is None:
            return False
        st[dreg] = value
        return True

    def _register(self, plan: tuple, st: dict) -> None:
        """No memory operand: a register written gets the known value moved in, else becomes unknown."""
        _flow, _kind, _cmp, action, dreg, arg, drops = plan
        if action == _R_MOV:
            value = arg[1] if arg[0] else st.get(arg[1])
            if value is None:
                st.pop(dreg, None)
            else:
                st[dreg] = value
        elif action == _R_ZERO:
            st[dreg] = 0
        elif action == _R_MOVE:
            _put(st, dreg, _moved_by(arg[0], st.get(dreg), arg[1], self.object_of))
        elif action == _R_FORGET:
            st.pop(dreg, None)
        if drops:
            _drop(st, drops)


def _word_of(st: dict, based: tuple[str, int] | None) -> str | None:
    """The value (values.held) of the word at ``[reg + d]`` when reg holds another module's object's address
    (a symbol the GOT gave, maybe moved: the word at its offset plus d, or one not known), else None."""
    base = st.get(based[0]) if based is not None else None
    if based is None or not named_address(base):
        return None
    moved = offset_of(base)
    return held(base, None if moved is None else moved + based[1])


def _x86_args(st: dict) -> tuple:
    """The known values of the argument registers (X86_ARGS)."""
    get = st.get
    return get("rdi"), get("rsi"), get("rdx"), get("rcx"), get("r8"), get("r9")


def _x86_stack_slot(operand: tuple, dreg: str | None, st: dict) -> None:
    """A stack slot: -O0 spills its arguments there, so a known value stored is known when loaded back; a
    store forgets every slot whose bytes it may overwrite (see _x86_slot)."""
    slot, action, source = operand[3], operand[4], operand[5]
    if action == _S_STORE or action == _S_FORGET:
        overwrite(st, operand[10], operand[11], "rbp")
    if action == _S_STORE:
        if slot is not None:
            _put(st, slot, narrowed(_get(st, source), operand[12]))
    elif action == _S_FORGET:
        if slot is not None:
            st.pop(slot, None)
        if dreg:  # an exchange with the slot
            st.pop(dreg, None)
    elif action == _S_LOAD:
        _put(st, dreg, st.get(slot) if slot is not None else None)  # type: ignore[arg-type]  # with a register
    elif action == _S_CLOBBER:
        _put(st, dreg, None)  # type: ignore[arg-type]

