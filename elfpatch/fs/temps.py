"""Our own temps and journals: their names, the marker only elfpatch writes on them, and telling ours from
anyone's (``temp_state``), never by the name alone: a lock a live run holds on it, or our marker.

A name is made exclusively (``exclusive``: up to 16 fresh random names, O_EXCL or link semantics), short
enough to fit NAME_MAX beside any name. Where the file system keeps no user extended attributes there is no
marker: such a temp is ours only while its run lives and holds its lock; one a killed run left behind
cannot be told from someone's file, so it is never removed or passed over, only named in a warning
(``temp_state`` says "unmarked").
"""
from __future__ import annotations

import errno
import fcntl
import os
import re

from elfpatch.errors import WriteError
from elfpatch.fs.regular import open_at, same_inode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    T = TypeVar("T")

TEMP_RE = re.compile(r"^\.elfpatch-[0-9a-f]{16}\.tmp$")
JOURNAL_RE = re.compile(r"^\.elfpatch-[0-9a-f]{16}\.links$")  # a tree's hard-link re-pointing in progress
# The marker only elfpatch writes on its temps and journals: with a lock held on it, what makes a file ours
# (a name alone never does). Taken off a temp just before its rename: the result never carries it.
TEMP_MARK = "user.elfpatch.temp"
TEMP_MARK_VALUE = b"1"
NAME_TRIES = 16
LIVE, STALE, UNMARKED, REMOVED = "live", "stale", "unmarked", "removed"
# A file named like our temp, with no lock on it, where the file system keeps no marker: reported like any
# input (it may be anyone's), never removed; the user is told what it probably is.
PROBABLE_TEMP = ("named like an elfpatch temp, and its file system keeps no extended attributes to mark ours: "
                 "probably the temp of a killed run (no run holds it); reported as an input and never removed, "
                 "delete it if it is one")
_NO_XATTRS = (errno.ENOTSUP, errno.EOPNOTSUPP)


def temp_name(suffix: str = ".tmp") -> str:
    """A fresh temp (or, with ".links", journal) name: short, so that it fits NAME_MAX beside any name."""
    return f".elfpatch-{os.urandom(8).hex()}{suffix}"


def exclusive(create: Callable[[str], T | None], what: str, path: str, suffix: str = ".tmp") -> tuple[T, str]:
    """``create(name)`` for fresh names until one is made: a name taken (FileExistsError) or refused (None)
    is tried again with another, up to NAME_TRIES times. Returns what ``create`` made, and its name."""
    for _ in range(NAME_TRIES):
        name = temp_name(suffix)
        try:
            made = create(name)
        except FileExistsError:
            continue
        if made is not None:
            return made, name
    raise WriteError(f"cannot create a unique {what} name", path)


def create_locked(dir_fd: int, flags: int, path: str, *, what: str, failure: str,
                  suffix: str = ".tmp") -> tuple[int, str]:
    """A new file (a ``what``) under a fresh name in ``dir_fd`` (O_EXCL, mode 0600, never through a symlink),
    locked (LOCK_EX: ours for as long as we hold it) and checked, once locked, to be still at its name (a
    cleaner may have taken it for stale in between: then another name). Raises WriteError (``failure``: what
    could not be done, about ``path``)."""
    def create_as(name: str) -> int | None:
        try:
            fd = os.open(name, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            raise
        except OSError as exc:
            raise WriteError(f"{failure}: {exc.strerror or exc}", path) from exc
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if same_inode(os.stat(name, dir_fd=dir_fd, follow_symlinks=False), os.fstat(fd)):
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
        return None

    return exclusive(create_as, what, path, suffix)


def mark_temp(fd: int) -> None:
    """Put the marker only elfpatch writes on a temp or journal it made (none where the file system has no
    user extended attributes: such a temp is ours only while its lock is held)."""
    try:
        os.setxattr(fd, TEMP_MARK, TEMP_MARK_VALUE)
    except OSError:
        pass


def unmark_temp(fd: int) -> None:
    try:
        os.removexattr(fd, TEMP_MARK)
    except OSError:
        pass


def marked(fd: int) -> bool | None:
    """Whether the file carries our marker; None where its file system keeps no user extended attributes
    (nothing tells then)."""
    try:
        return os.getxattr(fd, TEMP_MARK) == TEMP_MARK_VALUE
    except OSError as exc:
        return None if exc.errno in _NO_XATTRS else False


def temp_state(dir_fd: int, name: str, *, remove: bool = False) -> str | None:
    """Whether the entry ``name`` is a temp or journal of an elfpatch run: LIVE (a process holds its lock),
    STALE (it carries our marker and no process holds its lock: its run died), UNMARKED (named like one, no
    lock, on a file system that cannot carry the marker: maybe a killed run's, maybe anyone's), or None: not
    ours, whatever its name. Only LIVE and STALE are ours; the rest are inputs like any file, reported and
    never removed. With ``remove``, a STALE one is unlinked (under an exclusive lock, while its name still
    names it): REMOVED."""
    if not TEMP_RE.match(name) and not JOURNAL_RE.match(name):
        return None
    try:
        fd, st = open_at(name, dir_fd)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if remove else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except OSError:
            return LIVE
        ours = marked(fd)
        if not ours:
            return UNMARKED if ours is None else None
        if remove and _unlink_if_names(dir_fd, name, st):
            return REMOVED
        return STALE
    finally:
        os.close(fd)


def probable_temp(path: str) -> bool:
    """Whether the file a PATH names (a symlink followed: the file a run reads) is named like our temp, held
    by no run, where no marker can tell ours (``temp_state``'s UNMARKED): what a tree walk warns of in its
    tree (PROBABLE_TEMP), said of a PATH given by name too. Costs nothing more for any other name."""
    head, name = os.path.split(os.path.realpath(path))
    if not TEMP_RE.match(name):
        return False
    try:
        dir_fd = os.open(head or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False  # the run's own open says why
    try:
        return temp_state(dir_fd, name) == UNMARKED
    finally:
        os.close(dir_fd)


def _unlink_if_names(dir_fd: int, name: str, st: os.stat_result) -> bool:
    try:
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not same_inode(now, st):
            return False
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        return False
    return True


_cleaned_dirs: set[tuple[int, int]] = set()


def clean_stale_temps(dir_fd: int) -> list[str]:
    """Remove the temps of dead runs in the directory ``dir_fd``: those carrying our marker that no process
    holds a lock on (a PID says nothing across PID namespaces; a name says nothing at all)."""
    try:
        names = os.listdir(dir_fd)
    except OSError:
        return []
    return [name for name in names if TEMP_RE.match(name) and temp_state(dir_fd, name, remove=True) == REMOVED]


def clean_stale_temps_once(dir_fd: int) -> None:
    """clean_stale_temps, once per directory per process."""
    st = os.fstat(dir_fd)
    if (st.st_dev, st.st_ino) not in _cleaned_dirs:
        _cleaned_dirs.add((st.st_dev, st.st_ino))
        clean_stale_temps(dir_fd)
