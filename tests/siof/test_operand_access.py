"""Read or write, from an instruction's semantics: the decoder's table (``x86_memory_access``) against capstone's
detailed operand access, and golden tests of the operand text the decoder parses (capstone is pinned to the
major version whose text this is, see pyproject.toml).

Capstone 5's access flags are wrong for a few instructions; there the Intel SDM decides and the test says so
(``CAPSTONE_WRONG``), so a table entry that agrees with neither fails."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import require_tool

from elfpatch.elf.const import EM_AARCH64, EM_X86_64
from elfpatch.inits.disasm import Disassembler
from elfpatch.inits.events import Access, Deref
from elfpatch.inits.x86 import _PREFIXES, _X86_MEM, x86_memory_access

capstone = pytest.importorskip("capstone")

# (Intel syntax line, expected (read, write) of each memory operand, by the SDM)
CASES = [
    ("div dword ptr [rax]", [(True, False)]),  # one-operand div/idiv/mul/imul read their operand (issue class 9)
    ("idiv qword ptr [rax]", [(True, False)]),
    ("mul dword ptr [rax]", [(True, False)]),
    ("imul dword ptr [rax]", [(True, False)]),
    ("imul eax, dword ptr [rax], 3", [(True, False)]),
    ("fild dword ptr [rax]", [(True, False)]),
    ("fld qword ptr [rax]", [(True, False)]),
    ("fadd dword ptr [rax]", [(True, False)]),
    ("cmp dword ptr [rax], 1", [(True, False)]),
    ("test byte ptr [rax], 1", [(True, False)]),
    ("bt dword ptr [rax], 3", [(True, False)]),
    ("push qword ptr [rax]", [(True, False)]),
    ("ucomiss xmm0, dword ptr [rax]", [(True, False)]),
    ("mov dword ptr [rax], 1", [(False, True)]),
    ("mov eax, dword ptr [rax]", [(True, False)]),
    ("movss dword ptr [rax], xmm0", [(False, True)]),
    ("movsd qword ptr [rax], xmm0", [(False, True)]),
    ("movups xmmword ptr [rax], xmm0", [(False, True)]),
    ("vmovdqu ymmword ptr [rax], ymm0", [(False, True)]),
    ("pextrd dword ptr [rax], xmm0, 1", [(False, True)]),
    ("sete byte ptr [rax]", [(False, True)]),
    ("fstp qword ptr [rax]", [(False, True)]),
    ("fistp dword ptr [rax]", [(False, True)]),
    ("fnstcw word ptr [rax]", [(False, True)]),
    ("stmxcsr dword ptr [rax]", [(False, True)]),
    ("pop qword ptr [rax]", [(False, True)]),
    ("add dword ptr [rax], 1", [(True, True)]),
    ("inc dword ptr [rax]", [(True, True)]),
    ("neg dword ptr [rax]", [(True, True)]),
    ("shl dword ptr [rax], 1", [(True, True)]),
    ("bts dword ptr [rax], 3", [(True, True)]),
    ("xchg dword ptr [rax], ecx", [(True, True)]),
    ("lock xadd dword ptr [rax], ecx", [(True, True)]),
    ("lock cmpxchg dword ptr [rax], ecx", [(True, True)]),
    ("movsb", [(False, True), (True, False)]),  # string move: writes [rdi], reads [rsi]
    ("rep stosq", [(False, True)]),
    ("cmpsb", [(True, False), (True, False)]),
]
# Where capstone 5's access flags contradict the SDM (a store it calls a read, a read-modify-write it calls a
# read, a compare it calls neither): the SDM's answer is the one the table must give.
CAPSTONE_WRONG = {"movups", "movaps", "vmovdqa", "vmovdqu", "movq", "movlps", "movhps", "set", "fnstcw", "cmpxchg",
                  "test", "fnstsw", "stmxcsr", "pextr", "fst", "fist"}


def _assemble_x86(tmp: Path, lines: list[str]) -> bytes:
    require_tool("as", "objcopy", packages="binutils")
    import subprocess

    src, obj, out = tmp / "a.s", tmp / "a.o", tmp / "a.bin"
    src.write_text(".intel_syntax noprefix\n.text\n" + "\n".join(lines) + "\n")
    subprocess.run(["as", "-o", str(obj), str(src)], check=True, capture_output=True)
    subprocess.run(["objcopy", "-O", "binary", "-j", ".text", str(obj), str(out)], check=True, capture_output=True)
    return out.read_bytes()


def _mnemonic(mnem: str) -> str:
    while mnem.startswith(_PREFIXES):
        mnem = mnem.split(" ", 1)[1]
    return mnem


def _ours(mnem: str, op_str: str) -> list:
    ops = op_str.split(", ", 1)
    return [x86_memory_access(mnem, m.start() < len(ops[0])) for m in _X86_MEM.finditer(op_str)]


def _capstone_wrong(mnem: str) -> bool:
    return any(mnem.startswith(w) for w in CAPSTONE_WRONG)


@pytest.mark.parametrize("line,expected", CASES, ids=[c[0] for c in CASES])
def test_memory_access_follows_the_instruction(tmp_path: Path, line: str, expected: list) -> None:
    """The table gives the SDM's read/write for each memory operand, and agrees with capstone's detailed
    operand access wherever capstone is right."""
    code = _assemble_x86(tmp_path, [line])
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    (insn,) = list(md.disasm(code, 0))
    mnem = _mnemonic(insn.mnemonic)
    assert _ours(mnem, insn.op_str) == expected
    mems = [op for op in insn.operands if op.type == capstone.x86.X86_OP_MEM]
    flags = [(bool(op.access & capstone.CS_AC_READ), bool(op.access & capstone.CS_AC_WRITE)) for op in mems]
    if not _capstone_wrong(mnem) and len(flags) == len(expected):
        assert flags == expected


def test_a_one_operand_divide_reads_the_global(tmp_path: Path) -> None:
    """`div dword ptr [rip + g]` reads g: it used to count as a store, so the reader "built" another unit's
    object (own) and the real constructor was credited with nothing."""
    code = _assemble_x86(tmp_path, ["div dword ptr [rip + 0x100]", "ret"])
    dis = Disassembler(EM_X86_64, lambda a, n: code[a: a + n], lambda _a: None)
    events = [ev for ev in dis.sweep(0, len(code), {}) if isinstance(ev, Access)]
    assert events == [Access(0x106, False, 0)]  # by the instruction at 0


def test_the_table_agrees_with_capstone_on_compiled_code(siof_build: Path) -> None:
    """Every memory operand of every instruction in the x86-64 fixture builds: the table's read/write is
    capstone's, except where capstone is known wrong (CAPSTONE_WRONG)."""
    require_tool("g++", packages="g++")
    from elfpatch.elf.file import ElfFile

    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    disagree = set()
    seen = 0
    for path in sorted(p for v in ("O2", "O0", "clang-O2") if (siof_build / "siof" / v).is_dir()
                       for p in (siof_build / "siof" / v).iterdir()):
        data = path.read_bytes()
        if not data.startswith(b"\x7fELF"):
            continue
        elf = ElfFile(data, str(path))
        text = next(s for s in elf.sections if s.name == ".text")
        for insn in md.disasm(data[text.sh_offset: text.sh_offset + text.sh_size], text.sh_addr):
            mnem = _mnemonic(insn.mnemonic)
            mems = [op for op in insn.operands if op.type == capstone.x86.X86_OP_MEM]
            ours = _ours(mnem, insn.op_str)
            for op, rw in zip(mems, ours):
                flags = (bool(op.access & capstone.CS_AC_READ), bool(op.access & capstone.CS_AC_WRITE))
                seen += 1
                if rw is not None and rw != flags and not _capstone_wrong(mnem):
                    disagree.add((mnem, rw, flags))
    assert seen > 2000 and not disagree, disagree


# The operand text the decoder parses (capstone 5's lite API): (bytes, mnemonic, op_str).
X86_TEXT = [
    ("8b05f0ffffff", "mov", "eax, dword ptr [rip - 0x10]"),
    ("c705f0ffffff01000000", "mov", "dword ptr [rip - 0x10], 1"),
    ("8b04c540404000", "mov", "eax, dword ptr [rax*8 + 0x404040]"),
    ("8b042540404000", "mov", "eax, dword ptr [0x404040]"),
    ("64488b042528000000", "mov", "rax, qword ptr fs:[0x28]"),
    ("488d4c2408", "lea", "rcx, [rsp + 8]"),
    ("3effe0", "notrack jmp", "rax"),
    ("ff2502000000", "jmp", "qword ptr [rip + 2]"),
    ("f348ab", "rep stosq", "qword ptr [rdi], rax"),
    ("a4", "movsb", "byte ptr [rdi], byte ptr [rsi]"),
    ("66662e0f1f840000000000", "nop", "word ptr cs:[rax + rax]"),
    ("f7f1", "div", "ecx"),
    ("f730", "div", "dword ptr [rax]"),
]
A64_TEXT = [
    ("200440f9", "ldr", "x0, [x1, #8]"),
    ("fd7bbea9", "stp", "x29, x30, [sp, #-0x20]!"),
    ("20040091", "add", "x0, x1, #1"),
    ("fd030091", "mov", "x29, sp"),
    ("206861b8", "ldr", "w0, [x1, x1]"),
]


@pytest.mark.parametrize("machine,table", [(EM_X86_64, X86_TEXT), (EM_AARCH64, A64_TEXT)], ids=["x86-64", "a64"])
def test_operand_text_is_what_the_decoder_parses(machine: int, table: list) -> None:
    from elfpatch.inits.disasm import _disassembler

    md = _disassembler(machine)
    for hexa, mnem, op_str in table:
        (insn,) = list(md.disasm_lite(bytes.fromhex(hexa), 0x1000))
        assert (insn[2], insn[3]) == (mnem, op_str), hexa


def test_a_load_through_an_unknown_pointer_is_a_deref(tmp_path: Path) -> None:
    """`mov eax, [rbx]` with rbx unknown: the decoder hands the walker a Deref (it used to drop the access)."""
    code = _assemble_x86(tmp_path, ["mov eax, dword ptr [rbx]", "mov dword ptr [rsp + 8], eax", "ret"])
    dis = Disassembler(EM_X86_64, lambda a, n: code[a: a + n], lambda _a: None)
    events = dis.sweep(0, len(code), {})
    assert [ev for ev in events if isinstance(ev, Deref)] == [Deref(0, None, False)]
