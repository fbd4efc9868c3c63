"""A hostile or broken library cannot fool the harness (issue 16, part 4). Each test states the guarantee it
attacks: a crash is reported as a crash and takes the library's helper processes with it; a fork or stray
writes cannot desynchronise the protocol; output is bounded; a bad --timeout is a usage error."""
from __future__ import annotations

import math
import os
import resource
import select
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from elfpatch.errors import ElfPatchError
from elfpatch.harness import Session
from elfpatch.harness.dlcheck import dlcheck
from elfpatch.harness.session import BadTimeout
from harness.conftest import dlcheck_cli

FLOOD_AS = 256 << 20  # bytes of address space for dlcheck (and, inherited, its child): a quarter of the flood


def wait_gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie has): waits for the event, bounded so a failure cannot
    hang the suite."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 120)[0])
    finally:
        os.close(fd)


def test_a_crash_with_a_helper_holding_the_pipes_is_a_crash(dl_build: Path, tmp_path: Path) -> None:
    """Guarantee: a child that dies is reported as dead (not as a timeout), even while a helper process it
    forked keeps every pipe open; and the helper does not outlive dlcheck."""
    pidfile = tmp_path / "helper.pid"
    rc, doc, err = dlcheck_cli(dl_build / "libspawn_crash.so", options=["--timeout", "600"],
                               env={**os.environ, "ELFPATCH_TEST_PIDFILE": str(pidfile)})
    assert rc == 2
    (entry,) = doc["files"]
    assert "killed by SIGSEGV during dlclose" in entry["error"] and "no answer" not in entry["error"]
    helper = int(pidfile.read_text())
    assert wait_gone(helper)


def test_the_api_kills_the_process_group_too(dl_build: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "helper.pid"
    with Session(env={**os.environ, "ELFPATCH_TEST_PIDFILE": str(pidfile)}) as s:
        s.open(dl_build / "libspawn_crash.so")
        helper = int(pidfile.read_text())
        assert not wait_gone_now(helper)
    assert wait_gone(helper)


def wait_gone_now(pid: int) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 0)[0])
    finally:
        os.close(fd)


def test_a_constructor_that_forks_does_not_desync(dl_build: Path) -> None:
    """Guarantee: the copy of the child that a library's fork() makes never answers in its place."""
    rc, doc, err = dlcheck_cli(dl_build / "libfork_ctor.so")
    assert (rc, err) == (0, "")
    assert doc["files"][0]["unloads"] is True
    lib = dl_build / "libfork_ctor.so"
    with Session() as s:
        h = s.open(lib)
        assert str(lib) in s.loaded()
        assert s.call(h, "fork_ctor_value") == 5
        for _ in range(3):
            h2 = s.open(lib)
            s.close(h2)
        s.close(h)
        assert not s.resident(lib)


def test_stray_writes_to_the_answer_pipe_are_not_answers(dl_build: Path) -> None:
    """Guarantee: only the child's own answer to the request asked counts (lines tagged with its PID and the
    request's number); garbage and answer-shaped lines from a library are skipped."""
    rc, doc, err = dlcheck_cli(dl_build / "libnoise.so")
    assert (rc, err) == (0, "")
    lib = dl_build / "libnoise.so"
    with Session() as s:
        h = s.open(lib)
        assert s.call(h, "noise_value") == 9
        assert str(lib) in s.loaded()


def test_a_flood_on_stderr_is_bounded(dl_build: Path, tmp_path: Path) -> None:
    """Guarantee: a library that writes 1 GiB to stderr before aborting costs dlcheck bounded memory, and
    the error stays one short line that ends with the library's last word and says how much was dropped."""
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "wb") as o, open(err, "wb") as e:
        # Memory is bounded by RLIMIT_AS on dlcheck and the child it starts (inherited), far below the 1 GiB
        # written: ru_maxrss would count the forking test process's own size, which depends on the tests before.
        proc = subprocess.Popen([sys.executable, "-m", "elfpatch", "dlcheck", "--json",
                                 str(dl_build / "libflood.so")], stdout=o, stderr=e,
                                env={**os.environ, "ELFPATCH_TEST_FLOOD_MIB": "1024"},
                                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (FLOOD_AS, FLOOD_AS)))
        proc.wait()
    assert proc.returncode == 2
    lines = err.read_text().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 1000
    assert "killed by SIGABRT during dlopen" in lines[0]
    assert lines[0].endswith("flood: the last word (stderr: 1.0 GiB, only its end shown)")


def test_session_output_is_a_bounded_tail(dl_build: Path) -> None:
    from elfpatch.harness.session import OUTPUT_TAIL, ChildCrashed

    with Session(env={**os.environ, "ELFPATCH_TEST_FLOOD_MIB": "8"}) as s:
        with pytest.raises(ChildCrashed) as info:
            s.open(dl_build / "libflood.so")
        assert len(info.value.stderr) <= OUTPUT_TAIL
        assert info.value.stderr.endswith("flood: the last word\n")
        assert s.stderr_dropped == 8 * (1 << 20) + len(" flood: the last word\n") - OUTPUT_TAIL


BAD_TIMEOUTS = ["inf", "nan", "1e308", "-1", "0", "-inf", "86401", "soon", ""]


@pytest.mark.parametrize("value", BAD_TIMEOUTS)
def test_bad_timeouts_are_usage_errors(value: str, unique_build: Path, tmp_path: Path) -> None:
    """Guarantee: a --timeout that is not a finite number of seconds in range is one usage error line, exit
    2, nothing started and no temp directory left behind."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    rc, out, err = dlcheck_cli(unique_build / "libuser.so", human=True, options=[f"--timeout={value}"],
                               env={**os.environ, "TMPDIR": str(tmp)})
    assert rc == 2 and out == ""
    assert err.splitlines() == [f"elfpatch: error: --timeout: expected seconds above 0 and at most 86400, "
                                f"not {value!r}"]
    assert list(tmp.iterdir()) == []


def test_a_timeout_in_range_is_taken(dl_build: Path) -> None:
    rc, doc, _ = dlcheck_cli(dl_build / "libmid.so", options=["--timeout", "86400"])
    assert rc == 0
    rc, doc, _ = dlcheck_cli(dl_build / "libmid.so", options=["--timeout", "0.5e2"])
    assert rc == 0


@pytest.mark.parametrize("value", [math.inf, math.nan, 1e308, -1, 0, "soon", True, None])
def test_the_api_rejects_bad_timeouts(value: object, unique_build: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for call in (lambda: Session(timeout=value), lambda: dlcheck([str(unique_build / "libuser.so")],
                                                                  timeout=value)):
        with pytest.raises(BadTimeout) as info:
            call()
        assert isinstance(info.value, ElfPatchError) and isinstance(info.value, ValueError)
    assert list(tmp_path.iterdir()) == []
