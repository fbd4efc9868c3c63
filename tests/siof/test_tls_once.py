"""A thread_local's initialization runs once per thread, in the first initializer that runs it: a later one
reaching it reads nothing. A read reached only through it is dropped at a later initializer only where an
earlier one ran it for sure -- never because an earlier one merely stores into a ``thread_local bool`` the
initialization also sets, nor because it reaches the initialization on some path only. Each program's run is
the truth: the unit's own initializer (``u``'s, after ``early``) reports the thread_local's value, 0 when the
initialization read ``g`` before c.cpp built it."""
from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

pytestmark = pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64",
                                reason="x86-64 Linux builds")

_HEAD = '#include <cstdio>\n#include <cstdlib>\nstruct G { int v; G(); };\nextern G g;\n'
_USER = ('struct U { U() { std::printf("U %d\\n", get1()); } } u;\n')
_READERS = {
    # early() stores true into tl_flag, which T's constructor (inlined into __tls_init) also sets: it runs no
    # initialization of t.
    "flag": _HEAD + "thread_local bool tl_flag;\n"
                    "struct T { int v; T() { tl_flag = true; v = g.v; } };\nthread_local T t;\n"
                    '__attribute__((constructor)) static void early() { tl_flag = true; std::printf("early\\n"); }\n'
                    "__attribute__((noinline)) int get1() { return t.v; }\n"
                    "__attribute__((noinline)) int get2() { return t.v + tl_flag; }\n"
                    + _USER + "int other() { return get2(); }\n",
    # early() reaches t's initialization only when NEVER is set: the run never takes that way.
    "maybe": _HEAD + "struct T { int v; T() { v = g.v; } };\nthread_local T t;\n"
                     "__attribute__((noinline)) int get1() { return t.v; }\n"
                     "__attribute__((constructor)) static void early() {\n"
                     '  if (std::getenv("NEVER")) std::printf("early %d\\n", get1()); else std::printf("early\\n");\n'
                     "}\n" + _USER,
}
_BUILDER = ('#include <cstdio>\nstruct G { int v; G(); };\nG::G() : v(42) { std::printf("g built\\n"); }\nG g;\n'
            "int main() { return 0; }\n")


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tool("g++", packages="g++")
    d = tmp_path_factory.mktemp("tls_once")
    (d / "c.cpp").write_text(_BUILDER)
    for name, text in _READERS.items():
        (d / name).mkdir()
        (d / name / "b.cpp").write_text(text)
    return d


@pytest.mark.parametrize("opt", ["-O0", "-O1", "-O2"])
@pytest.mark.parametrize("program", sorted(_READERS))
def test_a_later_reader_of_a_thread_locals_initialization_is_judged_unless_an_earlier_one_surely_ran_it(
        sources: Path, program: str, opt: str) -> None:
    d = sources / program
    exe = d / f"t{opt}"
    subprocess.run(["g++", opt, "-o", str(exe), "b.cpp", str(sources / "c.cpp")], cwd=d, check=True,
                   capture_output=True)
    env = {k: v for k, v in __import__("os").environ.items() if k != "NEVER"}
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True, env=env).stdout
    assert "U 0" in out.splitlines()  # the fixture does what it is for: U's initializer read g unbuilt
    proc = run_main("inits", "--siof", "--json", str(exe))
    assert proc.returncode in (0, 1), proc.stderr
    f = json.loads(proc.stdout)["files"][0]
    user = next(e for e in f["init"] if (e["symbol"] or "").startswith("_GLOBAL__sub_I_") and e["source"] == "b.cpp")
    found = {(x["reader"]["index"], x["object"]["symbol"]) for x in f["findings"]}
    assert (user["index"], "g") in found or not user["analysis"]["complete"], (found, user["analysis"])


_A64 = ("aarch64-linux-gnu-g++", "qemu-aarch64", "/usr/aarch64-linux-gnu")


@pytest.mark.cross
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("program", sorted(_READERS))
def test_the_same_on_aarch64(sources: Path, program: str, opt: str) -> None:
    """AArch64's guard is the byte at an offset from tpidr_el0 (inits.tlsonce.a64_tls_bytes): the same traps
    (a thread_local bool stored true, a reach on one path only) prove nothing there either."""
    cxx, qemu, sysroot = _A64
    require_tool(cxx, qemu, packages="g++-aarch64-linux-gnu, qemu-user")
    d = sources / program
    exe = d / f"a64{opt}"
    subprocess.run([cxx, opt, "-o", str(exe), "b.cpp", str(sources / "c.cpp")], cwd=d, check=True,
                   capture_output=True)
    out = subprocess.run([qemu, "-L", sysroot, str(exe)], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert "U 0" in out.splitlines()
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    user = next(e for e in f["init"] if (e["symbol"] or "").startswith("_GLOBAL__sub_I_") and e["source"] == "b.cpp")
    found = {(x["reader"]["index"], x["object"]["symbol"]) for x in f["findings"]}
    assert (user["index"], "g") in found or not user["analysis"]["complete"], (found, user["analysis"])


@pytest.mark.cross
@pytest.mark.parametrize("probe", ["probe_tls", "probe_tlsin"])
def test_aarch64_drops_a_read_only_where_an_earlier_initializer_surely_ran_it(tmp_path: Path, probe: str) -> None:
    """GCC -O2 for AArch64: probe_tls's second reader and probe_tlsin's out-of-line reader reach the
    initialization after the first initializer ran it (a call, or its guard set inline): the run reads the
    object early once, in the first, and the analysis finds that read alone (it used to judge every reader)."""
    cxx, qemu, sysroot = _A64
    require_tool(cxx, qemu, packages="g++-aarch64-linux-gnu, qemu-user")
    src = Path(__file__).resolve().parents[2] / "native_tests" / "siof"
    units = {"probe_tls": ["probe_tls_a", "probe_tls_b", "probe_tls_var", "probe_tls_def"],
             "probe_tlsin": ["probe_tlsin_var", "probe_tlsin_b", "probe_tlsin_def"]}[probe]
    (tmp_path / "main.cpp").write_text("int main() { return 0; }\n")
    exe = tmp_path / probe
    objects = []
    for u in [*units, "probe_box"]:  # each unit named by its own file, as the native fixtures' builds do
        obj = tmp_path / f"{u}.o"
        subprocess.run([cxx, "-O2", "-std=c++20", "-fPIE", f"-I{src}", f'-DPROBE_UNIT="{u}.cpp"', "-c", "-o", str(obj),
                        str(src / f"{u}.cpp")], check=True, capture_output=True)
        objects.append(str(obj))
    subprocess.run([cxx, "-pie", "-o", str(exe), *objects, str(tmp_path / "main.cpp")], check=True,
                   capture_output=True)
    out = subprocess.run([qemu, "-L", sysroot, str(exe)], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    obj, first = {"probe_tls": ("g_tlsd", "probe_tls_a.cpp"), "probe_tlsin": ("g_tlsin", "probe_tlsin_var.cpp")}[probe]
    assert [line.split()[1] for line in out.splitlines() if line.endswith(" 0")] == [obj]  # read early once
    f = json.loads(run_main("inits", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    assert {x["reader"]["source"] for x in f["findings"] if x["object"]["symbol"] == obj} == {first}


# t's initialization inlined whole (guard byte test, T's constructor, __cxa_thread_atexit) into both early() and
# u's initializer: it runs in early() alone, which reads g before c.cpp builds it.
_INLINED = (_HEAD + 'struct T { int v; T() : v(g.v) { std::printf("T %d\\n", v); } ~T() { std::printf("~T\\n"); } };\n'
            "thread_local T t;\n"
            '__attribute__((constructor(101))) static void early() { std::printf("early %d\\n", t.v); }\n'
            + _USER.replace("get1()", "t.v"))
_INLINED_BUILDS = {"g++-O2": (["g++", "-O2"], []), "clang++-O1": (["clang++", "-O1"], []),
                   "clang++-O2": (["clang++", "-O2"], []),
                   "aarch64-g++-O2": (["aarch64-linux-gnu-g++", "-O2"], list(_A64[1:])),
                   "aarch64-clang++-O2": (["clang++", "--target=aarch64-linux-gnu", "-O2"], list(_A64[1:]))}


@pytest.mark.parametrize("build", [pytest.param(b, marks=pytest.mark.cross) if b.startswith("aarch64") else b
                                   for b in sorted(_INLINED_BUILDS)])
def test_an_initialization_inlined_into_two_initializers_reads_and_registers_in_the_first_only(
        tmp_path: Path, build: str) -> None:
    """The inlined copy's blocks past its guard's clear way run only where the guard is still clear
    (inits.tlsonce.once_blocks): u's copy reads g and registers ~T only when early()'s did not run. Both
    copies were judged, a false finding on u (which reads t built, never g) and ~T listed twice."""
    cmd, qemu = _INLINED_BUILDS[build]
    require_tool(cmd[0], *qemu[:1], packages="g++, clang, g++-aarch64-linux-gnu, qemu-user")
    (tmp_path / "b.cpp").write_text(_INLINED)
    (tmp_path / "c.cpp").write_text(_BUILDER)
    exe = tmp_path / "prog"
    subprocess.run([*cmd, "-o", str(exe), "b.cpp", "c.cpp"], cwd=tmp_path, check=True, capture_output=True)
    run = [qemu[0], "-L", qemu[1], str(exe)] if qemu else [str(exe)]
    out = subprocess.run(run, capture_output=True, text=True, timeout=120, check=True).stdout.splitlines()
    assert out[:3] == ["T 0", "early 0", "U 0"] and out.count("~T") == 1  # one initialization, in early()
    f = json.loads(run_main("inits", "--siof", "--dtors", "--json", str(exe), check=True).stdout)["files"][0]
    early = next(e for e in f["init"] if e["symbol"] == "_ZL5earlyv")
    assert {x["reader"]["index"] for x in f["findings"] if x["object"]["symbol"] == "g"} == {early["index"]}
    assert [r["initializer"] for r in f["exit_time_destructors"] if r["kind"] == "thread_atexit"] == [early["index"]]
