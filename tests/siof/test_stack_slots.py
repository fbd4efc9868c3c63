"""Stack slots keep a value only while nothing may have overwritten their bytes, and a compare is of its
operands' width. Each program prints ``EARLY <reader>`` when its initializer reads ``g_b`` before ``g_b``'s
constructor ran (the run is the truth); the analysis must then find ``g_b`` or say the reader's entry is
incomplete. Before: an -O0 store at an index not known (``arr[i] = &g_b``), a store through a pointer into the
frame (``*p = &g_b`` with ``p = &slot``) and a store of half of a pointer left the slot's old value (``&g_a``,
built) known, and ``int x = -1; if (x == -1)`` was decided false (the slot held 0xffffffff, the compare
said -1): each was complete with no finding (g++ and clang++ -O0; on AArch64, built by the cross compilers
and run under qemu-user, the first three too)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case, run_main

from elfpatch.inits import x86
from elfpatch.inits.state import clobber, slot_clobbers, slot_key
from elfpatch.inits.values import FRAME
from siof.truth import A64_SYSROOT

BOX = ('#include <cstdio>\nstruct Box { Box(); int v;\n  int peek(const char* who) const {\n'
       '    if (v != 42) std::printf("EARLY %s\\n", who); return v; } };\n')
COMMON = {"box.hpp": BOX,
          "box.cpp": '#include "box.hpp"\nBox::Box() : v(42) {}\nint __attribute__((noinline)) pick(int n) '
                     "{ return n - 1; }\n",
          "b.cpp": '#include "box.hpp"\nBox g_b;\nint main() {}\n'}
READERS = {
    "indexed": "int pick(int);\nstruct R { R() { Box* arr[2] = {&g_a, &g_a}; arr[pick(1)] = &g_b; "
               'arr[0]->peek("indexed"); } } r;\n',
    "through": 'struct R { R() { Box* slot = &g_a; Box** p = &slot; *p = &g_b; slot->peek("through"); } } r;\n',
    "width": 'struct R { R() { int x = -1; if (x == -1) g_b.peek("width"); else g_a.peek("width"); } } r;\n',
    "half": "#include <cstdint>\nstruct R { R() { Box* p = &g_a; *(uint32_t*)&p = (uint32_t)(uintptr_t)&g_b; "
            'p->peek("half"); } } r;\n',
}
# compiler -> (its command, the runner of what it builds)
COMPILERS = {"g++": (["g++"], []), "clang++": (["clang++"], []),
             "a64-g++": (["aarch64-linux-gnu-g++"], ["qemu-aarch64", "-L", A64_SYSROOT]),
             "a64-clang++": (["clang++", "--target=aarch64-linux-gnu"], ["qemu-aarch64", "-L", A64_SYSROOT])}
CASES = [case(reader, cxx, opt, needs=[COMPILERS[cxx][0][0], *COMPILERS[cxx][1][:1]], id=f"{reader}-{cxx}-{opt}")
         for reader in READERS for cxx in COMPILERS for opt in ("-O0", "-O2")]


# clang -O0 for AArch64 spills by both frame bases: ``p`` at [sp], ``n`` at [x29, #-4] (x29 = sp + 16); a store
# of ``n`` forgot ``p``, and the read through it was unproven (no finding, the entry incomplete)
TWO_BASES = ("int pick(int);\nstatic int __attribute__((noinline)) reader() { int n = pick(2); Box* p = &g_b; "
             'n = pick(n); return p->peek("twobases") + n; }\nstruct R { R() { reader(); } } r;\n')


@pytest.mark.parametrize(("reader", "cxx", "opt"), CASES)
def test_an_early_read_through_a_stack_slot_is_found_or_incomplete(tmp_path: Path, reader: str, cxx: str,
                                                                    opt: str) -> None:
    found, complete = _analysed(tmp_path, reader, READERS[reader], cxx, opt)
    assert "g_b" in found or not complete


@pytest.mark.parametrize(("cxx", "opt"), [case(cxx, opt, needs=[COMPILERS[cxx][0][0], *COMPILERS[cxx][1][:1]],
                                               id=f"{cxx}-{opt}") for cxx in COMPILERS for opt in ("-O0", "-O2")])
def test_an_early_read_through_a_slot_by_either_frame_base_is_found(tmp_path: Path, cxx: str, opt: str) -> None:
    found, complete = _analysed(tmp_path, "twobases", TWO_BASES, cxx, opt)
    assert "g_b" in found and complete


def _analysed(tmp_path: Path, reader: str, text: str, cxx: str, opt: str) -> tuple[set, bool]:
    """``reader`` built and run (it must print its EARLY line) and analysed: the objects found read early by
    its unit, and whether its entry and the file say complete."""
    command, runner = COMPILERS[cxx]
    require_tool(command[0], *runner[:1], packages="g++, clang, g++-aarch64-linux-gnu, qemu-user")
    for name, common in COMMON.items():
        (tmp_path / name).write_text(common)
    (tmp_path / f"{reader}.cpp").write_text(f'#include "box.hpp"\nBox g_a;\nextern Box g_b;\n{text}')
    exe = tmp_path / "prog"
    # non-PIE: the addresses fit in 32 bits, so half a pointer stored is the whole of it
    subprocess.run([*command, opt, "-no-pie", "-fno-pie", "-o", str(exe), "box.cpp", f"{reader}.cpp", "b.cpp"],
                   cwd=tmp_path, check=True, capture_output=True)
    out = subprocess.run([*runner, str(exe)], capture_output=True, text=True, check=True).stdout
    assert out == f"EARLY {reader}\n"
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    entry = next(e for e in f["init"] if e["source"] == f"{reader}.cpp")
    found = {x["object"]["symbol"] for x in f["findings"] if x["reader"]["source"] == f"{reader}.cpp"}
    return found, entry["analysis"]["complete"] or f["analysis_complete"]


def test_a_store_forgets_every_slot_it_overlaps() -> None:
    """8- and 4-byte slots at their alignment hold values; a store of any width forgets those it touches."""
    assert slot_key("rbp", -8, 8) == "m:rbp-8" and slot_key("rbp", -4, 4) == "m:rbp-4/4"
    assert slot_key("rsp", 4, 8) is None and slot_key("rsp", 2, 4) is None and slot_key("rsp", 0, 1) is None
    assert set(slot_clobbers("rbp", -8, 8)) == {"m:rbp-8/4", "m:rbp-4/4"}
    assert set(slot_clobbers("rbp", -4, 4)) == {"m:rbp-8"}
    assert set(slot_clobbers("rsp", 0x11, 1)) == {"m:rsp+16", "m:rsp+16/4"}
    assert set(slot_clobbers("rsp", 16, 16)) == {"m:rsp+16", "m:rsp+24", "m:rsp+16/4", "m:rsp+20/4",
                                                 "m:rsp+24/4", "m:rsp+28/4"}
    assert slot_clobbers("sp", 0, None) == ("m:sp",)
    st = {"m:rsp+8": 1, "m:rsp+16": 2, "m:rbp-8": 3, "rax": 4}
    clobber(st, ("m:rsp",))
    assert st == {"m:rbp-8": 3, "rax": 4}


def _stepped(block: list[tuple[str, str]], st: dict) -> dict:
    arch = x86._X86(lambda _a: None, lambda _a: None)
    insns = [(0x1000 + 8 * n, 8, m, o) for n, (m, o) in enumerate(block)]
    for insn, plan in zip(insns, arch.plans(insns)):
        arch.step(insn, plan, st, [], 0x1000, 0x2000)
    return st


@pytest.mark.parametrize(("block", "kept"), [
    ([("mov", "qword ptr [rsp + 8], rax"), ("push", "rbx")], False),  # rsp moved: [rsp + 8] is other bytes
    ([("mov", "qword ptr [rsp + 8], rax"), ("mov", "dword ptr [rsp + 0xc], 0")], False),  # its upper half
    ([("mov", "qword ptr [rsp + 8], rax"), ("movaps", "xmmword ptr [rsp], xmm0")], False),
    ([("mov", "qword ptr [rsp + 8], rax"), ("mov", "qword ptr [rsp + rcx*8], rdx")], False),  # an index
    ([("mov", "qword ptr [rsp + 8], rax"), ("lea", "rdi, [rsp + 0x20]"), ("rep stosq", "qword ptr [rdi], rax")],
     False),  # through a pointer into the frame
    ([("mov", "qword ptr [rsp + 8], rax"), ("mov", "qword ptr [rsp + 0x10], rdx"),
      ("mov", "dword ptr [rsp + 4], 7")], True),  # other bytes
])
def test_a_slot_is_kept_only_while_its_bytes_are(block: list, kept: bool) -> None:
    st = _stepped(block + [("mov", "rsi, qword ptr [rsp + 8]")], {"rax": 0x4040})
    assert (st.get("rsi") == 0x4040) is kept


@pytest.mark.parametrize(("block", "outcome"), [
    ([("mov", "dword ptr [rbp - 4], 0xffffffff"), ("cmp", "dword ptr [rbp - 4], -1")], True),
    ([("mov", "eax, 0xffffffff"), ("cmp", "eax, -1")], True),
    ([("mov", "rax, 0xffffffff"), ("cmp", "rax, -1")], False),
    ([("mov", "rax, 0x100"), ("cmp", "al, 0")], None),  # a byte register is not read: not decided
    ([("mov", "dword ptr [rbp - 4], 1"), ("cmp", "dword ptr [rbp - 4], 2")], False),
])
def test_a_compare_is_of_its_width(block: list, outcome: bool | None) -> None:
    assert _stepped(block, {"rbp": FRAME}).get("cmp") is outcome


@pytest.mark.parametrize(("block", "kept"), [
    ([("stp", "x1, x2, [sp]")], False),  # a pair over the slot
    ([("strb", "w1, [sp, #0xc]")], False),  # a byte of it
    ([("str", "x1, [sp, x3, lsl #3]")], False),  # an index
    ([("stp", "x29, x30, [sp, #-0x20]!")], False),  # the stack pointer moved
    ([("add", "x4, sp, #0x20"), ("str", "x1, [x4]")], False),  # through a pointer into the frame
    ([("str", "x1, [sp, #0x10]"), ("str", "w1, [sp, #4]")], True),  # other bytes
])
def test_an_a64_slot_is_kept_only_while_its_bytes_are(block: list, kept: bool) -> None:
    from elfpatch.inits.a64 import _A64

    arch = _A64(lambda _a: None, lambda _a: None)
    block = [("str", "x0, [sp, #8]"), *block, ("ldr", "x5, [sp, #8]")]
    st: dict = {"x0": 0x4040}
    for n, (m, o) in enumerate(block):
        arch.step((0x1000 + 4 * n, 4, m, o), ((),), st, [], 0x1000, 0x2000)
    assert (st.get("x5") == 0x4040) is kept


@pytest.mark.parametrize(("block", "kept"), [
    ([("stur", "w1, [x29, #-4]")], True),  # sp + 12: other bytes (clang -O0 spills by both bases)
    ([("stur", "x1, [x29, #-8]")], True),  # sp + 8
    ([("stur", "x1, [x29, #-16]")], False),  # sp + 0: the slot itself, by the other name
    ([("stur", "w1, [x29, #-14]")], False),  # a part of it
    ([("sub", "sp, sp, #0x10"), ("add", "sp, sp, #0x10"), ("stur", "w1, [x29, #-4]")], False),  # sp moved:
    # x29's distance from it is not known any more
    ([("mov", "x29, sp"), ("stur", "w1, [x29, #8]")], True),  # sp + 8 (a new frame pointer, at sp)
    ([("mov", "x29, sp"), ("stur", "x1, [x29]")], False),
])
def test_an_a64_frame_pointer_names_the_bytes_sp_does(block: list, kept: bool) -> None:
    """With x29 = sp + 16 a store by x29 forgets the slots by sp it overlaps, not every one: [sp] survives
    ``stur w1, [x29, #-4]``."""
    from elfpatch.inits.a64 import _A64

    arch = _A64(lambda _a: None, lambda _a: None)
    block = [("sub", "sp, sp, #0x20"), ("add", "x29, sp, #0x10"), ("str", "x0, [sp]"), *block,
             ("ldr", "x5, [sp]"), ("ldur", "x6, [x29, #-16]")]
    st: dict = {"x0": 0x4040}
    for n, (m, o) in enumerate(block):
        arch.step((0x1000 + 4 * n, 4, m, o), ((),), st, [], 0x1000, 0x2000)
    assert (st.get("x5") == 0x4040) is kept
    assert (st.get("x6") == 0x4040) is (kept and block[3][0] != "mov" and "sp, sp" not in block[3][1])


def test_an_a64_frame_pointer_of_unknown_distance_forgets_every_slot() -> None:
    """x29 the frame at a distance from sp not known (after a join of two): a store by it may be any slot."""
    from elfpatch.inits.a64 import _A64

    arch = _A64(lambda _a: None, lambda _a: None)
    st: dict = {"x0": 0x4040, "x29": FRAME}
    for n, (m, o) in enumerate([("str", "x0, [sp]"), ("stur", "w1, [x29, #-4]"), ("ldr", "x5, [sp]")]):
        arch.step((0x1000 + 4 * n, 4, m, o), ((),), st, [], 0x1000, 0x2000)
    assert "x5" not in st
