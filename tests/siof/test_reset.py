"""An initializer that loads an object and then overwrites it whole by plain stores is its inlined constructor
only where nothing else builds it (inits/filled.py). Where another unit's initializer built it before (its
constructor inlined too), the overwrite is a reset after construction: no read before construction (it was a
false finding). Where a later unit's initializer calls its constructor, the reset came first and its load is a
read before construction, as is every reader's before that constructor (the reset no longer takes the
constructor's place: an "order-dependent" verdict named the reset as the constructor). The runs are the truth."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import require_tool
from helpers import run_main

HEAD = ('#pragma once\n#include <stdio.h>\nextern "C" volatile int k_seven;\n'
        '#define OBS(unit, val) printf("%s %d\\n", unit, (int)(val))\n')
RESET = "static int r = [] { int old = g.built; OBS(\"reset.cpp\", old); g.built = 0; g.b = k_seven; return old; }();\n"


def _build(tmp: Path, units: dict[str, str]) -> tuple[list[str], dict]:
    (tmp / "h.hpp").write_text(HEAD)
    (tmp / "k.c").write_text("volatile int k_seven = 7;\nint k_pad[2];\n")
    (tmp / "main.cpp").write_text("int main() {}\n")
    for name, text in units.items():
        (tmp / name).write_text('#include "h.hpp"\n' + text)
    exe = tmp / "prog"
    subprocess.run(["gcc", "-O2", "-c", "-o", str(tmp / "k.o"), str(tmp / "k.c")], check=True, capture_output=True)
    subprocess.run(["g++", "-O2", "-o", str(exe), str(tmp / "k.o"), *(str(tmp / n) for n in units),
                    str(tmp / "main.cpp")], check=True, capture_output=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    return out, json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]


def test_a_reset_after_an_inlined_build_is_no_read_before_construction(tmp_path: Path) -> None:
    require_tool("g++", packages="g++")
    p = "struct P { int built; int b; P() : built(k_seven), b(k_seven) {} };\n"
    out, f = _build(tmp_path, {"obj.cpp": p + "P g;\n", "reset.cpp": p + "extern P g;\n" + RESET})
    assert out == ["reset.cpp 7"]
    assert [x for x in f["findings"] if x["verdict"] == "before-construction"] == []


def test_a_reset_before_the_constructor_call_is_a_read_before_construction(tmp_path: Path) -> None:
    require_tool("g++", packages="g++")
    r = "struct R { int built; int b; R(); };\nextern R g;\n"
    out, f = _build(tmp_path, {"reset.cpp": r + RESET,
                               "reader.cpp": r + 'static int s = (OBS("reader.cpp", g.built), 1);\n',
                               "obj.cpp": r + "R g;\n", "ctor.cpp": r + "R::R() : built(k_seven), b(1) {}\n"})
    assert out == ["reset.cpp 0", "reader.cpp 0"]
    got = {(x["reader"]["source"], x["verdict"], x["constructor"]["source"]) for x in f["findings"]
           if x["object"]["symbol"] == "g"}
    assert got == {("reset.cpp", "before-construction", "obj.cpp"), ("reader.cpp", "before-construction", "obj.cpp")}
