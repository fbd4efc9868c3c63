"""`inits --siof` never calls a read clean that the program itself saw happen before construction.

The probe fixtures (native_tests/siof/probe*.cpp, one per class of read the analysis used to miss: a one-operand
``mul`` of another unit's global, a reference global, a constant pointer table and a getter returning a
reference, a constructor function and a reader defined before its object in one file, a template static member
only another unit instantiates, a library reading the program's global, a read behind mutual recursion whose
summary was made while the other function was on the walk's stack, an object whose only builder is a plain
function storing through the address it is passed, objects reached through writable pointer globals -- a
pointer, a function pointer, a vptr -- holding their address from the load on, a reader defined before an object
whose constructor is inlined into plain stores, and one whose inlined constructor fills it whole) report what
each initializer observed:
0 is a read before construction. Each such read must be a finding on that object by that reader, or lie in an
entry of the reader's unit marked incomplete: never a clean, complete result."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case, run_main

PROGRAMS = ["probe_mul", "probe_ref", "probe_unit", "probe_tmpl", "probe_ext", "probe_rec", "probe_init", "probe_ptr",
            "probe_move", "probe_clone", "probe_inl", "probe_fill"]
VARIANTS = {"gcc-O0": "g++", "gcc-O2": "g++", "gcc-O2-cet": "g++", "clang-O0": "clang++", "clang-O2": "clang++"}
# The reader's file, when it is not the program: the library's initializer reads the program's global.
READER_FILE = {"probe_ext": "libprobe_ext.so"}
# Objects whose early read the analysis must name (a finding), not only say it could not prove: resolved from
# the instruction (mul), the relocations (reference, pointer table; a writable pointer global's, function
# pointer's and vptr's load-time value), a getter's result, the unit's own order, and the guard the
# instantiating unit runs.
MUST_FIND = {"probe_mul": {"g_mul"}, "probe_ref": {"g_refd", "g_t1", "g_getb"}, "probe_unit": {"g_same", "g_attr"},
             "probe_tmpl": {"_ZN6HolderIiE1bE"}, "probe_init": {"g_inited"}, "probe_ptr": {"g_ptrd", "g_fnd", "g_vird"},
             "probe_clone": {"_ZN12_GLOBAL__N_16g_soloE", "_ZN12_GLOBAL__N_18g_pair_bE"},
             "probe_fill": {"g_fill"}}


def observed_early(exe: Path) -> list[tuple[str, str]]:
    """(reader unit, object) for every read the program's initializers saw before construction (value 0)."""
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True,
                         cwd=exe.parent).stdout
    return [(unit, obj) for unit, obj, value in (line.split() for line in out.splitlines()) if value == "0"]


def false_cleans(analysis: dict, early: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The early reads that are neither a finding by that unit on that object nor in an incomplete entry of
    that unit."""
    found = {(x["reader"]["source"], x["object"]["symbol"]) for x in analysis["findings"]}
    incomplete = {e["source"] for e in analysis["init"] if e.get("analysis") and not e["analysis"]["complete"]}
    return [(unit, obj) for unit, obj in early if (unit, obj) not in found and unit not in incomplete]


@pytest.fixture(scope="module")
def probe_build(siof_build: Path) -> Path:
    return siof_build.parent / "build" / "probe"


@pytest.mark.parametrize("variant", [case(v, needs=[VARIANTS[v]]) for v in sorted(VARIANTS)])
@pytest.mark.parametrize("program", PROGRAMS)
def test_no_false_clean(probe_build: Path, program: str, variant: str) -> None:
    require_tool(VARIANTS[variant], packages="g++, clang")
    d = probe_build / variant
    early = observed_early(d / program)
    assert early, "the fixture reads before construction: the run says so"
    target = d / READER_FILE.get(program, program)
    doc = json.loads(run_main("inits", "--siof", "--json", str(target), check=True).stdout)
    f = doc["files"][0]
    assert false_cleans(f, early) == []
    found = {x["object"]["symbol"] for x in f["findings"] if x["verdict"] == "before-construction"}
    assert MUST_FIND.get(program, set()) <= found


@pytest.mark.parametrize("variant", [case(v, needs=[VARIANTS[v]]) for v in sorted(VARIANTS)])
def test_a_reader_that_builds_through_a_call_reads_its_own(probe_build: Path, variant: str) -> None:
    """probe_share: each unit calls init_plain(&g_share) before reading it (a build-on-first-use helper that
    stores through the address): never read early, and never a finding -- a callee's store through the
    address makes the reader's read `own`, as a direct store does, unless some initializer builds the object
    for sure (a registrar's insert into a map another unit constructs stays a finding)."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    exe = probe_build / variant / "probe_share"
    assert observed_early(exe) == []
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    assert f["findings"] == []
    statuses = {r["status"] for e in f["init"] for r in ((e.get("analysis") or {}).get("reads") or ())}
    assert statuses == {"own"}


@pytest.mark.parametrize("variant", [case(v, needs=[VARIANTS[v]]) for v in sorted(VARIANTS)])
def test_deps_orders_reads_of_what_earlier_objects_define(probe_build: Path, variant: str) -> None:
    """probe_dep: the program's initializer reads the library's global (through the GOT, or a copy
    relocation), and the library's initializers run first: with --deps the read is ordered by the load (the
    file is complete, no finding). probe_ext's library reads the program's global: the program is not in the
    library's load, so --deps leaves that read unproven (incomplete, never clean)."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    d = probe_build / variant
    assert observed_early(d / "probe_dep") == []

    def analysis(*args: str) -> dict:
        return json.loads(run_main("inits", "--siof", "--json", *args, check=True).stdout)["files"][0]

    plain, deps = analysis(str(d / "probe_dep")), analysis("--deps", str(d / "probe_dep"))
    assert deps["findings"] == [] and deps["analysis_complete"]
    assert plain["findings"] == []
    if not plain["analysis_complete"]:  # read through the GOT: another module's object, unproven alone
        assert any("another module's g_lib_box" in n for n in plain["analysis_notes"])
    lib = analysis("--deps", str(d / "libprobe_ext.so"))
    assert not lib["analysis_complete"]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_pointer_global_an_initializer_moves_is_not_followed(probe_build: Path, variant: str) -> None:
    """probe_move: an earlier unit's initializer stores &g_moved_b into g_pmove, which the loader set to
    &g_moved_a: the reader's load of g_pmove proves nothing about where it points, so its access is unproven
    (the entry incomplete) and nothing is found on g_moved_a (it reads g_moved_b). probe_ptr's pointers, which
    nothing stores into, are followed to a complete result."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    d = probe_build / variant

    def analysis(name: str) -> dict:
        return json.loads(run_main("inits", "--siof", "--json", str(d / name), check=True).stdout)["files"][0]

    moved = analysis("probe_move")
    assert "g_moved_a" not in {x["object"]["symbol"] for x in moved["findings"]}
    user = next(e for e in moved["init"] if e["source"] == "probe_move_user.cpp")
    assert not user["analysis"]["complete"]
    assert analysis("probe_ptr")["analysis_complete"]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_constructor_clones_build_their_objects(probe_build: Path, variant: str) -> None:
    """probe_clone: GCC -O2 builds g_solo through `Solo::Solo(int) [clone .constprop.0]`, whose `this` IPA-CP
    propagated (the initializer passes nothing), and g_pair_a, g_pair_b through Pair's clone, the initializer
    keeping `this` in rdi across the Solo clone's call (-fipa-ra: the clone never writes it). The unit's
    initializer constructs exactly those three -- credited by what each clone stores into, not by an argument
    position the clone no longer has -- and every access is proven."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    exe = probe_build / variant / "probe_clone"
    if variant.startswith("gcc-O2"):  # the fixture does what it is for: the clones are there
        names = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout
        assert "SoloC2Ei.constprop." in names and "PairC2Ei.constprop." in names
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    entry = next(e for e in f["init"] if e["source"] == "probe_clone_def.cpp")
    built = {o["symbol"] for o in entry["analysis"]["constructs"]}
    assert built == {"_ZN12_GLOBAL__N_16g_soloE", "_ZN12_GLOBAL__N_18g_pair_aE", "_ZN12_GLOBAL__N_18g_pair_bE"}
    assert f["analysis_complete"], f["analysis_notes"]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_thread_locals_initialization_reads_in_the_first_initializer_only(probe_build: Path, variant: str) -> None:
    """probe_tls: t_reader's initialization reads g_tlsd (built last) and runs once per thread, in the first
    initializer that touches t_reader (probe_tls_a.cpp): the run reports that one read, before construction.
    probe_tls_b.cpp reaches the same initialization later, when it no longer runs: a finding there is false."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    exe = probe_build / variant / "probe_tls"
    assert observed_early(exe) == [("probe_tls_var.cpp", "g_tlsd")]
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    readers = {x["reader"]["source"] for x in f["findings"] if x["object"]["symbol"] == "g_tlsd"}
    assert readers == {"probe_tls_a.cpp"}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_thread_local_initialization_inlined_into_its_unit_runs_there_once(probe_build: Path,
                                                                            variant: str) -> None:
    """probe_tlsin: t_inl's initialization reads g_tlsin (built last); its own unit's initializer runs first and
    (GCC, clang -O2) has the unit's __tls_init inlined, setting its TLS guard in its own code; probe_tlsin_b.cpp
    later reaches the out-of-line __tls_init, which sees the guard set and reads nothing: the run reports one
    early read, by t_inl's unit, and a finding for probe_tlsin_b.cpp would be false (one function that sets
    the guard another sets runs the same initialization)."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    exe = probe_build / variant / "probe_tlsin"
    assert observed_early(exe) == [("probe_tlsin_var.cpp", "g_tlsin")]
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    assert false_cleans(f, [("probe_tlsin_var.cpp", "g_tlsin")]) == []
    readers = {x["reader"]["source"] for x in f["findings"] if x["object"]["symbol"] == "g_tlsin"}
    assert readers == {"probe_tlsin_var.cpp"}


@pytest.mark.parametrize("variant", [case(v, needs=[VARIANTS[v]]) for v in sorted(VARIANTS)])
def test_a_flag_checked_before_a_build_and_a_counter_are_no_findings(probe_build: Path, variant: str) -> None:
    """probe_fill: the unit's initializer loads g_once (a flag checked before its build) and g_count (a counter
    incremented) before it stores into them, as it loads g_fill before its inlined constructor fills it. The
    run reads g_fill before construction (a finding, test_no_false_clean); the others are zero by design: no
    finding, and the entry says it could not tell (incomplete)."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    f = json.loads(run_main("inits", "--siof", "--json", str(probe_build / variant / "probe_fill"),
                            check=True).stdout)["files"][0]
    assert {x["object"]["symbol"] for x in f["findings"]} == {"g_fill"}
    notes = [n for n in f["analysis_notes"] if "loads object(s) before it first stores" in n]
    assert len(notes) == 1 and sorted(notes[0].rsplit(": ", 1)[1].split(", ")) == ["g_count", "g_once"]


@pytest.mark.cross
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_the_inlined_constructor_on_aarch64(tmp_path: Path, opt: str) -> None:
    """The same on AArch64, the run under qemu-user the truth: GCC -O2 stores g_fill's two members with one
    ``stp`` (two registers: a build), g_once's and g_count's stay no findings."""
    require_tool("aarch64-linux-gnu-g++", "qemu-aarch64", packages="g++-aarch64-linux-gnu, qemu-user")
    src = Path(__file__).resolve().parents[2] / "native_tests" / "siof"
    (tmp_path / "main.cpp").write_text("int main() { return 0; }\n")
    exe = tmp_path / "probe_fill"
    sources = [str(src / "probe_fill.cpp"), str(src / "probe_box.cpp"), str(tmp_path / "main.cpp")]
    subprocess.run(["aarch64-linux-gnu-g++", opt, "-std=c++20", "-fPIE", "-pie", "-DPROBE_UNIT=\"probe_fill.cpp\"",
                    "-o", str(exe), *sources], check=True, capture_output=True)
    out = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", str(exe)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.split() == ["probe_fill.cpp", "g_fill", "0"]
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    assert [(x["verdict"], x["object"]["symbol"]) for x in f["findings"]] == [("before-construction", "g_fill")]
