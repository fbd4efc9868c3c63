"""`inits --dtors --siof` stays bounded on crafted code (elfpatch/inits/budget.py): each input is generated
assembly built here, small, and analysed in a child under an address-space cap (RLIMIT_AS) and a CPU-time cap
(RLIMIT_CPU). The guarantee checked is termination within the caps with a normal exit, and the note that says
which limit cut the analysis short; never how long it took."""
from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from conftest import require_tool

MEMORY_CAP = 1 << 30  # the bound for crafted code under 1 MB
CPU_CAP_S = 300  # far above what the bounded analysis needs; the old exponential walk ran for hours

pytestmark = pytest.mark.skipif(sys.platform != "linux" or not sys.maxsize > 2 ** 32,
                                reason="x86-64 Linux assembly")


def _build(tmp: Path, body: str, name: str = "crafted", gcc: str = "gcc") -> Path:
    """A shared library whose one DT_INIT_ARRAY entry is ``init`` (defined by ``body``)."""
    require_tool(gcc, packages="gcc, gcc-aarch64-linux-gnu")
    src = tmp / f"{name}.s"
    head = ".intel_syntax noprefix\n" if gcc == "gcc" else ""
    src.write_text(head + ".text\n" + body + '\n.section .init_array,"aw"\n.balign 8\n.quad init\n'
                   '.section .note.GNU-stack,"",@progbits\n')
    out = tmp / f"lib{name}.so"
    subprocess.run([gcc, "-shared", "-nostdlib", "-o", str(out), str(src)], check=True, capture_output=True)
    return out


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_CAP_S, CPU_CAP_S))


def _analyse(lib: Path) -> dict:
    """`inits --dtors --siof --json` in a capped child: it must exit normally (0, or 1 for a finding)."""
    proc = subprocess.run([sys.executable, "-m", "elfpatch", "inits", "--dtors", "--siof", "--json", str(lib)],
                          capture_output=True, text=True, preexec_fn=_limits)
    assert proc.returncode in (0, 1), f"rc {proc.returncode} (negative: killed by a cap): {proc.stderr[-500:]}"
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)["files"][0]


def _function(name: str, body: str) -> str:
    return f".globl {name}\n.type {name}, @function\n{name}:\n{body}\n.size {name}, .-{name}\n"


def test_a_state_never_holds_more_than_its_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound itself, measured: every abstract state the walk bounds holds at most STATE_SLOTS stack slots
    after it, however many the code writes (a state that kept them all is what made blocks x slots grow)."""
    from elfpatch.inits.analysis import analyze_path
    from elfpatch.inits.budget import STATE_SLOTS
    from elfpatch.inits.order import list_initializers
    from elfpatch.inits.state import State

    slots = "\n".join(f"mov qword ptr [rbp - {8 * (i + 1)}], {i + 1}" for i in range(4 * STATE_SLOTS))
    blocks = "\n".join(f"test eax, eax\nje .Lc{i}\nnop\n.Lc{i}:" for i in range(50))
    lib = _build(tmp_path, _function("init", f"push rbp\nmov rbp, rsp\n{slots}\n{blocks}\npop rbp\nret"))
    seen: list[int] = []
    bound = State.bound

    def measured(st: State) -> None:
        bound(st)
        seen.append(sum(k.startswith("m:") for k in st.values))

    monkeypatch.setattr(State, "bound", measured)
    listing = list_initializers(str(lib))
    analyze_path(str(lib), listing)
    assert seen and max(seen) <= STATE_SLOTS


def test_blocks_times_slots_is_not_quadratic(tmp_path: Path) -> None:
    """Many stack slots held across many blocks: a state keeps at most STATE_SLOTS slots, so the walk's memory
    does not grow with blocks x slots (the old walk kept every block's copy of every slot: over 1 GB)."""
    slots = "\n".join(f"mov qword ptr [rbp - {8 * (i + 1)}], {i + 1}" for i in range(1500))
    blocks = "\n".join(f"test eax, eax\nje .Lb{i}\nnop\n.Lb{i}:" for i in range(12000))
    lib = _build(tmp_path, _function("init", f"push rbp\nmov rbp, rsp\n{slots}\n{blocks}\npop rbp\nret"))
    assert lib.stat().st_size < 1 << 20
    f = _analyse(lib)
    assert f["init"][-1]["analysis"] is not None


@pytest.mark.cross
def test_blocks_times_slots_aarch64(tmp_path: Path) -> None:
    """The same on AArch64: -O0 style ``str`` to many frame slots, then many blocks."""
    slots = "\n".join(f"mov x1, #{i + 1}\nstr x1, [x29, #{8 * (i + 2)}]" for i in range(1500))
    blocks = "\n".join(f"cbz w0, .Lb{i}\nnop\n.Lb{i}:" for i in range(12000))
    lib = _build(tmp_path, _function("init", f"stp x29, x30, [sp, #-16]!\nmov x29, sp\n{slots}\n{blocks}\n"
                                     "ldp x29, x30, [sp], #16\nret").replace("@function", "%function"),
                 gcc="aarch64-linux-gnu-gcc")
    assert lib.stat().st_size < 1 << 20
    assert _analyse(lib)["init"][-1]["analysis"] is not None


def test_three_megabyte_function_is_cut_with_a_note(tmp_path: Path) -> None:
    """A sized 3 MB function is decoded only up to FUNCTION_BYTES, and the entry says it is incomplete."""
    body = ".rept 1000000\nadd eax, 1\n.endr\nret"
    f = _analyse(_build(tmp_path, _function("init", body)))
    entry = [e for e in f["init"] if e["analysis"]][0]
    assert entry["analysis"]["complete"] is False and f["analysis_complete"] is False
    assert any("not seen whole" in n and "bytes" in n for n in f["analysis_notes"]), f["analysis_notes"]


def test_argument_tuples_are_capped(tmp_path: Path) -> None:
    """A chain of the unit's own helpers (walked with their arguments), each calling the next with ``2a`` and
    ``2a+1``: 2^30 argument tuples uncapped; capped at ARG_TUPLES per function, the walk is linear and the file
    says so."""
    depth = 30
    funcs = [_function(f"__cxx_global_var_init.{k}",
                       f"push rbx\nmov rbx, rdi\nlea rdi, [rbx + rbx]\ncall __cxx_global_var_init.{k - 1}\n"
                       f"lea rdi, [rbx + rbx + 1]\ncall __cxx_global_var_init.{k - 1}\npop rbx\nret")
             for k in range(1, depth + 1)]
    funcs.append(_function("__cxx_global_var_init.0", "ret"))
    funcs.append(_function("init", f"mov edi, 1\njmp __cxx_global_var_init.{depth}"))
    f = _analyse(_build(tmp_path, "\n".join(funcs)))
    assert any("argument tuples" in n for n in f["analysis_notes"]), f["analysis_notes"]


def test_instruction_budget_cuts_the_file_with_a_note() -> None:
    """Past the file's instruction budget no function is decoded; the ones asked for are named as cut."""
    from elfpatch.inits.budget import Budget
    from elfpatch.inits.disasm import EM_X86_64, Disassembler

    code = b"\x90" * 64 + b"\xc3"
    budget = Budget(instructions=10)
    dis = Disassembler(EM_X86_64, lambda a, n: code[a - 0x1000: a - 0x1000 + n], lambda _a: None, budget=budget)
    dis.sweep(0x1000, 0x1000 + len(code), {})  # decoded whole: the budget is checked before a function starts
    assert budget.exhausted() and not budget.cut
    assert dis.sweep(0x1010, 0x1000 + len(code), {}) == []
    assert 0x1010 in budget.cut and "budget" in budget.cut[0x1010]


def test_capstone_error_is_one_function_unseen(monkeypatch: pytest.MonkeyPatch) -> None:
    """capstone failing on one function (CS_ERR_MEM) leaves that function unseen, named in the budget's cuts;
    the next function decodes."""
    import capstone

    from elfpatch.inits.budget import Budget
    from elfpatch.inits.disasm import EM_X86_64, Disassembler

    code = b"\x90\xc3" * 8
    budget = Budget()
    dis = Disassembler(EM_X86_64, lambda a, n: code[a - 0x1000: a - 0x1000 + n], lambda _a: None, budget=budget)
    real = dis.md.disasm_lite

    def failing(data: bytes, addr: int):
        if addr == 0x1000:
            raise capstone.CsError(capstone.CS_ERR_MEM)
        return real(data, addr)

    monkeypatch.setattr(dis.md, "disasm_lite", failing)
    assert dis.sweep(0x1000, 0x1002, {}) == [] and "disassembler failed" in budget.cut[0x1000]
    assert dis.decode(0x1002, 0x1004).insns


def test_unsized_function_ends_at_its_reachable_code(tmp_path: Path) -> None:
    """No symbol size and no FDE (hand-written code, stripped): the decoder keeps only the code reachable from
    the function's start, so the next function's registration is not listed as the initializer's."""
    require_tool("strip", packages="binutils")
    register = "lea rdi, [rip + {d}]\nlea rsi, [rip + {o}]\nlea rdx, [rip + {o}]\ncall __cxa_atexit@PLT\n"
    body = ("init:\n" + register.format(d="dtor", o="obj1") + "ret\n"
            "other:\n" + register.format(d="dtor", o="obj2") + "ret\n"
            "dtor:\nret\n.bss\nobj1: .zero 16\nobj2: .zero 16\n.text\n")
    lib = _build(tmp_path, body, name="unsized")
    nm = subprocess.run(["nm", str(lib)], capture_output=True, text=True, check=True).stdout.split("\n")
    syms = {f[2]: int(f[0], 16) for f in (line.split() for line in nm) if len(f) == 3}
    subprocess.run(["strip", "--strip-all", str(lib)], check=True)
    f = _analyse(lib)
    objects = [d["object"]["address"] for d in f["exit_time_destructors"]]
    assert objects == [syms["obj1"]]


def test_walk_budget_cuts_a_fixpoint_short() -> None:
    """Past the file's budget of instructions walked, a loop's fixpoint stops after its current pass and the
    function is named as cut (its first pass's events stand)."""
    from elfpatch.inits.budget import Budget
    from elfpatch.inits.disasm import EM_X86_64, Disassembler

    code = b"\xb8\x01\x00\x00\x00\x83\xc0\x01\xeb\xfb"  # mov eax, 1; L: add eax, 1; jmp L (rax changes each pass)
    budget = Budget(steps=1)
    dis = Disassembler(EM_X86_64, lambda a, n: code[a - 0x1000: a - 0x1000 + n], lambda _a: None, budget=budget)
    assert dis.sweep(0x1000, 0x1000 + len(code), {}) == []
    assert "walked" in budget.cut[0x1000] and not dis.unsettled


def test_overlapping_functions_decode_within_budget(tmp_path: Path) -> None:
    """400 sized functions that all run to the end of one 256 KB stretch of code (symbols may overlap): each is
    decoded whole, 100M instructions in all uncapped; the per-file instruction budget stops that with a note,
    and the file says it is incomplete."""
    count = 400
    body = "".join(f".type f{k}, @function\nf{k}:\n.fill 16, 1, 0x90\n" for k in range(count))
    body += f".fill {(1 << 18) - 16 * count}, 1, 0x90\nret\n.Lend:\n"
    body += "".join(f".size f{k}, .Lend - f{k}\n" for k in range(count))
    calls = "\n".join(f"call f{k}" for k in range(count))
    f = _analyse(_build(tmp_path, _function("init", calls + "\nret") + body))
    assert any("budget of instructions was spent" in n for n in f["analysis_notes"]), f["analysis_notes"]
    assert f["analysis_complete"] is False


def test_one_site_reached_8_to_the_k_ways_is_listed_once(tmp_path: Path) -> None:
    """A chain of the unit's helpers, each calling the next 8 times, down to one ``__cxa_atexit``: 8^12 paths to
    one site. A summary lists a site once (it held every path's copy: out of memory), so the file lists it
    once."""
    depth = 12
    calls = "call __cxx_global_var_init.{k}\n" * 8
    funcs = [_function(f"__cxx_global_var_init.{k}", "push rbx\n" + calls.format(k=k - 1) + "pop rbx\nret")
             for k in range(1, depth + 1)]
    funcs.append(_function("__cxx_global_var_init.0", "lea rdi, [rip + dtor]\nlea rsi, [rip + obj]\n"
                           "lea rdx, [rip + obj]\njmp __cxa_atexit@PLT"))
    funcs.append(_function("init", f"jmp __cxx_global_var_init.{depth}"))
    body = "\n".join(funcs) + "\ndtor:\nret\n.bss\nobj: .zero 8\n.text\n"  # local: no PLT, no interposition
    f = _analyse(_build(tmp_path, body, name="paths"))
    assert [d["kind"] for d in f["exit_time_destructors"]] == ["atexit"]


def test_long_helper_chain_over_many_reads_stays_small(tmp_path: Path) -> None:
    """120 helpers chained, the last reading 16,000 globals: every level's summary holds its subtree's reads
    with their call paths (over 1 GB at 120 levels); the chain stops at MAX_CHAIN nested calls, and the entry
    says what it did not follow."""
    depth, objects = 120, 16000
    funcs = [_function(f"__cxx_global_var_init.{k}", f"jmp __cxx_global_var_init.{k - 1}")
             for k in range(1, depth + 1)]
    funcs.append(_function("__cxx_global_var_init.0",
                           "\n".join(f"mov eax, dword ptr [rip + g{i}]" for i in range(objects)) + "\nret"))
    funcs.append(_function("init", f"jmp __cxx_global_var_init.{depth}"))
    data = "".join(f".type g{i}, @object\n.size g{i}, 4\ng{i}: .long {i}\n" for i in range(objects))
    lib = _build(tmp_path, "\n".join(funcs) + "\n.data\n" + data + ".text\n", name="chain")
    assert lib.stat().st_size < 1 << 20
    f = _analyse(lib)
    assert f["analysis_complete"] is False and any("not followed" in n for n in f["analysis_notes"])


def test_summary_entries_past_the_budget_walk_no_deeper_than_the_default(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The initializer calls level0 .. level39, each reading 5 globals of its own and calling the level below:
    each level's summary lists its whole subtree's reads, so what the summaries keep grows with the square of
    the chain (a deep --depth on a large library kept 2.5M, 1 GB). Past the file's SUMMARY_ENTRIES (here 100)
    new walks go no deeper than the default depth: they keep a few levels each, the registration in the
    initializer itself is still listed, and the file says which functions the budget cut."""
    from elfpatch.inits import analysis
    from elfpatch.inits.budget import Budget
    from elfpatch.inits.order import list_initializers

    levels, reads = 40, 5
    funcs = [_function(f"level{k}", "\n".join(f"mov eax, dword ptr [rip + g{k}_{i}]" for i in range(reads))
                       + (f"\ncall level{k - 1}" if k else "") + "\nret") for k in range(levels)]
    calls = "".join(f"call level{k}\n" for k in range(levels))
    funcs.append(_function("init", "push rbx\nlea rdi, [rip + dtor]\nlea rsi, [rip + obj]\nlea rdx, [rip + obj]\n"
                           f"call __cxa_atexit@PLT\n{calls}pop rbx\nret"))
    data = "".join(f".type g{k}_{i}, @object\n.size g{k}_{i}, 4\ng{k}_{i}: .long 1\n"
                   for k in range(levels) for i in range(reads))
    body = "\n".join(funcs) + "\ndtor:\nret\n.bss\nobj: .zero 8\n.data\n" + data + ".text\n"
    lib = str(_build(tmp_path, body, name="levels"))
    budgets: list[Budget] = []

    def budget(entries: int) -> Callable[[], Budget]:
        def make() -> Budget:
            budgets.append(Budget(entries=entries))
            return budgets[-1]
        return make

    monkeypatch.setattr(analysis, "Budget", budget(1 << 30))
    whole = list_initializers(lib)
    analysis.analyze_path(lib, whole, depth=levels + 2)
    assert not any("summary entries" in n for n in whole["analysis_notes"])
    monkeypatch.setattr(analysis, "Budget", budget(100))
    cut = list_initializers(lib)
    analysis.analyze_path(lib, cut, depth=levels + 2)
    assert any("summary entries" in n for n in cut["analysis_notes"]), cut["analysis_notes"]
    assert not cut["analysis_complete"]
    assert [d["kind"] for d in cut["exit_time_destructors"]] == [d["kind"] for d in whole["exit_time_destructors"]]
    # unbounded, the levels' summaries list 5 + 10 + ... + 200 = 4,100 objects; cut, a few levels per walk
    assert budgets[0].kept > 4000 and budgets[1].kept < budgets[0].kept // 2


def test_symbol_size_checked_against_its_fde(tmp_path: Path) -> None:
    """.eh_frame checks .symtab: a function whose symbol size runs past its FDE's end is named in a note (the
    size is what is used)."""
    body = (".globl init\n.type init, @function\ninit:\n.cfi_startproc\nret\n.cfi_endproc\n"
            ".fill 64, 1, 0x90\n.size init, .-init\n")
    f = _analyse(_build(tmp_path, body, name="sized"))
    assert any("size and .eh_frame extent disagree" in n and "init" in n for n in f["analysis_notes"]), \
        f["analysis_notes"]


def test_code_past_a_guessed_end_makes_the_file_incomplete(tmp_path: Path) -> None:
    """No symbol size and no FDE, and the function runs on into the next one (hand-written code): what it
    runs past its guessed end is not decoded, so the file must not claim complete, and a note names it."""
    register = "lea rdi, [rip + dtor]\nlea rsi, [rip + {o}]\nlea rdx, [rip + {o}]\ncall __cxa_atexit@PLT\n"
    body = ("init:\n" + register.format(o="obj1")  # no ret: falls into next_fn at run time
            + _function("next_fn", register.format(o="obj2") + "ret")
            + "dtor:\nret\n.bss\nobj1: .zero 16\nobj2: .zero 16\n.text\n")
    f = _analyse(_build(tmp_path, body, name="runson"))
    assert f["analysis_complete"] is False
    assert any("runs past the guessed end" in n for n in f["analysis_notes"]), f["analysis_notes"]


def test_an_fde_past_the_address_space_is_a_lying_record() -> None:
    """A 64-bit FDE whose start plus size passes 2**64 is refused as a record (a note where it is read), never
    an OverflowError out of the analysis."""
    from array import array

    from elfpatch.inits.extents import EhFrameError, _add

    starts, ends = array("Q"), array("Q")
    _add(0x1000, 0x20, 0, starts, ends)
    assert (list(starts), list(ends)) == ([0x1000], [0x1020])
    with pytest.raises(EhFrameError):
        _add((1 << 64) - 0x10, 0x20, 0x40, starts, ends)
