"""dlcheck ended by a signal (issue 23, row 12): a CI job's timeout (SIGTERM), ^C (SIGINT) or a closed terminal
(SIGHUP) while a library's initializer spins must not leave the child running or its temp dir behind, and
dlcheck must die of the signal, as the conventional status says. Deterministic: libspin.so's constructor
writes the child's PID to a FIFO before it spins, and the signal is sent only once the test has read it."""
from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.test_hostile import wait_gone

WAIT = 120  # seconds: a bound so that a failure cannot hang the suite, never a measure of speed


def started_child(fifo: Path) -> int:
    """The PID the spinning constructor wrote to ``fifo``: waits for it, bounded. Opened read-write, so the
    open does not wait for the writer and the FIFO never reads as ended before it has written."""
    fd = os.open(fifo, os.O_RDWR)
    try:
        text = b""
        while not text.endswith(b"\n"):
            assert select.select([fd], [], [], WAIT)[0], "the library's constructor never started"
            text += os.read(fd, 64)
        return int(text)
    finally:
        os.close(fd)


# How dlcheck ends: killed by the signal itself, or (SIGINT) as every command reports ^C.
ENDINGS = [(signal.SIGTERM, -signal.SIGTERM, b""), (signal.SIGHUP, -signal.SIGHUP, b""),
           (signal.SIGINT, 130, b"elfpatch: error: interrupted\n")]


@pytest.mark.parametrize(("sig", "status", "stderr"), ENDINGS)
def test_a_signal_stops_the_child_and_removes_its_files(sig: signal.Signals, status: int, stderr: bytes,
                                                        dl_build: Path, tmp_path: Path) -> None:
    """Guarantee: on SIGTERM, SIGINT or SIGHUP dlcheck kills its child (spinning in a constructor), removes
    its temp dir and ends with the conventional status, printing no report."""
    fifo, tmp = tmp_path / "started", tmp_path / "tmp"
    os.mkfifo(fifo)
    tmp.mkdir()
    env = {**os.environ, "ELFPATCH_TEST_STARTED": str(fifo), "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "elfpatch", "dlcheck", "--json",
                             str(dl_build / "libspin.so")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        child = started_child(fifo)
        assert [p.name for p in tmp.iterdir()][0].startswith("elfpatch-harness-")  # it made one, in TMPDIR
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=WAIT)
    finally:
        proc.kill()  # a no-op when it ended; on a failure, leaves nothing running
        proc.wait()
    assert (proc.returncode, err, out) == (status, stderr, b"")
    assert wait_gone(child), "the child outlived dlcheck"
    assert list(tmp.iterdir()) == []


def test_an_ignored_hangup_stays_ignored(dl_build: Path, tmp_path: Path) -> None:
    """Guarantee: under nohup (SIGHUP ignored) a hangup does not end dlcheck. SIGHUP is sent before SIGTERM:
    had dlcheck taken it, it would have died of it (-SIGHUP)."""
    fifo, tmp = tmp_path / "started", tmp_path / "tmp"
    os.mkfifo(fifo)
    tmp.mkdir()
    env = {**os.environ, "ELFPATCH_TEST_STARTED": str(fifo), "TMPDIR": str(tmp)}
    proc = subprocess.Popen(["nohup", sys.executable, "-m", "elfpatch", "dlcheck", str(dl_build / "libspin.so")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        child = started_child(fifo)
        proc.send_signal(signal.SIGHUP)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=WAIT)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGTERM
    assert wait_gone(child) and list(tmp.iterdir()) == []


def test_sigkill_takes_the_child_along(dl_build: Path, tmp_path: Path) -> None:
    """Guarantee: dlcheck killed with SIGKILL (no handler can run) leaves no child behind, even one spinning
    in a library's constructor: the kernel kills the child's group when dlcheck's end of the lifeline pipe
    closes. Killed only once the constructor has said it runs; the child's end is waited for, bounded."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    env = {**os.environ, "ELFPATCH_TEST_STARTED": str(fifo)}
    proc = subprocess.Popen([sys.executable, "-m", "elfpatch", "dlcheck", str(dl_build / "libspin.so")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child = None
    try:
        child = started_child(fifo)
        proc.kill()
        proc.wait()
        assert wait_gone(child), "the child outlived dlcheck's SIGKILL"
    finally:
        proc.kill()
        proc.wait()
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)  # on a failure: the spinning orphan must not outlive the test
