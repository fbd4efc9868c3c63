"""Helpers for the adversarial tests: run `python -m elfpatch` as root or as `nobody`, stopped at a named phase.

A run started with ``stop=PHASE`` stops itself there (ELFPATCH_TEST_STOP, elfpatch.fs.teststop); ``os.waitpid``
with WUNTRACED returns once it has, so the test acts at exactly that moment (no timer), then continues it or
kills it. ``nobody`` gets the interpreter's own copy of the package in a world-readable temp directory: the
checkout (and its venv) may sit in a directory nobody cannot enter.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import NOBODY, nobody_interpreter, nobody_package

ROOT = Path(__file__).resolve().parents[2]
# The package the runs use: this checkout's, or another's (to show that a test fails before its fix).
SOURCE = Path(os.environ.get("ELFPATCH_ADVERSARY_SOURCE", ROOT))
USERS = pytest.mark.parametrize("user", ["root", "nobody"])
def need_user(user: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (to act as root and to become nobody with setpriv)")
    if user == "nobody" and shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (Debian package util-linux)")


def command(user: str, *args: str) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("ELFPATCH_TEST_STOP", None)
    env["PYTHONPATH"] = str(nobody_package(SOURCE))
    if user == "root":
        return [sys.executable, "-B", "-m", "elfpatch", *args], env
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", nobody_interpreter(),
            "-B", "-m", "elfpatch", *args], env


def arena(user: str) -> Path:
    """A fresh directory under /tmp that ``user`` owns (nobody cannot reach pytest's tmp_path)."""
    d = Path(tempfile.mkdtemp(prefix="elfpatch-adv-", dir="/tmp"))
    d.chmod(0o755)
    if user == "nobody":
        os.chown(d, NOBODY, NOBODY)
    return d


def give(path: Path, user: str) -> Path:
    """Hand ``path`` (and everything below it) to ``user``."""
    if user == "nobody":
        for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
            os.chown(p, NOBODY, NOBODY, follow_symlinks=False)
    return path


def run(user: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd, base = command(user, *args)
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**base, **(env or {})}, timeout=300,
                          cwd="/")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


class Stopped:
    """A run that stopped itself at a phase (``stopped``), or ran to its end without reaching it."""

    def __init__(self, user: str, phase: str, *args: str, env: dict[str, str] | None = None) -> None:
        cmd, base = command(user, *args)
        base.update(env or {})
        base["ELFPATCH_TEST_STOP"] = phase
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base,
                                     cwd="/")
        _, status = os.waitpid(self.proc.pid, os.WUNTRACED)
        self.stopped = os.WIFSTOPPED(status)
        if not self.stopped:
            self.proc.returncode = os.waitstatus_to_exitcode(status)

    def target_pid(self) -> int:
        """The elfpatch process itself (setpriv execs it: the same pid)."""
        return self.proc.pid

    def resume(self) -> subprocess.CompletedProcess:
        if self.stopped:
            os.kill(self.proc.pid, signal.SIGCONT)
        out, err = self.proc.communicate(timeout=300)
        assert "Traceback" not in err, err
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def kill(self) -> int:
        self.proc.kill()
        self.proc.communicate(timeout=300)
        return self.proc.returncode


def start(user: str, phase: str, *args: str, env: dict[str, str] | None = None) -> Stopped:
    """Start a run that must reach ``phase`` (fails the test if it ends first)."""
    s = Stopped(user, phase, *args, env=env)
    if not s.stopped:
        out, err = s.proc.communicate()
        pytest.fail(f"the run never reached phase {phase!r} (exit {s.proc.returncode}): {err}")
    return s


def one_error_line(proc: subprocess.CompletedProcess, path: Path | str, *words: str) -> str:
    """Exit 2 and exactly one `elfpatch: error: PATH: ...` line holding every word (case-insensitive)."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("elfpatch: error:")]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"elfpatch: error: {path}"), lines[0]
    for w in words:
        assert w.lower() in lines[0].lower(), lines[0]
    return lines[0]


def temps_in(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if ".elfpatch-" in n)
