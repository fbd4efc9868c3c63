"""What a failed or interrupted run leaves behind: faults injected into the writer, temp files of a killed
run, two runs on one file at once."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

import elfpatch
from elfpatch import write
from unique.helpers import temps


@pytest.mark.parametrize("target", ["copy_file_range", "pwrite", "fsync", "replace"])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_injected_fault_leaves_original(lib: Path, monkeypatch: pytest.MonkeyPatch, target: str, code: int) -> None:
    before = lib.read_bytes()

    def fail(*args: object, **kw: object) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(write.os, target, fail)
    with pytest.raises(elfpatch.ElfPatchError, match=os.strerror(code)):
        elfpatch.patch(lib, fsync=True)
    monkeypatch.undo()
    assert lib.read_bytes() == before
    assert temps(lib.parent) == []


def test_inplace_fault_restores_bytes(lib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = lib.read_bytes()
    real = os.pwrite
    calls = []

    def flaky(fd: int, data: bytes, offset: int) -> int:
        calls.append(offset)
        if len(calls) == 3:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(fd, data, offset)

    monkeypatch.setattr(write.os, "pwrite", flaky)
    with pytest.raises(elfpatch.ElfPatchError):
        elfpatch.patch(lib, inplace=True)
    monkeypatch.undo()
    assert lib.read_bytes() == before, "the bytes written before the fault are put back"


def test_temp_of_a_killed_run_is_cleaned_by_the_next(lib: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = lib.parent / f".{lib.name}.elfpatch-{dead.pid}-0123abcd.tmp"
    stale.write_bytes(b"half written")
    alive = lib.parent / f".{lib.name}.elfpatch-{os.getpid()}-0123abcd.tmp"  # a live run's: kept
    alive.write_bytes(b"in progress")
    run_cli("unique", str(lib), check=True)
    assert not stale.exists() and alive.exists()


def test_every_writing_run_cleans_temps_and_read_only_runs_do_not(lib: Path) -> None:
    """--inplace and a default run with nothing left to patch need no temp of their own, yet remove a dead
    run's; --check and --dry-run write nothing, so they leave it."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = lib.parent / f".{lib.name}.elfpatch-{dead.pid}-0123abcd.tmp"
    for args, removed in ((["--check"], False), (["-n"], False), (["--inplace"], True), ([], True)):
        stale.write_bytes(b"half written")
        run_cli("unique", *args, str(lib))
        assert stale.exists() != removed, args
    assert "0 patched" in run_cli("unique", str(lib), check=True).stdout  # already patched by --inplace


def test_killed_run_leaves_original_or_patched(lib: Path, tmp_path: Path) -> None:
    """SIGKILL at several moments of the default mode: the file is always whole, unpatched or patched."""
    original = lib.read_bytes()
    patched_path = tmp_path / "expected.so"
    run_cli("unique", "-o", str(patched_path), str(lib), check=True)
    patched = patched_path.read_bytes()
    for delay in (0.0, 0.02, 0.05, 0.08, 0.12, 0.2):
        lib.write_bytes(original)
        proc = subprocess.Popen([sys.executable, "-m", "elfpatch", "unique", str(lib)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert lib.read_bytes() in (original, patched), delay
    run_cli("unique", str(lib), check=True)
    assert lib.read_bytes() == patched and temps(lib.parent) == []


def test_two_runs_at_once_patch_exactly_once(lib: Path, tmp_path: Path) -> None:
    original = lib.read_bytes()
    expected = tmp_path / "expected.so"
    run_cli("unique", "-o", str(expected), str(lib), check=True)
    for mode in ([], ["--inplace"]):
        lib.write_bytes(original)
        procs = [subprocess.Popen([sys.executable, "-m", "elfpatch", "unique", *mode, str(lib)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(4)]
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
        assert lib.read_bytes() == expected.read_bytes()
        assert temps(lib.parent) == []
