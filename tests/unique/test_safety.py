"""What a failed or interrupted run leaves behind: faults injected into the writer, temp files of a killed
run, two runs on one file at once."""
from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

import elfpatch
from elfpatch.fs import commit as write
from elfpatch.fs import temps as fs_temps
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


def stale_temp(directory: Path, hexname: str = "0123456789abcdef") -> Path:
    """A temp as a killed run leaves it (only a kill between its link and its rename leaves one named): it
    carries the marker only elfpatch writes, and no process holds its lock."""
    p = directory / f".elfpatch-{hexname}.tmp"
    p.write_bytes(b"half written")
    try:
        os.setxattr(p, fs_temps.TEMP_MARK, fs_temps.TEMP_MARK_VALUE)
    except OSError as exc:
        pytest.skip(f"no user extended attributes here: {exc.strerror}")
    return p


def test_temp_of_a_killed_run_is_cleaned_by_the_next(lib: Path) -> None:
    stale = stale_temp(lib.parent)
    alive = stale_temp(lib.parent, "fedcba9876543210")  # a live run's (it holds the lock): kept
    fd = os.open(alive, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        run_cli("unique", str(lib), check=True)
    finally:
        os.close(fd)
    assert not stale.exists() and alive.exists()


def test_a_temp_name_without_our_marker_is_never_removed(lib: Path) -> None:
    """Guarantee: only our own temps are ever deleted. Files named like temps (of this version or of versions
    before the marker, `.NAME.elfpatch-PID-HEX.tmp`) that carry no marker and no lock are someone's files:
    a run that cleans temps in their directory keeps them."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    names = [lib.parent / f".{lib.name}.elfpatch-{dead.pid}-0123abcd.tmp",
             lib.parent / ".elfpatch-0123456789abcdef.tmp"]
    for p in names:
        p.write_bytes(b"someone's")
    run_cli("unique", str(lib), check=True)
    assert all(p.read_bytes() == b"someone's" for p in names)


def test_only_runs_that_create_a_temp_clean_temps(lib: Path) -> None:
    """Stale temps are removed by a run that creates a temp in that directory; --check, --dry-run, --inplace
    and a run with nothing to patch create none and leave them."""
    stale = stale_temp(lib.parent)
    original = lib.read_bytes()
    for args, removed in ((["--check"], False), (["-n"], False), (["--inplace"], False), ([], False)):
        run_cli("unique", *args, str(lib))
        assert stale.exists() != removed, args
    lib.write_bytes(original)
    run_cli("unique", str(lib), check=True)
    assert not stale.exists()


# Phases of a default-mode run (elfpatch.fs.teststop), in order; the file is the original up to the rename.
ATOMIC_PHASES = ("locked", "mapped", "temp", "written", "verified", "linked", "renamed")


@pytest.mark.parametrize("phase", ATOMIC_PHASES)
def test_killed_run_leaves_original_or_patched(lib: Path, tmp_path: Path, phase: str) -> None:
    """SIGKILL at each phase of the default mode, reached for sure (the run stops itself there): the file is
    whole, the original before the rename and the patched file after it; the next run finishes the job and
    leaves no temp (a kill after the link, before the rename, is the one that leaves a named temp)."""
    original = lib.read_bytes()
    patched_path = tmp_path / "expected.so"
    run_cli("unique", "-o", str(patched_path), str(lib), check=True)
    patched = patched_path.read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "elfpatch", "unique", str(lib)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, ELFPATCH_TEST_STOP=phase))
    _, status = os.waitpid(proc.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), f"phase {phase} was not reached"
    proc.kill()
    proc.wait()
    assert lib.read_bytes() == (patched if phase == "renamed" else original)
    assert len(temps(lib.parent)) == (phase == "linked")
    run_cli("unique", str(lib), check=True)
    assert lib.read_bytes() == patched and temps(lib.parent) == []


@pytest.mark.slow  # runs at once
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


def test_named_temp_where_o_tmpfile_is_missing_is_locked_and_removed(lib: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Without O_TMPFILE (a file system or kernel without it) the temp is a short named file, locked by its
    creator for as long as it exists (another run must neither take nor remove it), and gone after the run."""
    expected = tmp_path / "expected.so"
    run_cli("unique", "-o", str(expected), str(lib), check=True)
    monkeypatch.delattr(write.os, "O_TMPFILE")
    seen: dict[str, object] = {}

    def at(phase: str) -> None:
        if phase == "written":
            (name,) = temps(lib.parent)
            fd = os.open(lib.parent / name, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen["locked"] = False
            except BlockingIOError:
                seen["locked"] = True
            finally:
                os.close(fd)
            seen["name"] = name
            dfd = os.open(lib.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                seen["removed"] = fs_temps.clean_stale_temps(dfd)
            finally:
                os.close(dfd)

    monkeypatch.setattr(write.teststop, "stop", at)
    elfpatch.patch(lib)
    assert fs_temps.TEMP_RE.match(seen["name"]) and seen["locked"] and seen["removed"] == []
    assert lib.read_bytes() == expected.read_bytes() and temps(lib.parent) == []
