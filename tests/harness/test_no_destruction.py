"""native_tests/no_destruction: a global used after its destructor ran (by an atexit handler, by a thread
still running at exit, by another library's destructor at dlclose and at exit), and the two fixes. Every
claim is read from the fixtures' trace, produced by the real loader and C++ runtime: in the harness child (a
Python process) and in nd_host (a plain C program)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from elfpatch.harness import DlHarness

MODES = ("plain", "leak", "nodestructor")
LATE_USE = re.compile(r"^nd: late-use user=(\S+) object=(\S+) state=(alive|dead)", re.M)


def late_uses(trace: str) -> dict[str, str]:
    """{user: state} from the trace's late-use lines (each user reports exactly once)."""
    found = LATE_USE.findall(trace)
    users = [u for u, _, _ in found]
    assert len(users) == len(set(users)), trace
    return {u: state for u, _, state in found}


def expected(mode: str) -> str:
    return "dead" if mode == "plain" else "alive"


def run_in_harness(dlharness: DlHarness, lib: Path, thread: bool = False, close: bool = False) -> str:
    s = dlharness.session()
    h = s.open(lib)
    if thread:
        assert s.call(h, "widget_start_thread") == 1
    if close:
        s.close(h)
        assert not s.resident(lib), "the fixture must really unload, or dlclose proves nothing"
        return s.stdout()
    ended = s.exit(0)
    assert ended.returncode == 0
    return ended.stdout


@pytest.mark.parametrize("mode", MODES)
def test_atexit_handler_registered_before_the_global(dlharness: DlHarness, nd_build: Path, mode: str) -> None:
    lib = nd_build / f"libnd_widget_{mode}.so"
    for close in (False, True):  # at exit, and at dlclose (through __cxa_finalize)
        trace = run_in_harness(dlharness, lib, close=close)
        assert late_uses(trace) == {"atexit": expected(mode)}
        assert ("nd: destroy widget" in trace) == (mode == "plain")
        if mode == "plain":  # the order that makes it a use after destruction
            assert trace.index("nd: destroy widget") < trace.index("late-use user=atexit")


@pytest.mark.parametrize("mode", MODES)
def test_thread_still_running_at_exit(dlharness: DlHarness, nd_build: Path, mode: str) -> None:
    trace = run_in_harness(dlharness, nd_build / f"libnd_widget_{mode}.so", thread=True)
    assert late_uses(trace) == {"thread": expected(mode), "atexit": expected(mode)}


@pytest.mark.parametrize("mode", MODES)
def test_another_librarys_destructor(dlharness: DlHarness, nd_build: Path, mode: str) -> None:
    lib = nd_build / f"libnd_logger_{mode}.so"
    for close in (False, True):
        trace = run_in_harness(dlharness, lib, close=close)
        assert late_uses(trace) == {"core": expected(mode)}
        assert "msg=core shutting down" in trace
        # The loader's order: the core (a dependency) is constructed first and destroyed last.
        assert trace.index("nd: construct core") < trace.index("nd: construct logger")
        assert trace.index("nd: destroy core") < trace.index("late-use user=core")
        if mode == "plain":
            assert trace.index("nd: destroy logger") < trace.index("nd: destroy core")
        else:
            assert "nd: destroy logger" not in trace


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("args, lib, users", [
    ([], "widget", {"atexit"}),
    (["-c"], "widget", {"atexit"}),
    (["-t"], "widget", {"thread", "atexit"}),
    ([], "logger", {"core"}),
    (["-c"], "logger", {"core"}),
])
def test_the_same_in_a_c_host(nd_build: Path, mode: str, args: list[str], lib: str, users: set[str]) -> None:
    proc = subprocess.run([str(nd_build / "nd_host"), *args, str(nd_build / f"libnd_{lib}_{mode}.so")],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert late_uses(proc.stdout) == {u: expected(mode) for u in users}
    if "-c" in args:  # the late use happened inside dlclose, before the host went on
        assert proc.stdout.index("late-use") < proc.stdout.index("nd: host closed")


def test_the_fixed_libraries_still_unload(dlharness: DlHarness, nd_build: Path) -> None:
    """Leaking the global keeps nothing else resident: the libraries themselves still unload."""
    for mode in ("leak", "nodestructor"):
        for lib in (f"libnd_widget_{mode}.so", f"libnd_logger_{mode}.so"):
            assert dlharness.unloads(nd_build / lib)
    assert dlharness.dlcheck(*(nd_build / f"libnd_widget_{m}.so" for m in MODES))["cross_bindings"] == []
