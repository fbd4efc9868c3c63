"""What a PATH can be. Each kind opens its bytes, finds the ELF images inside, plans their edits and commits
them through elfpatch.fs.commit: an ELF file, an ar archive or a wheel (each its own module), or a directory
tree of them (tree.py). dispatch.py sends a PATH to its kind.

This module holds what every kind shares (the job, the outcome, how a file's kind is told) and imports none
of them, so that no import cycle runs through the package."""
from __future__ import annotations

import os

from elfpatch.elf.const import ELFMAG, STB_GLOBAL, STB_WEAK
from elfpatch.elf.symbols import NameFilter
from elfpatch.errors import ElfPatchError, warn
from elfpatch.fs.regular import NotRegular, open_at
from elfpatch.report import ERROR, PATCHED, FileReport

TYPE_CHECKING = False  # typing is not imported on the read path
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Protocol, Sequence

    from elfpatch.fs.source import Place, Source

    class ProgressEvents(Protocol):
        """What a tree walk tells of its progress (the CLI's bar is elfpatch.commands.progress)."""

        def begin(self, total: int) -> None: ...
        def step(self, processed: bool) -> None: ...
        def end(self) -> None: ...
    from elfpatch.fs.commit import Verifier

PATCH, CHECK, DRY_RUN = "patch", "check", "dry-run"
ELF, ARCHIVE, WHEEL = "elf", "archive", "wheel"


class Exclude:
    """``--exclude GLOB`` filters on file names: a tree's paths relative to its root, archive and wheel member
    names, a PATH as given. A glob with a ``/`` matches the whole name (``*`` crosses ``/``, as in fnmatch);
    one without matches the last component too, as in .gitignore (``test_*`` anywhere).

    Each glob that matched is remembered (``unused`` lists the others), so that a glob that passed over
    nothing is reported rather than silently blind."""

    def __init__(self, globs: Iterable[str] = ()) -> None:
        import fnmatch
        import re

        self.globs = tuple(globs)
        self._each = [(g, re.compile(fnmatch.translate(g)), "/" not in g) for g in self.globs]
        whole = "|".join(fnmatch.translate(g) for g in self.globs)
        base = "|".join(fnmatch.translate(g) for g in self.globs if "/" not in g)
        self._whole = re.compile(whole) if whole else None
        self._base = re.compile(base) if base else None
        self.used: set[str] = set()

    def __bool__(self) -> bool:
        return self._whole is not None

    def excludes(self, name: str) -> bool:
        return self.matching(name) is not None

    def matching(self, name: str) -> str | None:
        """The first glob that excludes ``name`` (remembered as used), or None."""
        if self._whole is None:
            return None
        name = name.replace(os.sep, "/")
        last = name.rstrip("/").rsplit("/", 1)[-1]
        if not self._whole.match(name) and not (self._base is not None and self._base.match(last)):
            return None
        for glob, rx, bare in self._each:  # only on a match: which glob it was
            if rx.match(name) or (bare and rx.match(last)):
                self.used.add(glob)
                return glob
        return None  # not reached: the joined patterns match only where one glob does

    def unused(self) -> list[str]:
        """The globs that have excluded nothing so far, in the order given."""
        return [g for g in dict.fromkeys(self.globs) if g not in self.used]

    def warn_unused(self, reports: Iterable[FileReport] = ()) -> list[str]:
        """Warn about each glob that passed over nothing (globs match paths relative to a tree's root, so
        ``*/test/*`` on ``site-packages/torch`` misses ``test/...`` and would exclude nothing, silently);
        returns the warnings as ``--exclude: message`` lines, for a JSON document's ``warnings``. ``reports``:
        those that carry member globs used in a pool worker."""
        for r in reports:
            self.used.update(r.excluded_by)
        lines = []
        for glob in self.unused():
            hint = f"; for a directory at a tree's root: {glob[2:]!r}" if glob.startswith("*/") else ""
            message = (f"{glob!r} matched nothing (globs match a path relative to each tree's root, an archive "
                       "or wheel member name, or a PATH as given; a glob without / matches a file name anywhere"
                       f"{hint})")
            warn("--exclude", message)
            lines.append(f"--exclude: {message}")
        return lines


class Job:
    """What `elfpatch unique` (or `audit`) was asked to do, shared by every target kind.

    Option combinations that could only harm the input are refused here, where the CLI and the API both pass,
    with a ValueError before anything is opened (the CLI turns it into a usage error, exit 2).

    ``exclude``: names to pass over. ``inspect``: called with each ELF image the job plans (and whether it is
    an archive or wheel member); what it returns becomes the report's ``facts``. A module-level function, so
    that a tree's worker processes can run it."""

    def __init__(self, mode: str = PATCH, to: int = STB_GLOBAL, names: NameFilter | None = None,
                 inplace: bool = False, output: str | None = None, fsync: bool = False,
                 progress: ProgressEvents | None = None, exclude: Exclude | None = None,
                 inspect: Callable[[Any, bool], Any] | None = None, output_dir: str | None = None,
                 lock_timeout: float | None = None) -> None:
        if mode not in (PATCH, CHECK, DRY_RUN):
            raise ValueError(f"mode must be one of {PATCH!r}, {CHECK!r} or {DRY_RUN!r}, not {mode!r}")
        if to not in (STB_GLOBAL, STB_WEAK):
            raise ValueError(f"the new binding must be STB_GLOBAL or STB_WEAK, not {to!r}")
        _check_writes(mode, inplace, output, output_dir)
        if lock_timeout is not None and not (isinstance(lock_timeout, (int, float))
                                             and 0 <= lock_timeout < float("inf")):
            raise ValueError(f"the lock timeout must be a number of seconds, not {lock_timeout!r}")
        self.mode = mode
        self.to = to
        self.names = names if names is not None else NameFilter()
        self.inplace = inplace
        self.output = os.fspath(output) if output is not None else None
        self.output_dir = os.fspath(output_dir) if output_dir is not None else None  # -w DIR
        self.fsync = fsync
        # Told of each tree's progress (the library draws nothing; the CLI passes its bar). A bool, the old
        # form, is taken as nothing to tell.
        self.progress = None if isinstance(progress, bool) else progress
        self.exclude = exclude if exclude is not None else Exclude()
        self.inspect = inspect
        self.lock_timeout = lock_timeout  # seconds to wait for another process's lock (None: the default)

    def check_paths(self, paths: Sequence[str]) -> None:
        """Refuse (ValueError) what this job cannot do with these PATHs, before any of them is opened. With
        -w DIR, DIR is then created if need be, as auditwheel's -w does."""
        if not paths:
            raise ValueError("no PATH given")
        if self.output is not None and len(paths) != 1:
            raise ValueError(f"-o/--output takes exactly one PATH, not {len(paths)}")
        if self.output is not None or self.output_dir is not None:
            self._check_not_excluded(paths)
        if self.output is not None:
            _check_output_parent(self.output)
        if self.output_dir is not None:
            self._check_output_dir(paths)

    def _check_not_excluded(self, paths: Sequence[str]) -> None:
        """A PATH named with -o/-w that --exclude matches would be passed over: OUT would be left unwritten
        (or stale, from an earlier run) while the run reported success. Refused instead."""
        for path in paths:
            glob = self.exclude.matching(os.fspath(path)) if not os.path.isdir(path) else None
            if glob is not None:
                where = "-o/--output" if self.output is not None else "-w/--output-dir"
                raise ValueError(f"{path}: matches --exclude {glob!r}, so {where} would get no result for it; "
                                 "drop the PATH or the glob")

    def _check_output_dir(self, paths: Sequence[str]) -> None:
        assert self.output_dir is not None  # only with -w DIR
        taken: dict[str, str] = {}
        for path in paths:
            out = self.output_in_dir(path)
            if out in taken and taken[out] != path:
                raise ValueError(f"-w/--output-dir: {taken[out]} and {path} would both be written to {out}")
            taken[out] = path
            if os.path.exists(out) and os.path.exists(path) and os.path.samefile(out, path):
                raise ValueError(f"-w/--output-dir: {path} is already in {self.output_dir}; inputs stay untouched")
        try:  # last: a refused run leaves no directory behind
            os.makedirs(self.output_dir, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"-w/--output-dir {self.output_dir}: {exc.strerror or exc}") from None

    def output_in_dir(self, path: str) -> str:
        """Where -w DIR writes the result of ``path``: DIR/its own name."""
        assert self.output_dir is not None  # only with -w DIR
        return os.path.join(self.output_dir, os.path.basename(os.path.normpath(path)))

    def for_path(self, path: str) -> Job:
        """The job for one PATH: with -w DIR, this job writing to DIR/its own name (-o), else this job."""
        if self.output_dir is None:
            return self
        import copy

        job = copy.copy(self)
        job.output, job.output_dir = self.output_in_dir(path), None
        return job

    @staticmethod
    def warn(path: str, message: str) -> None:
        warn(path, message)

    @property
    def writes(self) -> bool:
        return self.mode == PATCH

    @property
    def replaces(self) -> bool:
        """Whether a patched file is committed as a new inode renamed over its name (the default atomic mode):
        the only commit that can leave the file's other hard-link names behind."""
        return self.writes and not self.inplace and not self.output


def _check_writes(mode: str, inplace: bool, output: str | None, output_dir: str | None) -> None:
    """Refuse the ways of writing that contradict each other or the mode: each would harm the input or write
    somewhere the caller did not ask for. An empty name is an unset variable, not a request to patch PATH."""
    if output is not None and not os.fspath(output):
        raise ValueError("-o/--output is empty (an unset variable?)")
    if output_dir is not None:
        if not os.fspath(output_dir):
            raise ValueError("-w/--output-dir is empty (an unset variable?)")
        if output is not None or inplace or mode != PATCH:
            raise ValueError("-w/--output-dir goes with neither -o, --check, --dry-run nor --inplace")
    if output is not None and (inplace or mode != PATCH):
        raise ValueError("-o/--output goes with neither --check, --dry-run nor --inplace")
    if inplace and mode != PATCH:
        raise ValueError("--inplace goes with neither --check nor --dry-run")


def _check_output_parent(output: str) -> None:
    """-o OUT goes into an existing directory (as cp and cc -o do; -w DIR is created): a missing one is
    named, with OUT, before anything is opened."""
    parent = os.path.dirname(output) or "."
    if not os.path.isdir(parent):
        why = "does not exist" if not os.path.lexists(parent) else "is not a directory"
        raise ValueError(f"-o/--output {output}: its directory {parent} {why}")


class Outcome:
    """The reports of one PATH; how many entries a tree walk passed over for a reason (``skipped``: symlinks,
    devices, --exclude) and how many regular files were no target kind (``other``: not ELF, archive or
    wheel)."""

    def __init__(self, reports: list[FileReport] | None = None, skipped: int = 0, other: int = 0) -> None:
        self.reports = reports if reports is not None else []
        self.skipped = skipped
        self.other = other


def error_report(path: str, exc: ElfPatchError, member: str | None = None) -> FileReport:
    return FileReport(path, ERROR, error=exc.message, member=member, exception=exc)


def read_head(path: str, dir_fd: int | None = None, size: int = 8) -> bytes:
    """The first ``size`` bytes of a file (raises OSError); b"" when it is not a regular file. O_NONBLOCK: a
    FIFO must not hang the run; only regular files have a kind. With ``dir_fd`` (a tree walk's directory),
    ``path`` is a name in it and a symlink put there since the walk is not followed."""
    try:
        fd, _ = open_at(path, dir_fd, follow=dir_fd is None)
    except NotRegular:
        return b""
    try:
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


def kind_of(head: bytes, path: str) -> str | None:
    """The kind of a regular file from its first bytes: ELF, ar archive (regular or thin), wheel (a zip file
    named *.whl), or None for anything else."""
    if head[:4] == ELFMAG:  # the common case first: no import on its path
        return ELF
    from elfpatch.formats.arfmt import is_archive

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


def renamed(reports: list[FileReport], job: Job) -> bool:
    """Whether committing these reports replaced the file by a new inode (the default atomic mode)."""
    return job.replaces and any(r.status == PATCHED for r in reports)


def open_source(path: str, job: Job, place: Place | None = None) -> Source:
    """The input of a kind, opened as the job needs it: locked when the job writes over it, writable for
    --inplace, relative to ``place`` when a tree walk found it."""
    from elfpatch.fs.source import LOCK_TIMEOUT, Source

    writes = job.writes and not job.output
    timeout = job.lock_timeout if job.lock_timeout is not None else LOCK_TIMEOUT
    return Source(path, lock=writes, writable=writes and job.inplace, place=place, lock_timeout=timeout)


def commit(src: Source, edits: list, verify: Verifier, job: Job) -> None:
    """Write ``edits`` to the file behind ``src`` the way the job asks: in place, or atomically (to -o OUT)."""
    from elfpatch.fs.commit import replace_atomic, write_inplace

    if job.inplace:
        write_inplace(src, edits, verify, fsync=job.fsync)
    else:
        replace_atomic(src, edits, verify, output=job.output, fsync=job.fsync)
