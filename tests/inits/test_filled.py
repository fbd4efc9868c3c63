"""inits.filled on hand-written functions: an object the function loads and then fills is counted as built
there (its inlined constructor after a read) only where plain stores of two registers at least cover every byte
of it on every path from the entry to each way out. A flag checked before a build (stores on one way), an early
return past the stores, a conditional jump out of the function, a read-modify-write instruction, a lone scalar
store, a store that leaves a byte unwritten or a loop that may run no time prove nothing."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool

from elfpatch.elf.const import EM_AARCH64, EM_X86_64
from elfpatch.inits.disasm import Disassembler
from elfpatch.inits.filled import filled_objects, stored_pieces

START = 0x1000
G, SIZE = 0x4000, 16  # the object: two 8-byte members
OTHER = 0x5000  # an address outside the function: a conditional tail call's target

X86 = {
    "straight": "mov rax, qword ptr [0x4000]\n mov qword ptr [0x4000], 1\n mov qword ptr [0x4008], 2\n ret",
    "both_ways": "mov rax, qword ptr [0x4008]\n test rax, rax\n je 1f\n mov qword ptr [0x4000], 1\n jmp 2f\n"
                 "1: mov qword ptr [0x4000], 3\n2: mov qword ptr [0x4008], 2\n ret",
    "flag": "mov rax, qword ptr [0x4000]\n test rax, rax\n jne 1f\n mov qword ptr [0x4000], 1\n"
            " mov qword ptr [0x4008], 2\n1: ret",
    "early_return": "mov rax, qword ptr [0x4000]\n test rax, rax\n je 1f\n ret\n"
                    "1: mov qword ptr [0x4000], 1\n mov qword ptr [0x4008], 2\n ret",
    "tail_out": "mov rax, qword ptr [0x4000]\n test rax, rax\n jne 0x5000\n mov qword ptr [0x4000], 1\n"
                " mov qword ptr [0x4008], 2\n ret",
    "rmw": "add qword ptr [0x4000], 1\n add qword ptr [0x4008], 1\n ret",
    "one_store": "mov rax, qword ptr [0x4000]\n movups xmmword ptr [0x4000], xmm0\n ret",
    "a_byte_short": "mov rax, qword ptr [0x4000]\n mov qword ptr [0x4000], 1\n mov dword ptr [0x4008], 2\n"
                    " mov word ptr [0x400c], 3\n mov byte ptr [0x400e], 4\n ret",
    "loop": "mov rax, qword ptr [0x4000]\n xor ecx, ecx\n1: cmp ecx, edi\n jge 2f\n mov qword ptr [0x4000], 1\n"
            " mov qword ptr [0x4008], 2\n inc ecx\n jmp 1b\n2: ret",
}
A64 = {
    "pair": "adrp x1, g\n add x1, x1, :lo12:g\n ldr x0, [x1, #8]\n stp x2, x3, [x1]\n ret",
    "half": "adrp x1, g\n add x1, x1, :lo12:g\n ldr x0, [x1, #8]\n str x2, [x1]\n ret",
}


def _decoded(tmp: Path, machine: int, text: str) -> tuple[Disassembler, int, int]:
    prefix = "" if machine == EM_X86_64 else "aarch64-linux-gnu-"
    require_tool(f"{prefix}as", f"{prefix}ld", packages="binutils" if machine == EM_X86_64
                 else "binutils-aarch64-linux-gnu")
    syntax = ".intel_syntax noprefix\n" if machine == EM_X86_64 else ""
    (tmp / "f.s").write_text(f"{syntax}.text\n.globl _start\n_start:\n {text}\n")
    subprocess.run([f"{prefix}as", "-o", str(tmp / "f.o"), str(tmp / "f.s")], check=True, capture_output=True)
    subprocess.run([f"{prefix}ld", "-o", str(tmp / "f.elf"), f"-Ttext={START:#x}", f"--defsym=g={G:#x}",
                    str(tmp / "f.o")], check=True, capture_output=True)
    subprocess.run([shutil.which(f"{prefix}objcopy") or "objcopy", "-O", "binary", "-j", ".text",
                    str(tmp / "f.elf"), str(tmp / "f.bin")], check=True, capture_output=True)
    code = (tmp / "f.bin").read_bytes()
    dis = Disassembler(machine, lambda a, n: code[a - START:a - START + n], lambda _a: None,
                       lambda a: G if G <= a < G + SIZE else None)
    return dis, START, START + len(code)


def _filled(tmp: Path, machine: int, text: str) -> bool:
    dis, start, end = _decoded(tmp, machine, text)
    events = dis.sweep(start, end, {})
    return filled_objects(machine, dis.decode(start, end), events, {G: SIZE}, start, end) == [G]


@pytest.mark.parametrize(("name", "filled"), [("straight", True), ("both_ways", True), ("flag", False),
                                              ("early_return", False), ("tail_out", False), ("rmw", False),
                                              ("one_store", False), ("a_byte_short", False), ("loop", False)])
def test_x86_64(tmp_path: Path, name: str, filled: bool) -> None:
    assert _filled(tmp_path, EM_X86_64, X86[name]) is filled


@pytest.mark.cross
@pytest.mark.parametrize(("name", "filled"), [("pair", True), ("half", False)])
def test_aarch64_stp_stores_two_registers(tmp_path: Path, name: str, filled: bool) -> None:
    assert _filled(tmp_path, EM_AARCH64, A64[name]) is filled


@pytest.mark.parametrize(("machine", "insn", "pieces"), [
    (EM_X86_64, (0, 7, "mov", "dword ptr [rip + 0x10], 1"), [(0, 4)]),
    (EM_X86_64, (0, 7, "movups", "xmmword ptr [rax], xmm0"), [(0, 16)]),
    (EM_X86_64, (0, 3, "rep stosq", "qword ptr [rdi], rax"), []),
    (EM_X86_64, (0, 3, "add", "dword ptr [rax], 1"), []),
    (EM_AARCH64, (0, 4, "stp", "x3, x2, [x19, #0x18]"), [(0, 8), (8, 8)]),
    (EM_AARCH64, (0, 4, "str", "wzr, [x1]"), [(0, 4)]),
    (EM_AARCH64, (0, 4, "strb", "w0, [x1]"), [(0, 1)]),
    (EM_AARCH64, (0, 4, "str", "q0, [x1]"), [(0, 16)]),
    (EM_AARCH64, (0, 4, "ldr", "x0, [x1]"), []),
])
def test_the_bytes_a_store_writes(machine: int, insn: tuple, pieces: list) -> None:
    assert stored_pieces(machine, insn) == pieces
