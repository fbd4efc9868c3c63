"""One `atexit(fn)` site in a helper that two initializers call registers twice at run time: it is listed once
per initializer (it was listed once for the file). A guarded or thread_local registration stays one for the
file; two call instructions are two registrations; one initializer reaching a site again (a helper called
twice, a call in a loop) is listed once and the file says it is incomplete. Each program's exit prints one
line per destructor run: the listing must match it, or the file say incomplete."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

UNITS = {
    "a.cpp": "#include <stdlib.h>\nstatic void bye() {}\n__attribute__((noinline)) void reg() { atexit(bye); }\n"
             "static int a = (reg(), 1);\n",
    "b.cpp": "void reg();\nstatic int b = (reg(), 1);\nint main() {}\n",
}


def test_a_helpers_registration_is_listed_once_per_initializer(tmp_path: Path) -> None:
    require_tool("g++", packages="g++")
    for name, text in UNITS.items():
        (tmp_path / name).write_text(text)
    exe = tmp_path / "prog"
    subprocess.run(["g++", "-O2", "-o", str(exe), *(str(tmp_path / n) for n in UNITS)], check=True,
                   capture_output=True)
    f = json.loads(run_main("inits", "--dtors", "--json", str(exe), check=True).stdout)["files"][0]
    listed = [(r["kind"], r["dtor"]["symbol"], r["initializer"]) for r in f["exit_time_destructors"]]
    by = {e["source"]: e["index"] for e in f["init"] if not e["toolchain"]}
    assert sorted(listed) == sorted([("atexit_c", "_ZL3byev", by["a.cpp"]), ("atexit_c", "_ZL3byev", by["b.cpp"])])


def test_a_thread_locals_registration_is_one_whatever_guard_its_reacher_runs_under() -> None:
    """GCC -O1: two units' initializers call the one _ZTH<var> that registers the thread_local's destructor,
    one of them under an inline variable's guard: listed twice (the run registers it once per thread)."""
    from elfpatch.inits.analysis import _registration_key
    from elfpatch.inits.walk import Registration

    def unguarded(_obj: int) -> bool:
        return False

    plain = Registration("thread_atexit", 0x40120E, None, None, 0x4012B9, 0x4012D0)
    guarded = plain._replace(guard=0x404200)
    assert _registration_key(plain, 2, unguarded) == _registration_key(guarded, 7, unguarded)
    helper = Registration("atexit_c", 0x401170, None, None, 0x401200, 0x401210)
    assert _registration_key(helper, 1, unguarded) != _registration_key(helper, 2, unguarded)  # once per caller
    # two calls in one function are two registrations; one object with no guard variable, one per caller
    assert _registration_key(helper, 1, unguarded) != _registration_key(helper._replace(at=0x401220), 1, unguarded)
    on = Registration("atexit", 0x401300, 0x404010, None, 0x401200, 0x401210)
    assert _registration_key(on, 1, unguarded) != _registration_key(on, 2, unguarded)
    assert _registration_key(on, 1, lambda _o: True) == _registration_key(on, 2, lambda _o: True)
    # a guarded initialization's own helper (__tcf_0, no object) inlined into two units: one per guard
    tcf = Registration("atexit", 0x401220, 0, 0x404048, 0x401090, 0x4010E4)
    assert _registration_key(tcf, 1, unguarded) == _registration_key(tcf._replace(dtor=0x401250, at=0x4012FA), 2,
                                                                      unguarded)


_OBJ = '#include <stdio.h>\n#include <stdlib.h>\nstruct Obj { int v; Obj(); ~Obj() { puts("~Obj"); } };\n'
_RUNS = {
    # one initializer, two call instructions of atexit(f): two registrations
    "two-calls": {"a.cpp": '#include <stdio.h>\n#include <stdlib.h>\nstatic void f() { puts("~Obj"); }\n'
                           "static int x = (atexit(f), atexit(f), 0);\nint main() {}\n"},
    # a helper with no guard registering one object, called by two units' initializers: it runs twice
    "unguarded-object": {
        "reg.cpp": '#include <stdio.h>\n#include <stdlib.h>\nint g_shared;\nextern "C" int __cxa_atexit('
                   "void (*)(void*), void*, void*);\nextern void* __dso_handle;\n"
                   'static void kill(void*) { puts("~Obj"); }\n'
                   "__attribute__((noinline)) void reg() { __cxa_atexit(kill, &g_shared, __dso_handle); }\n",
        "a.cpp": "void reg();\nstatic int a = (reg(), 1);\n",
        "b.cpp": "void reg();\nstatic int b = (reg(), 1);\nint main() {}\n"},
    # a guarded static array of an inline function inlined into two units, each with its own __tcf_0: once
    "guarded-array": {
        "h.hpp": _OBJ + "inline Obj* arr() { static Obj a[3]; return a; }\n",
        "a.cpp": '#include "h.hpp"\nObj::Obj() : v(1) {}\nstatic int a = arr()[0].v;\n',
        "b.cpp": '#include "h.hpp"\nstatic int b = arr()[1].v;\nint main() {}\n'},
    # two thread_locals of one type: two registrations
    "two-thread-locals": {
        "a.cpp": _OBJ + "Obj::Obj() : v(1) {}\nthread_local Obj t1, t2;\n"
                 "static int a = t1.v + t2.v;\nint main() {}\n"},
    # a loop's registration: it runs three times (the file must say it is incomplete)
    "loop": {"a.cpp": '#include <stdio.h>\n#include <stdlib.h>\nstatic void f() { puts("~Obj"); }\n'
                      "volatile int n = 3;\nstatic int x = [] { for (int i = 0; i < n; ++i) atexit(f); return 0; }();"
                      "\nint main() {}\n"},
}


# lines one registration's destructor prints (the array's helper destroys three objects)
_PER_REGISTRATION = {"guarded-array": 3}


# (clang's build of two-thread-locals runs no thread_local destructor at exit: no truth to check it against)
@pytest.mark.parametrize(("program", "cxx"), [(p, c) for p in sorted(_RUNS) for c in ("g++", "clang++")
                                              if (p, c) != ("two-thread-locals", "clang++")])
def test_the_listing_matches_what_the_run_registers(tmp_path: Path, program: str, cxx: str) -> None:
    require_tool(cxx, packages="g++, clang")
    units = _RUNS[program]
    for name, text in units.items():
        (tmp_path / name).write_text(text)
    exe = tmp_path / "prog"
    subprocess.run([cxx, "-O2", "-o", str(exe), *(n for n in units if n.endswith(".cpp"))], cwd=tmp_path, check=True,
                   capture_output=True)
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout.count("~Obj")
    ran //= _PER_REGISTRATION.get(program, 1)
    f = json.loads(run_main("inits", "--dtors", "--json", str(exe), check=True).stdout)["files"][0]
    listed = [r for r in f["exit_time_destructors"] if r["dtor"]["symbol"] not in ("__do_global_dtors_aux",)]
    assert ran >= 1
    assert len(listed) == ran or not f["analysis_complete"], (ran, listed, f["analysis_notes"])
    if program == "loop":
        assert not f["analysis_complete"] and any("reached again" in n for n in f["analysis_notes"])


@pytest.mark.parametrize("strip", [False, True])
@pytest.mark.parametrize("depth", ["3", "5"])
def test_a_wrapper_that_registers_its_callers_function_is_one_site_per_call(tmp_path: Path, siof_build: Path,
                                                                             strip: bool, depth: str) -> None:
    """HDF5's C++ library: a function calls ``atexit(f)`` for twelve functions, and (stripped) each call goes to
    a local copy of libc's ``atexit`` stub, ``__cxa_atexit(fn, 0, __dso_handle)`` on its argument. The stub's
    one site registered "a destructor not known"; each call of the stub registers its caller's function: one
    entry per call, as the LD_PRELOAD shim logs them at dlopen."""
    require_tool("g++", packages="g++")
    fns = "".join(f"void bye{i}() {{}}\n" for i in range(4))
    calls = "".join(f"  reg(bye{i});\n" for i in range(4))
    (tmp_path / "lib.cpp").write_text(
        '#include <stdlib.h>\n' + fns + '__attribute__((noinline)) static void reg(void (*fn)()) { atexit(fn); }\n'
        "__attribute__((noinline)) void init_all() {\n" + calls + "}\nstatic int once = (init_all(), 1);\n")
    lib = tmp_path / "libwrap.so"
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-o", str(lib), str(tmp_path / "lib.cpp")], check=True,
                   capture_output=True)
    if strip:
        subprocess.run(["strip", str(lib)], check=True)
    d = siof_build / "gcc-O2"
    log = tmp_path / "shim.log"
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(d / "shim.so"), "SHIM_LOG": str(log), "SHIM_TARGET": lib.name}
    subprocess.run([str(d / "dlopen_driver"), str(lib)], env=env, check=True, capture_output=True, timeout=60)
    logged = sorted(int(line.split()[1], 16) for line in log.read_text().splitlines())
    f = json.loads(run_main("inits", "--dtors", "--depth", depth, "--json", str(lib), check=True).stdout)["files"][0]
    listed = sorted(r["dtor"]["address"] or 0 for r in f["exit_time_destructors"])
    assert len(logged) == 4 and listed == logged
