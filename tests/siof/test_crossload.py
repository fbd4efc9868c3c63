"""`inits --siof --deps`: a read in one module of another module's object is judged by the whole load.

The fixtures report what each initializer observed (0: before construction), so the run is the truth:
probe_ext's library reads the program's global (the program's initializers run last: always early), and
probe_xget's only through the program's exported getter, loading through the reference it returns;
probe_xab_*'s libB reads libA's global where libA is libB's dependency (initialized first: never early), or is
not and the program names libA first (the load initializes it after libB: early) or later (before: not)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case, run_main

from elfpatch.elf.loadorder import resolve
from elfpatch.inits.crossload import _definer, cross_reads
from siof.test_probe import VARIANTS, observed_early

# program -> (reader library, object, defining file) of the read the run sees early, or None (not early)
CASES = {"probe_ext": ("libprobe_ext.so", "g_prog_box", "probe_ext"),
         "probe_xget": ("libprobe_xget.so", "g_get_box", "probe_xget"),
         "probe_xab_first": ("libprobe_xb.so", "g_liba_box", "libprobe_xa.so"),
         "probe_xab_dep": None, "probe_xab_later": None}


@pytest.fixture(scope="module")
def probe_build(siof_build: Path) -> Path:
    return siof_build.parent / "build" / "probe"


def _load_doc(*args: str) -> dict:
    return json.loads(run_main("inits", "--siof", "--json", *args, check=True).stdout)


@pytest.mark.parametrize("variant", [case(v, needs=[VARIANTS[v]]) for v in sorted(VARIANTS)])
@pytest.mark.parametrize("program", sorted(CASES))
def test_deps_finds_what_the_load_reads_early(probe_build: Path, program: str, variant: str) -> None:
    """Guarantee: with --deps on the program, each read the run saw before construction in one module of
    another's object is a `before-construction` finding of the load naming the reader's file and the object's
    file, and a read the load orders (the definer initialized first) is no finding."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    exe = probe_build / variant / program
    expected = CASES[program]
    early = observed_early(exe)
    assert [obj for _unit, obj in early] == ([expected[1]] if expected else [])  # the run agrees with CASES
    load = _load_doc("--deps", str(exe))["loads"][0]
    got = [(Path(f["reader"]["file"]).name, f["object"]["symbol"], Path(f["object"]["file"]).name, f["verdict"])
           for f in load["findings"]]
    assert got == ([(*expected, "before-construction")] if expected else [])
    # Every module links probe_box.cpp, so each library's own call of the exported Box::Box() binds to the first
    # definition in the search order (interposed): judged in that module, whose walk through `this` is not proven
    # complete -- a note on that name alone.
    assert [n for n in load["analysis_notes"] if "calls _ZN3BoxC1Ev of " not in n] == []
    for f in load["findings"]:  # the constructor named is the definer's; a getter is the read's route
        assert f["constructor"]["file"] == f["object"]["file"]
        assert f["via"] == (["_Z7get_boxv"] if program == "probe_xget" else [])


@pytest.mark.parametrize("variant", [case(v, needs=[VARIANTS[v]]) for v in sorted(VARIANTS)])
def test_without_deps_a_cross_module_read_is_never_clean(probe_build: Path, variant: str) -> None:
    """Guarantee: analysed alone (no --deps), the reading library says incomplete, naming the other module's
    object; with --deps on the library whose dependency defines it, the read is ordered and proven."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    d = probe_build / variant
    for lib in ("libprobe_xb.so", "libprobe_xbd.so", "libprobe_ext.so", "libprobe_xget.so"):
        f = _load_doc(str(d / lib))["files"][0]
        assert not f["analysis_complete"] and f["findings"] == []
        assert any("another module's" in n for n in f["analysis_notes"])
    ordered = _load_doc("--deps", str(d / "libprobe_xbd.so"))["files"][0]
    assert not any("another module's" in n for n in ordered["analysis_notes"])  # libxa's read ordered
    # what keeps it incomplete: its own call of the exported Box::Box(), which what loads it first may interpose
    assert all("may interpose" in n for n in ordered["analysis_notes"]) and ordered["findings"] == []
    assert not _load_doc("--deps", str(d / "libprobe_xb.so"))["files"][0]["analysis_complete"]


@pytest.mark.parametrize("variant", [case(v, needs=[VARIANTS[v]]) for v in sorted(VARIANTS)])
def test_a_copy_is_bound_to_the_library_that_builds_it(probe_build: Path, variant: str) -> None:
    """Guarantee: a program's copy relocation of a library's object is passed over by the lookup: the object
    is the library's (its initializers build the copy), so a read of it is ordered by the library's place."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    load = resolve(str(probe_build / variant / "probe_dep"))
    symbols, wanted = cross_reads(load)
    program, lib = symbols[0], symbols[1]
    assert program is not None and lib is not None and "g_lib_box" in lib.defined
    if "g_lib_box" in program.copies:  # GCC's PIE code reads extern data through a copy; clang's through the GOT
        assert "g_lib_box" in program.defined
    assert _definer("g_lib_box", symbols) == 1
    # nothing in this load reads an object of a module initialized later: the copy is the library's
    assert all("g_lib_box" not in names for names in wanted.values())


@pytest.mark.parametrize("variant", [case(v, needs=[VARIANTS[v]]) for v in sorted(VARIANTS)])
def test_fail_on_and_text_carry_the_loads_findings(probe_build: Path, variant: str) -> None:
    """Guarantee: `--fail-on before-construction` exits 1 on a load's cross-module finding (the PATH whose load
    it is fails) and 0 where the load orders the read; the text names reader and object with their files."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    d = probe_build / variant
    early = run_main("inits", "--siof", "--deps", "--fail-on", "before-construction", str(d / "probe_xab_first"))
    assert early.returncode == 1
    assert "across the load's modules: 1 finding(s)" in early.stdout
    assert "g_liba_box of " in early.stdout and "libprobe_xb.so, which runs first" in early.stdout
    ordered = run_main("inits", "--siof", "--deps", "--fail-on", "before-construction", str(d / "probe_xab_dep"))
    assert ordered.returncode == 0 and "across the load's modules: 0 finding(s)" in ordered.stdout
    doc = json.loads(run_main("inits", "--siof", "--json", "--deps", "--fail-on", "before-construction",
                              str(d / "probe_xab_first")).stdout)
    assert doc["summary"]["failing"] == [str(d / "probe_xab_first")]


def _entry(index: int, constructs: list[str], reads: list[str]) -> dict:
    return {"index": index, "symbol": f"init{index}", "source": f"u{index}.cpp",
            "analysis": {"constructs": [{"address": None, "symbol": n} for n in constructs],
                         "other_module_reads": reads}}


@pytest.mark.parametrize(("built", "complete", "expected"), [
    (["g"], True, "finding"),    # the later object's initializer builds it: read before construction
    ([], True, "nothing"),       # nothing builds it and the definer is proven: constant data
    ([], False, "note"),         # nothing seen building it, but the definer's analysis is incomplete
])
def test_a_read_of_a_later_object_is_judged_by_its_constructor(built: list[str], complete: bool,
                                                               expected: str) -> None:
    """Guarantee: a read of an object the load initializes later is a finding when the definer constructs it,
    nothing when the definer is proven and constructs nothing, and a note (never silence) when the definer's
    analysis could not say."""
    from types import SimpleNamespace

    from elfpatch.inits.crossload import Symbols, judge

    def symbols(defined: dict[str, int], imported: set[str]) -> Symbols:
        s = Symbols.__new__(Symbols)
        s.defined, s.imported, s.copies = defined, imported, set()
        return s

    load = SimpleNamespace(objects=[SimpleNamespace(info=SimpleNamespace(path=p)) for p in ("prog", "lib.so")],
                           init_order=[1, 0])
    listings = {0: {"init": [_entry(1, built, [])], "analysis_complete": complete},
                1: {"init": [_entry(1, [], ["g"])], "analysis_complete": True}}
    findings, notes = judge(load, [symbols({"g": 0x4000}, set()), symbols({}, {"g"})], {1: {"g"}},
                            listings.get)
    assert (bool(findings), bool(notes)) == {"finding": (True, False), "nothing": (False, False),
                                             "note": (False, True)}[expected]
    if findings:
        assert findings[0]["reader"]["file"] == "lib.so" and findings[0]["object"]["file"] == "prog"
