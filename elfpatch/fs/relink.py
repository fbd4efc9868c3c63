"""Re-pointing the other hard-link names of a file the atomic commit replaced by a new inode: each name made a
link of the new file atomically (a link under a temp name beside it, renamed over it), under the journal
(elfpatch.fs.journal) that says what is left to do.

``Links`` begins the journal through the commit's hook (elfpatch.fs.commit.before_install), just before the first
name's rename, records the new inode just after it, and removes the journal when nothing is left (``settle``).
``switch_name`` re-points one name, only while it still names the old file exactly as recorded and the first
name the new one. Which names to switch, and what to report, is the tree's (elfpatch.targets.tree).

Each directory whose entries a re-pointing changed (a name, a leftover link, a journal removed) is noted
(``changed``); with --fsync the tree fsyncs each once, at the end of its run (``fsync_dirs``), as the commit
fsyncs the directory of its rename: a name re-pointed survives a power loss as the patched file does.
"""
from __future__ import annotations

import os

from elfpatch.errors import WriteError
from elfpatch.fs import teststop
from elfpatch.fs.commit import check_replaceable
from elfpatch.fs.journal import JOURNAL_KIND, Journal, full
from elfpatch.fs.regular import open_at, same_inode
from elfpatch.fs.temps import exclusive

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterable

    from elfpatch.fs.source import Place

# What became of one name: already the new file, re-pointed now, left (not the recorded file), failed.
DONE, SWITCHED, DIFFERS, FAILED = "done", "switched", "differs", "failed"

# The directories (by path) whose entries this process's re-pointing changed since the tree last took them.
_changed: set[str] = set()


def changed(directory: str) -> None:
    """Note that the entries of ``directory`` (a path) were changed by a re-pointing or its journal."""
    _changed.add(directory)


def take_changed() -> list[str]:
    """The directories noted since the last call (a pool worker's travel back with its reports), forgotten."""
    taken = sorted(_changed)
    _changed.clear()
    return taken


def fsync_dirs(paths: Iterable[str]) -> list[tuple[str, OSError]]:
    """fsync each directory of ``paths`` once (one reached by two paths, through a bind mount, once too); the
    directories that could not be, with why. A directory gone since has nothing left to make durable."""
    seen: set[tuple[int, int]] = set()
    failed: list[tuple[str, OSError]] = []
    for path in sorted(set(paths)):
        try:
            fd = os.open(path or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as exc:
            failed.append((path, exc))
            continue
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                os.fsync(fd)
        except OSError as exc:
            failed.append((path, exc))
        finally:
            os.close(fd)
    return failed


def open_file(place: Place) -> int:
    """The file ``place`` names, opened as every input is (elfpatch.fs.regular.open_at)."""
    return open_at(place.name, place.dir_fd)[0]


class Links:
    """The names of one inode this run re-points: its journal, written just before the first name's rename
    (``before_rename``, elfpatch.fs.commit's hook) and brought up to date just after it. ``ident``: the inode
    (device, inode) the tree read; ``others``: the other names, relative to the first name's directory."""

    def __init__(self, place: Place, path: str, ident: tuple[int, int], others: list[str]) -> None:
        self.place, self.path, self.ident, self.others = place, path, ident, others
        self.journal: Journal | None = None

    def before_rename(self, new: os.stat_result) -> Callable[[os.stat_result], None]:
        fd = open_file(self.place)  # the first name still names the old inode
        try:
            old = os.fstat(fd)
            if (old.st_dev, old.st_ino) != self.ident:
                raise WriteError("replaced since the tree was read (its hard links were not); left as it is, "
                                 "run again", self.path)
            self.journal = Journal.create(self.place, {
                "journal": JOURNAL_KIND, "first": self.place.name, "new": full(new), "old": full(old),
                "others": list(self.others)})
        except BaseException:
            os.close(fd)
            raise
        self.journal.old_fd = fd
        return self.after_rename

    def after_rename(self, new: os.stat_result) -> None:
        try:
            fd = open_file(self.place)
        except OSError:
            return  # the journal keeps the pre-rename record; relink reports every name
        if not same_inode(os.fstat(fd), new):
            os.close(fd)
            return
        assert self.journal is not None
        self.journal.new_fd = fd
        try:
            self.journal.note()
        except OSError:
            pass

    def settle(self) -> None:
        """Remove the journal unless names are left to switch after the first name's rename."""
        j = self.journal
        if j is None:
            return
        try:
            now = self.place.lstat()
        except OSError:  # cannot tell how the names stand: the journal stays for the next run to judge
            j.finish(remove=False)
            return
        remove = not j.names_new(now) or not j.record["others"]
        j.finish(remove=remove)
        if remove:
            changed(os.path.dirname(self.path))


def switch_name(j: Journal, fp: Place, op: Place, where: str) -> tuple[str, str]:
    """Point ``op``'s name (in ``where``, relative to the first name's directory) at the journal's new inode,
    which ``fp`` names, if it still names the old one exactly as recorded: (outcome, why not). Raises
    OSError or ElfPatchError when the file system refuses a step."""
    st = op.lstat()
    if j.names_new(st):
        return DONE, ""  # already (the same directory reached through a bind mount)
    if st is None or full(st) != j.record["old"]:
        return DIFFERS, "changed since the tree was read; left as it is"
    if not j.first_is_new(fp.lstat()):
        return DIFFERS, "the patched first name was replaced meanwhile; left as it is"
    check_replaceable(op, output=False)
    if j.old_fd < 0:
        fd = open_file(op)
        if full(os.fstat(fd)) != j.record["old"]:
            os.close(fd)
            return DIFFERS, "changed since the tree was read; left as it is"
        j.old_fd = fd
    link_over(j, fp, op, where)
    return SWITCHED, ""


def link_over(j: Journal, fp: Place, op: Place, where: str) -> None:
    """Make ``op``'s name a hard link of ``fp``'s file, atomically (link beside it, rename over it). The
    link's temp name is in the journal first: it is the new file itself, so it carries no marker, and a kill
    before the rename leaves it for the repair to remove."""
    def link_as(tmp: str) -> bool:
        j.record["linking"] = os.path.join(where, tmp)
        j.save()
        os.link(fp.name, tmp, src_dir_fd=fp.dir_fd, dst_dir_fd=op.dir_fd, follow_symlinks=False)
        return True

    _, tmp = exclusive(link_as, "link", op.path)
    teststop.stop("relink-temp")
    try:
        os.replace(tmp, op.name, src_dir_fd=op.dir_fd, dst_dir_fd=op.dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=op.dir_fd)
        except OSError:
            pass
        raise
    changed(os.path.dirname(op.path))


def remove_link(j: Journal, p: Place) -> bool:
    """Remove the link a killed run left at ``p`` (the temp name its journal recorded), if that name still
    names the journal's new file; whether it was removed."""
    if not j.names_new(p.lstat()):
        return False
    os.unlink(p.name, dir_fd=p.dir_fd)
    changed(os.path.dirname(p.path))
    return True
