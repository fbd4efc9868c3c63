"""What one function does, as far as static initialization cares: the calls it makes (with the constant
addresses in its argument registers), the global memory it loads and stores, and its tail calls.

A linear sweep with capstone's ``disasm_lite`` (no operand detail objects: about 3x faster) and a small
constant-propagation over registers: ``lea``/``adrp``+``add`` materialize addresses, a load from a GOT slot
yields the address the slot holds once relocated, a call clobbers the caller-saved registers, and every branch
target starts from nothing known (control flow may join there). That is enough for the compilers' patterns:
``__cxa_atexit(dtor, obj, &__dso_handle)`` is set up straight-line right before the call, and a constructor
gets its ``this`` the same way.
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple, Union

EM_X86_64, EM_AARCH64 = 62, 183
SUPPORTED_MACHINES = frozenset({EM_X86_64, EM_AARCH64})

# A register's known value: a link-time address in this file (int) or an external symbol's name (str).
Value = Union[int, str]


class Access(NamedTuple):
    address: int  # link-time address of the global memory touched
    write: bool


class Call(NamedTuple):
    target: Value | None  # address called, or an external symbol's name; None for an unknown target
    slot: int | None  # the GOT slot an indirect call or jump goes through, when known
    args: tuple  # known values of the first argument registers (None where unknown)
    tail: bool


# Events a sweep yields, in code order.
Event = Union[Access, Call]


class Decoded(NamedTuple):
    insns: list  # (address, size, mnemonic, op_str) from capstone
    targets: frozenset  # addresses inside the function some branch jumps to


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
X86_ARGS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
X86_CLOBBER = ("rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11")
_X86_MEM = re.compile(r"(?:(\w+):)?\[([^\]]*)\]")
_X86_WRITES = ("mov", "stos", "set", "cmov")  # a memory first operand of these is only written
_X86_READS = ("cmp", "test", "bt", "ucomis", "comis", "push")  # a memory first operand of these is only read
_HEX = re.compile(r"^-?(?:0x[0-9a-f]+|\d+)$")


def _imm(text: str) -> int | None:
    text = text.strip().lstrip("#")
    if _HEX.match(text):
        return int(text, 0)
    return None


class _X86:
    args = X86_ARGS

    def __init__(self, got: Callable[[int], Value | None]) -> None:
        self.got = got

    def _mem(self, op: str, regs: dict, ip_next: int) -> tuple[int | None, bool]:
        """(address, base register known) of a memory operand ``[...]``; None when not constant."""
        m = _X86_MEM.search(op)
        if not m or m.group(1):  # fs:/gs: segment: TLS, not a global address
            return None, False
        total = 0
        sign = 1
        known = False
        for tok in m.group(2).split():
            if tok in "+-":
                sign = 1 if tok == "+" else -1
                continue
            if tok == "rip":
                total += ip_next
                known = True
                continue
            imm = _imm(tok)
            if imm is not None:
                total += sign * imm
                continue
            if "*" in tok:  # an index register: the element is unknown, the object is not
                continue
            base = regs.get(_X86_ALIAS.get(tok, tok))
            if not isinstance(base, int):
                return None, False
            total += base
            known = True
        return (total, True) if known else (None, False)

    def sweep(self, dec: Decoded, start: int, end: int, entry: dict) -> list:
        regs = dict(entry)
        out: list = []
        got = self.got
        for addr, size, mnem, op in dec.insns:
            if addr in dec.targets:
                regs = {}
            nxt = addr + size
            if mnem.startswith(("bnd ", "notrack ", "rep ", "lock ", "addr32 ")):
                prefix, mnem = mnem.split(" ", 1)
                if prefix == "notrack" and mnem == "jmp":  # a jump table (-fcf-protection): stays inside
                    continue
            if mnem == "call" or mnem == "jmp":
                tail = mnem == "jmp"
                target = _imm(op)
                if target is not None:
                    if tail and start <= target < end:
                        continue
                    out.append(Call(target, None, tuple(regs.get(r) for r in X86_ARGS), tail))
                elif "[" in op:
                    slot, _ = self._mem(op, regs, nxt)
                    out.append(Call(None, slot, tuple(regs.get(r) for r in X86_ARGS), tail))
                else:  # call/jmp through a register: known when it was loaded from the GOT
                    out.append(Call(regs.get(_X86_ALIAS.get(op, op)), None,
                                    tuple(regs.get(r) for r in X86_ARGS), tail))
                for r in X86_CLOBBER:
                    regs.pop(r, None)
                continue
            if mnem[0] == "j" or mnem in ("ret", "hlt", "ud2", "int3"):
                continue
            ops = op.split(", ", 1)
            dst = ops[0]
            dreg = _X86_ALIAS.get(dst)
            if mnem == "lea":
                a, _ = self._mem(ops[1], regs, nxt) if len(ops) == 2 else (None, False)
                if dreg:
                    if a is None:
                        regs.pop(dreg, None)
                    else:
                        regs[dreg] = a
                continue
            if "[" in op:
                mem_first = "[" in dst
                a, _ = self._mem(op, regs, nxt)
                if a is not None:
                    if not mem_first and mnem == "mov" and dreg:
                        value = got(a)
                        if value is not None:  # a GOT load: the register now holds the object's address
                            regs[dreg] = value
                            continue
                        out.append(Access(a, False))
                    elif mem_first:
                        if mnem.startswith(_X86_READS):
                            out.append(Access(a, False))
                        else:
                            if not mnem.startswith(_X86_WRITES):
                                out.append(Access(a, False))  # read-modify-write
                            out.append(Access(a, True))
                    else:
                        out.append(Access(a, False))
                if dreg:
                    regs.pop(dreg, None)
                continue
            if dreg:
                if mnem == "mov" and len(ops) == 2:
                    src = _X86_ALIAS.get(ops[1])
                    if src is not None:
                        v = regs.get(src)
                        if v is None:
                            regs.pop(dreg, None)
                        else:
                            regs[dreg] = v
                        continue
                    imm = _imm(ops[1])
                    if imm is not None and dst[0] in "re":
                        regs[dreg] = imm
                        continue
                if mnem == "xor" and len(ops) == 2 and ops[0] == ops[1]:
                    regs[dreg] = 0
                    continue
                regs.pop(dreg, None)
            elif mnem.startswith(("xchg", "cpuid", "rdtsc", "syscall", "div", "idiv", "mul", "cqo", "cdq")):
                for r in ("rax", "rdx", "rcx", "rbx", "rsi", "rdi"):
                    regs.pop(r, None)
        return out


# -- AArch64 ---------------------------------------------------------------------------------------------

A64_ARGS = tuple(f"x{i}" for i in range(8))
A64_CLOBBER = tuple(f"x{i}" for i in range(19)) + ("x30",)
_A64_MEM = re.compile(r"\[(\w+)(?:, #(-?(?:0x[0-9a-f]+|\d+)))?\](!?)")
_A64_BRANCH = ("b.", "cbz", "cbnz", "tbz", "tbnz")


def _a64(reg: str) -> str:
    if reg.startswith("w") and reg[1:].isdigit():
        return "x" + reg[1:]
    return reg


class _A64:
    args = A64_ARGS

    def __init__(self, got: Callable[[int], Value | None]) -> None:
        self.got = got

    def sweep(self, dec: Decoded, start: int, end: int, entry: dict) -> list:
        regs = dict(entry)
        out: list = []
        got = self.got
        for addr, _size, mnem, op in dec.insns:
            if addr in dec.targets:
                regs = {}
            if mnem in ("bl", "b"):
                target = _imm(op)
                if target is None:
                    continue
                if mnem == "b" and start <= target < end:
                    continue
                out.append(Call(target, None, tuple(regs.get(r) for r in A64_ARGS), mnem == "b"))
                for r in A64_CLOBBER:
                    regs.pop(r, None)
                continue
            if mnem in ("blr", "br", "blraa", "braa", "blraaz", "braaz"):
                reg = op.split(",")[0]
                slot = regs.get("slot:" + reg)
                out.append(Call(regs.get(reg), slot if isinstance(slot, int) else None,
                                tuple(regs.get(r) for r in A64_ARGS), mnem.startswith("br")))
                for r in A64_CLOBBER:
                    regs.pop(r, None)
                continue
            if mnem.startswith(_A64_BRANCH) or mnem in ("ret", "nop", "hint", "bti", "paciasp", "autiasp",
                                                       "pacibsp", "autibsp", "brk", "udf"):
                continue
            ops = op.split(", ")
            dst = _a64(ops[0]) if ops else ""
            if mnem in ("adrp", "adr") and len(ops) == 2:
                imm = _imm(ops[1])
                if imm is not None:
                    regs[dst] = imm
                    regs.pop("slot:" + dst, None)
                continue
            if mnem == "add" and len(ops) == 3 and ops[2].startswith("#"):
                base = regs.get(_a64(ops[1]))
                imm = _imm(ops[2])
                if isinstance(base, int) and imm is not None:
                    regs[dst] = base + imm
                else:
                    regs.pop(dst, None)
                regs.pop("slot:" + dst, None)
                continue
            if mnem == "mov" and len(ops) == 2:
                src = regs.get(_a64(ops[1]))
                imm = _imm(ops[1])
                if src is not None:
                    regs[dst] = src
                elif imm is not None:
                    regs[dst] = imm
                else:
                    regs.pop(dst, None)
                regs.pop("slot:" + dst, None)
                continue
            if "[" in op:
                m = _A64_MEM.search(op)
                a = None
                if m:
                    base = regs.get(_a64(m.group(1)))
                    if isinstance(base, int):
                        a = base + (int(m.group(2), 0) if m.group(2) else 0)
                is_store = mnem.startswith(("st", "cas", "swp", "ldadd", "ldset", "ldclr"))
                if a is not None:
                    if not is_store and mnem == "ldr" and len(ops) >= 2:
                        value = got(a)
                        if value is not None:
                            regs[dst] = value
                            regs["slot:" + dst] = a
                            continue
                    if is_store:
                        if not mnem.startswith("st"):
                            out.append(Access(a, False))
                        out.append(Access(a, True))
                    else:
                        out.append(Access(a, False))
                if not is_store:
                    for r in ops[:2] if mnem.startswith("ldp") else ops[:1]:
                        regs.pop(_a64(r), None)
                        regs.pop("slot:" + _a64(r), None)
                if m and (m.group(3) or op.rstrip().endswith("]") is False):
                    regs.pop(_a64(m.group(1)), None)  # pre/post-index writes the base back
                continue
            if mnem == "ldr" and len(ops) == 2 and ops[1].startswith("#"):  # literal load
                a = _imm(ops[1])
                if a is not None:
                    out.append(Access(a, False))
            if dst:
                regs.pop(dst, None)
                regs.pop("slot:" + dst, None)
        return out


# -- the per-file decoder --------------------------------------------------------------------------------

_A64_TARGET = re.compile(r"#(0x[0-9a-f]+)$")


class Disassembler:
    """Decodes functions of one file (each once) and sweeps them with given argument registers."""

    def __init__(self, machine: int, read_code: Callable[[int, int], bytes],
                 got: Callable[[int], Value | None]) -> None:
        self.machine = machine
        self.md = _disassembler(machine)
        self.read_code = read_code
        self.arch = _X86(got) if machine == EM_X86_64 else _A64(got)
        self._decoded: dict[tuple[int, int], Decoded] = {}

    @property
    def arg_registers(self) -> tuple:
        return self.arch.args

    def decode(self, start: int, end: int) -> Decoded:
        key = (start, end)
        dec = self._decoded.get(key)
        if dec is None:
            insns = list(self.md.disasm_lite(self.read_code(start, end - start), start))
            targets = set()
            if self.machine == EM_X86_64:
                for _a, _s, mnem, op in insns:
                    if mnem[0] == "j" and mnem != "jmp" or mnem == "jmp":
                        t = _imm(op)
                        if t is not None and start <= t < end:
                            targets.add(t)
            else:
                for _a, _s, mnem, op in insns:
                    if mnem == "b" or mnem.startswith(_A64_BRANCH):
                        m = _A64_TARGET.search(op)
                        if m:
                            t = int(m.group(1), 16)
                            if start <= t < end:
                                targets.add(t)
            dec = self._decoded[key] = Decoded(insns, frozenset(targets))
        return dec

    def sweep(self, start: int, end: int, entry: dict) -> list:
        return self.arch.sweep(self.decode(start, end), start, end, entry)

    def stub_slot(self, start: int, end: int) -> int | None:
        """The GOT slot a PLT stub jumps through (``jmp *slot`` / ``adrp; ldr x17; br x17``)."""
        for ev in self.sweep(start, min(end, start + 32), {}):
            if isinstance(ev, Call):
                return ev.slot
        return None
