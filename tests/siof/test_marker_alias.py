"""A zero-size marker at an object's address never hides the object: crtstuff's ``__TMC_END__`` (the end of
.tm_clone_table) is where the first object after it lies, so a clang -O2 program whose first .bss object after
crtstuff's is another unit's global had its every access dropped as the marker's -- a read before construction
came out clean and complete (the run printed 0)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

SOURCES = {
    "k.c": "volatile int k_seven = 7;\n",
    "obj.hpp": '#pragma once\n#include <stdio.h>\nextern "C" volatile int k_seven;\n'
               "struct ObjD { int built; ObjD() : built(k_seven) {} ~ObjD() { built = -1; } };\n",
    "obj.cpp": '#include "obj.hpp"\nObjD g_obj;\n',
    "user.cpp": '#include "obj.hpp"\nextern ObjD g_obj;\n'
                'static int seen = (printf("user.cpp g_obj %d\\n", g_obj.built), 1);\n',
    "main.cpp": "int main() {}\n",
}


@pytest.mark.cross
def test_an_object_at_the_tm_clone_tables_end_is_read(tmp_path: Path) -> None:
    require_tool("clang++", "clang", "nm", packages="clang, binutils")
    for name, text in SOURCES.items():
        (tmp_path / name).write_text(text)
    subprocess.run(["clang", "-O2", "-c", "-o", str(tmp_path / "k.o"), str(tmp_path / "k.c")], check=True)
    exe = tmp_path / "prog"
    subprocess.run(["clang++", "-O2", "-o", str(exe), *(str(tmp_path / f) for f in ("user.cpp", "obj.cpp",
                                                                                     "main.cpp", "k.o"))],
                   check=True)
    symbols = {line.split()[2]: line.split()[0] for line in
               subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
               if len(line.split()) == 3}
    assert symbols["g_obj"] == symbols["__TMC_END__"]  # the shape this test is about
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "user.cpp g_obj 0\n"
    f = json.loads(run_main("inits", "--dtors", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    assert [(x["verdict"], x["object"]["symbol"]) for x in f["findings"]] == [("before-construction", "g_obj")]
    assert [r["object"]["symbol"] for r in f["exit_time_destructors"]] == ["g_obj"]
