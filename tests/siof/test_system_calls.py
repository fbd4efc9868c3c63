"""A system call made with the instruction itself (``syscall``, AArch64's ``svc``), not through libc's function,
is handed the addresses in its argument registers as another module's function would be: the kernel reads the
memory they point to. Each program writes g_obj (built by a later unit) into a pipe, from its buffer or from an
iovec in the frame, reads back what the kernel copied and prints it (0: before construction). The read used to
be no read at all: the file said complete with no finding."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

OBJ = "struct Obj { int built; Obj(); };\nextern Obj g_obj;\n"
LATER = ('#include "obj.hpp"\nextern "C" volatile int k_seven;\nvolatile int k_seven = 7;\n'
         "Obj::Obj() : built(k_seven) {}\nObj g_obj;\nint main() {}\n")
FIRST = ('#include <stdio.h>\n#include <unistd.h>\n#include <sys/uio.h>\n#include "obj.hpp"\n'
         "static long sys3(long nr, long a, long b, long c) {{\n{call}}}\n"
         "static int r = [] {{ int fd[2]; if (pipe(fd)) return -1;\n"
         "  {how}\n"
         '  int seen = -1; read(fd[0], &seen, sizeof seen); printf("g_obj %d\\n", seen); return 0; }}();\n')
CALLS = {
    "x86_64": '  long n; asm volatile("syscall" : "=a"(n) : "0"(nr), "D"(a), "S"(b), "d"(c)\n'
              '                          : "rcx", "r11", "memory"); return n;\n',
    "aarch64": '  register long x8 asm("x8") = nr, x0 asm("x0") = a, x1 asm("x1") = b, x2 asm("x2") = c;\n'
               '  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory"); return x0;\n',
}
NR = {"x86_64": ("1", "20"), "aarch64": ("64", "66")}  # write, writev
HOW = {
    "buffer": "sys3({write}, fd[1], (long)&g_obj, sizeof g_obj);",
    "iovec": "struct iovec v = {{&g_obj, sizeof g_obj}}; sys3({writev}, fd[1], (long)&v, 1);",
}
BUILDS = [(cxx, opt) for cxx in ("g++", "clang++") for opt in ("-O0", "-O2")]


def _program(tmp: Path, arch: str, how: str, cxx: str, opt: str) -> Path:
    write, writev = NR[arch]
    (tmp / "obj.hpp").write_text(OBJ)
    (tmp / "first.cpp").write_text(FIRST.format(call=CALLS[arch], how=HOW[how].format(write=write, writev=writev)))
    (tmp / "later.cpp").write_text(LATER)
    exe = tmp / "prog"
    subprocess.run([cxx, opt, "-o", str(exe), str(tmp / "first.cpp"), str(tmp / "later.cpp")], check=True,
                   capture_output=True)
    return exe


def _the_kernels_read_is_found(exe: Path, *runner: str) -> None:
    seen = subprocess.run([*runner, str(exe)], capture_output=True, text=True, check=True, timeout=120).stdout
    assert seen == "g_obj 0\n"  # the truth: the kernel copied g_obj before its constructor ran
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    assert [(x["object"]["symbol"], x["verdict"], x["reader"]["source"]) for x in f["findings"]] \
        == [("g_obj", "before-construction", "first.cpp")]


@pytest.mark.parametrize("cxx,opt", BUILDS)
@pytest.mark.parametrize("how", sorted(HOW))
def test_a_system_call_reads_the_global_it_is_handed(tmp_path: Path, how: str, cxx: str, opt: str) -> None:
    require_tool(cxx, packages="g++ clang")
    _the_kernels_read_is_found(_program(tmp_path, "x86_64", how, cxx, opt))


@pytest.mark.cross
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("how", sorted(HOW))
def test_an_aarch64_system_call_reads_the_global_it_is_handed(tmp_path: Path, how: str, opt: str) -> None:
    require_tool("aarch64-linux-gnu-g++", "qemu-aarch64")
    exe = _program(tmp_path, "aarch64", how, "aarch64-linux-gnu-g++", opt)
    _the_kernels_read_is_found(exe, "qemu-aarch64", "-L", "/usr/aarch64-linux-gnu")
