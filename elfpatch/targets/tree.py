"""A directory PATH: walked in sorted order without following symlinks; every regular file that is an ELF
file, an ar archive or a wheel is processed, anything else is counted (as other).

- Everything is done relative to directory file descriptors: the walk opens each directory with
  O_NOFOLLOW | O_DIRECTORY below the one before and records its identity (device, inode); a file is later
  read, replaced and re-linked relative to its directory reopened the same way, every step checked against
  the walk's identity. A directory swapped for a symlink (or another directory) after the walk fails that
  file; nothing is ever opened, written or linked outside the tree.
- Symlinks are never followed: a link (to a file or a directory, inside the tree or out of it) is left as it
  is and counted as skipped; a target inside the tree is visited under its own name. Temps and journals of
  elfpatch runs are passed over (never inputs): those a process holds a lock on or that carry the marker
  only elfpatch writes (elfpatch.fs.temps.temp_state), or, for a journal, that begin as one; a file is never
  passed over for its name alone. One named like a temp where the file system keeps no marker is an input,
  with a warning that it is probably a killed run's temp: said once, after any repair (below), and never of
  the link a killed run was making under a temp name, which its journal records (the repair removes it).
- Hard links: each inode is processed once, under its first name in sorted order. When the default mode
  replaces it by a new inode, the tree's other names for it are re-pointed at the new inode (link to a temp
  name beside each, rename over it), so they stay hard links of one, patched, file. Names outside the tree
  keep the old file, with a warning; --inplace keeps every name, since it writes into the inode itself. A
  journal (``.elfpatch-*.links``, beside the first name, ``Journal``) is written just before the first
  name's rename and rewritten after each step; it names both files by device, inode, size, mtime and
  ctime. The journal and each re-pointing are elfpatch.fs.journal's and elfpatch.fs.relink's; which names
  are switched, and what is reported, is decided here. A re-pointing that fails is reported on that name
  (the first name is reported patched: it was) and the journal stays; a run killed or failed from the
  rename on is completed by the next writing run over the tree, before it reads anything, and only for
  names whose file is still exactly as recorded.
- The walk reads every directory before anything is written: a directory that cannot be read or entered
  fails the whole tree and changes nothing. Each file is then committed on its own (atomically, as a single
  PATH would be).
- Larger trees are spread over a process pool (one process per core); reports stay in sorted order.
- ``--exclude`` globs match paths relative to the root; excluded files are counted as skipped. Regular
  files that are no target kind are counted apart, as ``other``.
"""
from __future__ import annotations

import errno
import logging
import os
import pickle
import stat
from typing import Iterable, NamedTuple

from elfpatch.collector import few_collections
from elfpatch.errors import LOG, ElfPatchError, WriteError, one_line, warn
from elfpatch.fs import teststop
from elfpatch.fs.commit import before_install
from elfpatch.fs.journal import Journal, is_journal, recorded_link, trusted
from elfpatch.fs.relink import (
    DIFFERS,
    DONE,
    FAILED,
    SWITCHED,
    Links,
    changed,
    fsync_dirs,
    open_file,
    remove_link,
    switch_name,
    take_changed,
)
from elfpatch.fs.source import Place
from elfpatch.fs.temps import JOURNAL_RE, LIVE, PROBABLE_TEMP, STALE, TEMP_RE, UNMARKED, temp_state
from elfpatch.report import ERROR, FileReport
from elfpatch.targets import Exclude, Job, Outcome, error_report, kind_of, read_head, renamed
from elfpatch.targets.files import process_file
from elfpatch.warnlog import WarningLog, replay

TYPE_CHECKING = False
if TYPE_CHECKING:
    from elfpatch.targets import ProgressEvents


# Below this many files and bytes a process pool costs more to start (~50 ms) than it saves.
PARALLEL_MIN_FILES = 16
PARALLEL_MIN_BYTES = 32 << 20

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Step(NamedTuple):
    """One directory on the way from the root: its name in its parent (the root: its path) and identity."""

    name: str
    dev: int
    ino: int


Chain = tuple  # tuple[Step, ...], the root first


class Name(NamedTuple):
    path: str  # for reports
    chain: Chain  # the directories from the root to the one holding it
    name: str


class Group:
    """One inode of the tree: its names (sorted; the first is processed) and its size."""

    __slots__ = ("names", "size", "ident")

    def __init__(self, names: list[Name], size: int, ident: tuple[int, int] = (0, 0)) -> None:
        self.names = names
        self.size = size
        self.ident = ident

    @property
    def paths(self) -> list[str]:
        return [n.path for n in self.names]

    def __reduce__(self) -> tuple:
        return Group, (self.names, self.size, self.ident)  # to a pool worker: a quarter less work than slots


def open_chain(chain: Chain) -> int:
    """The directory at the end of ``chain``, opened step by step with O_NOFOLLOW and each step checked
    against the walk's identity (raises WriteError when one was replaced)."""
    fds: list[int] = []
    try:
        _open_steps(chain, fds)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    for fd in fds[:-1]:
        os.close(fd)
    return fds[-1]


def _open_steps(chain: Chain, fds: list[int]) -> None:
    """Open the steps of ``chain`` from ``len(fds)`` on, each below the last of ``fds`` (appended to it)."""
    i = len(fds)
    try:
        for i in range(len(fds), len(chain)):
            step = chain[i]
            if i:
                fds.append(os.open(step.name, _DIR_FLAGS, dir_fd=fds[-1]))
            else:  # the root as named: may be a link
                fds.append(os.open(step.name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
            st = os.fstat(fds[-1])
            if (st.st_dev, st.st_ino) != (step.dev, step.ino):
                raise WriteError("directory replaced since the tree was read; not followed", _path(chain, i))
    except OSError as exc:
        what = "a symlink now (replaced since the tree was read); not followed" if exc.errno in (
            errno.ELOOP, errno.ENOTDIR) else exc.strerror
        raise WriteError(f"cannot open directory: {what}", _path(chain, i)) from exc


def _path(chain: Chain, i: int) -> str:
    """The path of the ``i``-th directory of ``chain`` (for messages)."""
    return os.path.join(*(s.name for s in chain[: i + 1]))


class Dirs:
    """The directories of the last chain opened, kept open for the next file (files come in sorted order:
    mostly from the same directory). A kept directory is used again only once each step of its chain has
    been checked anew to be the walk's, with one lstat per step below the root (the root stat'ed by its
    name, as ``open_chain`` opens it): a directory swapped since, for a symlink or another directory, at any
    depth, is caught as before, and the chain is then opened afresh, which says what happened. One chain is
    kept at a time: its depth bounds the descriptors held."""

    def __init__(self) -> None:
        self.chain: Chain = ()
        self.fds: list[int] = []

    def fd(self, chain: Chain) -> int:
        """The directory at the end of ``chain``, checked as ``open_chain`` checks it; it stays this
        cache's (valid until the next call or ``clear``)."""
        keep = 0
        if chain is self.chain:  # the last file's directory (files come sorted): no step to compare
            keep = len(chain)
        else:
            for a, b in zip(chain, self.chain):
                if a != b:
                    break
                keep += 1
        if keep and not self._still(chain, keep):
            keep = 0
        if keep < len(self.fds):
            self._close_from(keep)
        if keep < len(chain):
            try:
                _open_steps(chain, self.fds)
            except BaseException:
                self.clear()
                raise
        self.chain = chain
        return self.fds[-1]

    def _still(self, chain: Chain, keep: int) -> bool:
        """Whether the first ``keep`` kept directories are still where the walk found them."""
        try:
            st = os.stat(chain[0].name)
            if (st.st_dev, st.st_ino) != (chain[0].dev, chain[0].ino):
                return False
            for i in range(1, keep):
                st = os.stat(chain[i].name, dir_fd=self.fds[i - 1], follow_symlinks=False)
                if (st.st_dev, st.st_ino) != (chain[i].dev, chain[i].ino):
                    return False
        except OSError:
            return False
        return True

    def _close_from(self, keep: int) -> None:
        for fd in self.fds[keep:]:
            os.close(fd)
        del self.fds[keep:]
        self.chain = self.chain[:keep]

    def clear(self) -> None:
        self._close_from(0)


def place_of(n: Name, dirs: Dirs | None = None) -> Place:
    """Where a file of the walk is now, its directory checked (errors name the file, and the directory).
    With ``dirs``, the directory is kept there for the next file (the place does not own it)."""
    try:
        if dirs is not None:
            return Place(dirs.fd(n.chain), n.name, n.path, owns=False)
        return Place(open_chain(n.chain), n.name, n.path)
    except WriteError as exc:
        raise WriteError(f"{exc.message} ({exc.path})", n.path) from exc


class _Walk:
    """One walk of a tree through directory file descriptors: what ``walk`` returns, gathered directory by
    directory (each directory's entries classified, then its subdirectories opened without following)."""

    def __init__(self, root: str, exclude: Exclude | None) -> None:
        self.root = root
        self.exclude = exclude
        self.groups: dict[tuple[int, int], Group] = {}
        self.skipped = 0
        self.journals: list[tuple[Chain, str, str]] = []
        self.probable: list[str] = []  # files named like our temps where no marker tells (PROBABLE_TEMP)
        self.stack: list[tuple[int, str, Chain]] = []

    def run(self) -> None:
        try:
            top = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise WriteError(f"cannot read directory: {exc.strerror}", self.root) from exc
        st = os.fstat(top)
        self.stack.append((top, self.root, (Step(self.root, st.st_dev, st.st_ino),)))
        while self.stack:
            fd, dirpath, chain = self.stack.pop()
            try:
                self._descend(fd, dirpath, chain, self._read(fd, dirpath, chain))
            except BaseException:
                for other, _, _ in self.stack:
                    os.close(other)
                raise
            finally:
                os.close(fd)

    def _read(self, fd: int, dirpath: str, chain: Chain) -> list[tuple[str, str, os.stat_result]]:
        """Classify one directory's entries; its subdirectories, for ``_descend``."""
        try:
            names = sorted(os.listdir(fd))
        except OSError as exc:
            raise WriteError(f"cannot read directory: {exc.strerror}", dirpath) from exc
        subdirs = []
        prefix = os.path.join(dirpath, "")  # what os.path.join(dirpath, name) puts before a listed name (a join
        for name in names:  # per entry cost a third of the walk)
            path = prefix + name
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed since it was listed
            except OSError as exc:  # listed but not enterable (no search permission): fail the tree
                raise WriteError(f"cannot read directory: {exc.strerror}", dirpath) from exc
            if stat.S_ISDIR(st.st_mode):
                subdirs.append((name, path, st))
            else:
                self._file(fd, name, path, st, chain)
        return subdirs

    def _file(self, fd: int, name: str, path: str, st: os.stat_result, chain: Chain) -> None:
        ours = name.startswith(".elfpatch-")  # what TEMP_RE and JOURNAL_RE begin with (tried on every file)
        if not stat.S_ISREG(st.st_mode):
            self.skipped += 1
        elif ours and JOURNAL_RE.match(name) and is_journal(fd, name):
            self.journals.append((chain, name, path))
        elif (state := temp_state(fd, name) if ours else None) in (LIVE, STALE):
            pass  # a run's temp (its lock is held, or it carries our marker): never an input
        elif self.exclude and self.exclude.excludes(os.path.relpath(path, self.root)):
            self.skipped += 1
        else:
            if state == UNMARKED and TEMP_RE.match(name):
                self.probable.append(path)
            entry = tuple.__new__(Name, (path, chain, name))  # (the record without its Python constructor)
            group = self.groups.get((st.st_dev, st.st_ino))
            if group is None:
                self.groups[(st.st_dev, st.st_ino)] = Group([entry], st.st_size, (st.st_dev, st.st_ino))
            else:
                group.names.append(entry)

    def _descend(self, fd: int, dirpath: str, chain: Chain, subdirs: list[tuple[str, str, os.stat_result]]) -> None:
        """Open each subdirectory without following, checked to be the one just listed."""
        for name, path, st in reversed(subdirs):
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # swapped for a symlink while we looked: not followed
                    self.skipped += 1
                    continue
                raise WriteError(f"cannot read directory: {exc.strerror}", path) from exc
            sst = os.fstat(sub)
            if (sst.st_dev, sst.st_ino) != (st.st_dev, st.st_ino):
                os.close(sub)
                raise WriteError("directory replaced while the tree was read", path)
            self.stack.append((sub, path, (*chain, Step(name, sst.st_dev, sst.st_ino))))


class Walked(NamedTuple):
    """What ``walk`` found: the regular files grouped by inode, in sorted order of their first name; how many
    entries were passed over (symlinks, devices, sockets, FIFOs, names ``exclude`` matches); the re-linking
    journals; and the inputs named like our temps where no marker can tell ours (PROBABLE_TEMP), less any a
    journal of the tree records as its run's leftover link (the repair's to remove, not a stranger's)."""

    groups: list[Group]
    skipped: int
    journals: list[tuple[Chain, str, str]]
    probable: list[str]


def walk(root: str, exclude: Exclude | None = None) -> Walked:
    """The tree below ``root`` read (``Walked``). Warns of nothing: the caller warns of ``probable`` once,
    from the walk whose files it processes (a repair walks the tree again)."""
    w = _Walk(root, exclude)
    w.run()
    for group in w.groups.values():
        group.names.sort()
    recorded = _recorded_links(w.journals) if w.probable else set()
    probable = [p for p in w.probable if os.path.normpath(p) not in recorded]
    return Walked(sorted(w.groups.values(), key=lambda g: g.names[0].path), w.skipped, w.journals, probable)


def _recorded_links(journals: list[tuple[Chain, str, str]]) -> set[str]:
    """The paths (normalized) of the links a killed run was making under a temp name, as its journal records
    them: the new file itself, unmarked, which the next writing run's repair removes."""
    out = set()
    for chain, jname, jpath in journals:
        try:
            dfd = open_chain(chain)
        except ElfPatchError:
            continue
        try:
            left = recorded_link(dfd, jname)
        finally:
            os.close(dfd)
        if left is not None:
            out.add(os.path.normpath(os.path.join(os.path.dirname(jpath), left)))
    return out


def warn_probable(paths: Iterable[str]) -> None:
    """Each input named like our temp where no marker tells ours: the one warning, said once per run."""
    for path in paths:
        warn(path, PROBABLE_TEMP)


def process_group(group: Group, job: Job, root: str, dirs: Dirs | None = None) -> tuple[list[FileReport], int]:
    """One inode of the tree: (its reports, 0), or ([], number of names) when it is no target kind. With
    ``dirs``, its directory is kept open there for the next group."""
    first = group.names[0]
    with place_of(first, dirs) as place:
        try:
            head = read_head(place.name, place.dir_fd)
        except OSError as exc:
            return [error_report(first.path, ElfPatchError(f"cannot open: {exc.strerror}"))], 0
        kind = kind_of(head, first.path)
        if kind is None:
            return [], len(group.names)
        if len(group.names) > 1:  # the names are re-pointed at what is read: it must be the walk's inode
            now = place.lstat()
            if now is None or (now.st_dev, now.st_ino) != group.ident:
                return [error_report(first.path, WriteError("replaced since the tree was read (its hard links "
                                                            "were not); left as it is, run again"))], 0
        if len(group.names) == 1 or not job.writes or job.inplace:
            return process_file(first.path, job, kind, root=root, place=place), 0
        links = Links(place, first.path, group.ident, [_rel(first, o) for o in group.names[1:]])
        token = before_install.set(links.before_rename)
        try:
            reports = process_file(first.path, job, kind, in_tree_links=len(group.names), root=root, place=place)
            if renamed(reports, job) and links.journal is not None:
                reports += relink(links.journal, first, group.names[1:], job)
        finally:
            before_install.reset(token)
            links.settle()
    return reports, 0


# -- re-pointing hard links (the mechanism is elfpatch.fs.relink's; which names, and the reports, are here) --

def _rel(first: Name, other: Name) -> str:
    return os.path.relpath(other.path, os.path.dirname(first.path))


def _switch_one(j: Journal, fp: Place, first: Name, other: Name) -> tuple[str, str]:
    """Point ``other`` at the journal's new inode if it still names the old one exactly as recorded."""

    try:
        with place_of(other) as op:
            return switch_name(j, fp, op, os.path.dirname(_rel(first, other)))
    except (OSError, ElfPatchError) as exc:
        return FAILED, exc.message if isinstance(exc, ElfPatchError) else (exc.strerror or str(exc))


def switch_all(j: Journal, first: Name, others: list[Name]) -> list[tuple[Name, str, str]]:
    """Switch each name of ``others`` (names of the journal) that still names the old inode as recorded;
    the journal is rewritten after each. Returns (name, outcome, why) for each; a name that failed stays in
    the journal unless it names the new inode anyway (through a bind mount, a directory of the tree can be
    another's, so a name that could not be switched may have been switched under its other path)."""
    results = []
    with place_of(first) as fp:
        for other in others:
            outcome, why = _switch_one(j, fp, first, other)
            j.record.pop("linking", None)
            if outcome != FAILED:
                j.done_with(_rel(first, other))
            j.note()
            if outcome == SWITCHED:
                teststop.stop("relinked")
            results.append((other, outcome, why))
        for i, (other, outcome, _why) in enumerate(results):
            if outcome == FAILED and _names(other, j.record["new"]):
                j.done_with(_rel(first, other))
                results[i] = (other, DONE, "")
        j.save()
    return results


def relink(j: Journal, first: Name, others: list[Name], job: Job) -> list[FileReport]:
    """Point every other name of the group at the first name's new inode, each switch atomic. The journal
    lists what is left while it runs; a name that fails stays in it for the next writing run to finish.
    Returns an error report for each name not re-pointed."""
    from elfpatch.fs.source import LOCK_TIMEOUT, lock_file

    teststop.stop("relinking")
    try:
        if j.new_fd < 0:
            raise WriteError("the patched first name could not be opened again")
        lock_file(j.new_fd, job.lock_timeout if job.lock_timeout is not None else LOCK_TIMEOUT, first.path)
        results = switch_all(j, first, others)
    except (OSError, ElfPatchError) as exc:
        why = exc.message if isinstance(exc, ElfPatchError) else exc.strerror or str(exc)
        results = [(o, DONE if _names(o, j.record["new"]) else FAILED, why) for o in others]
    errors = []
    for other, outcome, why in results:
        if outcome == FAILED:
            errors.append(FileReport(other.path, ERROR, error=f"not re-pointed at the patched {first.path} ({why}): "
                                     "this name still names the unpatched file; the first name is patched (its "
                                     "journal is kept: the next writing run over the tree finishes the switch)"))
        elif outcome == DIFFERS:
            errors.append(FileReport(other.path, ERROR, error=f"not re-pointed at the patched {first.path} ({why})"))
    return errors


def _names(n: Name, ident_: list[int]) -> bool:
    """Whether ``n`` names the inode (device, inode first) ``ident_`` now."""
    try:
        with place_of(n) as p:
            now = p.lstat()
    except ElfPatchError:
        return False
    return now is not None and [now.st_dev, now.st_ino] == list(ident_[:2])


def _replay(j: Journal, base: str, by_path: dict[str, Name], job: Job) -> tuple[int, bool]:
    """Finish what a journal records: (how many names were switched, whether the journal is done with)."""
    from elfpatch.fs.source import LOCK_TIMEOUT, lock_file

    first = by_path.get(os.path.normpath(os.path.join(base, j.record["first"])))
    if first is None:
        return 0, False  # outside this walk: left for a run over the whole tree
    with place_of(first) as fp:
        now = fp.lstat()
        if not j.first_is_new(now):
            if now is None or [now.st_dev, now.st_ino] != j.record["old"][:2]:  # not merely never renamed
                job.warn(first.path, "changed since an earlier run recorded it; its other names were left as they "
                                     "are")
            return 0, True
        j.new_fd = open_file(fp)
        if not j.first_is_new(os.fstat(j.new_fd)):
            return 0, True
        lock_file(j.new_fd, job.lock_timeout if job.lock_timeout is not None else LOCK_TIMEOUT, first.path)
        removed = _remove_leftover(j, base, by_path)
        j.note()  # the new file as we leave it (a leftover link of ours removed)
    others = [by_path.get(os.path.normpath(os.path.join(base, rel))) for rel in j.record["others"]]
    results = switch_all(j, first, [o for o in others if o is not None])
    for other, outcome, why in results:
        if outcome in (DIFFERS, FAILED):
            job.warn(other.path, f"not re-pointed at {first.path} as an earlier run had begun ({why})" +
                     ("; the journal is kept for the next run" if outcome == FAILED else ""))
    return removed + sum(r[1] == SWITCHED for r in results), not j.record["others"]


def _remove_leftover(j: Journal, base: str, by_path: dict[str, Name]) -> int:
    """Remove the link a kill left under the temp name the journal recorded for it, if that name still
    names the journal's new file (1 if removed: the tree must be walked again)."""
    left = j.record.pop("linking", None)
    leftover = by_path.get(os.path.normpath(os.path.join(base, left))) if isinstance(left, str) else None
    if leftover is None or not TEMP_RE.match(leftover.name):
        return 0
    with place_of(leftover) as p:
        return int(remove_link(j, p))


def replay_journals(journals: list[tuple[Chain, str, str]], groups: list[Group], job: Job) -> int:
    """Complete the re-pointing that killed (or failed) runs left half done; how many names were switched.

    A journal is trusted only if it is a regular file of this user, writable by no one else, that no live
    run holds a lock on; a name is switched only if it is a file of this walk that still names the journal's
    old inode exactly as recorded (device, inode, size, mtime and ctime) while the first name names its new
    one as recorded; a name that differs is left as it is, with a warning."""

    by_path = {os.path.normpath(n.path): n for g in groups for n in g.names}  # looked up normalized: "tree/."
    switched = 0
    for chain, jname, jpath in journals:
        try:
            dfd = open_chain(chain)
        except ElfPatchError:
            continue
        fd = trusted(dfd, jname)
        if fd is None:
            os.close(dfd)
            continue
        j = Journal(dfd, jname, fd, {})
        done = False
        try:
            j.load()
            n, done = _replay(j, os.path.dirname(jpath), by_path, job)
            switched += n
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ElfPatchError) as exc:
            job.warn(jpath, f"could not complete the re-linking an earlier run left: {one_line(str(exc))}")
        finally:
            j.finish(remove=done)
            os.close(dfd)
            if done:
                changed(os.path.dirname(jpath))
    return switched


# A group's reports, its names that are no target, the warnings a pool worker logged, and the directories
# whose entries its re-pointing changed (fsynced once each at the end of the run, with --fsync).
Result = tuple[list[FileReport], int, list[logging.LogRecord], list[str]]


def _run(args: tuple[Group, Job, str], dirs: Dirs | None = None) -> Result:
    group, job, root = args
    try:
        reports, other = process_group(group, job, root, dirs)
    except ElfPatchError as exc:
        reports, other = [error_report(exc.path or group.names[0].path, exc)], 0
    return reports, other, [], take_changed()


def _run_in_worker(args: tuple[Group, Job, str]) -> Result:
    """``_run`` in a pool process: its warnings travel back with its reports, to the caller's handlers (a lock
    wait it said at once among them, for the JSON only)."""
    _worker_waits.records.clear()
    _worker_capture.records.clear()
    reports, skipped, _, changed_dirs = _run(args, _worker_dirs)
    return reports, skipped, [*_worker_waits.records, *_worker_capture.records], changed_dirs


_worker_dirs = Dirs()  # a pool process's (it starts empty: the parent keeps none past its own run)
_worker_waits = WarningLog(shown=True)  # a pool process's lock-wait notices, said at once and kept for its results
_worker_capture = WarningLog()  # its other warnings: one handler for all its tasks (making one cost 5 us a task)


def _init_worker() -> None:
    """A pool process says a lock wait at once through the handlers it inherited (its other warnings travel
    back with its reports, which would be too late for this one), and keeps it to send back for the JSON."""
    from elfpatch.fs.source import wait_log

    waits = wait_log()
    shown = [h for h in LOG.handlers if not isinstance(h, WarningLog)]
    waits.handlers, waits.propagate = [*shown, _worker_waits], False
    LOG.handlers, LOG.propagate = [_worker_capture], False


def workers() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _parallel(groups: list[Group], job: Job) -> int:
    """How many worker processes to use (1: none)."""
    n = min(workers(), 8, len(groups))
    if n < 2 or (len(groups) < PARALLEL_MIN_FILES and sum(g.size for g in groups) < PARALLEL_MIN_BYTES):
        return 1
    try:
        pickle.dumps(job)
    except Exception:  # noqa: BLE001 - whatever cannot cross to a worker process
        return 1
    return n


@few_collections  # a tree's reports form no cycles (elfpatch.collector)
def process_tree(root: str, job: Job) -> Outcome:
    """The tree's walk and every group's reports."""
    return _process_tree(root, job)


def _process_tree(root: str, job: Job) -> Outcome:
    if job.output:
        raise WriteError("-o/--output takes a file, not a directory", root)
    if job.output_dir:
        raise WriteError("-w/--output-dir takes files, archives and wheels, not a directory", root)
    take_changed()  # nothing an earlier run of this process left
    groups, skipped, journals, probable = walk(root, job.exclude)
    if journals and job.writes and replay_journals(journals, groups, job):
        # names were re-pointed (a leftover link removed): group them again
        groups, skipped, journals, probable = walk(root, job.exclude)
    warn_probable(probable)  # after the repair, from the walk whose groups are processed: once, and true
    changed_dirs = set(take_changed())  # by the journals' replay
    teststop.stop("walked")
    outcome = Outcome(skipped=skipped)
    try:
        _process_groups(groups, job, root, outcome, changed_dirs)
    finally:
        if job.fsync:  # once per directory, after every change the run made to it
            _fsync_changed(changed_dirs, outcome)
    return outcome


def _process_groups(groups: list[Group], job: Job, root: str, outcome: Outcome, changed_dirs: set[str]) -> None:
    """Every group processed, in a pool when it pays, into ``outcome``; the directories whose entries their
    re-pointing changed into ``changed_dirs``."""
    progress, job = job.progress, _without_progress(job)
    tasks = [(g, job, root) for g in groups]
    if progress is not None:
        progress.begin(len(tasks))
    n = _parallel(groups, job)
    if n > 1:
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        # The archive and ELF readers (archive imports elf), imported here once: forked workers share them
        # instead of each importing them again (the rarer wheel's reader stays lazy).
        import elfpatch.targets.archive  # noqa: F401

        try:
            with ProcessPoolExecutor(n, initializer=_init_worker) as pool:
                _collect(pool.map(_run_in_worker, tasks, chunksize=max(1, len(tasks) // (n * 16))), outcome, progress,
                         changed_dirs)
        except BrokenProcessPool as exc:
            raise WriteError("a worker process died (out of memory?); files done before it are patched, "
                             "run again to finish", root) from exc
    else:
        dirs = Dirs()
        try:
            _collect((_run(task, dirs) for task in tasks), outcome, progress, changed_dirs)
        finally:
            dirs.clear()


def _fsync_changed(changed_dirs: set[str], outcome: Outcome) -> None:
    """--fsync: each directory whose entries the re-pointing changed, fsynced once, as the commit fsyncs the
    directory of its rename; one that cannot be is an error (its names may not survive a power loss)."""
    for path, exc in fsync_dirs(changed_dirs):
        outcome.reports.append(FileReport(path, ERROR, error=f"cannot fsync the directory after re-pointing hard "
                                          f"links in it: {exc.strerror or exc}"))


def _without_progress(job: Job) -> Job:
    """The job as the groups get it: its progress listener is told here, by this process alone (and need not
    cross to a pool worker)."""
    if job.progress is None:
        return job
    import copy

    job = copy.copy(job)
    job.progress = None
    return job


def _collect(results: Iterable[Result], outcome: Outcome, progress: ProgressEvents | None,
             changed_dirs: set[str]) -> None:
    try:
        for reports, other, records, dirs in results:
            changed_dirs.update(dirs)
            for record in records:
                replay(record)
            outcome.reports.extend(reports)
            outcome.other += other
            if progress is not None:
                progress.step(bool(reports))
    finally:
        if progress is not None:
            progress.end()
