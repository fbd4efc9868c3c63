"""Code spliced into ``.init`` (top-level asm ``.section .init; call hook``, as libcrypto splices its CPU probe and
the old crtstuff spliced ``call frame_dummy``) runs inside crti's ``_init``, at load before every init_array
entry, under the toolchain's name. Each program's hook reads g_obj, built by a later unit, and prints what it saw
(0: before construction); the file used to say complete with no finding. crti's ``_init`` alone (every other
program) is still the toolchain's own."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

HOOK = ('#include <stdio.h>\nstruct Obj { int built; Obj(); };\nextern Obj g_obj;\n'
        'extern "C" void early_hook() { printf("g_obj %d\\n", g_obj.built); }\n'
        'asm(".section .init,\\"ax\\",%progbits\\n\\tCALL early_hook\\n\\t.previous");\n')
LATER = ('struct Obj { int built; Obj(); };\nextern "C" volatile int k_seven;\nvolatile int k_seven = 7;\n'
         "Obj::Obj() : built(k_seven) {}\nObj g_obj;\nint main() {}\n")
BUILDS = [(cxx, opt) for cxx in ("g++", "clang++") for opt in ("-O0", "-O2", "-O2 -static")]


def _program(tmp: Path, cxx: str, opt: str, call: str, spliced: bool) -> Path:
    (tmp / "hook.cpp").write_text(HOOK.replace("CALL", call) if spliced else HOOK.split("asm(")[0])
    (tmp / "later.cpp").write_text(LATER)
    exe = tmp / "prog"
    subprocess.run([cxx, *opt.split(), "-o", str(exe), str(tmp / "hook.cpp"), str(tmp / "later.cpp")], check=True,
                   capture_output=True)
    return exe


def _judged(exe: Path, spliced: bool, *runner: str) -> None:
    seen = subprocess.run([*runner, str(exe)], capture_output=True, text=True, check=True, timeout=120).stdout
    assert seen == ("g_obj 0\n" if spliced else "")  # the truth: the hook ran before g_obj's constructor
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    notes = [n for n in f["analysis_notes"] if "spliced into .init" in n]
    if spliced:
        assert not f["analysis_complete"] and len(notes) == 1 and notes[0].startswith("DT_INIT function _init ")
    else:
        assert not notes and f["analysis_complete"], f["analysis_notes"]


@pytest.mark.parametrize("spliced", [True, False])
@pytest.mark.parametrize("cxx,opt", BUILDS)
def test_code_spliced_into_init_is_not_taken_as_the_toolchains(tmp_path: Path, cxx: str, opt: str,
                                                               spliced: bool) -> None:
    require_tool(cxx, packages="g++ clang")
    _judged(_program(tmp_path, cxx, opt, "call", spliced), spliced)


@pytest.mark.cross
@pytest.mark.parametrize("spliced", [True, False])
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_aarch64_code_spliced_into_init_is_not_taken_as_the_toolchains(tmp_path: Path, opt: str,
                                                                       spliced: bool) -> None:
    require_tool("aarch64-linux-gnu-g++", "qemu-aarch64")
    exe = _program(tmp_path, "aarch64-linux-gnu-g++", opt, "bl", spliced)
    _judged(exe, spliced, "qemu-aarch64", "-L", "/usr/aarch64-linux-gnu")
