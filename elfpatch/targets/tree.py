"""A directory PATH: walked in sorted order without following symlinks; every regular file that is an ELF
file, an ar archive or a wheel is processed, anything else is counted as skipped.

Hard links: each inode is processed once, under its first name. When the default mode replaces it by a
new inode, the tree's other names for it are re-pointed at the new inode (link to a temp name, rename over
the old name), so they stay hard links of one, patched, file. Names outside the tree keep the old file, with
a warning; --inplace keeps every name, since it writes into the inode itself.
"""
from __future__ import annotations

import os
import stat
import sys

from elfpatch.errors import WriteError
from elfpatch.report import FileReport
from elfpatch.targets import Job, Outcome, detect, process_file, renamed
from elfpatch.write import temp_name

# Below this many files a process pool costs more to start than it saves.
PARALLEL_MIN_FILES = 24


def walk(root: str) -> tuple[list[list[str]], int]:
    """Regular files below ``root`` grouped by inode (first name first, groups in sorted order of their
    first name), and how many entries were passed over (symlinks, devices, sockets, FIFOs)."""
    groups: dict[tuple[int, int], list[str]] = {}
    skipped = 0

    def onerror(exc: OSError) -> None:
        raise WriteError(f"cannot read directory: {exc.strerror}", exc.filename)

    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror):
        dirnames.sort()
        skipped += sum(os.path.islink(os.path.join(dirpath, d)) for d in dirnames)  # never descended into
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                skipped += 1
                continue
            if not stat.S_ISREG(st.st_mode):
                skipped += 1
                continue
            groups.setdefault((st.st_dev, st.st_ino), []).append(path)
    ordered = sorted((sorted(paths) for paths in groups.values()), key=lambda paths: paths[0])
    return ordered, skipped


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


def process_group(paths: list[str], job: Job) -> tuple[list[FileReport], int]:
    """One inode of the tree: (its reports, 0) or ([], number of names skipped) when it is no target kind."""
    kind = detect(paths[0])
    if kind is None:
        return [], len(paths)
    reports = process_file(paths[0], job, kind, in_tree_links=len(paths))
    if len(paths) > 1 and renamed(reports, job):
        relink(paths[0], paths[1:])
    return reports, 0


def _run(args: tuple[list[str], Job]) -> tuple[list[FileReport], int]:
    from elfpatch.errors import ElfPatchError
    from elfpatch.targets import error_report

    paths, job = args
    try:
        return process_group(paths, job)
    except ElfPatchError as exc:
        return [error_report(exc.path or paths[0], exc)], 0


def process_tree(root: str, job: Job) -> Outcome:
    if job.output:
        raise WriteError("-o/--output takes a file, not a directory", root)
    groups, skipped = walk(root)
    outcome = Outcome(skipped=skipped)
    tasks = [(paths, job) for paths in groups]
    workers = min(os.cpu_count() or 1, 8)
    if workers > 1 and len(tasks) >= PARALLEL_MIN_FILES:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers) as pool:
            results = pool.map(_run, tasks, chunksize=max(1, len(tasks) // (workers * 8)))
            _collect(results, outcome, len(tasks), job)
    else:
        _collect(map(_run, tasks), outcome, len(tasks), job)
    return outcome


def _collect(results, outcome: Outcome, total: int, job: Job) -> None:
    for i, (reports, skipped) in enumerate(results, 1):
        outcome.reports.extend(reports)
        outcome.skipped += skipped
        if job.progress:
            sys.stderr.write(f"\relfpatch: {i}/{total} files")
            sys.stderr.flush()
    if job.progress and total:
        sys.stderr.write("\n")
