"""A program linked at a fixed address (not PIE) dispatches a dense switch through a table of absolute
addresses, ``jmp qword ptr [rax*8 + T]`` (``notrack jmp`` under -fcf-protection). It was taken for an indirect
tail call: the entry said incomplete (`1 indirect call(s) not followed`) and the read in a case was not found.
The table is read now: each case is an edge of the jump. Each program's initializer picks a case at run time,
the case reads g_obj (built by a later unit) and prints what it saw (0: before construction)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

FIRST = ('#include <stdio.h>\nstruct Obj { int built; Obj(); };\nextern Obj g_obj;\nextern "C" volatile int k_two;\n'
         "__attribute__((noinline)) void touch(int n) { asm volatile(\"\" :: \"r\"(n)); }\n"
         "static int seen = [] { switch (k_two) {\n"
         "  case 0: touch(10); break; case 1: touch(11); break;\n"
         '  case 2: printf("g_obj %d\\n", g_obj.built); break;\n'
         "  case 3: touch(13); break; case 4: touch(14); break; case 5: touch(15); break;\n"
         "  case 6: touch(16); break; } return 0; }();\n")
LATER = ('extern "C" volatile int k_seven;\nvolatile int k_seven = 7;\nextern "C" volatile int k_two;\n'
         "volatile int k_two = 2;\nstruct Obj { int built; Obj(); };\nObj::Obj() : built(k_seven) {}\nObj g_obj;\n"
         "int main() {}\n")
BUILDS = [(cxx, opt, cf) for cxx in ("g++", "clang++") for opt in ("-O1", "-O2") for cf in ("", "-fcf-protection")]


@pytest.mark.parametrize("cxx,opt,cf", BUILDS)
def test_a_switch_through_an_absolute_table_is_followed(tmp_path: Path, cxx: str, opt: str, cf: str) -> None:
    require_tool(cxx, packages="g++ clang")
    (tmp_path / "first.cpp").write_text(FIRST)
    (tmp_path / "later.cpp").write_text(LATER)
    exe = tmp_path / "prog"
    subprocess.run([cxx, opt, *cf.split(), "-fno-pie", "-no-pie", "-o", str(exe), str(tmp_path / "first.cpp"),
                    str(tmp_path / "later.cpp")], check=True, capture_output=True)
    code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(exe)], capture_output=True, text=True,
                          check=True).stdout
    assert "(,%rax,8)" in code or "(,%rdx,8)" in code  # the shape: a jump through an absolute table
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "g_obj 0\n"
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    first = next(e for e in f["init"] if e["source"] == "first.cpp")
    assert [(x["object"]["symbol"], x["verdict"]) for x in f["findings"] if x["reader"]["source"] == "first.cpp"] \
        == [("g_obj", "before-construction")]
    assert first["analysis"]["unanalyzed"]["indirect_calls"] == 0, f["analysis_notes"]
