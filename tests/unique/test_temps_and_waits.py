"""Temps, /proc and lock waits under adversity: only our own temps are ever taken for temps (a lock held on
them or the marker only elfpatch writes, never the name alone), a run without /proc still writes, and a run
waiting for another process's lock says so. Each test names the guarantee it attacks."""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
from helpers import NO_USER_XATTRS
from jsonschema_check import cli_json

from unique.adversary import arena, command, give, need_user, run, temps_in

pytestmark = pytest.mark.root


@pytest.fixture
def box(request: pytest.FixtureRequest) -> Iterator[Path]:
    user = request.node.callspec.params.get("user", "root") if hasattr(request.node, "callspec") else "root"
    need_user(user)
    d = arena(user)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def put(data: bytes, path: Path, user: str = "root") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return give(path, user)


# -- no /proc ---------------------------------------------------------------------------------------------

def run_without_proc(*args: str) -> subprocess.CompletedProcess:
    """The CLI in a mount namespace whose /proc is an empty tmpfs (as in a chroot or a minimal container)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    cmd, env = command("root", *args)
    wrapped = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs none /proc && test ! -e /proc/self && exec "$@"', "sh", *cmd]
    proc = subprocess.run(wrapped, capture_output=True, text=True, env=env, timeout=300, cwd="/")
    if proc.returncode == 1 and not proc.stdout and ("mount" in proc.stderr or "unshare failed" in proc.stderr):
        pytest.skip(f"cannot hide /proc here: {proc.stderr.strip()}")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_without_proc_every_write_mode_works(box: Path, original: bytes, expected: bytes) -> None:
    """Guarantee: no spurious failure. Without /proc an unnamed (O_TMPFILE) temp cannot be linked in through
    /proc/self/fd: the default mode, -o and a tree with hard links must still write (a named temp instead),
    and leave no temp behind."""
    lib = put(original, box / "lib.so")
    out = box / "out" / "patched.so"
    out.parent.mkdir()
    tree = box / "tree"
    put(original, tree / "a.so")
    os.link(tree / "a.so", tree / "b.so")
    proc = run_without_proc("unique", str(lib))
    assert proc.returncode == 0, proc.stderr
    proc = run_without_proc("unique", "-o", str(out), str(put(original, box / "in.so")))
    assert proc.returncode == 0, proc.stderr
    proc = run_without_proc("unique", str(tree))
    assert proc.returncode == 0, proc.stderr
    assert lib.read_bytes() == expected and out.read_bytes() == expected
    assert (tree / "a.so").read_bytes() == expected and (tree / "a.so").stat().st_nlink == 2
    assert (tree / "a.so").stat().st_ino == (tree / "b.so").stat().st_ino
    assert temps_in(box) == [] and temps_in(out.parent) == [] and temps_in(tree) == []


# -- a file system without user extended attributes ------------------------------------------------------



def without_user_xattrs(*args: str, stop: str | None = None) -> subprocess.Popen:
    cmd, env = command("root", *args)
    assert cmd[-len(args) - 2:-len(args)] == ["-m", "elfpatch"], cmd
    cmd = [*cmd[:-len(args) - 2], "-c", NO_USER_XATTRS, *args]
    if stop:
        env["ELFPATCH_TEST_STOP"] = stop
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/")


def killed_runs_temp(lib: Path, expected: bytes) -> Path:
    """The named temp a run over ``lib`` leaves beside it where no marker can be written, killed with its temp
    named, before the rename."""
    killed = without_user_xattrs("unique", str(lib), stop="linked")
    _, status = os.waitpid(killed.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), "the run never reached its rename"
    killed.kill()
    killed.communicate(timeout=60)
    (left,) = temps_in(lib.parent)
    leftover = lib.parent / left
    assert os.listxattr(leftover) == [] and leftover.read_bytes() == expected
    return leftover


def test_a_killed_runs_unmarked_temp_is_reported_with_a_warning_and_kept(box: Path, original: bytes,
                                                                        expected: bytes) -> None:
    """Guarantee: only our own temps are ever deleted, no file is hidden for its name, and a temp a killed run
    left where no marker can be written is not silently taken for a library. The run is killed with its temp
    named, before the rename; the next writing run over the tree (which cleans temps in that directory)
    keeps the leftover, reports it, and warns, on stderr and in its JSON warnings, that it is probably a
    killed run's temp."""
    tree = box / "tree"
    lib = put(original, tree / "lib.so")
    put(original, tree / "other.so")
    leftover = killed_runs_temp(lib, expected)
    run = without_user_xattrs("unique", "--json", str(tree))
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0 and "Traceback" not in err, err
    assert leftover.read_bytes() == expected and lib.read_bytes() == expected
    (mine,) = [f for f in cli_json(out)["files"] if f["path"] == str(leftover)]
    assert [w for w in mine["warnings"] if "probably the temp of a killed run" in w], mine
    assert f"elfpatch: warning: {leftover}: named like an elfpatch temp" in err, err


@pytest.mark.parametrize("given", ["by its name", "through a symlink"])
def test_a_killed_runs_unmarked_temp_given_as_a_path_gets_the_warning(given: str, box: Path, original: bytes,
                                                                     expected: bytes) -> None:
    """Guarantee: a file is never taken silently for a library because of how it was named to us. The
    leftover of a killed run where no marker can be written, given as a PATH (by its own name, or through a
    symlink named like a library), gets the warning a tree walk gives it, on stderr and in its JSON
    warnings (it got none), and is read like any input; a library of any other name gets none."""
    lib = put(original, box / "dir" / "lib.so")
    leftover = killed_runs_temp(lib, expected)
    path = leftover
    if given == "through a symlink":
        path = box / "dir" / "libalias.so"
        path.symlink_to(leftover.name)
    run = without_user_xattrs("unique", "--check", "--json", str(path), str(lib))
    out, err = run.communicate(timeout=300)
    assert run.returncode == 1 and "Traceback" not in err, err  # lib.so: never renamed, still unique
    temp, plain = cli_json(out)["files"]
    assert temp["symbols"] == [] and plain["symbols"]  # the leftover is read: the patched copy it holds
    assert temp["path"] == str(path) and [w for w in temp["warnings"] if "probably the temp of a killed run" in w]
    assert plain["warnings"] == []
    assert err.count("named like an elfpatch temp") == 1 and f"elfpatch: warning: {path}: named like" in err, err
    assert leftover.exists() and leftover.read_bytes() == expected


# -- lock waits -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["file", "pool"])
def test_a_lock_wait_says_which_file_and_which_pid(where: str, box: Path, original: bytes, expected: bytes) -> None:
    """Guarantee: nothing looks hung. A writing run waiting for another process's lock says, while it waits,
    which file and which pid it waits for (as apt does), then goes on once the lock is released: the test
    holds the lock and only lets go after reading that line (no timer). ``pool``: the waiting run is a worker
    process of a tree large enough for the pool, whose other warnings travel back with its reports."""
    names = ["lib.so"] if where == "file" else [f"lib{i:02}.so" for i in range(20)]
    for n in names:
        put(original, box / n)
    lib = box / names[0]
    cmd, env = command("root", "unique", str(lib if where == "file" else box))
    fd = os.open(lib, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/")
        line = proc.stderr.readline()  # the run gives up after --lock-timeout (60 s): never a hang
    finally:
        os.close(fd)
    out, err = proc.communicate(timeout=300)
    assert line.startswith(f"elfpatch: warning: {lib}: waiting for the lock"), line + err
    assert f"held by pid {os.getpid()}" in line and "--lock-timeout" in line, line
    assert proc.returncode == 0, line + err
    assert all((box / n).read_bytes() == expected for n in names)


def test_a_pool_workers_lock_wait_is_in_the_json(box: Path, original: bytes, expected: bytes) -> None:
    """Guarantee: the JSON tells all. The "waiting for the lock" notice a pool worker prints at once is also
    in its file's ``warnings`` with --json (a CI job reading the JSON saw nothing), and printed once only."""
    from elfpatch.targets.tree import PARALLEL_MIN_FILES, workers

    if workers() < 2:
        pytest.skip("needs two cores for the tree's process pool")
    names = [f"lib{i:02}.so" for i in range(PARALLEL_MIN_FILES + 4)]
    for n in names:
        put(original, box / n)
    lib = box / names[0]
    cmd, env = command("root", "unique", "--json", str(box))
    fd = os.open(lib, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/")
        line = proc.stderr.readline()
    finally:
        os.close(fd)
    out, err = proc.communicate(timeout=300)
    assert line.startswith(f"elfpatch: warning: {lib}: waiting for the lock"), line + err
    assert proc.returncode == 0, line + err
    assert "waiting for the lock" not in err, err
    (mine,) = [f for f in cli_json(out)["files"] if f["path"] == str(lib)]
    assert [w for w in mine["warnings"] if w.startswith("waiting for the lock on it, held by pid")], mine
    assert all((box / n).read_bytes() == expected for n in names)


# -- only our own temps -----------------------------------------------------------------------------------

def test_a_library_named_like_a_temp_is_reported_and_kept(box: Path, original: bytes, expected: bytes) -> None:
    """Guarantee: a file is never hidden from a report, nor removed, because of its name; only our own temps
    are (a lock held on them or the marker elfpatch writes). Libraries named `.elfpatch-<16 hex>.tmp`
    (loaded through a symlink) and `.elfpatch-<16 hex>.links` (a journal's name), beside another: --check and
    audit see all three, a writing run patches all three (and its own temp cleaning and journal replay,
    which run in that directory, leave them)."""
    tree = box / "tree"
    hidden = [put(original, tree / ".elfpatch-0123456789abcdef.tmp"),
              put(original, tree / ".elfpatch-fedcba9876543210.links")]
    (tree / "libreal.so").symlink_to(hidden[0].name)
    put(original, tree / "other.so")
    proc = run("root", "unique", "--check", "--json", str(tree))
    assert proc.returncode == 1, proc.stderr
    assert {str(p) for p in hidden} <= {f["path"] for f in cli_json(proc.stdout)["files"]}, proc.stdout
    proc = run("root", "audit", "--json", str(tree))
    assert proc.returncode in (0, 1), proc.stderr
    assert all(str(p) in proc.stdout for p in hidden), proc.stdout
    proc = run("root", "unique", str(tree))
    assert proc.returncode == 0, proc.stderr
    assert all(p.read_bytes() == expected for p in [*hidden, tree / "other.so"])
    assert (tree / "libreal.so").is_symlink()
