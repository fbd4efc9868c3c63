"""What a PATH can be. Each kind opens its bytes, finds the ELF images inside, plans their edits and commits
them through elfpatch.write: an ELF file, an ar archive or a wheel (each its own module), or a directory
tree of them (tree.py)."""
from __future__ import annotations

import os
import stat
import struct
import sys
from typing import Any, Callable, Iterable

from elfpatch.errors import ElfPatchError, ParseError, one_line
from elfpatch.report import ERROR, PATCHED, FileReport
from elfpatch.symbols import STB_GLOBAL, NameFilter

PATCH, CHECK, DRY_RUN = "patch", "check", "dry-run"
ELF, ARCHIVE, WHEEL = "elf", "archive", "wheel"


def _warn(path: str, message: str) -> None:
    print(one_line(f"elfpatch: warning: {path}: {message}"), file=sys.stderr)


class Exclude:
    """``--exclude GLOB`` filters on file names: a tree's paths relative to its root, archive and wheel member
    names, a PATH as given. A glob with a ``/`` matches the whole name (``*`` crosses ``/``, as in fnmatch);
    one without matches the last component too, as in .gitignore (``test_*`` anywhere)."""

    def __init__(self, globs: Iterable[str] = ()) -> None:
        import fnmatch
        import re

        self.globs = tuple(globs)
        whole = "|".join(fnmatch.translate(g) for g in self.globs)
        base = "|".join(fnmatch.translate(g) for g in self.globs if "/" not in g)
        self._whole = re.compile(whole) if whole else None
        self._base = re.compile(base) if base else None

    def __bool__(self) -> bool:
        return self._whole is not None

    def excludes(self, name: str) -> bool:
        if self._whole is None:
            return False
        name = name.replace(os.sep, "/")
        if self._whole.match(name):
            return True
        return self._base is not None and bool(self._base.match(name.rstrip("/").rsplit("/", 1)[-1]))


class Job:
    """What `elfpatch unique` (or `audit`) was asked to do, shared by every target kind.

    ``inspect``: called with each ELF image the job plans (and whether it is an archive or wheel member); what
    it returns becomes the report's ``facts``. A module-level function, so that a tree's worker processes can
    run it."""

    def __init__(self, mode: str = PATCH, to: int = STB_GLOBAL, names: NameFilter | None = None,
                 inplace: bool = False, output: str | None = None, fsync: bool = False,
                 warn: Callable[[str, str], None] = _warn, progress: bool = False,
                 exclude: Exclude | None = None, inspect: Callable[[Any, bool], Any] | None = None) -> None:
        self.mode = mode
        self.to = to
        self.names = names if names is not None else NameFilter()
        self.inplace = inplace
        self.output = output
        self.fsync = fsync
        self.warn = warn
        self.progress = progress  # a progress line on stderr for trees
        self.exclude = exclude if exclude is not None else Exclude()
        self.inspect = inspect

    @property
    def writes(self) -> bool:
        return self.mode == PATCH


class Outcome:
    """The reports of one PATH; how many entries a tree walk passed over for a reason (``skipped``: symlinks,
    devices, --exclude) and how many regular files were no target kind (``other``: not ELF, archive or
    wheel)."""

    def __init__(self, reports: list[FileReport] | None = None, skipped: int = 0, other: int = 0) -> None:
        self.reports = reports if reports is not None else []
        self.skipped = skipped
        self.other = other


def error_report(path: str, exc: ElfPatchError, member: str | None = None) -> FileReport:
    return FileReport(path, ERROR, error=exc.message, member=member)


def read_head(path: str) -> bytes:
    """The first 8 bytes of a file (raises OSError). O_NONBLOCK: a FIFO must not hang the run; only
    regular files have a kind."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.pread(fd, 8, 0)
    finally:
        os.close(fd)


def kind_of(head: bytes, path: str) -> str | None:
    """The kind of a regular file from its first bytes: ELF, ar archive (regular or thin), wheel (a zip file
    named *.whl), or None for anything else."""
    from elfpatch.arfmt import is_archive

    if head[:4] == b"\x7fELF":
        return ELF
    if is_archive(head):
        return ARCHIVE
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06") and path.endswith(".whl"):  # a member first, or empty
        return WHEEL
    return None


def detect(path: str) -> str | None:
    """``kind_of`` the file at ``path``; None also when it cannot be read (the kind's own open then reports
    why)."""
    try:
        head = read_head(path)
    except OSError:
        return None
    return kind_of(head, path)


def process(path: str, job: Job) -> Outcome:
    """Run ``job`` on one PATH; failures become error reports, never exceptions."""
    try:
        if os.path.isdir(path):
            from elfpatch.targets.tree import process_tree

            return process_tree(path, job)
        if job.exclude.excludes(path):
            return Outcome(skipped=1)
        return Outcome(process_file(path, job, detect(path)))
    except ElfPatchError as exc:
        return Outcome([error_report(path, exc)])


def process_file(path: str, job: Job, kind: str | None, in_tree_links: int = 1,
                 root: str | None = None) -> list[FileReport]:
    """One regular file of a known kind (None: treated as ELF, whose reader names what is wrong).

    ``in_tree_links``: how many of the file's hard links the caller re-points at the patched file itself;
    ``root``: the directory tree being walked, if any (a thin archive's members are then the walk's)."""
    try:
        links = os.stat(path).st_nlink
    except OSError:
        links = 1  # the kind's own open reports the error
    try:
        if kind == ARCHIVE:
            from elfpatch.targets.archive import process_archive

            reports = process_archive(path, job, root)
        elif kind == WHEEL:
            from elfpatch.targets.wheel import process_wheel

            reports = process_wheel(path, job)
        else:
            from elfpatch.targets.elf import process_elf

            reports = [process_elf(path, job)]
    except ElfPatchError as exc:
        return [error_report(path, exc)]
    except (struct.error, ValueError, IndexError, OverflowError) as exc:
        # A low-level parse failure the bounds checks did not phrase: still one line, still exit 2.
        return [error_report(path, ParseError(f"malformed file ({exc})"))]
    if links > in_tree_links and renamed(reports, job):
        job.warn(path, f"had {links} hard links; the atomic rename gave this name a new inode, so "
                 f"{links - in_tree_links} other name(s) keep the unpatched file (--inplace patches every name)")
    return reports


def renamed(reports: list[FileReport], job: Job) -> bool:
    """Whether committing these reports replaced the file by a new inode (the default atomic mode)."""
    return job.writes and not job.inplace and not job.output and any(r.status == PATCHED for r in reports)


def commit(src: object, edits: list, verify: Callable[[bytes], None], job: Job) -> None:
    """Write ``edits`` to the file behind ``src`` the way the job asks: in place, or atomically (to -o OUT)."""
    from elfpatch.write import replace_atomic, write_inplace

    if job.inplace:
        write_inplace(src, edits, verify, fsync=job.fsync)
    else:
        replace_atomic(src, edits, verify, output=job.output, fsync=job.fsync)
