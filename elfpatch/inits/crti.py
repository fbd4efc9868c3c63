"""Whether DT_INIT's function is crti's ``_init`` alone: its call of the profiling hook (``__gmon_start__``, when
one is linked) and crtn's epilogue. Code another object splices into ``.init`` (top-level asm
``.section .init; call hook``, as the old crtstuff spliced ``call frame_dummy``) runs between the two at load,
before every init_array entry, under crti's name: the listing's name alone does not show it."""
from __future__ import annotations

from elfpatch.elf.const import EM_X86_64
from elfpatch.inits.disasm import Disassembler
from elfpatch.inits.isa import imm

# x86-64: [endbr64] sub $8,%rsp; mov __gmon_start__@GOTPCREL(%rip),%rax (mov $0,%rax linked static);
# test %rax,%rax; je over; call *%rax; then crtn's add $8,%rsp; ret
_X86_OWN = frozenset({"endbr64", "sub", "mov", "test", "je", "add", "nop"})
# AArch64: stp x29,x30,[sp,#-16]!; mov x29,sp; bl call_weak_fn; then crtn's ldp x29,x30,[sp],#16; ret
_A64_OWN = frozenset({"nop", "bti", "hint", "paciasp", "autiasp", "stp", "mov", "ldp"})
# ... call_weak_fn: adrp x0, GOT; ldr x0,[x0,#slot]; cbz x0, 1f; b __gmon_start__; 1: ret
_A64_WEAK_FN = frozenset({"nop", "bti", "hint", "adrp", "ldr", "cbz", "b"})
MAX_BYTES = 64  # crti's and crtn's code together is under 40 bytes on both


def spliced(dis: Disassembler, addr: int) -> int | None:
    """The address of the first instruction of the DT_INIT function at ``addr`` that is not crti's or crtn's
    (None: theirs alone), up to its first return."""
    x86 = dis.machine == EM_X86_64
    own = _X86_OWN if x86 else _A64_OWN
    weak_fn = False  # AArch64's one call, of call_weak_fn
    for at, _size, mnem, op in dis.decode(addr, addr + MAX_BYTES).insns:
        if mnem == "ret":
            return None
        if mnem == "call" and x86 and "[" not in op and imm(op) is None:  # call *%rax: the hook, from the GOT
            continue
        if mnem == "bl" and not x86 and not weak_fn and _weak_fn(dis, imm(op)):
            weak_fn = True
            continue
        if mnem not in own:
            return at
    return addr  # no return where crti's ends


def _weak_fn(dis: Disassembler, addr: int | None) -> bool:
    """Whether the function at ``addr`` is crti's call_weak_fn (AArch64): a test of the hook's GOT slot, a jump
    to it, a return."""
    if addr is None:
        return False
    for _at, _size, mnem, _op in dis.decode(addr, addr + MAX_BYTES).insns:
        if mnem == "ret":
            return True
        if mnem not in _A64_WEAK_FN:
            return False
    return False
