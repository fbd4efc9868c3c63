"""The decoder's dataflow on hand-written code: what a register holds across loops and joins, and which global
a store through it reaches. Each case assembles a few instructions with GNU as (x86-64, AArch64) and sweeps
them with a toy object map: one global array at DATA .. DATA + SIZE."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool

from elfpatch.elf.const import EM_AARCH64, EM_X86_64
from elfpatch.inits.disasm import Disassembler
from elfpatch.inits.events import Access, Call, Deref, Ret
from elfpatch.inits.values import Ptr, Within

START = 0x1000
DATA, SIZE = 0x4000, 0x400  # the global array
CALLEE = 0x2000


def _object_of(addr: int) -> int | None:
    return DATA if DATA <= addr < DATA + SIZE else None


def _assemble(tmp: Path, machine: int, text: str) -> bytes:
    """The flat bytes of ``text`` placed at START (labels resolved by the assembler and linker)."""
    prefix = "" if machine == EM_X86_64 else "aarch64-linux-gnu-"
    require_tool(f"{prefix}as", f"{prefix}ld", packages="binutils" if machine == EM_X86_64
                 else "binutils-aarch64-linux-gnu")
    syntax = ".intel_syntax noprefix\n" if machine == EM_X86_64 else ""
    src, obj, out = tmp / "f.s", tmp / "f.o", tmp / "f.bin"
    src.write_text(f"{syntax}.text\n.globl _start\n_start:\n{text}\n")
    subprocess.run([f"{prefix}as", "-o", str(obj), str(src)], check=True, capture_output=True)
    linked = tmp / "f.elf"
    subprocess.run([f"{prefix}ld", "-o", str(linked), f"-Ttext={START:#x}", f"--defsym=g={DATA:#x}",
                    f"--defsym=callee={CALLEE:#x}", str(obj)], check=True, capture_output=True)
    subprocess.run([shutil.which(f"{prefix}objcopy") or "objcopy", "-O", "binary", "-j", ".text", str(linked),
                    str(out)], check=True, capture_output=True)
    return out.read_bytes()


def _sweep(tmp: Path, machine: int, text: str, entry: dict | None = None) -> list:
    code = _assemble(tmp, machine, text)
    dis = Disassembler(machine, lambda a, n: code[a - START: a - START + n], lambda _a: None, _object_of)
    return dis.sweep(START, START + len(code), entry or {})


def _stores(events: list) -> list[int]:
    return [ev.address for ev in events if isinstance(ev, Access) and ev.write]


def _this(events: list) -> list:
    return [ev.args[0] for ev in events if isinstance(ev, Call)]


def test_a_constructor_loop_builds_the_array(tmp_path: Path) -> None:
    """GCC -O2's array constructor loop: ``this`` advances through the array, past a compare against its end.
    Starting the loop head from nothing lost ``rbx`` (and a cmp forgot it too)."""
    events = _sweep(tmp_path, EM_X86_64, """
        push rbx
        lea rbx, [rip + g]
        lea rbp, [rbx + 0x400]
    1:  mov rdi, rbx
        add rbx, 4
        call callee
        cmp rbx, rbp
        jne 1b
        pop rbx
        ret""")
    (this,) = _this(events)
    assert this == Within(DATA)


def test_a_fill_loop_stores_into_the_array(tmp_path: Path) -> None:
    events = _sweep(tmp_path, EM_X86_64, """
        lea rax, [rip + g]
        lea rdx, [rax + 0x400]
    1:  mov dword ptr [rax], 7
        add rax, 4
        cmp rax, rdx
        jne 1b
        ret""")
    assert _stores(events) == [Within(DATA)]


def test_a_loop_invariant_base_with_an_index_register(tmp_path: Path) -> None:
    """-O0: ``[rcx + rdx*1]`` with the array's address in the index register, the element offset in rcx."""
    events = _sweep(tmp_path, EM_X86_64, """
        mov dword ptr [rbp - 4], 0
    1:  mov edx, dword ptr [rbp - 4]
        movsxd rdx, edx
        lea rcx, [rdx*4]
        lea rdx, [rip + g]
        mov dword ptr [rcx + rdx*1], eax
        add dword ptr [rbp - 4], 1
        cmp dword ptr [rbp - 4], 0xff
        jle 1b
        ret""")
    assert _stores(events) == [Within(DATA)]  # some element: rcx (index * 4) is not known, and never 0


def test_an_exact_address_stays_exact_when_the_loop_keeps_it(tmp_path: Path) -> None:
    """A register the loop does not change keeps its exact value at the loop head (not Within)."""
    events = _sweep(tmp_path, EM_X86_64, """
        lea rsi, [rip + g + 8]
    1:  mov dword ptr [rsi], 1
        dec ecx
        jne 1b
        ret""")
    assert _stores(events) == [DATA + 8] and not isinstance(_stores(events)[0], Within)


def test_a_loop_that_starts_at_a_global_and_follows_pointers(tmp_path: Path) -> None:
    """An intrusive list whose head node is a global: the first iteration stores into it (kept from the first
    pass, which runs the loop once from its entry state); later ones store through loaded pointers, which are
    not known at the loop head (nothing is made up for them)."""
    events = _sweep(tmp_path, EM_X86_64, """
        lea rax, [rip + g]
    1:  mov dword ptr [rax], 1
        mov rax, qword ptr [rax + 8]
        test rax, rax
        jne 1b
        ret""")
    assert _stores(events) == [DATA] and not isinstance(_stores(events)[0], Within)


def test_a_compare_of_a_moving_pointer_decides_no_branch(tmp_path: Path) -> None:
    """Two exact values compared decide a je/jne (GCC -O0's priority dispatch); a pointer that moves through
    an array does not, so the loop's exit stays live and what follows it is seen."""
    events = _sweep(tmp_path, EM_X86_64, """
        lea rbx, [rip + g]
        lea rbp, [rip + g + 0x10]
    1:  add rbx, 4
        cmp rbx, rbp
        jne 1b
        mov rdi, rbx
        call callee
        ret""")
    assert len(_this(events)) == 1


def test_two_ways_into_one_array_meet_within_it(tmp_path: Path) -> None:
    """An if/else choosing between two elements: the join keeps the array, not nothing."""
    events = _sweep(tmp_path, EM_X86_64, """
        test edi, edi
        je 1f
        lea rax, [rip + g + 16]
        jmp 2f
    1:  lea rax, [rip + g + 32]
    2:  mov dword ptr [rax], 0
        ret""")
    assert _stores(events) == [Within(DATA)]


A64_FILLS = {
    # ``str w2, [x0], #4``: the base is written back moved, and stays inside the array.
    "post-index": """
        adrp x0, g
        add x0, x0, :lo12:g
        add x1, x0, #0x400
    1:  str w2, [x0], #4
        cmp x0, x1
        b.ne 1b
        ret""",
    # ``str w2, [x1, x3, lsl #2]``: an index register, shifted; the element is unknown, the array is not.
    "register-index": """
        adrp x1, g
        add x1, x1, :lo12:g
        mov x3, #0
    1:  str w2, [x1, x3, lsl #2]
        add x3, x3, #1
        cmp x3, #256
        b.ne 1b
        ret""",
}


@pytest.mark.cross  # needs aarch64 binutils
@pytest.mark.parametrize("form", sorted(A64_FILLS))
def test_aarch64_fill_loops_store_into_the_array(tmp_path: Path, form: str) -> None:
    assert _stores(_sweep(tmp_path, EM_AARCH64, A64_FILLS[form])) == [Within(DATA)]


@pytest.mark.cross  # needs aarch64 binutils
def test_aarch64_constructor_loop(tmp_path: Path) -> None:
    events = _sweep(tmp_path, EM_AARCH64, """
        adrp x19, g
        add x19, x19, :lo12:g
        add x20, x19, #0x400
    1:  mov x0, x19
        add x19, x19, #4
        bl callee
        cmp x19, x20
        b.ne 1b
        ret""")
    (this,) = _this(events)
    assert this == Within(DATA)


@pytest.mark.parametrize("op", ["cmp rbx, rbp", "test rbx, rbx"])
def test_compares_write_no_register(tmp_path: Path, op: str) -> None:
    events = _sweep(tmp_path, EM_X86_64, f"""
        lea rbx, [rip + g]
        {op}
        mov dword ptr [rbx], 1
        ret""")
    assert _stores(events) == [DATA]


def test_a_pointer_difference_is_not_an_address(tmp_path: Path) -> None:
    """``end - begin`` is a length: storing through it names no global (an index added to an address does)."""
    events = _sweep(tmp_path, EM_X86_64, """
        lea rax, [rip + g + 0x100]
        lea rdx, [rip + g]
        sub rax, rdx
        mov dword ptr [rax], 1
        add rdx, rcx
        mov dword ptr [rdx], 2
        ret""")
    assert _stores(events) == [Within(DATA)]


def test_loops_that_never_settle_make_the_analysis_incomplete(siof_build: Path, monkeypatch) -> None:
    """The fixpoint is bounded; should a function's loops ever be cut short at the bound, its loop heads assume
    nothing (stores can be missed), so the file must not be called complete."""
    from elfpatch.elf.file import ElfFile
    from elfpatch.inits import disasm
    from elfpatch.inits.analysis import analyze
    from elfpatch.inits.order import initializers

    path = siof_build / "siof" / "O2" / "loop_ctor"
    elf = ElfFile(path.read_bytes(), str(path))
    listing = {"init": initializers(elf)["init"]}
    analyze(elf, listing)
    assert listing["analysis_complete"] and [x["object"]["symbol"] for x in listing["findings"]] == ["g_slots"]

    monkeypatch.setattr(disasm, "_states_equal", lambda _a, _b: False)
    listing = {"init": initializers(elf)["init"]}
    analyze(elf, listing)
    assert not listing["analysis_complete"]
    assert any("cut short" in n for n in listing["analysis_notes"])
    assert all(not e["analysis"]["complete"] for e in listing["init"] if e.get("analysis"))


# -- no access is dropped: what the walker cannot resolve comes out as a Deref ("complete" is a proof) ------


def _derefs(events: list) -> list:
    return [ev.base for ev in events if isinstance(ev, Deref)]


def test_a_case_of_a_jump_table_starts_from_the_jump(tmp_path: Path) -> None:
    """A `notrack jmp` (-fcf-protection) leaves its cases without a decoded edge: a case starts from the state
    at the jump (the store goes through the rbx set before the switch), never from the block before it in the
    code (which moved rbx), and it is not dropped (it was: the case started from nothing)."""
    events = _sweep(tmp_path, EM_X86_64, """
        lea rbx, [rip + g]
        notrack jmp rax
        lea rbx, [rip + g + 0x100]
        ret
        mov dword ptr [rbx], 1
        ret""")
    assert _stores(events) == [DATA] and _derefs(events) == []


def test_a_block_after_a_table_that_other_edges_reach_meets_the_jump(tmp_path: Path) -> None:
    """The default case is reached by a branch before the table and may be a case too: its state is what both
    agree on (here rbx differs: the store is not resolved, and not dropped)."""
    events = _sweep(tmp_path, EM_X86_64, """
        lea rbx, [rip + g]
        cmp eax, 3
        ja 1f
        mov rbx, rdi
        notrack jmp rax
    1:  mov dword ptr [rbx], 1
        ret""")
    assert _stores(events) == [] and _derefs(events) == [None]


def test_a_dereferenced_call_result_is_a_deref(tmp_path: Path) -> None:
    """`call f; mov eax, [rax]`: the callee's result is not known here, so the load is not proven."""
    events = _sweep(tmp_path, EM_X86_64, """
        call callee
        mov eax, dword ptr [rax]
        ret""")
    assert _derefs(events) == [None]


def test_a_load_through_an_argument_is_the_callers_to_prove(tmp_path: Path) -> None:
    """Loads through what the caller passed carry the argument register; a pointer loaded through it does
    not (a load through a loaded pointer is not proven)."""
    events = _sweep(tmp_path, EM_X86_64, """
        mov rax, qword ptr [rdi + 8]
        mov ecx, dword ptr [rax]
        ret""", {"rdi": Ptr("arg", 0)})
    assert _derefs(events) == [Ptr("arg", 0), None]


def test_rbp_is_a_frame_pointer_only_once_it_is_one(tmp_path: Path) -> None:
    """At -O2 rbp is a general register: `[rbp + 8]` is a stack slot only after `mov rbp, rsp`."""
    general = _sweep(tmp_path, EM_X86_64, """
        mov rbp, rsi
        mov dword ptr [rbp + 8], 1
        ret""")
    frame = _sweep(tmp_path, EM_X86_64, """
        push rbp
        mov rbp, rsp
        mov dword ptr [rbp - 8], 1
        pop rbp
        ret""")
    assert _derefs(general) == [None] and _derefs(frame) == []


@pytest.mark.cross  # needs aarch64 binutils
def test_aarch64_a_load_through_an_unknown_register_is_a_deref(tmp_path: Path) -> None:
    events = _sweep(tmp_path, EM_AARCH64, """
        ldr x1, [x19, #8]
        str wzr, [x1]
        ret""")
    assert _derefs(events) == [None, None]


def test_movabs_loads_its_64_bit_immediate(tmp_path: Path) -> None:
    """clang -O0 non-PIE passes a registration's destructor and object as `movabs rdi, imm64`: the argument
    registers hold those addresses at the call (they were unknown: the registration listed no destructor)."""
    events = _sweep(tmp_path, EM_X86_64, f"""
        movabs rdi, {CALLEE:#x}
        movabs rsi, {DATA + 8:#x}
        call callee
        ret""")
    assert [ev.args[:2] for ev in events if isinstance(ev, Call)] == [(CALLEE, DATA + 8)]


def test_a_case_walked_before_its_jump_keeps_what_the_jump_holds(tmp_path: Path) -> None:
    """GCC -O2 -fcf-protection: the switch's bounds check jumps past the table to code that reverse post-order
    walks before the table's block. That code may be a case, so it starts from what the jump holds, not from
    the frame alone: the destructor kept in rbx across the switch is still known at the call after it (it was
    forgotten: the registration listed no destructor)."""
    events = _sweep(tmp_path, EM_X86_64, """
        push rbx
        lea rbx, [rip + callee]
        cmp eax, 3
        ja 2f
        notrack jmp rax
    1:  mov edi, 1
        call callee
    2:  mov rdi, rbx
        call callee
        pop rbx
        ret""")
    assert CALLEE in [ev.args[0] for ev in events if isinstance(ev, Call)]


def test_a_case_that_falls_into_a_block_walked_before_it_brings_its_state(tmp_path: Path) -> None:
    """A case (reached only through the table, so walked last) that falls into the block after the switch:
    what it changed (rbx) reaches that block, though the order walked the block first; the call there does
    not claim the rbx the other paths hold."""
    events = _sweep(tmp_path, EM_X86_64, """
        push rbx
        lea rbx, [rip + callee]
        cmp eax, 3
        ja 2f
        notrack jmp rax
    1:  mov rbx, rsi
    2:  mov rdi, rbx
        call callee
        pop rbx
        ret""")
    assert [ev.args[0] for ev in events if isinstance(ev, Call)] == [None]


def test_a_block_the_walk_reaches_before_the_table_jump_gets_the_jumps_state(tmp_path: Path) -> None:
    """The default case, reached by a branch the walk follows before the table jump: a first walk can assume
    only the frame there; the walk is redone with the state the jump had, so where both agree (rbx) the store
    is resolved (it was not: registrations after a switch lost their object in LTO -fcf-protection builds)."""
    events = _sweep(tmp_path, EM_X86_64, """
        lea rbx, [rip + g]
        cmp eax, 3
        ja 1f
        notrack jmp rax
    1:  mov dword ptr [rbx], 1
        ret""")
    assert _stores(events) == [DATA] and _derefs(events) == []


_SWITCH = """
        push rbx
        lea r12, [rip + g]
        cmp eax, 1
        ja 3f
        lea rdx, [rip + 9f]
        mov eax, eax
        movsxd rax, dword ptr [rdx + rax*4]
        add rax, rdx
        notrack jmp rax
    1:  mov rdi, r12
        call callee
        jmp 3f
    2:  mov edi, 2
        call callee
    3:  lea rbx, [rip + callee]
        test esi, esi
        je 4f
        mov rdi, rbx
        call callee
    4:  pop rbx
        ret
        .p2align 2
    9:  .long 1b - 9b
        .long {second} - 9b
"""


def test_a_jump_table_read_gives_the_cases_their_edges(tmp_path: Path) -> None:
    """The compilers' PIC switch (cmp/ja, lea of the table, movsxd, add, notrack jmp): its table is read, so each
    case gets an edge from the jump (case 1 passes the r12 set before it) and a block after the switch that no
    entry names is not a case: the rbx set after the switch reaches the call (it was forgotten, every block
    after a table counting as a possible case: a registration there listed no destructor)."""
    events = _sweep(tmp_path, EM_X86_64, _SWITCH.format(second="2b"))
    first = [ev.args[0] for ev in events if isinstance(ev, Call)]
    assert DATA in first and CALLEE in first


def test_a_plain_jump_table_is_a_switch_not_a_tail_call(tmp_path: Path) -> None:
    """The same switch built without -fcf-protection ends in a plain `jmp rax` (GCC -O2): read as the table it
    is, its cases get their edges (case 1's call passes the global) and the jump is no indirect tail call; it
    counted as one, the entry incomplete and the case's read of the global never seen."""
    events = _sweep(tmp_path, EM_X86_64, _SWITCH.format(second="2b").replace("notrack jmp rax", "jmp rax"))
    code = events[: next(n for n, ev in enumerate(events) if isinstance(ev, Ret))]  # not the table's bytes
    calls = [ev for ev in code if isinstance(ev, Call)]
    assert [ev.args[0] for ev in calls] == [2, DATA, CALLEE]  # as with -fcf-protection
    assert all(ev.target == CALLEE for ev in calls)


def test_a_jump_through_a_register_that_is_no_table_stays_a_tail_call(tmp_path: Path) -> None:
    """A `jmp rax` without the switch's shape (no bound, no table) is an indirect tail call: unknown."""
    events = _sweep(tmp_path, EM_X86_64, """
        lea rdx, [rip + 9f]
        movsxd rax, dword ptr [rdx + rax*4]
        add rax, rdx
        jmp rax
    9:  .long 0""")
    assert [ev.target for ev in events if isinstance(ev, Call) and ev.tail] == [None]


def test_a_table_not_read_keeps_every_later_block_a_possible_case(tmp_path: Path) -> None:
    """A table entry outside the function (here: past its end) is not trusted: every block after the jump may
    be a case again, so the rbx set after the switch is not claimed at the call (sound, as before)."""
    events = _sweep(tmp_path, EM_X86_64, _SWITCH.format(second="9b + 0x1000"))
    assert CALLEE not in [ev.args[0] for ev in events if isinstance(ev, Call)]


def test_a_jump_table_read_leaves_other_blocks_after_it_alone(tmp_path: Path) -> None:
    """`cmp idx, N; ja; movsxd r, [base + idx*4]; add r, base; notrack jmp r`: the table's entries say which
    blocks are cases; the join after the switch is not one, so the rbx both ways into it set is kept (without
    reading the table every later block had to meet the jump's state, which knows no rbx)."""
    events = _sweep(tmp_path, EM_X86_64, """
        cmp eax, 1
        ja 3f
        lea rdx, [rip + 9f]
        movsxd rax, dword ptr [rdx + rax*4]
        add rax, rdx
        notrack jmp rax
    1:  nop
    2:  lea rbx, [rip + g]
        jmp 4f
    3:  lea rbx, [rip + g]
    4:  mov dword ptr [rbx], 1
        ret
    9:  .long 1b - 9b
        .long 2b - 9b""")
    assert _stores(events) == [DATA] and _derefs(events) == []


_A64_SWITCH = """
        cmp w0, #1
        b.hi 3f
        adrp x1, 9f
        add x1, x1, :lo12:9f
        ldrb w1, [x1, w0, uxtw]
        adr x2, 1f
        add x1, x2, w1, sxtb #2
        br x1
    1:  mov x0, x19
        bl callee
        b 3f
    2:  mov x0, #2
        bl callee
    3:  ret
    9:  .byte 0, (2b - 1b) / 4
"""


@pytest.mark.cross  # needs aarch64 binutils
def test_aarch64_a_jump_table_read_gives_the_cases_their_edges(tmp_path: Path) -> None:
    """GCC's AArch64 switch (cmp/b.hi, adrp/add of the table, ldrb, adr, add sxtb #2, br): its table is read,
    so the `br` is no indirect tail call and case 0 gets the jump's state (x19, set by the caller, passed on).
    The `br` was a tail call to an unknown target and the cases started from nothing."""
    events = _sweep(tmp_path, EM_AARCH64, _A64_SWITCH, {"x19": DATA})
    calls = [ev for ev in events if isinstance(ev, Call)]
    assert sorted(ev.args[0] for ev in calls) == [2, DATA]
    assert all(ev.target == CALLEE and not ev.tail for ev in calls)


@pytest.mark.cross  # needs aarch64 binutils
def test_aarch64_a_br_without_the_bound_stays_a_tail_call(tmp_path: Path) -> None:
    """The same code without its bounds check is not read: the `br` stays an indirect tail call (unknown)."""
    events = _sweep(tmp_path, EM_AARCH64, _A64_SWITCH.replace("cmp w0, #1", "nop").replace("b.hi 3f", "nop"))
    assert [ev.target for ev in events if isinstance(ev, Call) and ev.tail] == [None]
