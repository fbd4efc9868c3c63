"""An atomic read-modify-write of another unit's object reads it: ``lock xadd``, AArch64's LSE ``ldaddal``, an
LL/SC loop, or libgcc's outline helper (``__aarch64_ldadd4_acq_rel``, GCC's default on AArch64), to which the
initializer passes the object's address. The store the read-modify-write makes must not count as building the
object. Each program's first unit increments g_count before the later unit's dynamic initialization stores 7
over it: the program prints 7, where 8 would mean the increment came after. Each such read is a finding or lies
in an entry that says it is incomplete. These held before they were written too: a review reported the outline
helper's read-modify-write counted as a build, which none of these builds reproduces; they guard it."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

FIRST = '#include <atomic>\nextern std::atomic<int> g_count;\nstatic int r = (g_count.fetch_add(1), 0);\n'
LATER = ('#include <atomic>\n#include <stdio.h>\nextern "C" volatile int k_seven;\nvolatile int k_seven = 7;\n'
         'std::atomic<int> g_count{k_seven};\nint main() { printf("g_count %d\\n", g_count.load()); }\n')
X86 = [(cxx, opt) for cxx in ("g++", "clang++") for opt in ("-O0", "-O2")]
A64 = ["-O0", "-O2", "-O2 -march=armv8.1-a", "-O2 -mno-outline-atomics"]


def _judged(tmp: Path, cxx: str, opt: str, *runner: str) -> None:
    (tmp / "first.cpp").write_text(FIRST)
    (tmp / "later.cpp").write_text(LATER)
    exe = tmp / "prog"
    subprocess.run([cxx, *opt.split(), "-o", str(exe), str(tmp / "first.cpp"), str(tmp / "later.cpp")],
                   check=True, capture_output=True)
    seen = subprocess.run([*runner, str(exe)], capture_output=True, text=True, check=True, timeout=120).stdout
    assert seen == "g_count 7\n"  # the truth: the increment read g_count before its initialization
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    first = next(e for e in f["init"] if e["source"] == "first.cpp")
    found = [x["verdict"] for x in f["findings"] if x["object"]["symbol"] == "g_count"]
    assert found == ["before-construction"] or not first["analysis"]["complete"] and not f["analysis_complete"]
    assert not any(x["object"]["symbol"] == "g_count" and x["verdict"] != "before-construction"
                   for x in f["findings"])


@pytest.mark.parametrize("cxx,opt", X86)
def test_an_atomic_increment_reads_the_object(tmp_path: Path, cxx: str, opt: str) -> None:
    require_tool(cxx, packages="g++ clang")
    _judged(tmp_path, cxx, opt)


@pytest.mark.cross
@pytest.mark.parametrize("opt", A64)
def test_an_aarch64_atomic_increment_reads_the_object(tmp_path: Path, opt: str) -> None:
    require_tool("aarch64-linux-gnu-g++", "qemu-aarch64")
    _judged(tmp_path, "aarch64-linux-gnu-g++", opt, "qemu-aarch64", "-L", "/usr/aarch64-linux-gnu")
