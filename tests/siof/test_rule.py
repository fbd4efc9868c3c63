"""The SIOF rule by its name (elfpatch.inits.siof): each status a read gets from its place in the run order,
its object's constructor and the priorities, on hand-made summaries (no binary, no disassembler)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, require_tool
from helpers import run_main

from elfpatch.inits.siof import VERDICTS, constructors, order_verdict, read_status
from elfpatch.inits.walk import Summary

OBJ = 0x4000


def summary(**fields: object) -> Summary:
    empty = {"registrations": [], "constructs": {}, "reads": {}, "indirect": 0, "depth_limited": 0,
             "unresolved": 0, "unproven": 0, "unproven_at": (), "arg_derefs": {}, "early": {}, "touched": {},
             "guards": frozenset(), "cut": frozenset(), "strange": 0, "call_stores": frozenset(),
             "foreign": frozenset(), "foreign_unproven": 0}
    return Summary(**{**empty, **fields})


def entries(*priorities: int | None) -> list[dict]:
    return [{"address": 0x1000 + 0x10 * i, "priority": p} for i, p in enumerate(priorities)]


def test_a_read_before_its_constructor_runs_is_before_construction() -> None:
    assert order_verdict(0, 1, entries(None, None)) == "before-construction"
    assert read_status(OBJ, "g", 0, summary(), {OBJ: 1}, {}, entries(None, None), set()) == (1, "before-construction")


def test_a_read_after_its_constructor_is_ordered_by_link_order_or_by_priority() -> None:
    assert order_verdict(1, 0, entries(None, None)) == "order-dependent"  # same (default) priority
    assert order_verdict(1, 0, entries(101, 65535)) == "priority-ordered"
    assert order_verdict(1, 0, entries(101, 101)) == "order-dependent"


def test_the_same_function_twice_in_the_table_is_its_own() -> None:
    table = entries(None, None)
    table[1]["address"] = table[0]["address"]
    assert order_verdict(0, 1, table) == "own"


def test_safe_reads_get_no_verdict() -> None:
    table = entries(None, None)
    assert read_status(OBJ, "_ZZ1fvE1x", 0, summary(), {OBJ: 1}, {}, table, set())[1] == "function-local-static"
    assert read_status(OBJ, "g", 1, summary(), {}, {}, table, set()) == (None, "constant")
    assert read_status(OBJ, "g", 0, summary(constructs={OBJ: True}), {OBJ: 1}, {}, table, set())[1] == "own"
    for status in ("function-local-static", "constant", "own", "guarded", "priority-ordered"):
        assert status not in VERDICTS


def test_an_inline_variable_is_safe_once_its_guard_ran_before_the_read() -> None:
    table = entries(None, None)
    guard = "_ZGVN1a1vE"  # the guard variable of _ZN1a1vE
    assert read_status(OBJ, "_ZN1a1vE", 1, summary(), {}, {guard: 0}, table, set()) == (0, "guarded")
    assert read_status(OBJ, "_ZN1a1vE", 0, summary(), {}, {guard: 1}, table, set()) == (1, "before-construction")


def test_read_then_built_by_the_same_initializer_is_before_construction() -> None:
    s = summary(constructs={OBJ: True}, early={OBJ: ()})
    assert read_status(OBJ, "g", 0, s, {OBJ: 0}, {}, entries(None), {OBJ}) == (0, "before-construction")


def test_the_constructor_is_the_first_strong_builder_else_the_first_store() -> None:
    stores, builds = summary(constructs={OBJ: False}), summary(constructs={OBJ: True})
    assert constructors([stores, builds]) == {OBJ: 1}
    assert constructors([stores, None, summary(constructs={OBJ: False})]) == {OBJ: 0}
    assert constructors([summary(), summary(call_stores=frozenset({OBJ}))]) == {OBJ: 1}


def test_a_store_into_a_member_does_not_build_what_another_initializer_constructs() -> None:
    """``g_obj.extra = 3`` and then a read of g_obj.built, in a unit before the one whose constructor call
    builds g_obj: the plain store is no construction (it read as "own": a false clean)."""
    s = summary(constructs={OBJ: False}, touched={OBJ: (False, ())})
    table = entries(None, None)
    assert read_status(OBJ, "g", 0, s, {OBJ: 1}, {}, table, {OBJ}, frozenset({OBJ})) == (1, "before-construction")
    after = read_status(OBJ, "g", 1, s, {OBJ: 0}, {}, table, {OBJ}, frozenset({OBJ}))
    assert after == (0, "order-dependent")
    # no initializer builds it for sure: the first store is its constructor, and the storing reader its own
    assert read_status(OBJ, "g", 0, s, {OBJ: 0}, {}, table, set()) == (0, "own")


@pytest.mark.parametrize("opt", ["-O0", "-O1", "-O2"])
def test_a_program_storing_one_member_before_the_constructor_reads_it_unbuilt(tmp_path: Path, opt: str) -> None:
    require_tool("g++", packages="g++")
    (tmp_path / "obj.hpp").write_text(
        '#include <stdio.h>\nextern "C" volatile int k_seven;\n'
        "struct Obj { int built; int extra; Obj() : built(k_seven), extra(0) {} };\nextern Obj g_obj;\n")
    (tmp_path / "user.cpp").write_text(
        '#include "obj.hpp"\nstatic int seen = [] { g_obj.extra = 3; printf("g_obj %d\\n", g_obj.built); '
        "return 0; }();\nint main() {}\n")
    (tmp_path / "later.cpp").write_text('#include "obj.hpp"\nvolatile int k_seven = 7;\nObj g_obj;\n')
    exe = tmp_path / "prog"
    subprocess.run(["g++", opt, "-o", str(exe), str(tmp_path / "user.cpp"), str(tmp_path / "later.cpp")],
                   check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "g_obj 0\n"
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    user = next(e for e in f["init"] if e["source"] == "user.cpp")
    found = {x["object"]["symbol"] for x in f["findings"] if x["reader"]["source"] == "user.cpp"}
    assert "g_obj" in found or not user["analysis"]["complete"]
    assert found or not f["analysis_complete"]


def test_a_preinit_array_entry_runs_before_every_init_array_entry() -> None:
    table = [{"address": 0x1000, "priority": None, "kind": "preinit_array"},
             {"address": 0x1010, "priority": None, "kind": "init_array"}]
    assert order_verdict(1, 0, table) == "priority-ordered"  # the loader's order, not the link's
    assert order_verdict(0, 1, table) == "before-construction"


@pytest.mark.parametrize("cxx", ["g++", "clang++"])
def test_a_program_reading_what_its_preinit_array_built_reads_it_built(tmp_path: Path, cxx: str) -> None:
    require_tool(cxx, packages="g++ clang")
    (tmp_path / "user.cpp").write_text(
        '#include <stdio.h>\nstruct S { int v; S(); };\nextern char g_store[];\n'
        'static int seen = printf("g_store %d\\n", reinterpret_cast<S*>(g_store)->v);\nint main() {}\n')
    (tmp_path / "pre.cpp").write_text(
        '#include <new>\nextern "C" volatile int k_seven;\nvolatile int k_seven = 7;\n'
        "struct S { int v; S(); };\nS::S() : v(k_seven) {}\nalignas(S) char g_store[sizeof(S)];\n"
        "static void build(int, char**, char**) { new (g_store) S(); }\n"
        '__attribute__((section(".preinit_array"), used)) static void (*pre)(int, char**, char**) = build;\n')
    exe = tmp_path / "prog"
    subprocess.run([cxx, "-O2", "-o", str(exe), str(tmp_path / "user.cpp"), str(tmp_path / "pre.cpp")],
                   check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "g_store 7\n"
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    user = next(e for e in f["init"] if e["source"] == "user.cpp")
    assert f["findings"] == []
    assert [r["status"] for r in user["analysis"]["reads"] if r["object"]["symbol"] == "g_store"] \
        == ["priority-ordered"]


def test_the_rule_imports_no_disassembler() -> None:
    code = "import sys, elfpatch.inits.siof\nprint(sorted(m for m in sys.modules if m.startswith('capstone')))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_guard_variable_names_what_gcc_names(tmp_path: Path) -> None:
    """The guard name the analysis looks for (one formula, elf.symbols.guard_variable) is the one g++ emits:
    for an inline variable at namespace scope (its symbol is not mangled: ``x``) and in a namespace, a template
    static member and a function-local static."""
    from elfpatch.elf.symbols import guard_variable

    src = tmp_path / "g.cpp"
    src.write_text("int f();\ninline int x = f();\nnamespace n { inline int y = f(); }\n"
                   "template <class T> struct S { static int v; };\ntemplate <class T> int S<T>::v = f();\n"
                   "int use() { static int local = f(); return x + n::y + S<int>::v + local; }\n")
    obj = tmp_path / "g.o"
    subprocess.run(["g++", "-std=c++17", "-c", str(src), "-o", str(obj)], check=True)
    names = set(subprocess.run(["nm", "-P", str(obj)], capture_output=True, text=True,
                               check=True).stdout.split())
    objects = ["x", "_ZN1n1yE", "_ZN1SIiE1vE", "_ZZ3usevE5local"]
    guards = {n for n in names if n.startswith("_ZGV")}
    assert {guard_variable(o) for o in objects} == guards, guards
