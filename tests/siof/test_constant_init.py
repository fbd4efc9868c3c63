"""An object constant-initialized (a ``constexpr`` constructor) whose type has a destructor: its unit's dynamic
initialization only registers the destructor, so a reader that runs earlier already sees its value. Registering
a destructor used to count as building the object, and such a read as one before construction (a false finding).
The control is the same object built by a constructor that is not constexpr: a read before construction, found.
Each program prints what the earlier unit read (5 built, 0 not yet)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

TYPE = {"constexpr": "struct Reg {{ int n; constexpr Reg() : n(5) {{}} ~Reg(); }};\n",
        "dynamic": 'extern "C" volatile int k_five;\nstruct Reg {{ int n; Reg() : n(k_five) {{}} ~Reg(); }};\n'}
FIRST = '#include <stdio.h>\n{type}extern Reg g_reg;\nstatic int r = printf("g_reg %d\\n", g_reg.n);\n'
LATER = ('{type}extern "C" volatile int k_five;\nvolatile int k_five = 5;\nReg::~Reg() {{ n = 0; }}\nReg g_reg;\n'
         "int main() {{}}\n")
BUILDS = [(cxx, opt) for cxx in ("g++", "clang++") for opt in ("-O0", "-O2")]


def _judged(tmp: Path, kind: str, cxx: str, opt: str, *runner: str) -> None:
    (tmp / "first.cpp").write_text(FIRST.format(type=TYPE[kind].format()))
    (tmp / "later.cpp").write_text(LATER.format(type=TYPE[kind].format()))
    exe = tmp / "prog"
    subprocess.run([cxx, opt, "-o", str(exe), str(tmp / "first.cpp"), str(tmp / "later.cpp")], check=True,
                   capture_output=True)
    seen = subprocess.run([*runner, str(exe)], capture_output=True, text=True, check=True, timeout=120).stdout
    assert seen == ("g_reg 5\n" if kind == "constexpr" else "g_reg 0\n")  # the truth
    f = json.loads(run_main("inits", "--siof", "--dtors", "--json", str(exe), check=True).stdout)["files"][0]
    found = [(x["object"]["symbol"], x["verdict"]) for x in f["findings"]]
    if kind == "constexpr":
        assert found == [] and f["analysis_complete"], f["analysis_notes"]
    else:
        assert found == [("g_reg", "before-construction")]
    # its destructor is registered either way
    assert [d["object"]["symbol"] for d in f["exit_time_destructors"]] == ["g_reg"]


@pytest.mark.parametrize("kind", sorted(TYPE))
@pytest.mark.parametrize("cxx,opt", BUILDS)
def test_a_constant_initialized_object_is_built_before_any_initializer(tmp_path: Path, kind: str, cxx: str,
                                                                       opt: str) -> None:
    require_tool(cxx, packages="g++ clang")
    _judged(tmp_path, kind, cxx, opt)


@pytest.mark.cross
@pytest.mark.parametrize("kind", sorted(TYPE))
def test_an_aarch64_constant_initialized_object_is_built_before_any_initializer(tmp_path: Path, kind: str) -> None:
    require_tool("aarch64-linux-gnu-g++", "qemu-aarch64")
    _judged(tmp_path, kind, "aarch64-linux-gnu-g++", "-O2", "qemu-aarch64", "-L", "/usr/aarch64-linux-gnu")
