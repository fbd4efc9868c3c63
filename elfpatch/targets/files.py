"""One regular file, sent to its kind: an ar archive, a wheel or an ELF file.

The kinds' modules are imported only when a file of that kind comes up, so `elfpatch unique` on ELF files
loads no zip code."""
from __future__ import annotations

import os

from elfpatch.errors import ElfPatchError
from elfpatch.report import FileReport
from elfpatch.targets import ARCHIVE, WHEEL, Job, error_report, renamed

TYPE_CHECKING = False  # typing is not imported on the read path
if TYPE_CHECKING:
    from elfpatch.fs.source import Place


def process_file(path: str, job: Job, kind: str | None, in_tree_links: int = 1,
                 root: str | None = None, place: Place | None = None) -> list[FileReport]:
    """One regular file of a known kind (None: treated as ELF, whose reader names what is wrong).

    ``in_tree_links``: how many of the file's hard links the caller re-points at the patched file itself;
    ``root``: the directory tree being walked, if any (a thin archive's members are then the walk's);
    ``place``: where the file is (a tree's directory fd and name), else found from ``path``."""
    links = 1  # the kind's own open reports a file that cannot be stat'ed
    if job.replaces:  # only a rename can leave other names behind
        try:
            st = place.lstat() if place is not None else os.stat(path)
            links = st.st_nlink if st is not None else 1
        except OSError:
            pass
    try:
        if kind == ARCHIVE:
            from elfpatch.targets.archive import process_archive

            reports = process_archive(path, job, root, place=place)
        elif kind == WHEEL:
            from elfpatch.targets.wheel import process_wheel

            reports = process_wheel(path, job, place=place)
        else:
            from elfpatch.targets.elf import process_elf

            reports = [process_elf(path, job, place=place)]
    except ElfPatchError as exc:
        reports = [error_report(path, exc)]
    if job.exclude.used:  # back to the caller across a process pool: which globs were used
        reports[0].excluded_by = tuple(job.exclude.used)
    if links > in_tree_links and renamed(reports, job):
        job.warn(path, f"had {links} hard links; the atomic rename gave this name a new inode, so "
                 f"{links - in_tree_links} other name(s) keep the unpatched file (--inplace patches every name)")
    return reports
