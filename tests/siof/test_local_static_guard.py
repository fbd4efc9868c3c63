"""A function-local static is built by the first call that passes its declaration; C++ lets a ``goto`` or a
``case`` label jump past it (only automatic variables may not be skipped), and then it is used unbuilt: each
program below prints what its initializer read (0: before construction). Its read was judged
``function-local-static`` (safe) and the file complete. Now a use that some path reaches without checking the
guard makes the entry incomplete, with a note; the same getter without the jump stays proven safe."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case, run_main

from siof.truth import A64_SYSROOT

HEAD = ('#include <stdio.h>\nextern "C" volatile int k_seven;\nvolatile int k_seven = 7;\nvolatile int k_skip = 1;\n'
        "struct Obj { int built; Obj() : built(k_seven) {} };\n")
GETTERS = {  # how get() reaches its static: the printed value when the initializer reads it
    "goto": ("__attribute__((noinline)) Obj& get() {\n  if (k_skip) goto use;\n  {\n  static Obj o;\nuse:\n"
             "  return o;\n  }\n}\n", "0"),
    "case": ("__attribute__((noinline)) Obj& get() {\n  switch (k_skip) {\n  case 0: {\n  static Obj o;\n"
             "  case 1:\n  return o;\n  }\n  default: __builtin_trap();\n  }\n}\n", "0"),
    "inlined-goto": ("static inline Obj& get() {\n  if (k_skip) goto use;\n  {\n  static Obj o;\nuse:\n"
                     "  return o;\n  }\n}\n", "0"),
    "plain": ("__attribute__((noinline)) Obj& get() { static Obj o; return o; }\n", "7"),
    "plain-inlined": ("static inline Obj& get() { static Obj o; return o; }\n", "7"),
    "pointer": ("__attribute__((noinline)) Obj* get_p() { static Obj o; return &o; }\n"
                "static Obj& get() { return *get_p(); }\n", "7"),
}


# compiler -> (its command, the runner of what it builds)
COMPILERS = {"g++": (["g++"], []), "clang++": (["clang++"], []),
             "a64-g++": (["aarch64-linux-gnu-g++"], ["qemu-aarch64", "-L", A64_SYSROOT]),
             "a64-clang++": (["clang++", "--target=aarch64-linux-gnu"], ["qemu-aarch64", "-L", A64_SYSROOT])}
CASES = [case(how, cxx, opt, needs=[COMPILERS[cxx][0][0], *COMPILERS[cxx][1][:1]], id=f"{how}-{cxx}-{opt}")
         for how in GETTERS for cxx in COMPILERS for opt in ("-O0", "-O2")]


def _note(f: dict) -> bool:
    return any("no check of their guard" in n for n in f["analysis_notes"])


@pytest.mark.parametrize(("how", "cxx", "opt"), CASES)
def test_a_static_used_past_its_guard_is_not_proven(tmp_path: Path, how: str, cxx: str, opt: str) -> None:
    command, runner = COMPILERS[cxx]
    require_tool(command[0], *runner[:1], packages="g++, clang, g++-aarch64-linux-gnu, qemu-user")
    getter, printed = GETTERS[how]
    src = tmp_path / "prog.cpp"
    src.write_text(HEAD + getter + 'static int seen = printf("o %d\\n", get().built);\nint main() {}\n')
    exe = tmp_path / "prog"
    built = subprocess.run([*command, opt, "-o", str(exe), str(src)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    assert subprocess.run([*runner, str(exe)], capture_output=True, text=True, check=True).stdout == f"o {printed}\n"
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    entry = next(e for e in f["init"] if e["source"] == "prog.cpp")
    if printed == "0":  # read unbuilt: a finding or an incomplete entry, never a clean one
        assert f["findings"] or (not entry["analysis"]["complete"] and _note(f)), f["analysis_notes"]
    else:  # every path checks the guard first: no note, and the read stays function-local-static
        assert not _note(f), f["analysis_notes"]
        assert [r["status"] for r in entry["analysis"]["reads"] if (r["object"]["symbol"] or "").startswith("_ZZ")] \
            == ["function-local-static"]


@pytest.mark.parametrize("opt", ["-O1", "-O2", "-Os"])
def test_a_call_that_never_returns_is_no_path_past_the_guard(tmp_path: Path, opt: str) -> None:
    """``die()`` throws: GCC -Os lays the code after its call out as the guarded initialization's, so the blocks
    as decoded have an edge from the call into a use that skips the check. A function of this file whose whole
    code has no return is known never to return: no such path, no note."""
    require_tool("g++", packages="g++")
    src = tmp_path / "prog.cpp"
    src.write_text(HEAD + '__attribute__((noinline, noreturn)) void die(int n) { printf("die %d\\n", n); throw n; }\n'
                   "__attribute__((noinline)) Obj& get() {\n  if (k_skip == 5) die(1);\n  static Obj o;\n"
                   "  if (k_skip == 6) die(2);\n  return o;\n}\n"
                   'static int seen = printf("o %d\\n", get().built);\nint main() {}\n')
    exe = tmp_path / "prog"
    subprocess.run(["g++", opt, "-o", str(exe), str(src)], check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "o 7\n"
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    assert not _note(f), f["analysis_notes"]
