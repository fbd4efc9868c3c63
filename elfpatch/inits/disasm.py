"""What one function does, as far as static initialization cares: the calls it makes (with the constant
addresses in its argument registers), the global memory it loads and stores, and its tail calls.

Decoded with capstone's ``disasm_lite`` (no operand detail objects: about 3x faster), cut into basic blocks
and walked in reverse post-order, so that events come out in the order they run (a guarded variable's
out-of-line construction block comes before the code it jumps back to). Registers carry constants forward:
``lea``/``adrp``+``add`` materialize addresses, a load from a GOT slot yields the address the slot holds once
relocated, ``add``/``sub`` move a known address, a call clobbers the caller-saved registers. Stack slots
written with a known value (-O0 spills) are tracked too, and a compare of two known values against a following
``je``/``jne`` decides the branch: GCC's -O0 ``__static_initialization_and_destruction_0(initialize, priority)``
runs only the block of its priority.

A join keeps what all its predecessors agree on. Two different addresses inside one global object agree on the
object: a loop's moving pointer (``this`` of each array element, a fill loop's store pointer) is ``Within`` the
array, and so is an address plus an unknown index. Loop heads take their back edges into account: the sweep
repeats until every loop head's state is stable, so a store through a pointer set before the loop is seen. The
events are the settled pass's, plus the memory accesses of the first pass (each loop's first iteration, run
exactly from the loop's entry state).
"""
from __future__ import annotations

import re
from itertools import compress, count, repeat
from operator import itemgetter, ne
from typing import Callable, NamedTuple, Union, overload

from capstone import CsError

from elfpatch.elf.const import EM_AARCH64, EM_X86_64
from elfpatch.inits.budget import CHUNK, FUNCTION_BYTES, Budget
from elfpatch.inits.jumptable import marked_tables, x86_case_targets
from elfpatch.inits.state import FRAME_ONLY as _FRAME_ONLY
from elfpatch.inits.state import bound as _bound
from elfpatch.inits.state import case_base as _case_base
from elfpatch.inits.state import case_state as _case_state
from elfpatch.inits.state import equal as _states_equal
from elfpatch.inits.state import head_state as _head_state
from elfpatch.inits.state import meet as _meet
from elfpatch.inits.state import with_more as _with
from elfpatch.inits.values import FRAME, Ptr, Value, Within

SUPPORTED_MACHINES = frozenset({EM_X86_64, EM_AARCH64})

# Passes over one function's loops before they are cut short. A pass that does not settle lowers some loop
# head's state (a key lost, an exact address widened to Within) or opens an edge a decided compare had closed;
# real code settles in one or two. The bound keeps work on a crafted function linear; a function cut short is
# reported (the analysis says it is incomplete).
MAX_PASSES = 16
# Walks of one function's blocks before the state its jump tables' cases start from agrees with the jumps'
# (see Disassembler._pass); real code agrees at the second. Past it, a case walked before its jump starts from
# the frame alone.
TABLE_PASSES = 4


class Access(NamedTuple):
    address: int  # link-time address of the global memory touched
    write: bool


class Call(NamedTuple):
    target: Value | None  # address called, or an external symbol's name; None for an unknown target
    slot: int | None  # the GOT slot an indirect call or jump goes through, when known
    args: tuple  # known values of the first argument registers (None where unknown)
    tail: bool


class Deref(NamedTuple):
    """A load or store through a pointer the sweep could not resolve to an address: ``base`` is the argument
    register it came from (Ptr "arg"), another module's object (str: the GOT said so), or None (a pointer of
    unknown provenance: loaded from memory, returned by a call, computed)."""

    insn: int  # the instruction's address
    base: Ptr | str | None
    write: bool


class Ret(NamedTuple):
    """A return: what the result register holds there (a getter returning a reference to a global)."""

    value: Value | None


# Events a sweep yields, in code order.
Event = Union[Access, Call, Deref, Ret]


class Decoded(NamedTuple):
    insns: list  # (address, size, mnemonic, op_str) from capstone
    plans: list  # each instruction's plan (see _x86_plan): what the walk does with it, parsed once
    blocks: list  # (first, last) instruction indexes, in reverse post-order (unreachable ones last)
    succs: dict  # block position -> [(successor position, taken: bool | None)]
    back: frozenset  # block positions some later block jumps back to (loop heads)
    has_pred: frozenset  # block positions some edge leads to
    table: int  # the first jump table's instruction index (len(insns): none); blocks after it may be its cases


_NOTHING = Decoded([], [], [], {}, frozenset(), frozenset(), 0)  # a function not seen (see budget.py)
CACHE_INSTRUCTIONS = 400_000  # decoded instructions kept for reuse (about 100 MB); older ones are decoded again


def _disassembler(machine: int):
    import capstone  # only the analysis flags load it (see tests/siof/test_imports.py)

    if machine == EM_X86_64:
        md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    else:
        md = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
    md.skipdata = True  # literal pools and padding inside a function must not end the sweep
    return md



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
_HEX = re.compile(r"^-?(?:0x[0-9a-f]+|\d+)$")
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


def _x86_accesses(a: int, rw: tuple[bool, bool]) -> list[Access]:
    """The global accesses of a memory operand at ``a`` that reads and/or writes (``rw``)."""
    return [Access(a, w) for w, on in ((False, rw[0]), (True, rw[1])) if on]


def _no_result(_target: Value | None, _args: tuple) -> Value | None:
    return None


def _put(st: dict, key: str, value: Value | None) -> None:
    """Sets a register's (or stack slot's) known value; None forgets it."""
    if value is None:
        st.pop(key, None)
    else:
        st[key] = value


@overload
def _moved(base: int, delta: int | None, object_of: Callable[[int], int | None]) -> int | None: ...
@overload
def _moved(base: Value | None, delta: int | None, object_of: Callable[[int], int | None]) -> Value | None: ...
def _moved(base: Value | None, delta: int | None, object_of: Callable[[int], int | None]) -> Value | None:
    """A known address moved by ``delta`` (None: by an unknown amount, an index). C's rule that pointer
    arithmetic stays inside its object keeps an unknown move Within the object; anything else is unknown."""
    if isinstance(base, (Ptr, str)):
        return base  # a pointer moved stays inside what it points into: its provenance holds
    if not isinstance(base, int):
        return None
    if isinstance(base, Within):
        return base
    if delta is not None:
        return base + delta
    o = object_of(base)
    return Within(o) if o is not None else None


def _moved_by(mnem: str, base: Value | None, imm: int | None, object_of: Callable[[int], int | None]) -> Value | None:
    """``add``/``sub`` of an immediate (``imm``) or of a register (None) to a known address. Subtracting a
    register may be a pointer difference (``end - begin``): an integer, not an address in the object."""
    if mnem == "sub":
        return _moved(base, -imm, object_of) if imm is not None else None
    return _moved(base, imm, object_of)


def _decides(left: Value | None, right: Value | None) -> bool:
    """Whether a compare of these two values has a known outcome: both known, neither Within an object nor a
    pointer known only by its provenance."""
    return left is not None and right is not None and not isinstance(left, (Within, Ptr)) \
        and not isinstance(right, (Within, Ptr))


def _imm(text: str) -> int | None:
    text = text.strip().lstrip("#")
    if _HEX.match(text):
        return int(text, 0)
    return None


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
        if isinstance(value, int) and not isinstance(value, Within) and scale is not None:
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
        elif not isinstance(v, int):
            unknown = True
    if isinstance(found, Ptr) and found.kind != "arg":
        return found  # frame or allocated memory plus an index: still there
    return None if unknown else found


# What a decoded instruction is to the x86-64 walk, worked out once per distinct (mnemonic, operands) text (a
# plan): its control flow, then one of these kinds and the operands it needs, already parsed. The walk then
# does no string work; the same text at another address (a register move, a stack slot) reuses the plan.
_K_CALL, _K_COND, _K_RET, _K_LEA, _K_MEM, _K_REG = range(6)
# Register-only instructions (_K_REG): what they do to the register written.
_R_NONE, _R_MOV, _R_ZERO, _R_MOVE, _R_FORGET = range(5)
# A stack slot operand (_K_MEM): what the instruction does to it.
_S_NONE, _S_STORE, _S_FORGET, _S_LOAD, _S_CLOBBER = range(5)
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
        return False, "m:" + m.group(2)
    return True, _imm(text)


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
    register forgets its full one) and those it writes without naming them."""
    own: tuple = (dreg,) if dreg else ((_X86_PARTIAL[ops[0]],) if ops[0] in _X86_PARTIAL else ())
    return own + tuple(_x86_implicit(mnem, ops))


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
    elif first and rw[1]:
        action = _S_FORGET
    elif dreg and not first:
        action = _S_LOAD if mnem == "mov" else _S_CLOBBER
    parsed = _x86_parse(inner)
    return (first, rw, stack, "m:" + inner, action, source, parsed,
            bool(not first and mnem == "mov" and dreg and dreg == ops[0]),  # a 64-bit register: a pointer
            _rip_relative(parsed[0]), _based(parsed[0]))


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
    cmp = (_x86_source(ops[0]), _x86_source(ops[1])) if mnem == "cmp" and len(ops) == 2 else None
    if "[" in op:
        operands = tuple(p for p in (_x86_operand(m, mnem, ops, dreg) for m in _X86_MEM.finditer(op))
                         if p is not None)
        # A spill to the stack or a load back from it (-O0 code is full of them): done in line by run().
        slot = operands[0] if len(operands) == 1 and operands[0][2] == 1 and cmp is None else None
        spill = (slot[4], slot[3], slot[5]) if slot is not None and slot[4] in (_S_STORE, _S_LOAD) else None
        return flow, _K_MEM, cmp, operands, _x86_drops(mnem, ops, dreg), dreg, spill
    return (flow, _K_REG, cmp) + _x86_register(mnem, ops, dreg)


def _x86_register(mnem: str, ops: list, dreg: str | None) -> tuple:
    """A register-only instruction's plan tail: (action, register, its argument, registers dropped)."""
    if mnem in _X86_NO_WRITE:
        return _R_NONE, None, None, ()
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

    def _mem(self, terms: tuple, st: dict, ip_next: int) -> int | None:
        """The address a memory operand names: exact, Within an object (a moving pointer, or a known address
        plus an unknown index register), or None."""
        moving, total, known, index, scaled = _x86_terms(terms, st, ip_next)
        if moving is not None:
            return moving
        if not known:
            return None
        if index or scaled:
            inside = _moved(total, None, self.object_of)
            if inside is not None:
                return inside
        return None if index else total  # unscaled: which register is the base is not known

    def run(self, insns: list, plans: list, first: int, last: int, st: dict, out: list, start: int,
            end: int) -> None:
        """step() over the instructions [first, last) of a block, the commonest plans done in line (a register
        move, lea of a rip-relative address): one call per block, not one per instruction."""
        step, pop, get = self.step, st.pop, st.get
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
                action, slot, source = plan[6]
                key, value = (slot, source[1] if source[0] else get(source[1])) if action == _S_STORE else \
                    (plan[5], get(slot))
                if value is None:
                    pop(key, None)
                else:
                    st[key] = value
            else:
                step(insns[n], plan, st, out, start, end)

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
                out.append(Call(target, None, _x86_args(st), True))
            st["cmp"] = cmp
        else:
            out.append(Ret(st.get("rax")))

    def _call(self, insn: tuple, plan: tuple, st: dict, out: list, start: int, end: int) -> bool:
        """A call, or a jmp out of the function (a tail call): records it and clobbers the caller-saved
        registers. False for a jmp inside the function: control flow, not a call."""
        _flow, _kind, tail, target, memory, terms, reg, notrack = plan
        args = _x86_args(st)
        if target is not None:  # an immediate
            if tail and start <= target < end:
                return False
            out.append(Call(target, None, args, tail))
        elif memory:
            slot = self._mem(terms, st, insn[0] + insn[1]) if terms is not None else None
            out.append(Call(None, slot, args, tail))
            target = self.got(slot) if isinstance(slot, int) else None
        elif not (tail and notrack):  # through a register: known when from the GOT
            target = st.get(reg)
            out.append(Call(target, None, args, tail))
        kept = self.kept(target) if isinstance(target, int) and not tail else frozenset()
        pop = st.pop
        for r in X86_CLOBBER:  # rax among them
            if r not in kept:
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
            a = self._mem(parsed[0], st, nxt)
            if a is None:
                a = _x86_provenance(parsed[1], st)  # an address inside the frame, an allocation or an argument
        if dreg:
            _put(st, dreg, a)

    @staticmethod
    def _compare(sources: tuple | None, st: dict) -> None:
        """A ``cmp`` of two known values: its outcome decides the ``je``/``jne`` after it (see sweep)."""
        if sources is None:
            return
        left = _get(st, sources[0])
        right = _get(st, sources[1])
        if _decides(left, right):
            st["cmp"] = left == right

    def _memory(self, insn: tuple, plan: tuple, st: dict, out: list) -> None:
        """An instruction with memory operands: a stack slot, a GOT load, an access to global memory, or one
        through a pointer not resolved here (a Deref: the walker decides whether its provenance is proven)."""
        for operand in plan[3]:
            if self._operand(insn, operand, plan[5], st, out):
                return
        for r in plan[4]:
            st.pop(r, None)

    def _operand(self, insn: tuple, operand: tuple, dreg: str | None, st: dict, out: list) -> bool:
        """One memory operand; True when the instruction is fully handled (a stack slot or a GOT load)."""
        _first, rw, stack, slot, action, source, _parsed, got_load, _rip, _based = operand
        if stack == 1 or stack == 2 and st.get("rbp") == FRAME:
            _x86_stack_slot(slot, action, source, dreg, st)
            return True
        a, base = self._address(operand, st, insn[0] + insn[1])
        if a is not None:
            if got_load and dreg and self._got_load(a, dreg, st):
                if self.object_of(a) is not None:  # a pointer global's initial value: still a read of it
                    out.extend(_x86_accesses(a, rw))
                return True
            out.extend(_x86_accesses(a, rw))
            return False
        if not (isinstance(base, Ptr) and base.kind != "arg"):
            out.append(Deref(insn[0], base, rw[1]))
        return False

    def _address(self, operand: tuple, st: dict, nxt: int) -> tuple[int | None, Ptr | str | None]:
        """(the address a memory operand names, None: not known; and then where its pointer comes from). The
        two commonest forms are done without the general terms: ``[rip + d]`` and ``[reg + d]`` (the same
        results as _mem and _x86_provenance give them)."""
        parsed, rip, based = operand[6], operand[8], operand[9]
        if rip is not None:
            return nxt + rip, None
        if based is not None:
            v = st.get(based[0])
            if isinstance(v, Within):
                return v, None
            if isinstance(v, int):
                return v + based[1], None
            return None, v if isinstance(v, (Ptr, str)) else None
        a = self._mem(parsed[0], st, nxt)
        return a, (_x86_provenance(parsed[1], st) if a is None else None)

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
        for r in drops:
            st.pop(r, None)


def _x86_args(st: dict) -> tuple:
    """The known values of the argument registers (X86_ARGS)."""
    get = st.get
    return get("rdi"), get("rsi"), get("rdx"), get("rcx"), get("r8"), get("r9")


def _x86_stack_slot(slot: str, action: int, source: tuple, dreg: str | None, st: dict) -> None:
    """A stack slot: -O0 spills its arguments there, so a known value stored is known when loaded back."""
    if action == _S_STORE:
        _put(st, slot, _get(st, source))
    elif action == _S_FORGET:
        st.pop(slot, None)
    elif action == _S_LOAD:
        _put(st, dreg, st.get(slot))  # type: ignore[arg-type]  # _S_LOAD only with a register written
    elif action == _S_CLOBBER:
        _put(st, dreg, None)  # type: ignore[arg-type]


# -- AArch64 ---------------------------------------------------------------------------------------------

A64_ARGS = tuple(f"x{i}" for i in range(8))
A64_CLOBBER = tuple(f"x{i}" for i in range(19)) + ("x30",)
# [base], [base, #imm], [base, #imm]! (pre-index), [base, index{, extend #amount}]; a post-index "#imm" follows.
_A64_MEM = re.compile(r"\[(\w+)(?:, #(-?(?:0x[0-9a-f]+|\d+))|, ([wx]\d+)[^\]]*)?\](!?)(?:, #(-?(?:0x[0-9a-f]+|\d+)))?")
_A64_COND = ("b.", "cbz", "cbnz", "tbz", "tbnz")
_A64_INDIRECT = ("blr", "br", "blraa", "braa", "blraaz", "braaz")
_A64_QUIET = ("nop", "hint", "bti", "paciasp", "autiasp", "pacibsp", "autibsp", "prfm", "dmb", "dsb", "isb")


def _a64_accesses(a: int, mnem: str, is_store: bool) -> list[Access]:
    """The global accesses of a load or store at ``a`` (atomics read, then write)."""
    if not is_store:
        return [Access(a, False)]
    if mnem.startswith("st"):
        return [Access(a, True)]
    return [Access(a, False), Access(a, True)]


def _a64(reg: str) -> str:
    if reg[:1] == "w" and reg[1:].isdigit():
        return "x" + reg[1:]
    return reg


def _a64_get(st: dict, reg: str) -> Value | None:
    """A register's known value; the stack pointer always points into the frame."""
    return FRAME if reg in ("sp", "wsp") else st.get(reg)


class _A64:
    args = A64_ARGS

    def __init__(self, got: Callable[[int], Value | None], object_of: Callable[[int], int | None]) -> None:
        self.got = got
        self.object_of = object_of
        self.result: Callable[[Value | None, tuple], Value | None] = _no_result

    def plans(self, insns: list) -> list:
        """Each instruction's plan: its control flow alone (the AArch64 walk parses as it goes)."""
        flow = self.flow
        return [(flow(i[2], i[3]),) for i in insns]

    def flow(self, mnem: str, op: str) -> tuple[str, int | None]:
        if mnem == "b":
            return "jmp", _imm(op)
        if mnem.startswith(_A64_COND):
            return "cond", _imm(op.rsplit(", ", 1)[-1])
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
        if self._branch(mnem, op, st, out, start, end, cmp):
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
                out.append(Access(a, False))
        if dst:
            self._set(st, dst, None)

    def _branch(self, mnem: str, op: str, st: dict, out: list, start: int, end: int, cmp: bool | None) -> bool:
        """Returns, calls, jumps and hints (True: handled)."""
        if mnem in ("ret", "retaa"):
            out.append(Ret(st.get("x0")))
        elif mnem in ("bl", "b"):
            if not self._call(mnem, op, st, out, start, end):
                st["cmp"] = cmp
        elif mnem in _A64_INDIRECT:
            self._indirect(mnem, op, st, out)
        else:
            return mnem.startswith(_A64_COND) or mnem in ("brk", "udf") or mnem in _A64_QUIET
        return True

    def _call(self, mnem: str, op: str, st: dict, out: list, start: int, end: int) -> bool:
        """``bl``, or a ``b`` out of the function (a tail call): records it. False for a ``b`` inside the
        function (control flow, not a call) or to an unknown target."""
        target = _imm(op)
        if target is None or (mnem == "b" and start <= target < end):
            return False
        args = tuple(st.get(r) for r in A64_ARGS)
        out.append(Call(target, None, args, mnem == "b"))
        self._clobber(st)
        self._set(st, "x0", self.result(target, args))  # what the callee returns, when the walker knows it
        return True

    def _indirect(self, mnem: str, op: str, st: dict, out: list) -> None:
        """A call or jump through a register: known when it was loaded from the GOT (its slot too)."""
        reg = op.split(",")[0]
        slot = st.get("slot:" + reg)
        args = tuple(st.get(r) for r in A64_ARGS)
        target = st.get(reg)
        out.append(Call(target, slot if isinstance(slot, int) else None, args, mnem.startswith("br")))
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
        elif mnem in ("mov", "movz") and len(ops) == 2:
            src = _a64_get(st, _a64(ops[1]))
            self._set(st, dst, src if src is not None else _imm(ops[1]))
        else:
            return False
        return True

    def _memory(self, addr: int, mnem: str, op: str, ops: list, dst: str, st: dict, out: list) -> None:
        """A load or store: a stack slot, a GOT load, an access to global memory, or one through a pointer
        not resolved here (a Deref); then the registers it writes."""
        m = _A64_MEM.search(op)
        is_store = mnem.startswith(("st", "cas", "swp", "ldadd", "ldset", "ldclr", "ldeor"))
        frame = m is not None and (m.group(1) == "sp" or m.group(1) == "x29" and st.get("x29") == FRAME)
        if frame and m is not None and not (m.group(3) or m.group(4) or m.group(5)) \
                and mnem in ("str", "stur", "ldr", "ldur"):
            self._stack_slot(f"m:{m.group(1)},{m.group(2)}", is_store, dst, st)
            return
        a = self._address(m, st)
        if a is not None:
            if not is_store and mnem == "ldr" and len(ops) >= 2 and self._pointer_load(a, ops[0], dst, st, out):
                return
            out.extend(_a64_accesses(a, mnem, is_store))
        elif not mnem.startswith("prf"):  # an operand the pattern does not parse is not resolved either
            base = _a64_get(st, _a64(m.group(1))) if m is not None else None
            if not (isinstance(base, Ptr) and base.kind != "arg"):
                out.append(Deref(addr, base if isinstance(base, (Ptr, str)) else None, is_store))
        if not is_store:
            for r in ops[:2] if mnem.startswith("ldp") else ops[:1]:
                self._set(st, _a64(r), None)
        if m and (m.group(4) or m.group(5)):  # pre/post-index by an immediate writes the moved base back
            reg = _a64(m.group(1))
            step = _imm(m.group(2) if m.group(4) else m.group(5))
            self._set(st, reg, _moved(st.get(reg), step, self.object_of))
        elif m and op[m.end():].strip():  # post-index by a register: the base moved by an unknown amount
            self._set(st, _a64(m.group(1)), None)

    def _stack_slot(self, slot: str, is_store: bool, dst: str, st: dict) -> None:
        """A stack slot: -O0 spills its arguments there, so a known value stored is known when loaded back."""
        if is_store:
            _put(st, slot, st.get(dst))
        else:
            self._set(st, dst, st.get(slot))

    def _address(self, m: re.Match | None, st: dict) -> int | None:
        """The address a ``[base, #offset]`` or ``[base, index]`` operand names, when the base register's
        value is known (a post-index access uses the base as it is)."""
        if not m:
            return None
        base = st.get(_a64(m.group(1)))
        if not isinstance(base, int):
            return None  # unknown, or a pointer whose provenance (not address) is known
        if m.group(3):  # a register index (maybe extended or shifted): some element of the object
            return _moved(base, None, self.object_of)
        return _moved(base, int(m.group(2), 0) if m.group(2) else 0, self.object_of)

    def _pointer_load(self, a: int, reg: str, dst: str, st: dict, out: list) -> bool:
        """An ``ldr`` of a 64-bit word whose relocated value is known (see _got_load); a pointer global's
        load-time value is still a read of the global."""
        if not reg.startswith("x") or not self._got_load(a, dst, st):
            return False
        if self.object_of(a) is not None:
            out.extend(_a64_accesses(a, "ldr", False))
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
    def _set(st: dict, reg: str, value: Value | None) -> None:
        st.pop("slot:" + reg, None)
        if value is None:
            st.pop(reg, None)
        else:
            st[reg] = value


# -- the per-file decoder --------------------------------------------------------------------------------


def _blocks(kinds: list, index: dict[int, int], cases: dict[int, list[int]],
            flows: list[int]) -> tuple[list, dict[int, list]]:
    """Basic blocks as (first, last) instruction indexes in address order, and each one's successors
    [(block, taken: True/False for a conditional branch's two ways, None for the only way)]; a table jump
    (``cases``: its instruction -> its cases' instructions) leads to each of its cases. ``flows``: the
    instructions whose kind is not "none"."""
    size = len(kinds)
    leaders = {0}
    for targets in cases.values():
        leaders.update(targets)
    for n in flows:
        kind, target = kinds[n]
        if kind != "none":
            leaders.add(n + 1)
            if target is not None and target in index:
                leaders.add(index[target])
    starts = sorted(x for x in leaders if x < size)
    block_of = {s: b for b, s in enumerate(starts)}
    spans = [(s, (starts[b + 1] if b + 1 < len(starts) else size) - 1) for b, s in enumerate(starts)]
    succ: dict[int, list] = {}
    for b, (_first, last) in enumerate(spans):
        kind, target = kinds[last]
        out = []
        inside = target is not None and target in index
        if kind in ("none", "cond") and b + 1 < len(spans):
            out.append((b + 1, False if kind == "cond" else None))
        if kind in ("cond", "jmp") and inside:
            out.append((block_of[index[target]], True if kind == "cond" else None))
        out.extend((block_of[t], None) for t in cases.get(last, ()))
        succ[b] = out
    return spans, succ


def _reverse_post_order(spans: list, succ: dict[int, list]) -> tuple[list[int], set[int]]:
    """Reverse post-order from the entry (iterative DFS), then the blocks nothing reaches in address order;
    and the blocks some edge jumps back to (loop heads)."""
    order: list[int] = []
    seen = {0} if spans else set()
    stack = [(0, iter(succ.get(0, ())))] if spans else []
    back = set()
    on_stack = {0}
    while stack:
        b, it = stack[-1]
        for s, _taken in it:
            if s in on_stack:
                back.add(s)
            if s not in seen:
                seen.add(s)
                on_stack.add(s)
                stack.append((s, iter(succ.get(s, ()))))
                break
        else:
            stack.pop()
            on_stack.discard(b)
            order.append(b)
    order.reverse()
    order += [b for b in range(len(spans)) if b not in seen]
    return order, back


def _decided(cmp: bool | None, mnem: str) -> bool | None:
    """Whether the block's closing ``je``/``jne`` is taken, when a compare of two known values decided it."""
    if cmp is None:
        return None
    if mnem in ("je", "b.eq"):
        return cmp
    if mnem in ("jne", "b.ne"):
        return not cmp
    return None


def _with_first_iteration(out: list, first: list) -> list:
    """The settled pass's events, and the memory accesses only the first pass saw: it ran each loop's first
    iteration from the loop's entry state, exactly (a loop that starts at a global and then follows loaded
    pointers touches that global once, which the settled loop head no longer knows)."""
    if first is out:
        return out
    seen = {ev for ev in out if isinstance(ev, Access)}
    return out + [ev for ev in first if isinstance(ev, Access) and ev not in seen]


class Disassembler:
    """Decodes functions of one file (each once, while its cache holds) and walks them with given argument
    registers, within the file's Budget (see budget.py)."""

    def __init__(self, machine: int, read_code: Callable[[int, int], bytes],
                 got: Callable[[int], Value | None],
                 object_of: Callable[[int], int | None] = lambda _a: None,
                 budget: Budget | None = None,
                 extent_known: Callable[[int], bool] = lambda _a: True) -> None:
        """``got``: the value a GOT slot holds once relocated (None: not a slot); ``object_of``: the start of the
        global object covering an address (None: none), for joins and unknown indexes; ``extent_known``:
        whether a function's end is known (else only the code reachable from its start is kept)."""
        self.machine = machine
        self.md = _disassembler(machine)
        self.read_code = read_code
        self.object_of = object_of
        self.arch = _X86(got, object_of) if machine == EM_X86_64 else _A64(got, object_of)
        self.budget = budget if budget is not None else Budget()
        self.extent_known = extent_known
        self._decoded: dict[tuple[int, int], Decoded] = {}
        self._held = 0  # instructions the cache holds
        self.unsettled: list[int] = []  # functions whose loops were cut short (loop heads assumed nothing)

    @property
    def arg_registers(self) -> tuple:
        return self.arch.args

    def decode(self, start: int, end: int) -> Decoded:
        key = (start, end)
        dec = self._decoded.get(key)
        if dec is None:
            dec = self._decoded[key] = self._decode(start, end)
            self._held += len(dec.insns)
            while self._held > CACHE_INSTRUCTIONS and len(self._decoded) > 1:  # oldest first: decoded again
                self._held -= len(self._decoded.pop(next(iter(self._decoded))).insns)
        return dec

    def forget_all(self) -> None:
        """Drops every decoded function (a walker done with this decoder)."""
        self._decoded.clear()
        self._held = 0

    def forget(self, start: int, end: int) -> None:
        """Drops a function's decoded instructions (a caller that keeps what it needs from them)."""
        self._decoded.pop((start, end), None)

    def _decode(self, start: int, end: int) -> Decoded:
        budget = self.budget
        if budget.exhausted():
            budget.cut_short(start, "the file's budget of instructions was spent")
            return _NOTHING
        if end - start > FUNCTION_BYTES:
            budget.cut_short(start, f"longer than {FUNCTION_BYTES} bytes: decoded that far")
            end = start + FUNCTION_BYTES
        try:
            insns = self._instructions(start, end)
        except CsError as exc:  # CS_ERR_MEM and the like: this function is not seen, the file goes on
            budget.cut_short(start, f"the disassembler failed: {exc}")
            return _NOTHING
        budget.decoded += len(insns)
        if self.machine == EM_X86_64:
            insns = marked_tables(insns, self.read_code)
        plans = self.arch.plans(insns)
        kinds = [p[0] for p in plans]
        # The instructions that end a block (jumps, returns): the only ones the block structure looks at,
        # picked out at C speed, as is the address -> index map.
        flows = list(compress(count(), map(ne, kinds, repeat(_NO_FLOW))))
        index = dict(zip(map(itemgetter(0), insns), count()))
        cases = self._cases(insns, index, flows)
        spans, succ = _blocks(kinds, index, cases or {}, flows)
        order, back = _reverse_post_order(spans, succ)
        if not self.extent_known(start):  # a guessed end: what follows the reachable code is another function
            order = self._reachable(start, order, spans, succ, kinds)
        pos = {b: p for p, b in enumerate(order)}
        blocks = [spans[b] for b in order]
        succs = {pos[b]: [(pos[s], t) for s, t in succ[b] if s in pos] for b in order}
        has_pred = frozenset(s for edges in succs.values() for s, _ in edges)
        table = len(insns) if cases is not None else \
            next((n for n in flows if insns[n][2].startswith("notrack j")), len(insns))
        return Decoded(insns, plans, blocks, succs, frozenset(pos[b] for b in back if b in pos), has_pred, table)

    def _cases(self, insns: list, index: dict[int, int], flows: list[int]) -> dict[int, list[int]] | None:
        """Each table jump's case instructions (jump's index -> theirs), when every table jump of the function
        has its table read (jumptable.py) and every case is an instruction of it; else None. ``flows``: the
        instructions with control flow (a table jump is one)."""
        cases: dict[int, list[int]] = {}
        for n in flows:
            if not insns[n][2].startswith("notrack j"):
                continue
            targets = x86_case_targets(insns, n, self.read_code) if self.machine == EM_X86_64 else None
            if targets is None or any(t not in index for t in targets):
                return None
            cases[n] = [index[t] for t in targets]
        return cases

    def _instructions(self, start: int, end: int) -> list:
        """capstone's (address, size, mnemonic, op_str) tuples for [start, end), CHUNK bytes at a time (its
        instruction array for a whole 3 MB function is what ran out of memory). An instruction cut by a
        chunk's end is decoded again from its start with the next chunk."""
        insns: list = []
        pos = start
        while pos < end:
            stop = min(end, pos + CHUNK)
            got = list(self.md.disasm_lite(self.read_code(pos, stop - pos), pos))
            if stop < end:  # the last 16 bytes may hold a truncated instruction (skipdata would eat it)
                got = [i for i in got if i[0] + 16 <= stop] or got[:1]
            if not got:
                break
            insns += got
            pos = got[-1][0] + got[-1][1]
        return insns

    def _reachable(self, start: int, order: list, spans: list, succ: dict, kinds: list) -> list:
        """The blocks reachable from the entry (the RPO's head). A jump table or an indirect jump among them
        leaves the reachable end unknown: the function is reported cut."""
        reach = {0}
        for b in order:
            if b in reach:
                reach.update(s for s, _ in succ.get(b, ()))
        if any(kinds[spans[b][1]][0] in ("table", "out") and kinds[spans[b][1]][1] is None for b in reach):
            self.budget.cut_short(start, "no size, no FDE and a jump through a register")
        last = len(kinds) - 1  # a reachable block that runs on past the guessed end: its code is not seen
        if any(spans[b][1] == last and kinds[last][0] in ("none", "cond") for b in reach):
            self.budget.cut_short(start, "no size, no FDE and code that runs past the guessed end")
        return [b for b in order if b in reach]

    def sweep(self, start: int, end: int, entry: dict) -> list:
        """Events of the function at [start, end) in run order, given its known argument registers."""
        dec = self.decode(start, end)
        if dec.insns and self.budget.walked >= self.budget.steps:
            self.budget.cut_short(start, "the file's budget of instructions walked was spent")
            return []
        if not dec.back:
            return self._pass(dec, start, end, entry, {})[0]
        heads: dict[int, dict | None] = dict.fromkeys(dec.back)  # loop head -> what its back edges bring
        first: list | None = None
        for _ in range(MAX_PASSES):
            out, back_in, used = self._pass(dec, start, end, entry, heads)
            first = out if first is None else first
            # Settled when what each loop head started from already agrees with what its back edges bring.
            settled = {p: _meet(used.get(p), back_in[p], self.object_of) if p in back_in else heads[p]
                       for p in heads}
            if all(p not in back_in or _states_equal(settled[p], used.get(p)) for p in heads):
                return _with_first_iteration(out, first)
            if self.budget.walked >= self.budget.steps:  # the first pass's events stand, the function is cut
                self.budget.cut_short(start, "the file's budget of instructions walked was spent")
                return first
            heads = settled
        self.unsettled.append(start)  # the analysis says it is incomplete
        out = self._pass(dec, start, end, entry, {p: {} for p in dec.back})[0]  # assume nothing at loop heads
        return _with_first_iteration(out, first or [])

    def _pass(self, dec: Decoded, start: int, end: int, entry: dict,
              heads: dict[int, dict | None]) -> tuple[list, dict[int, dict], dict[int, dict]]:
        """One walk of the blocks in reverse post-order. A loop head starts from what its forward edges agree
        on met with ``heads`` (its back edges' state from the pass before; None: not known yet). Returns the
        events and, per loop head, what its back edges brought in this pass and the state it started from.

        A block after a jump table in the code may be one of its cases; reverse post-order may put it before
        the jump (the bounds check's target, a guarded initialization GCC moved past the switch). Like a loop
        head it then starts from its edges while the jumps' state is not known, and the blocks are walked
        again, each possible case met with what the jumps agreed on, until that agrees with itself (TABLE_PASSES;
        else such a case starts from the frame alone, as it would in the first walk: sound, but a callee-saved
        register holding a registration's destructor is forgotten)."""
        preset: dict | None = None
        late: dict[int, dict] = {}
        for _ in range(TABLE_PASSES):
            out, back_in, used, jumps = self._walk_blocks(dec, start, end, entry, heads, preset, late)
            if jumps is None:
                return out, back_in, used
            # A case the order puts after a block it falls into (a block that is no loop head): what it brings
            # there is met in at the next walk, as a loop's back edges are.
            later = {s: st for s, st in back_in.items() if s not in dec.back}
            if preset is not None and _states_equal(jumps, preset) and later.keys() == late.keys() \
                    and all(_states_equal(later[s], late[s]) for s in later):
                return out, back_in, used
            preset, late = jumps, later
            if self.budget.walked >= self.budget.steps:
                break  # the file's walk budget is spent: once more with the frame-alone rule (sound)
        return self._walk_blocks(dec, start, end, entry, heads, _FRAME_ONLY, {})[:3]

    def _walk_blocks(self, dec: Decoded, start: int, end: int, entry: dict, heads: dict[int, dict | None],
                     preset: dict | None, late: dict[int, dict]) -> tuple[list, dict[int, dict], dict[int, dict],
                                                                           dict | None]:
        """_pass's walk. A possible case starts from its edges met with ``preset`` (what every jump agreed on in
        the walk before); without one, from what the jumps walked so far agree on, and before any jump from its
        edges alone (None: _FRAME_ONLY, from the frame alone). Returns, besides _pass's results, what the jumps
        agreed on when a case needed it (preset given, or a case came before any jump), else None. ``late``: per
        block that is no loop head, what blocks walked after it brought it in the walk before."""
        step, run = self.arch.step, self.arch.run
        insns, plans = dec.insns, dec.plans
        object_of = self.object_of
        out: list = []
        incoming: dict[int, dict] = {}  # block position -> state agreed by the forward edges so far
        back_in: dict[int, dict] = {}
        used: dict[int, dict] = {}
        live: set[int] = {0}
        walked = 0
        jumps: dict | None = None  # what the table jumps walked so far agree on
        frame: dict = {}  # the frame registers the entry block set up
        early = preset is not None  # whether what the jumps agree on is asked for
        for p, (first, last) in enumerate(dec.blocks):
            st = self._block_state(dec, p, entry, incoming, heads, used, live)
            st = _with(st, late.get(p), object_of)  # what blocks walked after it bring (the walk before said)
            if p and first > dec.table:  # may be a case of a jump table: what the table jumps bring too
                early = early or jumps is None
                st = _case_state(st, p in dec.has_pred, _case_base(preset, jumps, frame), object_of)
            if st is None:
                continue  # every edge into it was decided against (dead for these arguments), or not known yet
            _bound(st)
            walked += last - first + 1
            run(insns, plans, first, last, st, out, start, end)
            cmp = st.get("cmp")
            step(insns[last], plans[last], st, out, start, end)
            if p == 0:
                frame = {k: v for k, v in st.items() if isinstance(v, Ptr) and v.kind == "frame"}
            if insns[last][2].startswith("notrack j"):
                jumps = _meet(jumps, st, object_of)
            taken_known = _decided(cmp, insns[last][2])
            for s, taken in dec.succs.get(p, ()):
                if taken is not None and taken_known is not None and taken != taken_known:
                    continue
                if s <= p:
                    back_in[s] = _meet(back_in.get(s), st, object_of)
                    continue
                live.add(s)
                incoming[s] = _meet(incoming.get(s), st, object_of)
        self.budget.walked += walked
        return out, back_in, used, (jumps if early and preset is not _FRAME_ONLY and jumps is not None else None)

    def _block_state(self, dec: Decoded, p: int, entry: dict, incoming: dict, heads: dict, used: dict,
                     live: set) -> dict | None:
        """The state block ``p`` starts from along its edges (None: dead); a loop head from its forward edges
        met with what its back edges brought (``used`` records it)."""
        if p in dec.back:  # a loop head (the entry block too, when the function starts with a loop)
            st = _head_state(entry if p == 0 else incoming.get(p), heads.get(p), self.object_of)
            used[p] = dict(st)
            return st
        if p == 0:
            return dict(entry)
        if p not in live and p in dec.has_pred:
            return None
        # Popped: a state is held only until its block is walked, and each is a fresh dict (_meet's) the block
        # may change in place.
        return incoming.pop(p, None) or {}

    def stub_slot(self, start: int, end: int) -> int | None:
        """The GOT slot a PLT stub jumps through (``jmp *slot`` / ``adrp; ldr x17; br x17``)."""
        if self.machine == EM_X86_64:  # .plt / .plt.sec / .plt.got: [endbr64] [bnd] jmp [rip + disp32] first
            head = self.read_code(start, min(end - start, 16))
            for skip in (0, 1, 4, 5):
                if head[skip: skip + 2] == b"\xff\x25" and head[:skip] in (b"", b"\xf2", b"\xf3\x0f\x1e\xfa",
                                                                        b"\xf3\x0f\x1e\xfa\xf2"):
                    return start + skip + 6 + int.from_bytes(head[skip + 2: skip + 6], "little", signed=True)
        for ev in self.sweep(start, min(end, start + 32), {}):
            if isinstance(ev, Call):
                return ev.slot
        return None
