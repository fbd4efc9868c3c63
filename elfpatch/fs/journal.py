"""The journal of a tree's hard-link re-pointing (``.elfpatch-<16 hex>.links``, beside the first name): what
a run killed or failed between the first name's rename and its last re-pointed name left to finish.

It names the first name, the inode that name has once renamed (``new``) and the one the other names still
have (``old``), each by device, inode, size, mtime and ctime, and the other names still to switch. Its run
holds a lock on it and marks it (elfpatch.fs.temps) while it lives; the record is rewritten in place after
each step (padded to its length: never torn) and bounded (MAX_JOURNAL) when written and before it is read.
A journal is trusted only when it is a regular file of this user that no one else may write, with one
name, that no live run holds.
"""
from __future__ import annotations

import errno
import fcntl
import os

from elfpatch.errors import WriteError
from elfpatch.fs.regular import open_at, same_inode
from elfpatch.fs.temps import create_locked, mark_temp, temp_state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from elfpatch.fs.source import Place

JOURNAL_KIND = "elfpatch-links"
MAX_JOURNAL = 1 << 20  # bytes of a journal's record, written or read: a count from a file is bounded first
_JOURNAL_HEAD = b'{"journal": "elfpatch-links"'


def full(st: os.stat_result) -> list[int]:
    """A file as the journal names it: device, inode, size, mtime and ctime (which no one can set back)."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def is_journal(dir_fd: int, name: str) -> bool:
    """Whether ``name`` is a journal of a run: a lock held on it or our marker, or a journal's first bytes
    (where the file system keeps no marker); never the name alone."""
    if temp_state(dir_fd, name) in ("live", "stale"):
        return True
    try:
        fd, _ = open_at(name, dir_fd)
    except OSError:
        return False
    try:
        return os.pread(fd, len(_JOURNAL_HEAD), 0) == _JOURNAL_HEAD
    except OSError:
        return False
    finally:
        os.close(fd)


def trusted(dir_fd: int, name: str) -> int | None:
    """The journal open and locked, if it can be trusted: a regular file of this user, writable by no one
    else, with one name, that no live run holds a lock on; else None."""
    try:
        fd, st = open_at(name, dir_fd, os.O_RDWR)
    except OSError:
        return None
    if not _may_trust(st):
        os.close(fd)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None  # a live run's
    return fd


def _may_trust(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022 and st.st_nlink == 1 and st.st_size <= MAX_JOURNAL


def recorded_link(dir_fd: int, name: str) -> str | None:
    """The temp name (relative to the journal's directory) of the link its run was making when it was killed,
    as a journal one may trust records it; None if it records none. Read only, no lock taken: a read-only run
    asks, and leaves the journal to the next writing run."""
    import json

    try:
        fd, st = open_at(name, dir_fd)
    except OSError:
        return None
    try:
        record = json.loads(os.pread(fd, MAX_JOURNAL, 0)) if _may_trust(st) else None
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    left = record.get("linking") if isinstance(record, dict) and record.get("journal") == JOURNAL_KIND else None
    return left if isinstance(left, str) else None


class Journal:
    """A re-pointing in progress, recorded beside its first name. Every step of ours (a rename, a link)
    changes both inodes' ctime, so it is rewritten after each (``note``): it always describes the two files
    as we left them, and a file that differs from it was changed by someone else."""

    def __init__(self, dir_fd: int, name: str, fd: int, record: dict[str, Any]) -> None:
        self.dir_fd, self.name, self.fd, self.record = dir_fd, name, fd, record
        self.new_fd = self.old_fd = -1

    @classmethod
    def create(cls, place: Place, record: dict[str, Any]) -> Journal:
        # Locked while the journal exists: a live run's is never replayed.
        fd, name = create_locked(place.dir_fd, os.O_WRONLY, place.path, what="journal", suffix=".links",
                                 failure="cannot write a re-linking journal beside it")
        mark_temp(fd)
        journal = cls(place.dir_fd, name, fd, record)
        try:
            journal.save()
        except OSError as exc:
            journal.finish(remove=True)
            raise WriteError(f"cannot write a re-linking journal beside it: {exc.strerror}", place.path) from exc
        return journal

    def load(self) -> None:
        """Read the record from the trusted journal (raises ValueError if it is none of this version's)."""
        import json

        self.record = json.loads(os.pread(self.fd, MAX_JOURNAL, 0))
        if not isinstance(self.record, dict) or self.record.get("journal") != JOURNAL_KIND:
            raise ValueError("not a journal of this version")

    def save(self) -> None:
        """Rewrite the record in place (padded with blanks to the length it had: never a torn record)."""
        import json

        data = json.dumps(self.record).encode()
        if len(data) > MAX_JOURNAL:  # a replay reads no more: refuse a record it could never finish
            raise OSError(errno.EFBIG, f"the record would pass {MAX_JOURNAL} bytes (too many hard links)")
        size = min(os.fstat(self.fd).st_size, MAX_JOURNAL)
        os.pwrite(self.fd, data.ljust(size), 0)

    def note(self) -> None:
        """Record both inodes as they are now, after a step of ours."""
        if self.new_fd >= 0:
            self.record["new"] = full(os.fstat(self.new_fd))
            self.record["settled"] = True
        if self.old_fd >= 0:
            self.record["old"] = full(os.fstat(self.old_fd))
        self.save()

    def first_is_new(self, st: os.stat_result | None) -> bool:
        """Whether the first name names the recorded new inode, unchanged (ctime too, once recorded after
        the rename, unless a kill came between a link of ours to it and the next record)."""
        n = 5 if self.record.get("settled") and not self.record.get("linking") else 4  # our link changes it
        return st is not None and full(st)[:n] == self.record["new"][:n]

    def names_new(self, st: os.stat_result | None) -> bool:
        """Whether ``st`` is the recorded new inode (device and inode)."""
        return st is not None and [st.st_dev, st.st_ino] == list(self.record["new"][:2])

    def done_with(self, rel: str) -> None:
        """The other name ``rel`` (relative to the first name's directory) needs nothing more: off the list."""
        if rel in self.record["others"]:
            self.record["others"].remove(rel)

    def finish(self, *, remove: bool) -> None:
        for fd in (self.new_fd, self.old_fd):
            if fd >= 0:
                os.close(fd)
        self.new_fd = self.old_fd = -1
        if remove:
            try:
                st, mine = os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False), os.fstat(self.fd)
                if same_inode(st, mine):  # never another file put at its name
                    os.unlink(self.name, dir_fd=self.dir_fd)
            except OSError:
                pass
        os.close(self.fd)
