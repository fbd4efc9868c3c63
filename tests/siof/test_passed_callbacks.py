"""A constructor that calls the function its caller passed it (PyTorch's ``TorchLibraryInit(kind, fn, ns)``
runs ``fn(lib_)``: 118 of Debian libtorch_cpu's registrations sit behind such a call): the callee's walk sees
an indirect call through an argument register, which its caller, knowing the function it passed, follows as
called there. What each callback registers is listed, against what the LD_PRELOAD shim logs at dlopen; what
it reads before construction is a finding or an incomplete entry."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

from siof.truth import SIOF

LIB = ('#include <string>\nstruct Library { std::string ns; explicit Library(const char* n) : ns(n) {} };\n'
       "void hand(void (*fn)(Library&), Library& l);\n"
       "struct LibraryInit {\n  Library lib_;\n"
       "  __attribute__((noinline)) LibraryInit(void (*fn)(Library&), const char* ns, bool on) : lib_(ns) {\n"
       "    if (on) hand(fn, lib_); else fn(lib_);\n  }\n};\n"
       "__attribute__((noinline)) void hand(void (*fn)(Library&), Library& l) { fn(l); }\n"
       'static void init_a(Library& l) { static std::string reg_a = l.ns + "a"; }\n'
       'static void init_b(Library& l) { static std::string reg_b = l.ns + "b"; }\n'
       'static LibraryInit ia(&init_a, "aten", false);\nstatic LibraryInit ib(&init_b, "prim", true);\n')


def _shim(lib: Path) -> list[str]:
    """The registrations the library makes while dlopen'ed (kind, dtor, object), as the shim logs them."""
    d = SIOF / "gcc-O2"
    log = lib.parent / "shim.log"
    env = dict(os.environ, LD_PRELOAD=str(d / "shim.so"), SHIM_LOG=str(log), SHIM_TARGET=lib.name)
    subprocess.run([str(d / "dlopen_driver"), str(lib)], env=env, check=True, capture_output=True, timeout=60)
    return log.read_text().splitlines()


@pytest.mark.parametrize("cxx", ["g++", "clang++"])
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_what_a_passed_callback_registers_is_listed(tmp_path: Path, siof_build: Path, cxx: str, opt: str) -> None:
    require_tool(cxx, packages="g++, clang")
    (tmp_path / "lib.cpp").write_text(LIB)
    lib = tmp_path / "libtl.so"
    subprocess.run([cxx, opt, "-fPIC", "-shared", "-o", str(lib), str(tmp_path / "lib.cpp")], check=True,
                   capture_output=True)
    logged = _shim(lib)
    f = json.loads(run_main("inits", "--dtors", "--json", str(lib), check=True).stdout)["files"][0]
    listed = f["exit_time_destructors"]
    objects = sorted((r["object"] or {}).get("symbol") or "" for r in listed)
    assert len(listed) == len(logged) == 4, (logged, objects)
    assert any("5reg_a" in o for o in objects) and any("5reg_b" in o for o in objects), objects
    assert not any("indirect call" in n for n in f["analysis_notes"]), f["analysis_notes"]


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_a_passed_callback_reading_an_object_built_later_is_a_finding(tmp_path: Path, opt: str) -> None:
    """The callback reads g_obj, which a later unit builds: the run prints 0; the reader was an indirect call
    (incomplete); followed, the read is a finding."""
    require_tool("g++", packages="g++")
    (tmp_path / "obj.hpp").write_text('#include <stdio.h>\nextern "C" volatile int k_seven;\n'
                                      "struct Obj { int built; Obj() : built(k_seven) {} };\nextern Obj g_obj;\n")
    (tmp_path / "user.cpp").write_text(
        '#include "obj.hpp"\nstruct Init { __attribute__((noinline)) Init(void (*fn)()) { fn(); } };\n'
        'static void look() { printf("g_obj %d\\n", g_obj.built); }\nstatic Init i(&look);\nint main() {}\n')
    (tmp_path / "later.cpp").write_text('#include "obj.hpp"\nvolatile int k_seven = 7;\nObj g_obj;\n')
    exe = tmp_path / "prog"
    subprocess.run(["g++", opt, "-o", str(exe), str(tmp_path / "user.cpp"), str(tmp_path / "later.cpp")],
                   check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "g_obj 0\n"
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    assert [(x["reader"]["source"], x["object"]["symbol"], x["verdict"]) for x in f["findings"]] \
        == [("user.cpp", "g_obj", "before-construction")]
