"""A word loaded at an index the walk does not know is not the table's first word: a -O0 loop over a pointer
table of this file (``g_table[i]->built``) read only the object its entry 0 names, found that one and said
complete while entry 1's object was read before construction too (the run printed 0 for both). An address
plus an unknown scaled index is inside its object (Within) or, outside any, not exact: ``lea rcx, [rdx*4]``
with rdx unknown no longer gives 0, and no pointer word, GOT slot or call slot is read from such an address."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case, run_main

OBJS = ('extern "C" volatile int k_seven;\nvolatile int k_seven = 7;\n'
        "struct Obj { int built; Obj() : built(k_seven) {} };\nObj g_t0, g_t1;\nObj* g_table[] = {&g_t0, &g_t1};\n")
USER = ('#include <stdio.h>\nstruct Obj { int built; };\nextern Obj* g_table[2];\n'
        'static int walk() { for (int i = 0; i < 2; i++) printf("g_t%d %d\\n", i, g_table[i]->built); return 1; }\n'
        "static int w = walk();\nint main() {}\n")


@pytest.mark.parametrize("cxx", [case("g++", needs=["g++"]), case("clang++", needs=["clang++"])])
def test_a_loop_over_a_pointer_table_is_never_clean(tmp_path: Path, cxx: str) -> None:
    require_tool(cxx, packages="g++, clang")
    (tmp_path / "user.cpp").write_text(USER)
    (tmp_path / "objs.cpp").write_text(OBJS)
    exe = tmp_path / "prog"
    subprocess.run([cxx, "-O0", "-o", str(exe), str(tmp_path / "user.cpp"), str(tmp_path / "objs.cpp")],
                   check=True, capture_output=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert out == "g_t0 0\ng_t1 0\n"
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    user = next(e for e in f["init"] if e["source"] == "user.cpp")
    found = {x["object"]["symbol"] for x in f["findings"] if x["reader"]["source"] == "user.cpp"}
    assert found >= {"g_t0", "g_t1"} or not (user["analysis"]["complete"] or f["analysis_complete"])
