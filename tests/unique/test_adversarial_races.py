"""Adversarial races, made deterministic with the test-only stop point (the run stops itself at a named
phase, the test acts, then continues it). Each test names the guarantee it attacks; each runs the CLI as root
and as nobody."""
from __future__ import annotations

import fcntl
import os
import shutil
import stat
from pathlib import Path

import pytest
from jsonschema_check import cli_json

from elfpatch.fs.temps import TEMP_MARK, TEMP_MARK_VALUE
from unique.adversary import NOBODY, USERS, arena, give, need_user, one_error_line, run, start, temps_in

pytestmark = pytest.mark.root


def place(data: bytes, path: Path, user: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return give(path, user)


def cleanup(*dirs: Path) -> None:
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


# -- 1. Never write outside what was named ----------------------------------------------------------------

@USERS
def test_dir_swapped_for_symlink_after_walk_writes_nothing_outside(user: str, original: bytes) -> None:
    """Guarantee: never write outside the tree. After the walk, a directory of the tree (holding a library and
    a hard link of it) is swapped for a symlink to a directory outside; the run must neither patch nor re-link
    anything there."""
    need_user(user)
    tree, outside = arena(user), arena(user)
    try:
        lib = place(original, tree / "sub" / "lib.so", user)
        os.link(lib, tree / "sub" / "lib2.so")
        victim = place(original, outside / "lib.so", user)
        os.link(victim, outside / "lib2.so")
        give(tree, user)
        run_ = start(user, "walked", "unique", str(tree))
        (tree / "sub").rename(tree / "sub.moved")
        (tree / "sub").symlink_to(outside)
        proc = run_.resume()
        one_error_line(proc, tree / "sub" / "lib.so", "directory")
        assert victim.read_bytes() == original and (outside / "lib2.so").read_bytes() == original
        assert os.stat(victim).st_ino == os.stat(outside / "lib2.so").st_ino
        assert temps_in(outside) == [] and temps_in(tree / "sub.moved") == []
    finally:
        cleanup(tree, outside)


@USERS
@pytest.mark.parametrize("swap", ["upper dir for a symlink", "own dir for a symlink", "upper dir for another"])
def test_dir_swapped_between_two_files_of_it_is_caught(user: str, swap: str, original: bytes) -> None:
    """Guarantee: never write outside the tree, also for the next file of a directory the run already holds
    open. Once the first of two libraries in tree/mid/sub is patched, a directory on their way (the upper one
    or their own) is moved out of the tree and a symlink to it (or another directory) put in its place: the
    second library gets an error naming the directory; nothing is patched or left where it went."""
    need_user(user)
    tree, outside = arena(user), arena(user)
    try:
        place(original, tree / "mid" / "sub" / "a.so", user)
        place(original, tree / "mid" / "sub" / "b.so", user)
        give(tree, user)
        run_ = start(user, "renamed", "unique", str(tree))
        moved = "sub" if swap.startswith("own") else "mid"
        at = tree / "mid" / "sub" if moved == "sub" else tree / "mid"
        at.rename(outside / moved)
        if swap.endswith("symlink"):
            at.symlink_to(outside / moved)
        else:
            place(original, tree / "mid" / "sub" / "b.so", user)
        proc = run_.resume()
        one_error_line(proc, tree / "mid" / "sub" / "b.so", "directory")
        went = outside / moved / "b.so" if moved == "sub" else outside / "mid" / "sub" / "b.so"
        assert went.read_bytes() == original and temps_in(went.parent) == []
        if swap.endswith("another"):
            assert (tree / "mid" / "sub" / "b.so").read_bytes() == original
    finally:
        cleanup(tree, outside)


@USERS
def test_dir_swapped_while_file_is_open_commits_inside(user: str, original: bytes, expected: bytes) -> None:
    """Guarantee: never write outside the tree. The file is open and locked when its directory is moved away
    and a symlink to an outside directory put in its place: the commit goes to the directory that was read
    (by its file descriptor), never through the symlink."""
    need_user(user)
    tree, outside = arena(user), arena(user)
    try:
        place(original, tree / "sub" / "lib.so", user)
        victim = place(original, outside / "lib.so", user)
        give(tree, user)
        run_ = start(user, "locked", "unique", str(tree))
        (tree / "sub").rename(tree / "moved")
        (tree / "sub").symlink_to(outside)
        run_.resume()
        assert victim.read_bytes() == original and temps_in(outside) == []
        assert (tree / "moved" / "lib.so").read_bytes() in (original, expected)
    finally:
        cleanup(tree, outside)


@USERS
@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_output_onto_non_regular_file_is_refused(user: str, kind: str, original: bytes) -> None:
    """Guarantee: never write outside what was named. `-o OUT` onto a FIFO or a character device (as root,
    `-o /dev/null` would replace the system's) is refused and leaves it as it is."""
    need_user(user)
    d = arena(user)
    try:
        lib = place(original, d / "lib.so", user)
        out = d / "out"
        if kind == "fifo":
            os.mkfifo(out)
        else:
            os.mknod(out, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
        give(out, user)
        proc = run(user, "unique", "-o", str(out), str(lib))
        one_error_line(proc, lib, str(out), "not a regular file")
        mode = os.lstat(out).st_mode
        assert (stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode))
        assert temps_in(d) == []
    finally:
        cleanup(d)


# -- 2. Never replace something newer, or someone else's work ---------------------------------------------

@USERS
@pytest.mark.parametrize("how", ["replaced", "truncated", "rewritten"])
def test_file_changed_before_commit_is_not_replaced(user: str, how: str, original: bytes) -> None:
    """Guarantee: never replace something newer. The file is replaced by a rebuild (`mv`), truncated, or
    rewritten in place between the read and the rename: nothing is written and the file gets an error."""
    need_user(user)
    d = arena(user)
    try:
        lib = place(original, d / "lib.so", user)
        run_ = start(user, "verified", "unique", str(lib))
        if how == "replaced":
            newer = place(original + b"new build", d / "new.so", user)
            newer.rename(lib)
        elif how == "truncated":
            os.truncate(lib, 100)
        else:
            with open(lib, "r+b") as f:
                f.seek(len(original) - 1)
                f.write(b"\x01")
            os.utime(lib, ns=(1, 1))  # a rewrite also changes mtime; make sure it differs
        proc = run_.resume()
        one_error_line(proc, lib, "changed on disk")
        now = lib.read_bytes()
        assert now == {"replaced": original + b"new build", "truncated": original[:100],
                       "rewritten": original[:-1] + b"\x01"}[how]
        assert temps_in(d) == []
    finally:
        cleanup(d)


@USERS
def test_inplace_file_replaced_after_read_is_not_written(user: str, original: bytes) -> None:
    """Guarantee: never replace something newer (--inplace). The path is renamed to a new file after it was
    read: the old inode is not written and the new file is left as it is."""
    need_user(user)
    d = arena(user)
    try:
        lib = place(original, d / "lib.so", user)
        run_ = start(user, "mapped", "unique", "--inplace", str(lib))
        old = d / "old.so"
        os.link(lib, old)
        place(original + b"new", d / "new.so", user).rename(lib)
        proc = run_.resume()
        one_error_line(proc, lib, "changed on disk")
        assert lib.read_bytes() == original + b"new" and old.read_bytes() == original
    finally:
        cleanup(d)


@USERS
def test_second_run_never_takes_a_live_temp_as_input(user: str, original: bytes, expected: bytes) -> None:
    """Guarantee: never take someone else's work as input. Run A is stopped with its complete temp named in
    the tree (just before its rename); run B over the same tree neither reports nor patches nor removes that
    temp (--check: only lib.so is found; a writing B waits for A's lock on lib.so, here 0.1 s, and gives up
    naming A's lock); A then finishes, and the file is patched exactly once."""
    need_user(user)
    tree = arena(user)
    try:
        lib = place(original, tree / "lib.so", user)
        a = start(user, "linked", "unique", str(tree))
        temp = temps_in(tree)
        assert len(temp) == 1 and temp[0].endswith(".tmp"), temp
        proc = run(user, "unique", "--check", "--json", str(tree))
        assert proc.returncode == 1, proc.stderr
        doc = cli_json(proc.stdout)
        assert [Path(f["path"]).name for f in doc["files"]] == ["lib.so"], doc
        proc = run(user, "unique", "--lock-timeout", "0.1", str(tree))
        one_error_line(proc, lib, f"held by pid {a.target_pid()}", "lock-timeout")
        assert temps_in(tree) == temp, "a live run's temp is kept (its lock says it is alive)"
        assert lib.read_bytes() == original
        proc = a.resume()
        assert proc.returncode == 0, proc.stderr
        assert lib.read_bytes() == expected and temps_in(tree) == []
        assert stat.S_IMODE(lib.stat().st_mode) == 0o644
    finally:
        cleanup(tree)


@USERS
def test_temp_liveness_is_its_lock_not_a_pid(user: str, original: bytes, expected: bytes) -> None:
    """Guarantee: never delete someone else's work. A temp locked by a process this run cannot see (a run in
    another PID namespace sharing the directory) is kept; once no one holds its lock, the next run that
    writes there removes it."""
    need_user(user)
    d = arena(user)
    try:
        lib = place(original, d / "lib.so", user)
        theirs = d / ".elfpatch-0123456789abcdef.tmp"
        theirs.write_bytes(b"a live run's half-written temp")
        os.setxattr(theirs, TEMP_MARK, TEMP_MARK_VALUE)  # as elfpatch marks its temps
        give(theirs, user)
        fd = os.open(theirs, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            assert run(user, "unique", str(lib)).returncode == 0
            assert theirs.exists(), "locked: alive, whatever the PID"
        finally:
            os.close(fd)
        lib.write_bytes(original)
        assert run(user, "unique", str(lib)).returncode == 0
        assert not theirs.exists() and lib.read_bytes() == expected and temps_in(d) == []
    finally:
        cleanup(d)


def test_nobody_cannot_remove_roots_temp(original: bytes) -> None:
    """A stale temp of another user in a shared sticky directory cannot be locked-and-removed by nobody; the
    run still patches its own file."""
    need_user("nobody")
    d = arena("root")
    try:
        d.chmod(0o1777)
        theirs = d / ".elfpatch-fedcba9876543210.tmp"
        theirs.write_bytes(b"root's")
        os.setxattr(theirs, TEMP_MARK, TEMP_MARK_VALUE)
        theirs.chmod(0o600)
        lib = place(original, d / "lib.so", "nobody")
        proc = run("nobody", "unique", str(lib))
        assert proc.returncode == 0, proc.stderr
        assert theirs.exists() and lib.stat().st_uid == NOBODY
    finally:
        cleanup(d)
