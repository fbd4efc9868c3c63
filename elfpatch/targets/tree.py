"""A directory PATH: walked in sorted order without following symlinks; every regular file that is an ELF
file, an ar archive or a wheel is processed, anything else is counted (as other).

- Symlinks are never followed: a link (to a file or a directory, inside the tree or out of it) is left as it
  is and counted as skipped; a target inside the tree is visited under its own name.
- Hard links: each inode is processed once, under its first name in sorted order. When the default mode
  replaces it by a new inode, the tree's other names for it are re-pointed at the new inode (link to a temp
  name beside each, rename over it), so they stay hard links of one, patched, file. Names outside the tree
  keep the old file, with a warning; --inplace keeps every name, since it writes into the inode itself.
- The walk reads every directory before anything is written: an unreadable directory fails the whole tree
  and changes nothing. Each file is then committed on its own (atomically, as a single PATH would be).
- Larger trees are spread over a process pool (one process per core); reports stay in sorted order.
- ``--exclude`` globs match paths relative to the root; excluded files are counted as skipped. Regular
  files that are no target kind are counted apart, as ``other``.
"""
from __future__ import annotations

import logging
import os
import pickle
import stat
import sys
import time
from typing import Iterable

from elfpatch.errors import LOG, ElfPatchError, WriteError
from elfpatch.report import FileReport
from elfpatch.targets import Exclude, Job, Outcome, error_report, kind_of, read_head, renamed
from elfpatch.targets.files import process_file
from elfpatch.write import temp_name

# Below this many files and bytes a process pool costs more to start (~50 ms) than it saves.
PARALLEL_MIN_FILES = 16
PARALLEL_MIN_BYTES = 32 << 20


class Group:
    """One inode of the tree: its names (sorted; the first is processed) and its size."""

    __slots__ = ("paths", "size")

    def __init__(self, paths: list[str], size: int) -> None:
        self.paths = paths
        self.size = size


def walk(root: str, exclude: Exclude | None = None) -> tuple[list[Group], int]:
    """Regular files below ``root`` grouped by inode, in sorted order of their first name, and how many
    entries were passed over (symlinks, devices, sockets, FIFOs, names ``exclude`` matches)."""
    groups: dict[tuple[int, int], Group] = {}
    skipped = 0

    def onerror(exc: OSError) -> None:
        raise WriteError(f"cannot read directory: {exc.strerror}", exc.filename)

    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror):
        dirnames.sort()
        skipped += sum(os.path.islink(os.path.join(dirpath, d)) for d in dirnames)  # never descended into
        for name in filenames:
            path = os.path.join(dirpath, name)
            if exclude and exclude.excludes(os.path.relpath(path, root)):
                skipped += 1
                continue
            try:
                st = os.lstat(path)
            except OSError:
                skipped += 1
                continue
            if not stat.S_ISREG(st.st_mode):
                skipped += 1
                continue
            group = groups.get((st.st_dev, st.st_ino))
            if group is None:
                groups[(st.st_dev, st.st_ino)] = Group([path], st.st_size)
            else:
                group.paths.append(path)
    for group in groups.values():
        group.paths.sort()
    return sorted(groups.values(), key=lambda g: g.paths[0]), skipped


def relink(first: str, others: list[str]) -> None:
    """Point every name in ``others`` at ``first``'s inode, each switch atomic."""
    for other in others:
        tmp = temp_name(other)
        try:
            os.link(first, tmp)
            os.replace(tmp, other)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise WriteError(f"cannot re-link to the patched {first}: {exc.strerror}", other) from exc


def process_group(paths: list[str], job: Job, root: str) -> tuple[list[FileReport], int]:
    """One inode of the tree: (its reports, 0), or ([], number of names) when it is no target kind."""
    try:
        head = read_head(paths[0])
    except OSError as exc:
        return [error_report(paths[0], ElfPatchError(f"cannot open: {exc.strerror}"))], 0
    kind = kind_of(head, paths[0])
    if kind is None:
        return [], len(paths)
    reports = process_file(paths[0], job, kind, in_tree_links=len(paths), root=root)
    if len(paths) > 1 and renamed(reports, job):
        relink(paths[0], paths[1:])
    return reports, 0


Result = tuple[list[FileReport], int, list[logging.LogRecord]]


def _run(args: tuple[list[str], Job, str]) -> Result:
    paths, job, root = args
    try:
        return (*process_group(paths, job, root), [])
    except ElfPatchError as exc:
        return [error_report(exc.path or paths[0], exc)], 0, []


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _run_in_worker(args: tuple[list[str], Job, str]) -> Result:
    """``_run`` in a pool process: its warnings travel back with its reports, to the caller's handlers."""
    capture = _Capture()
    LOG.handlers, LOG.propagate = [capture], False
    reports, skipped, _ = _run(args)
    return reports, skipped, capture.records


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


def process_tree(root: str, job: Job) -> Outcome:
    if job.output:
        raise WriteError("-o/--output takes a file, not a directory", root)
    if job.output_dir:
        raise WriteError("-w/--output-dir takes files, archives and wheels, not a directory", root)
    groups, skipped = walk(root, job.exclude)
    outcome = Outcome(skipped=skipped)
    tasks = [(g.paths, job, root) for g in groups]
    progress = Progress(len(tasks)) if job.progress and sys.stderr.isatty() else None
    n = _parallel(groups, job)
    if n > 1:
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        try:
            with ProcessPoolExecutor(n) as pool:
                _collect(pool.map(_run_in_worker, tasks, chunksize=max(1, len(tasks) // (n * 16))), outcome, progress)
        except BrokenProcessPool as exc:
            raise WriteError("a worker process died (out of memory?); files done before it are patched, "
                             "run again to finish", root) from exc
    else:
        _collect(map(_run, tasks), outcome, progress)
    return outcome


def _collect(results: Iterable[Result], outcome: Outcome, progress: Progress | None) -> None:
    try:
        for reports, other, records in results:
            for record in records:
                LOG.handle(record)
            outcome.reports.extend(reports)
            outcome.other += other
            if progress is not None:
                progress.step(bool(reports))
    finally:
        if progress is not None:
            progress.close()


class Progress:
    """A one-line progress bar on stderr (a TTY), redrawn at most ten times a second, erased at the end."""

    WIDTH = 30

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.files = 0
        self.last = 0.0

    def step(self, processed: bool) -> None:
        self.done += 1
        self.files += processed
        now = time.monotonic()
        if now - self.last < 0.1 and self.done < self.total:
            return
        self.last = now
        filled = self.WIDTH * self.done // max(self.total, 1)
        sys.stderr.write(f"\relfpatch: [{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} "
                         f"files ({self.files} ELF, archives or wheels)")
        sys.stderr.flush()

    def close(self) -> None:
        if self.last:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
