"""The Python API behind `elfpatch unique`: the same records the CLI reports."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Union

from elfpatch.errors import ElfPatchError
from elfpatch.report import ERROR, FileReport
from elfpatch.symbols import TARGET_BINDINGS, NameFilter
from elfpatch.targets import CHECK, DRY_RUN, PATCH, Job
from elfpatch.targets.dispatch import process

if TYPE_CHECKING:
    from elfpatch.collisions import Audit

Paths = Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]]
Globs = Union[str, Iterable[str]]


def _paths(paths: Paths) -> list[str]:
    if isinstance(paths, (str, bytes, os.PathLike)):
        return [os.fsdecode(paths)]
    return [os.fsdecode(p) for p in paths]


def _globs(globs: Globs, parameter: str) -> tuple[str, ...]:
    """A list parameter's globs: one string is one glob (never its characters, one by one), as ``paths`` takes
    one path; an item that is not a string is refused (ValueError) before anything is opened."""
    items = (globs,) if isinstance(globs, str) else tuple(globs)
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"{parameter}: each glob must be a string, not {item!r}")
    return items


def _raise(r: FileReport) -> None:
    """Raise the error of a failed report as the kind it was, naming the file (or ``archive[member]``)."""
    if r.exception is not None:
        raise type(r.exception)(r.exception.message, r.label) from r.exception
    raise ElfPatchError(r.error or "failed", r.label)


def run(paths: Paths, job: Job, raise_errors: bool = True) -> list[FileReport]:
    """Run ``job`` over ``paths``; with ``raise_errors`` the first failing file raises its ElfPatchError
    (after the files before it were done), otherwise failures are reports with status "error"."""
    names = _paths(paths)
    job.check_paths(names)
    reports: list[FileReport] = []
    for path in names:
        for r in process(path, job).reports:
            if r.status == ERROR and raise_errors:
                _raise(r)
            reports.append(r)
    return reports


def _job(mode: str, to: str, symbols: Globs, **kw: object) -> Job:
    if to not in TARGET_BINDINGS:
        raise ValueError(f"to must be one of {sorted(TARGET_BINDINGS)}, not {to!r}")
    return Job(mode=mode, to=TARGET_BINDINGS[to], names=NameFilter(_globs(symbols, "symbols")), **kw)  # type: ignore[arg-type]


def scan(paths: Paths, symbols: Globs = (), to: str = "global",
         raise_errors: bool = True) -> list[FileReport]:
    """What `elfpatch unique --dry-run` reports: every selected unique symbol, nothing written."""
    return run(paths, _job(DRY_RUN, to, symbols), raise_errors)


def check(paths: Paths, symbols: Globs = ()) -> bool:
    """True when any selected unique symbol exists (what makes `--check` exit 1)."""
    return any(r.symbols for r in run(paths, _job(CHECK, "global", symbols)))


def patch(paths: Paths, to: str = "global", symbols: Globs = (), inplace: bool = False,
          output: str | None = None, fsync: bool = False, raise_errors: bool = True,
          output_dir: str | None = None, lock_timeout: float | None = None) -> list[FileReport]:
    """Rewrite the selected unique symbols to GLOBAL or WEAK; atomically unless ``inplace``. ``output`` (one
    PATH) or ``output_dir`` (each PATH under its own name, the directory created if need be) leave the PATHs
    untouched, as -o and -w do. ``lock_timeout``: seconds to wait for another process's lock on a file, as
    --lock-timeout (None: its default)."""
    job = _job(PATCH, to, symbols, inplace=inplace, output=output, fsync=fsync, output_dir=output_dir,
               lock_timeout=lock_timeout)
    return run(paths, job, raise_errors)


def audit(paths: Paths, exclude: Globs = (), raise_errors: bool = True) -> Audit:
    """What `elfpatch audit` reports: unique names that several files (and packages) define; nothing written.
    ``result.to_json()`` is the ``--json`` document; ``result.exit_status()`` the CLI's status."""
    from elfpatch.collisions import audit_job, run_audit

    names = _paths(paths)
    job = audit_job(_globs(exclude, "exclude"))
    job.check_paths(names)
    result = run_audit(names, job)
    if raise_errors and result.errors:
        _raise(result.errors[0])
    return result
