"""Stripped files (no .symtab): function extents come from .eh_frame FDEs (elfpatch/inits/extents.py), so
decoding stops at each function's end and every registration the library makes at run time (the LD_PRELOAD
shim's log) is listed once; objects without a symbol are reported by address and section."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case, run_main

from elfpatch.elf.const import STT_FUNC
from elfpatch.elf.file import ElfFile
from elfpatch.inits.extents import eh_frame_extents

# Translation units with nothing exported: their initializers sit side by side in .text.startup with no
# dynamic symbol between them (what a stripped Debian library looks like).
_UNIT = """
#include <string>
extern "C" void api_a();
extern "C" int units_version();
namespace {{
struct Noisy {{ int v; Noisy() : v({n}) {{}} ~Noisy() {{ v = 0; }} }};
std::string name_{n}(40 + {n}, 'a');
Noisy noisy_{n};
std::string other_{n}(50, 'b');
struct Caller {{ int seen; Caller() : seen({n} ? units_version() : 0) {{ if (!{n}) api_a(); }} }} caller_{n};
}}
"""
# The exports: called through the PLT (-fPIC keeps them interposable), api_a skimmed, api_b found only through
# api_a's call to its PLT stub, g_state an exported global that an initializer stores into and others read.
_API = """
extern "C" {
int g_state[4];
void api_b() { g_state[1] = 7; }
void api_a() { api_b(); }
int units_version() { return g_state[1]; }
}
"""
UNITS = 5


@pytest.fixture(scope="module")
def stripped(siof_build: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(unstripped library, the same stripped of .symtab, the same with no section headers either)."""
    require_tool("g++", "strip", packages="g++, binutils")
    d = tmp_path_factory.mktemp("stripped")
    srcs = []
    for n in range(UNITS):
        src = d / f"unit{n}.cpp"
        src.write_text(_UNIT.format(n=n))
        srcs.append(str(src))
    api = d / "api.cpp"  # exports, as any library has (DT_GNU_HASH then counts the dynamic symbols)
    api.write_text(_API)
    srcs.append(str(api))
    full = d / "libunits.so"
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-o", str(full), *srcs], check=True, capture_output=True)
    lib = d / "libstripped.so"
    subprocess.run(["strip", "--strip-all", "-o", str(lib), str(full)], check=True, capture_output=True)
    bare = d / "libbare.so"
    bare.write_bytes(_without_section_headers(lib.read_bytes()))
    return full, lib, bare


def _without_section_headers(data: bytes) -> bytes:
    """e_shoff, e_shnum and e_shstrndx zeroed (ELF64): only the loader's view is left."""
    out = bytearray(data)
    out[0x28:0x30] = bytes(8)
    out[0x3C:0x40] = bytes(4)
    return bytes(out)


def _without_eh_frame_hdr(data: bytes) -> bytes:
    """PT_GNU_EH_FRAME turned into PT_NULL (ELF64): .eh_frame is then read from its section, record by record."""
    out = bytearray(data)
    phoff, entsize, count = int.from_bytes(out[0x20:0x28], "little"), out[0x36], out[0x38]
    for i in range(count):
        at = phoff + i * entsize
        if int.from_bytes(out[at: at + 4], "little") == 0x6474E550:
            out[at: at + 4] = bytes(4)
    return bytes(out)


def _shim_log(siof_build: Path, lib: Path) -> list[tuple[str, ...]]:
    return sorted(_shim_log_ordered(siof_build, lib))


def _shim_log_ordered(siof_build: Path, lib: Path) -> list[tuple[str, ...]]:
    """(kind, dtor, object) of each registration the library makes while dlopen'ed, in the run's order."""
    build = siof_build / "gcc-O2"
    if not (build / "shim.so").exists():
        pytest.skip("the shim is not built (gcc-O2 fixtures)")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_PRELOAD": str(build / "shim.so"),
               "SHIM_LOG": str(log), "SHIM_TARGET": lib.name}
        subprocess.run([str(build / "dlopen_driver"), str(lib)], env=env, check=True, timeout=120,
                       capture_output=True)
        lines = log.read_text().splitlines() if log.exists() else []
    return [tuple("ext" if x.startswith("ext") else x for x in line.split()) for line in lines]


def _listed(lib: Path) -> tuple[dict, list[tuple[str, ...]]]:
    proc = run_main("inits", "--dtors", "--siof", "--json", str(lib))
    assert proc.returncode in (0, 1), proc.stderr
    f = json.loads(proc.stdout)["files"][0]

    def show(o: dict | None) -> str:
        return "0" if o is None else ("ext" if o["address"] is None else hex(o["address"]))

    return f, sorted((d["kind"], show(d["dtor"]), show(d["object"])) for d in f["exit_time_destructors"])


def test_fde_extents_match_symbol_sizes(stripped: tuple[Path, Path, Path]) -> None:
    """Every sized function symbol of .symtab that starts an FDE ends where the FDE ends."""
    full, _, _ = stripped
    elf = ElfFile(full.read_bytes(), str(full))
    ext = eh_frame_extents(elf)
    spans = dict(ext.spans())
    assert spans and not ext.notes
    symtab = next(t for t in elf.symbol_tables() if t.name == ".symtab")
    checked = 0
    for sym in symtab:
        if sym.type == STT_FUNC and sym.st_size and sym.st_value in spans:
            assert ext.is_start(sym.st_value)
            assert spans[sym.st_value] == ext.end_of(sym.st_value) == sym.st_value + sym.st_size, sym.name
            checked += 1
    assert checked >= UNITS  # at least the units' initializers


def test_extents_without_section_headers(stripped: tuple[Path, Path, Path]) -> None:
    """No section headers: .eh_frame is found through PT_GNU_EH_FRAME (eh_frame_ptr and its search table),
    with the same FDEs as a record-by-record read of the .eh_frame section."""
    _, lib, bare = stripped
    records = eh_frame_extents(ElfFile(_without_eh_frame_hdr(lib.read_bytes()), str(lib)))
    loader_view = eh_frame_extents(ElfFile(bare.read_bytes(), str(bare)))
    assert not loader_view.notes and not records.notes
    assert loader_view.spans() == records.spans() and len(records.spans()) >= UNITS


@pytest.mark.parametrize("view", ["stripped", "no section headers"])
def test_stripped_library_lists_each_registration_once(siof_build: Path, stripped: tuple[Path, Path, Path],
                                                       view: str) -> None:
    """Against the shim: the registrations `--dtors` lists for the stripped library are exactly those a dlopen
    makes, each once (decoding past an initializer's end listed the next ones' again); without section headers
    too (extents through PT_GNU_EH_FRAME, the GOT where PT_DYNAMIC and DT_PLTGOT put it)."""
    lib = stripped[1] if view == "stripped" else stripped[2]
    truth = _shim_log(siof_build, lib)
    assert len(truth) >= 3 * UNITS
    f, ours = _listed(lib)
    assert ours == truth
    objects = [d["object"] for d in f["exit_time_destructors"] if d["object"] and d["object"]["address"]]
    section = ".bss" if view == "stripped" else None  # no section headers: no section to name
    assert objects and all(o["symbol"] is None and o["section"] == section for o in objects)


@pytest.mark.parametrize("table", [True, False], ids=["eh_frame_hdr", "records"])
def test_bad_eh_frame_is_a_note(stripped: tuple[Path, Path, Path], tmp_path: Path, table: bool) -> None:
    """An FDE length past the data: a note (read through the search table or record by record), never an
    exception; the CLI exits normally."""
    _, lib, _ = stripped
    elf = ElfFile(lib.read_bytes(), str(lib))
    sec = elf.section_by_name(".eh_frame")
    data = bytearray(lib.read_bytes() if table else _without_eh_frame_hdr(lib.read_bytes()))
    first = sec.sh_offset + int.from_bytes(data[sec.sh_offset: sec.sh_offset + 4], "little") + 4
    data[first: first + 4] = (0x7FFFFFF0).to_bytes(4, "little")  # the first FDE's length
    ext = eh_frame_extents(ElfFile(bytes(data), "bad"))
    ext.spans()
    assert any(".eh_frame" in n and "FDE" in n or "runs past" in n for n in ext.notes), ext.notes
    bad = tmp_path / "libbad.so"
    bad.write_bytes(bytes(data))
    proc = run_main("inits", "--dtors", "--json", str(bad))
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["files"][0]["exit_time_destructors"]


def test_eh_frame_ptr_outside_the_file_is_a_note(stripped: tuple[Path, Path, Path]) -> None:
    """The loader's view with .eh_frame_hdr's eh_frame_ptr pointing outside every segment: a note, no extents,
    no exception."""
    _, _, bare = stripped
    data = bytearray(bare.read_bytes())
    elf = ElfFile(bytes(data), str(bare))
    hdr = next(p for p in elf.segments if p.p_type == 0x6474E550)
    data[hdr.p_offset + 4: hdr.p_offset + 8] = (0x7FFFFFF0).to_bytes(4, "little")
    ext = eh_frame_extents(ElfFile(bytes(data), "bad"))
    assert ext.notes and not ext.spans()



def test_no_section_headers_same_analysis(stripped: tuple[Path, Path, Path]) -> None:
    """Without section headers the analysis sees what it sees with them (the PLT found from PLT0's FDE, the
    GOT and the writable data from the loader's view): the same registrations, constructions and reads."""
    _, lib, bare = stripped

    def seen(path: Path) -> tuple:
        f, listed = _listed(path)
        entries = [(e["address"], sorted(o["address"] for o in e["analysis"]["constructs"]),
                    sorted(r["object"]["address"] for r in e["analysis"]["reads"]))
                   for e in f["init"] if e.get("analysis") and e["address"] != f["init"][0]["address"]]
        return listed, entries, len(f["findings"])

    with_sections, loader_view = seen(lib), seen(bare)
    assert with_sections == loader_view
    assert any(constructs for _, constructs, _ in with_sections[1])  # g_state, built through two PLT calls


def test_mutated_eh_frame_never_raises(stripped: tuple[Path, Path, Path]) -> None:
    """Random bytes in .eh_frame and .eh_frame_hdr (seeded), with and without section headers: the extents
    parse and answer lookups or carry notes; no exception escapes (bad data is never fatal to the analysis)."""
    import random

    _, lib, _ = stripped
    base = lib.read_bytes()
    elf = ElfFile(base, str(lib))
    secs = [elf.section_by_name(".eh_frame"), elf.section_by_name(".eh_frame_hdr")]
    rng = random.Random(22)
    for n in range(300):
        data = bytearray(base if n % 2 else _without_section_headers(base))
        for _ in range(rng.randint(1, 8)):
            sec = rng.choice(secs)
            data[sec.sh_offset + rng.randrange(sec.sh_size)] = rng.randrange(256)
        ext = eh_frame_extents(ElfFile(bytes(data), "mutated"))
        ext.spans()
        for addr in range(0, 0x3000, 0x40):
            ext.end_of(addr)
            ext.next_start(addr)


def _subsequence(part: list, whole: list) -> bool:
    it = iter(whole)
    return all(any(x == y for y in it) for x in part)


@pytest.mark.parametrize("variant", ["gcc-O0", "gcc-O2", case("clang-O0", needs=["clang++"]),
                                     case("clang-O2", needs=["clang++"])])
def test_stripped_fixture_registrations_in_run_order(siof_build: Path, tmp_path: Path, variant: str) -> None:
    """The dtors fixture library (native_tests/siof), stripped: what `--dtors` lists is a subsequence of what the
    shim logs at dlopen (nothing listed that the run does not make, in the run's order). At -O0 this needs the
    unnamed unit helper to get its arguments (GCC's priority dispatch) and the local `atexit` stub its function."""
    build = siof_build / variant / "libdtors.so"
    if not build.exists():  # the compiler is absent (under CI, a failure)
        require_tool("clang++" if variant.startswith("clang") else "g++", packages="g++, clang")
    require_tool("strip", packages="binutils")
    lib = tmp_path / "libdtors.so"
    subprocess.run(["strip", "--strip-all", "-o", str(lib), str(build)], check=True)
    truth = _shim_log_ordered(siof_build, lib)
    f, _ = _listed(lib)
    ours = [(d["kind"].replace("atexit_c", "atexit"), hex(d["dtor"]["address"]) if d["dtor"]["address"] else "ext",
             "tls" if d["kind"] == "thread_atexit" else
             ("0" if d["object"] is None else hex(d["object"]["address"]) if d["object"]["address"] else "ext"))
            for d in f["exit_time_destructors"]]
    assert ours and _subsequence(ours, truth), (ours, truth)
    assert len(ours) == len(truth)  # the thread_local's too: an unnamed unit helper costs no depth, as a named one
