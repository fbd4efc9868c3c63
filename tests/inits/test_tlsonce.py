"""inits.tlsonce on hand-written x86-64 functions: an earlier initializer counts as having run a thread_local's
initialization only where no path from its entry to a way out avoids it (a call to it, its guard set in its
own code, the way a test of that guard takes when it is set). A store of 1 into another TLS byte, a call on one
path only, or a conditional jump out of the function (a conditional tail call) proves nothing. Ways no run takes
are cut only where proven: a weak initialization's address tested (a lea, or a GOT slot bound here), GCC -O0's
frame slots holding the constant arguments the caller passed (and nothing else writes)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import require_tool

from elfpatch.elf.const import EM_X86_64
from elfpatch.inits.disasm import Disassembler
from elfpatch.inits.tlsonce import OnceRuns

BASE = 0x1000
SLOT = 0x40  # each function gets its own 0x40 bytes
_FUNCTIONS = {  # name -> body; the first one is the initialization (guard at fs:-8)
    "once": "cmp byte ptr fs:[-8], 0\n jne 1f\n mov byte ptr fs:[-8], 1\n mov byte ptr fs:[-16], 1\n1: ret",
    "always": "call once\n ret",
    "one_path": "test rdi, rdi\n je 1f\n call once\n1: ret",
    "tail_out": "test rdi, rdi\n je other\n call once\n ret",
    "flag_only": "mov byte ptr fs:[-16], 1\n ret",
    "inlined": "cmp byte ptr fs:[-8], 0\n jne 1f\n mov byte ptr fs:[-8], 1\n1: ret",
    "via_always": "sub rsp, 8\n call always\n add rsp, 8\n ret",
    "other": "ret",
    # clang's test of the weak _ZTH<var>: its address (lea), or the GOT slot holding it (``slot``: bound here)
    "weak_lea": "lea rax, [rip + once]\n test rax, rax\n je 1f\n call once\n1: ret",
    "weak_slot": "mov rax, qword ptr [rip + slot]\n test rax, rax\n je 1f\n call once\n1: ret",
    "weak_cmp": "cmp qword ptr [rip + slot], 0\n je 1f\n call once\n1: ret",
    "weak_unbound": "mov rax, qword ptr [rip + unbound]\n test rax, rax\n je 1f\n call once\n1: ret",
    "slot": ".quad 0",
    "unbound": ".quad 0",
    # GCC -O0's __static_initialization_and_destruction_0(int, int): runs the initialization for (1, 0xffff)
    "static_init": "push rbp\n mov rbp, rsp\n mov dword ptr [rbp - 4], edi\n mov dword ptr [rbp - 8], esi\n"
                   " cmp dword ptr [rbp - 4], 1\n jne 1f\n cmp dword ptr [rbp - 8], 0xffff\n jne 1f\n call once\n"
                   "1: pop rbp\n ret",
    "static_init_rewritten": "push rbp\n mov rbp, rsp\n mov dword ptr [rbp - 4], edi\n"
                             " mov dword ptr [rbp - 8], esi\n mov qword ptr [rbp - 8], rdx\n"
                             " cmp dword ptr [rbp - 4], 1\n jne 1f\n cmp dword ptr [rbp - 8], 0xffff\n jne 1f\n"
                             " call once\n1: pop rbp\n ret",
    "init_1_ffff": "mov esi, 0xffff\n mov edi, 1\n call static_init\n ret",
    "init_2_ffff": "mov esi, 0xffff\n mov edi, 2\n call static_init\n ret",
    "init_unknown": "mov edi, 1\n call static_init\n ret",
    "init_rewritten": "mov esi, 0xffff\n mov edi, 1\n call static_init_rewritten\n ret",
    # an initialization laid out with its constructor's own test-and-set of a flag byte (fs:-16) before the
    # setting of its guard (fs:-24): the guard is the byte its entry block tests
    "once_late_set": "cmp byte ptr fs:[-24], 0\n je 2f\n ret\n3: cmp byte ptr fs:[-16], 0\n jne 4f\n"
                     " mov byte ptr fs:[-16], 1\n4: ret\n2: mov byte ptr fs:[-24], 1\n jmp 3b",
    "flag_tested": "cmp byte ptr fs:[-16], 0\n jne 1f\n mov byte ptr fs:[-16], 1\n1: ret",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[OnceRuns, dict[str, int]]:
    require_tool("as", "objcopy", packages="binutils")
    d: Path = tmp_path_factory.mktemp("tlsonce")
    src = ".intel_syntax noprefix\n.text\n" + "".join(
        f".org {n * SLOT:#x}\n{name}:\n {body}\n" for n, (name, body) in enumerate(_FUNCTIONS.items()))
    (d / "f.s").write_text(src)
    subprocess.run(["as", "--64", "-o", str(d / "f.o"), str(d / "f.s")], check=True, capture_output=True)
    subprocess.run(["objcopy", "-O", "binary", "-j", ".text", str(d / "f.o"), str(d / "f.bin")], check=True,
                   capture_output=True)
    code = (d / "f.bin").read_bytes().ljust(len(_FUNCTIONS) * SLOT, b"\xcc")
    starts = {name: BASE + n * SLOT for n, name in enumerate(_FUNCTIONS)}

    class _Image:
        def function_end(self, addr: int) -> int:
            return addr + SLOT

        def function_start(self, addr: int) -> bool:
            return addr in starts.values()

        def got(self, addr: int) -> int | None:
            return starts["once"] if addr == starts["slot"] else None

    dis = Disassembler(EM_X86_64, lambda a, n: code[a - BASE:a - BASE + n], lambda _a: None)
    return OnceRuns(dis, _Image()), starts  # type: ignore[arg-type]


def test_the_guard_is_the_byte_the_initialization_tests_before_it_sets_it(runs: tuple) -> None:
    once_runs, at = runs
    assert once_runs.guard(at["once"]) == 2**64 - 8
    assert once_runs.guard(at["once_late_set"]) == 2**64 - 24
    assert not once_runs.runs(at["flag_tested"], at["once_late_set"])


@pytest.mark.parametrize(("name", "ran"), [("always", True), ("inlined", True), ("via_always", True),
                                           ("one_path", False), ("tail_out", False), ("flag_only", False),
                                           ("other", False), ("weak_lea", True), ("weak_slot", True),
                                           ("weak_cmp", True), ("weak_unbound", False), ("init_1_ffff", True),
                                           ("init_2_ffff", False), ("init_unknown", False),
                                           ("init_rewritten", False)])
def test_an_earlier_function_runs_the_initialization_only_on_every_path(runs: tuple, name: str, ran: bool) -> None:
    once_runs, at = runs
    assert once_runs.runs(at[name], at["once"]) is ran
