"""The AArch64 switch reader (inits/jumptable.py ``a64_case_targets``) on the instruction shapes GCC 12 and
clang 14 emit, and on near misses it must refuse (None: the decoder keeps its sound fallback)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, require_tool

from elfpatch.elf.const import EM_AARCH64
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfPatchError
from elfpatch.inits.disasm import Disassembler
from elfpatch.inits.jumptable import A64_TABLE_JUMP, a64_case_targets, a64_marked_tables

TABLE = 0x2000


def _insns(text: str) -> list:
    """(address, size, mnemonic, op_str) tuples, 4 bytes apart from 0x1000, one per line."""
    out = []
    for n, line in enumerate(t.strip() for t in text.strip().splitlines()):
        mnem, _, op = line.partition(" ")
        out.append((0x1000 + 4 * n, 4, mnem, op.strip()))
    return out


def _reader(entries: bytes):
    def read(addr: int, size: int) -> bytes:
        if not TABLE <= addr <= TABLE + len(entries):
            raise ElfPatchError("outside")
        return entries[addr - TABLE: addr - TABLE + size]
    return read


GCC_O1 = """
cmp w0, #2
b.hi #0x1040
adrp x1, #0x2000
add x1, x1, #0
ldrb w1, [x1, w0, uxtw]
adr x0, #0x1020
add x1, x0, w1, sxtb #2
br x1
b #0x1040
b #0x1040
b #0x1040
ret
"""
GCC_O2 = """
cmp w0, #2
b.ls #0x100c
ret
adrp x1, #0x2000
add x1, x1, #0
ldrh w1, [x1, w0, uxtw #1]
adr x0, #0x1024
add x1, x0, w1, sxth #2
br x1
b #0x1040
"""
CLANG = """
cmp w0, #2
b.hi #0x1040
adrp x9, #0x2000
mov w8, w0
add x9, x9, #0
adr x10, #0x1024
ldrb w11, [x9, x8]
add x10, x10, x11, lsl #2
br x10
b #0x1040
"""
CLANG_OFFSET = """
add w8, w0, #3
cmp w8, #2
b.hi #0x1044
adrp x9, #0x2000
add x9, x9, #0
adr x10, #0x1024
ldrh w11, [x9, x8, lsl #1]
add x10, x10, x11, lsl #2
br x10
b #0x1040
"""

# clang -O3 schedules loads between the bound's compare and its branch (they set no flags, leave w0 alone)
CLANG_O3 = CLANG.replace("cmp w0, #2\n", "cmp w0, #2\nldr x19, [x19, #4032]\n")


@pytest.mark.parametrize(("text", "entries", "base", "cases"), [
    (GCC_O1, b"\x00\x01\xff", 0x1020, [0x101c, 0x1020, 0x1024]),  # signed bytes: -1 is the instruction before
    (GCC_O2, b"\x00\x00\x01\x00\x02\x00", 0x1024, [0x1024, 0x1028, 0x102c]),
    (CLANG, b"\x00\x01\x02", 0x1024, [0x1024, 0x1028, 0x102c]),
    (CLANG_OFFSET, b"\x02\x00\x00\x00\x01\x00", 0x1024, [0x1024, 0x1028, 0x102c]),
    (CLANG_O3, b"\x00\x01\x02", 0x1024, [0x1024, 0x1028, 0x102c]),
])
def test_the_compilers_switch_shapes_give_each_entry_as_a_case(text: str, entries: bytes, base: int,
                                                               cases: list) -> None:
    """The bound (cmp #2: three entries), the table (adrp + add), the entry size (ldrb/ldrh) and sign (sxtb/sxth
    signed, lsl unsigned) and the base (adr): each case is base + 4 * entry, read from the table."""
    insns = _insns(text)
    n = next(k for k, i in enumerate(insns) if i[2] == "br")
    assert a64_case_targets(insns, n, _reader(entries)) == cases
    assert a64_marked_tables(insns, _reader(entries))[n][2] == A64_TABLE_JUMP


def _br(text: str) -> list[int] | None:
    insns = _insns(text)
    n = next(k for k, i in enumerate(insns) if i[2] == "br")
    return a64_case_targets(insns, n, _reader(b"\x00\x01\x02\x00\x00\x00"))


@pytest.mark.parametrize(("why", "text"), [
    ("no bound", GCC_O1.replace("cmp w0, #2\nb.hi #0x1040\n", "nop\nnop\n")),
    ("a signed bound (b.gt)", GCC_O1.replace("b.hi", "b.gt")),
    ("the bound on another register", GCC_O1.replace("cmp w0, #2", "cmp w2, #2")),
    ("the index changed after the bound", GCC_O1.replace("adrp x1", "add w0, w0, #1\nadrp x1")),
    ("the table register changed between adrp and load", CLANG.replace("adr x10", "mov x9, x3\nadr x10")),
    ("a branch into the table code", GCC_O1.replace("b #0x1040\nb #0x1040\nret", "b #0x1040\nb #0x100c\nret")),
    ("b.ls to elsewhere", GCC_O2.replace("b.ls #0x100c", "b.ls #0x1010")),
    ("the index written between the compare and its branch", CLANG_O3.replace("ldr x19", "ldr w0")),
    ("flags set between the compare and its branch", CLANG_O3.replace("ldr x19, [x19, #4032]", "adds x19, x19, #1")),
    ("b.hi (index out of bounds) into the table code", GCC_O1.replace("b.hi #0x1040", "b.hi #0x1010")),
    ("an x index not zero-extended by a 32-bit write", CLANG_OFFSET.replace("add w8, w0, #3", "add x8, x0, #3")),
    ("an x index whose instruction before the bound only compares", CLANG_OFFSET.replace("add w8, w0, #3",
                                                                                        "ccmp w8, #3, #0, ne")),
    ("halfword entries read with a byte index", GCC_O2.replace("uxtw #1", "uxtw")),
    ("a byte load added as halfwords", GCC_O1.replace("sxtb #2", "sxth #2")),
    ("the jump through another register", GCC_O1.replace("br x1", "br x2")),
    ("no adr base", GCC_O1.replace("adr x0, #0x1020", "ldr x0, [x5]")),
])
def test_anything_else_is_not_read(why: str, text: str) -> None:
    """Near misses of the shape are not read (None: every later block stays a possible case): %s."""
    assert _br(text) is None, why


def test_a_table_that_cannot_be_read_is_not_read() -> None:
    insns = _insns(GCC_O1.replace("adrp x1, #0x2000", "adrp x1, #0x3000"))
    assert a64_case_targets(insns, 7, _reader(b"\x00\x01\x02")) is None


def test_a_bound_over_max_cases_is_not_read() -> None:
    insns = _insns(GCC_O1.replace("cmp w0, #2", "cmp w0, #0x1000"))
    assert a64_case_targets(insns, 7, _reader(bytes(0x2000))) is None


# The compilers' own labels, renamed so the linker keeps them: GCC's .L15 / .Lrtx4, clang's .LBB0_2 / .LJTI0_0.
_LABEL = re.compile(r"\.L(rtx\d+|BB\d+_\d+|JTI\d+_\d+|\d+)\b")
_ENTRY = re.compile(r"^\s*\.(?:byte|hword|2byte|short|word|4byte)\s+\(?(Lk_\w+)\s*-\s*Lk_\w+", re.M)
_DRIVERS = {"gcc": ["aarch64-linux-gnu-g++"], "clang": ["clang++", "--target=aarch64-linux-gnu", "-fuse-ld=lld"]}


def _build(tmp: Path, compiler: str) -> tuple[bytes, list[int]]:
    """The switch fixture (native_tests/siof/sw_user.cpp) built as a library, and its table's case labels'
    addresses as the compiler wrote them (its assembly's table directives, the labels looked up after linking)."""
    name, opt = compiler.split("-")
    driver = _DRIVERS[name]
    require_tool(driver[0], "aarch64-linux-gnu-nm", *(["ld.lld"] if name == "clang" else []),
                 packages="g++-aarch64-linux-gnu, clang, lld")
    asm = subprocess.run([*driver, "-std=c++20", f"-{opt}", "-fPIC", "-S", "-o", "-",
                          str(ROOT / "native_tests" / "siof" / "sw_user.cpp")],
                         check=True, capture_output=True, text=True).stdout
    asm = _LABEL.sub(lambda m: "Lk_" + m.group(1), asm)
    (tmp / "sw.s").write_text(asm)
    lib = tmp / "sw.so"
    subprocess.run([*driver, "-shared", "-nostdlib", "-o", str(lib), str(tmp / "sw.s")], check=True,
                   capture_output=True)
    nm = subprocess.run(["aarch64-linux-gnu-nm", str(lib)], check=True, capture_output=True, text=True).stdout
    where = {parts[2]: int(parts[0], 16) for parts in (line.split() for line in nm.splitlines()) if len(parts) == 3}
    return lib.read_bytes(), sorted({where[label] for label in _ENTRY.findall(asm)})


@pytest.mark.cross  # needs the AArch64 cross compilers
@pytest.mark.parametrize("compiler", ["gcc-O0", "gcc-O1", "gcc-O2", "gcc-O3", "clang-O1", "clang-O2", "clang-O3"])
def test_the_cases_read_are_the_compilers_table(tmp_path: Path, compiler: str) -> None:
    """Built by GCC 12 and clang 14: the cases read from the table are exactly the labels the compiler put in
    it, and the decoder gives the function's `br` those cases (it was an indirect tail call)."""
    data, expected = _build(tmp_path, compiler)
    assert expected  # the compiler did build a jump table
    elf = ElfFile(data, "sw.so")
    text = elf.section_by_name(".text")
    assert text is not None

    def read(addr: int, size: int) -> bytes:
        return elf.read(elf.vaddr_to_offset(addr, size), size)

    dis = Disassembler(EM_AARCH64, read, lambda _a: None)
    dec = dis.decode(text.sh_addr, text.sh_addr + text.sh_size)
    jumps = [n for n, i in enumerate(dec.insns) if i[2] == A64_TABLE_JUMP]
    assert len(jumps) == 1
    assert a64_case_targets(dec.insns, jumps[0], read) == expected
