"""The harness child process: every answer comes from a real dlopen/dlsym/dlclose in another process."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from elfpatch.harness import ChildCrashed, DlError, HarnessError, HarnessTimeout, Session, run
from elfpatch.harness.session import CHILD, RTLD_GLOBAL, RTLD_NOW, parse_flags


def test_open_call_close_probe(unique_build: Path, patched: Path) -> None:
    lib = patched / "libholder_v2.so"
    with Session() as s:
        h = s.open(lib)
        assert str(lib) in s.loaded()
        assert s.call(h, "fixture_version") == 2
        assert s.call(h, "holder_value", "int(void)") == 2
        addr = s.call(h, "holder_address", "void *(void)")
        assert addr == s.sym(h, "_ZN6HolderIiE5valueE") != 0
        assert s.resident(lib)
        s.close(h)
        assert not s.resident(lib)
        assert str(lib) not in s.loaded()


def test_the_calling_process_never_loads_anything(unique_build: Path) -> None:
    with Session() as s:
        s.open(unique_build / "libholder_v1.so")
        assert s.pid != os.getpid()
    maps = Path("/proc/self/maps").read_text()
    assert "libholder_v1.so" not in maps


def test_dlerror_text_comes_back(unique_build: Path, tmp_path: Path) -> None:
    not_elf = tmp_path / "notes.so"
    not_elf.write_text("hello")
    with Session() as s:
        with pytest.raises(DlError, match="cannot open shared object file: No such file or directory"):
            s.open(tmp_path / "missing.so")
        with pytest.raises(DlError, match="invalid ELF header|file too short"):
            s.open(not_elf)
        h = s.open(unique_build / "libholder_v1.so")
        with pytest.raises(DlError, match="undefined symbol: no_such_symbol"):
            s.sym(h, "no_such_symbol")
        with pytest.raises(HarnessError, match="no open handle"):
            s.close(12345)
        with pytest.raises(HarnessError, match="bad signature"):
            s.call(h, "fixture_version", "int(((")
        assert s.call(h, "fixture_version") == 1  # the session survives usage errors


def test_arguments_and_results_are_converted() -> None:
    with Session(env={**os.environ, "ELFPATCH_PROBE": "forty-two"}) as s:
        libc = s.open("libc.so.6")
        assert s.call(libc, "getenv", "char *(const char *)", "ELFPATCH_PROBE") == "forty-two"
        assert s.call(libc, "getenv", "char *(const char *)", "ELFPATCH_UNSET_VARIABLE") is None
        assert s.call(libc, "strlen", "size_t(const char *)", b"abcdef") == 6
        assert s.call(libc, "abs", "int(int)", -7) == 7
        assert s.call(libc, "labs", "long(long)", -(2**40)) == 2**40
        assert s.call(libc, "atof", "double(const char *)", "2.5") == 2.5


def test_a_crash_is_an_error_not_a_hang() -> None:
    with Session() as s:
        libc = s.open("libc.so.6")
        with pytest.raises(ChildCrashed, match="killed by SIGSEGV during call raise") as info:
            s.call(libc, "raise", "int(int)", int(signal.SIGSEGV))
        assert info.value.signal == signal.SIGSEGV
        with pytest.raises(HarnessError, match="already exited"):
            s.loaded()


def test_a_hang_is_killed_at_the_timeout() -> None:
    with Session(timeout=10) as s:
        libc = s.open("libc.so.6")
        with pytest.raises(HarnessTimeout, match="no answer within 0.5 s"):
            s.call(libc, "sleep", "unsigned int(unsigned int)", 60, timeout=0.5)
        child = s._proc
    assert child.returncode == -signal.SIGKILL, "the hung child was killed, not waited for"


def test_a_child_whose_parent_is_already_gone_ends_at_start() -> None:
    """Guarantee: a child whose lifeline has no writer left when it starts (its parent died before the child
    could arm the pipe) kills itself before answering anything, instead of living on as an orphan."""
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    life_r, life_w = os.pipe()
    os.close(life_w)
    proc = subprocess.Popen([sys.executable, CHILD, str(req_r), str(resp_w), str(life_r)],
                            pass_fds=(req_r, resp_w, life_r), start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for fd in (req_r, resp_w, life_r):
        os.close(fd)
    try:
        returncode = proc.wait(timeout=120)  # a bound so that a failure cannot hang the suite
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        proc.kill()
        proc.wait()
        answers = os.read(resp_r, 4096)
        for fd in (req_w, resp_r):
            os.close(fd)
    assert (returncode, answers) == (-signal.SIGKILL, b"")


def test_a_session_outlives_the_thread_that_started_it() -> None:
    """Guarantee: the child is tied to this process, not to the thread that started it (as PR_SET_PDEATHSIG
    would tie it): a session started in a thread that has ended, as the kernel sees it, still answers."""
    sessions: list[Session] = []
    tids: list[int] = []

    def start() -> None:
        tids.append(threading.get_native_id())
        sessions.append(Session(ld_debug=None))

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    deadline = time.monotonic() + 120  # a bound so that a failure cannot hang the suite
    while os.path.exists(f"/proc/self/task/{tids[0]}") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(f"/proc/self/task/{tids[0]}")
    with sessions[0] as s:
        assert s.call(s.open("libc.so.6"), "abs", "int(int)", -3) == 3


def test_exit_runs_exit_handlers_and__exit_does_not(nd_build: Path) -> None:
    lib = nd_build / "libnd_widget_plain.so"
    with Session() as s:
        s.open(lib)
        assert s.stdout() == "nd: construct widget\n"  # the library's output, not the protocol's
        ended = s.exit(3)
        assert ended.returncode == 3
        assert "nd: destroy widget" in ended.stdout
    with Session() as s:
        s.open(lib)
        ended = s.exit(4, run_handlers=False)
        assert ended.returncode == 4
        assert "destroy" not in ended.stdout


def test_debug_log_ties_loader_lines_to_requests(unique_build: Path) -> None:
    v1, v2 = str(unique_build / "libholder_v1.so"), str(unique_build / "libholder_v2.so")
    with Session() as s:
        s.open(v1)
        s.open(v2)
        log = s.debug()
    (mark,) = [m for m in log.marks if m.path in (v1, v2)]
    assert (mark.path, mark.reason) == (v1, "unique symbol")
    opens = sorted({b.op for b in log.bindings if b.file == v2 and b.bound_to == v1})
    assert len(opens) == 1 and opens[0] > mark.op  # bound while v2 was being opened, after v1's mark
    assert log.scopes[v2] and v2 in log.scopes[v2][-1]


def test_without_ld_debug_there_is_no_log(unique_build: Path) -> None:
    with Session(ld_debug=None) as s:
        s.open(unique_build / "libholder_v1.so")
        assert s.debug().lines == 0
        assert s.why_resident(unique_build / "libholder_v1.so")[0]["kind"] == "open-handle"


def test_run_takes_and_returns_plain_data(unique_build: Path) -> None:
    lib = str(unique_build / "libplugin.so")
    out = run([{"op": "open", "path": lib, "flags": RTLD_NOW},
               {"op": "call", "handle": 1, "name": "plugin_load_count", "signature": "int(void)"},
               {"op": "close", "handle": 1},
               {"op": "noload", "path": lib},
               {"op": "call", "handle": 1, "name": "plugin_load_count"}])
    results = out["results"]
    assert [r["ok"] for r in results] == [True, True, True, True, False]
    assert results[1]["value"] == 1
    assert results[3]["resident"] is True  # libplugin.so has a unique symbol: NODELETE
    assert results[4]["kind"] == "usage"
    assert out["debug"].nodelete(lib, "unique symbol")


def test_run_reports_a_crash_as_the_last_result() -> None:
    out = run([{"op": "open", "path": "libc.so.6", "flags": RTLD_NOW},
               {"op": "call", "handle": 1, "name": "abort", "signature": "void(void)"},
               {"op": "loaded"}])
    assert [r["ok"] for r in out["results"]] == [True, False]
    assert out["results"][-1]["kind"] == "crash" and "SIGABRT" in out["results"][-1]["error"]
    assert out["returncode"] == -signal.SIGABRT


def test_flags() -> None:
    assert parse_flags("RTLD_NOW|RTLD_GLOBAL") == RTLD_NOW | RTLD_GLOBAL
    assert parse_flags("now, global") == RTLD_NOW | RTLD_GLOBAL
    assert parse_flags(5) == 5
    with pytest.raises(HarnessError, match="unknown dlopen flag"):
        parse_flags("RTLD_SOMETIMES")
