"""A library's initializer calls a function of a stripped program (which the program exports because the library
names it), and that function reads, or returns a reference to, an object of the program that has no symbol any
more: the program's initializers build it after the library's. The load used to judge such a call only by the
objects with a symbol the function reads, so the read was not judged (the file said incomplete, as a stripped
file does, with no finding). Now an object without a symbol counts where the program's own initializers build
it, but not a guard or what is built under one: a function-local static the function itself builds on first
use is no finding. Each program prints what the library's initializer saw (0: before construction)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

PROG = ('#include <stdio.h>\nextern "C" volatile int k_seven;\nvolatile int k_seven = 7;\n'
        "struct Obj { int built; Obj() : built(k_seven) {} };\nstatic Obj g_obj;\n"
        'extern "C" int peek() { return g_obj.built; }\n'
        'extern "C" Obj& ref() { return g_obj; }\n'
        "static int& local() { static int v = k_seven; return v; }\n"
        'extern "C" int peek_local() { return local(); }\n'
        "int main() {}\n")
LIB = {
    "read": ('extern "C" int peek();\n', "peek()"),
    "getter": ('struct Obj { int built; };\nextern "C" Obj& ref();\n', "ref().built"),
    "local-static": ('extern "C" int peek_local();\n', "peek_local()"),
}


@pytest.mark.parametrize("cxx", ["g++", "clang++"])
@pytest.mark.parametrize("how", sorted(LIB))
def test_a_library_calling_a_stripped_programs_function_is_judged_by_what_it_reads(tmp_path: Path, how: str,
                                                                                   cxx: str) -> None:
    require_tool(cxx, packages="g++ clang")
    decl, expr = LIB[how]
    (tmp_path / "lib.cpp").write_text(f'#include <stdio.h>\n{decl}static int seen = printf("seen %d\\n", {expr});\n')
    (tmp_path / "prog.cpp").write_text(PROG)
    lib, exe = tmp_path / "libpeek.so", tmp_path / "prog"
    subprocess.run([cxx, "-O2", "-fPIC", "-shared", "-o", str(lib), str(tmp_path / "lib.cpp")], check=True,
                   capture_output=True)
    subprocess.run([cxx, "-O2", "-o", str(exe), str(tmp_path / "prog.cpp"), f"-L{tmp_path}", "-Wl,--no-as-needed",
                    "-lpeek", "-Wl,-rpath,$ORIGIN"], check=True, capture_output=True)
    subprocess.run(["strip", "--strip-all", str(exe)], check=True)
    seen = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    load = json.loads(run_main("inits", "--siof", "--deps", "--json", str(exe), check=True).stdout)["loads"][0]
    found = [(Path(f["reader"]["file"]).name, f["object"]["symbol"], f["object"]["section"], f["verdict"])
             for f in load["findings"]]
    if how == "local-static":
        assert seen == "seen 7\n"  # the function built it on first use
        assert found == []
    else:
        assert seen == "seen 0\n"  # the truth: g_obj read before the program's initializer built it
        assert found == [("libpeek.so", None, ".bss", "before-construction")]
