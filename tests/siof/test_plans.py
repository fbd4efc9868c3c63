"""What keeps the fast paths of `inits --dtors --siof` honest: each is checked against the general code it
short-cuts, on real instruction texts, so that speed never changes a result.

- An x86-64 instruction's plan (disasm.py: parsed once per distinct text) made by the quick path (a jump to
  an address, ``lea reg, [rip + d]``) is the plan the general parse makes.
- A walk with the instruction plans cached gives the events of one with every plan made afresh.
- The cyclic collector's threshold is raised only while a file is analysed (elfpatch.collector).
- A relocation table read column by column (relocs.py, the host's byte order) is the one read entry by entry."""
from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

from elfpatch.collector import COLLECT_AFTER, few_collections, no_collections
from elfpatch.elf import relocs
from elfpatch.elf.const import EM_X86_64
from elfpatch.elf.file import ElfFile
from elfpatch.elf.relocs import Relocator
from elfpatch.fs.source import Source
from elfpatch.inits import disasm, events, values, x86

TEXTS = [("jmp", "0x1234"), ("je", "0x10"), ("jne", "0xffffffffff"), ("jb", "0x401000"), ("jrcxz", "0x20"),
         ("lea", "rdi, [rip + 0x2f7b]"), ("lea", "rsi, [rip - 0x10]"), ("lea", "r12, [rip + 0x1234567]"),
         ("lea", "eax, [rip + 8]"), ("jmp", "rax"), ("lea", "rdi, [rip + rax*8 + 0x10]"), ("mov", "rdi, rbx")]


@pytest.mark.parametrize(("mnem", "op"), TEXTS)
def test_a_quick_plan_is_the_general_plan(monkeypatch: pytest.MonkeyPatch, mnem: str, op: str) -> None:
    quick = x86._x86_quick_plan(mnem, op)
    monkeypatch.setattr(x86, "_x86_quick_plan", lambda _m, _o: None)
    general = x86._x86_plan(mnem, op)
    assert quick is None or quick == general
    assert (quick is None) == (mnem == "mov" or "rax" in op)  # the texts it is for, and no other


def test_a_cached_plan_walks_as_a_fresh_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A function whose instruction texts repeat (the same store through rdi twice, the same register move)
    gives the same events whether each plan is taken from the cache or made for it alone."""
    # mov rdi, [rip+0x100]; mov [rdi+8], rax; mov rdi, rbx; mov [rdi+8], rax; lea rsi, [rip+0x10]; call rel32; ret
    code = bytes.fromhex("488b3d00010000" "48894708" "4889df" "48894708" "488d3510000000" "e800000000" "c3")
    start = 0x1000

    def sweep() -> list:
        dis = disasm.Disassembler(EM_X86_64, lambda a, n: code[a - start: a - start + n], lambda _a: None)
        return dis.sweep(start, start + len(code), {"rbx": 0x5000})

    cached = sweep()
    monkeypatch.setattr(x86, "MAX_PLANS", 0)  # the cache starts over at every text: every plan is fresh
    assert sweep() == cached
    assert [ev.address for ev in cached if isinstance(ev, events.Access)] == [0x1107, 0x5008]


def test_the_collector_is_relaxed_only_while_a_file_is_analysed() -> None:
    seen = []

    @few_collections
    def analysis() -> None:
        seen.append(gc.get_threshold()[0])
        raise ValueError("bad input")

    old = gc.get_threshold()
    gc.set_threshold(1234, old[1], old[2])
    try:
        with pytest.raises(ValueError):
            analysis()
        assert seen == [COLLECT_AFTER]
        assert gc.get_threshold() == (1234, old[1], old[2])  # put back, even when the analysis raised
    finally:
        gc.set_threshold(*old)


def test_the_collector_is_off_only_while_a_file_is_analysed() -> None:
    seen = []

    @no_collections
    def analysis() -> None:
        seen.append(gc.isenabled())
        raise ValueError("bad input")

    was = gc.isenabled()
    gc.enable()
    try:
        with pytest.raises(ValueError):
            analysis()
        assert seen == [False]
        assert gc.isenabled()  # back on, even when the analysis raised
    finally:
        if not was:
            gc.disable()


def test_an_analysed_file_leaves_no_cycle_to_collect(siof_build: Path) -> None:
    """The collector is off during an analysis (collector.no_collections): the walker, once done, holds no
    reference cycle, so what the analysis built is freed by reference counting alone."""
    from elfpatch.inits.analysis import analyze_path
    from elfpatch.inits.order import list_initializers

    lib = siof_build / "gcc-O2" / "libdtors.so"
    if not lib.exists():
        pytest.skip("native_tests/siof was not built with gcc")
    listing = list_initializers(str(lib))
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        analyze_path(str(lib), listing)
        gc.collect()
        left = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert "analysis_notes" in listing
    assert not left & {"Walker", "Disassembler", "Image", "OnceRuns"}


@pytest.mark.parametrize("ranges", [[(0, 1 << 62)], [(0, 0x3000), (0x3000, 1 << 62)]])
def test_a_table_read_by_columns_is_the_table_read_entry_by_entry(siof_build: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   ranges: list) -> None:
    """relocs.Relocator reads a table in the host's byte order column by column; any other file entry by entry.
    Both give the same relocations (the last for a word wins, R_*_NONE skipped), with one range or several."""
    lib = siof_build / "gcc-O2" / "libdtors.so"
    if not lib.exists():
        pytest.skip("native_tests/siof was not built with gcc")
    with Source(str(lib)) as src:
        elf = ElfFile(src.data, str(lib))
        by_columns = Relocator(elf, ranges)._relocs
        monkeypatch.setattr(relocs.sys, "byteorder", "big" if sys.byteorder == "little" else "little")
        by_entry = Relocator(elf, ranges)._relocs
    assert by_columns and by_columns == by_entry
    assert all(type(r) is relocs._Reloc for r in by_columns.values())


@pytest.mark.parametrize("text", ["qword ptr [rdi]", "qword ptr [rdi + 8]", "dword ptr [r12 - 0x10]",
                                  "qword ptr [rip + 0x100]", "byte ptr [rax + rdx]"])
@pytest.mark.parametrize("value", [None, 0x4000, values.Within(0x4000), values.Ptr("arg", 0), values.FRAME,
                                   values.ALLOC, "ext_object"])
def test_a_common_operand_resolves_as_the_general_terms_do(text: str, value: object) -> None:
    """``[reg + d]`` and ``[rip + d]`` are resolved without the general terms (x86._X86._address): the same
    address, or the same provenance when the address is not known."""
    plan = x86._x86_plan("mov", f"rax, {text}")
    operand = plan[3][0]
    general = operand[:8] + (None, None)  # neither short cut: the terms and _x86_provenance decide
    arch = x86._X86(lambda _a: None, lambda a: 0x4000 if 0x4000 <= a < 0x4400 else None)
    st = {} if value is None else {"rdi": value, "r12": value, "rax": value}
    assert arch._address(operand, st, 0x1007) == arch._address(general, st, 0x1007)
    assert (operand[8] is not None or operand[9] is not None) == ("rdx" not in text)


BLOCK = [("mov", "rdi, rbx"), ("mov", "qword ptr [rsp + 8], rdi"), ("lea", "rsi, [rip + 0x100]"),
         ("cmp", "rdi, 0x5000"), ("mov", "qword ptr [rsp + 0x10], rsi"), ("mov", "rax, qword ptr [rsp + 8]"),
         ("mov", "qword ptr [rsp + 0x18], 7"), ("mov", "rcx, qword ptr [rsp + 0x20]"), ("mov", "edx, eax"),
         ("mov", "qword ptr [rax + 8], rcx"), ("mov", "rdx, qword ptr [rbp - 8]"), ("movaps", "xmm0, xmm1"),
         ("lea", "r8, [rsp + 0x30]"), ("mov", "qword ptr [rsp + 8], rbx"), ("xor", "esi, esi"), ("cmp", "rdi, rbx")]


@pytest.mark.parametrize("entry", [{}, {"rbx": 0x5000}, {"rbx": values.Ptr("arg", 1), "rbp": values.FRAME}])
def test_a_block_run_in_line_is_the_block_stepped(entry: dict) -> None:
    """run() does register moves, lea [rip + d] and stack spills in line (one call per block): the state and
    the events are those of step() on each instruction."""
    arch = x86._X86(lambda _a: None, lambda _a: None)
    insns = [(0x1000 + 8 * n, 8, m, o) for n, (m, o) in enumerate(BLOCK)]
    plans = arch.plans(insns)
    in_line, one_by_one = dict(entry), dict(entry)
    out_in_line: list = []
    out_one_by_one: list = []
    arch.run(insns, plans, 0, len(insns), in_line, out_in_line, 0x1000, 0x2000)
    for insn, plan in zip(insns, plans):
        arch.step(insn, plan, one_by_one, out_one_by_one, 0x1000, 0x2000)
    assert in_line == one_by_one
    assert out_in_line == out_one_by_one
    assert in_line.get("m:rsp+8") == entry.get("rbx") and in_line.get("m:rsp+24") == 7


def test_a_loop_pass_resumed_at_its_first_changed_head_is_the_whole_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A later fixpoint pass over a function without jump tables goes on from where the pass before stood at
    the first loop head whose state changed (disasm._Mark): its events, the states its loop heads started
    from and what their back edges brought, and the instructions it counts as walked are those of the whole
    walk of the blocks, on the SIOF fixture builds' initializers (x86-64 and AArch64, -O0 and -O2)."""
    from elfpatch.inits.analysis import analyze_path
    from elfpatch.inits.order import list_initializers

    whole_walk = disasm.Disassembler._walk_blocks
    resumed = []

    def own(self, dec, *args) -> tuple:
        """A walk of the blocks, and the instructions of ``dec`` it walked (not those of the getters it sweeps
        on the way, which the walk before may have swept already)."""
        run, count = self.arch.run, []
        monkeypatch.setattr(self.arch, "run", lambda insns, plans, first, last, *rest: (
            count.append(last - first + 1) if insns is dec.insns else None, run(insns, plans, first, last, *rest)))
        try:
            return whole_walk(self, dec, *args), sum(count)
        finally:
            monkeypatch.setattr(self.arch, "run", run)

    def both(self, dec, start, end, entry, heads, preset, late, resume=None, marks=None):
        if resume is None:
            return whole_walk(self, dec, start, end, entry, heads, preset, late, resume, marks)
        want, counted = own(self, dec, start, end, entry, heads, preset, late)
        got, walked = own(self, dec, start, end, entry, heads, preset, late, resume, marks)
        assert resume.walked + walked == counted  # the budget counts the blocks gone on from as walked again
        assert got[0] == want[0]
        for a, b in zip(got[1:3], want[1:3]):
            assert {k: list(v.values.items()) for k, v in a.items()} == \
                {k: list(v.values.items()) for k, v in b.items()}
        resumed.append(resume.p)
        return got

    monkeypatch.setattr(disasm.Disassembler, "_walk_blocks", both)
    builds = Path(__file__).resolve().parents[2] / "native_tests" / "siof" / "build"
    paths = [p for d in ("siof/O0", "siof/O2", "siof/a64-O0", "siof/a64-O2", "gcc-O2") for p in (builds / d).glob("*")]
    for path in sorted(paths):
        if path.is_file() and path.read_bytes()[:4] == b"\x7fELF":
            try:
                listing = list_initializers(str(path))
                analyze_path(str(path), listing)
            except Exception as exc:  # a fixture built to be refused: its error is another test's
                if type(exc).__module__ != "elfpatch.errors":
                    raise
    assert any(p > 0 for p in resumed)  # some pass went on from a loop head past the first block


def test_the_got_read_as_one_range_is_the_got_read_section_by_section() -> None:
    """The GOT's relocations are read for .got and .got.plt joined into one range where they touch (one
    filter at C speed): the same relocations as for the two sections apart, on the SIOF fixture builds."""
    from elfpatch.inits.image import Image, _GotRelocator, _joined

    joined = 0
    builds = Path(__file__).resolve().parents[2] / "native_tests"
    for path in sorted(builds.glob("siof/build/**/*")):
        if not path.is_file() or path.read_bytes()[:4] != b"\x7fELF":
            continue
        elf = ElfFile(path.read_bytes(), str(path))
        got = Image(elf).got_ranges
        if not got:
            continue
        one = _joined(got)
        joined += len(one) < len(got)
        assert _GotRelocator(elf, one)._relocs == _GotRelocator(elf, got)._relocs, path
    assert joined  # .got.plt follows .got in some build
    assert _joined([(8, 12), (0, 4), (4, 6)]) == [(0, 6), (8, 12)]
