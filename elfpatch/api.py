"""The Python API behind the commands: the same records the CLI reports, and the CLI's options by the same
names (``symbols`` for --symbol, ``keep``, ``exclude``, ``lock_timeout``)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable, Union, overload

from elfpatch.elf.symbols import TARGET_BINDINGS, NameFilter
from elfpatch.errors import ElfPatchError
from elfpatch.report import ERROR, FileReport
from elfpatch.targets import CHECK, DRY_RUN, PATCH, Exclude, Job
from elfpatch.targets.dispatch import process

if TYPE_CHECKING:
    from elfpatch.auditing.collisions import Audit

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


def _job(mode: str, to: str, symbols: Globs, keep: Globs, exclude: Globs, **kw: Any) -> Job:
    if to not in TARGET_BINDINGS:
        raise ValueError(f"to must be one of {sorted(TARGET_BINDINGS)}, not {to!r}")
    names = NameFilter(_globs(symbols, "symbols"), _globs(keep, "keep"))
    return Job(mode=mode, to=TARGET_BINDINGS[to], names=names, exclude=Exclude(_globs(exclude, "exclude")), **kw)


def scan(paths: Paths, symbols: Globs = (), to: str = "global", raise_errors: bool = True,
         keep: Globs = (), exclude: Globs = ()) -> list[FileReport]:
    """What `elfpatch unique --dry-run` reports: every selected unique symbol, nothing written. ``keep``
    (--keep): globs of symbols that stay unique; ``exclude`` (--exclude): globs of files to pass over."""
    return run(paths, _job(DRY_RUN, to, symbols, keep, exclude), raise_errors)


def check(paths: Paths, symbols: Globs = (), keep: Globs = (), exclude: Globs = ()) -> bool:
    """True when any selected unique symbol exists (what makes `--check` exit 1); a file that fails raises."""
    return any(r.symbols for r in run(paths, _job(CHECK, "global", symbols, keep, exclude)))


def patch(paths: Paths, to: str = "global", symbols: Globs = (), inplace: bool = False,
          output: str | None = None, fsync: bool = False, raise_errors: bool = True,
          output_dir: str | None = None, lock_timeout: float | None = None, keep: Globs = (),
          exclude: Globs = ()) -> list[FileReport]:
    """Rewrite the selected unique symbols to GLOBAL or WEAK; atomically unless ``inplace``. ``output`` (one
    PATH) or ``output_dir`` (each PATH under its own name, the directory created if need be) leave the PATHs
    untouched, as -o and -w do. ``lock_timeout``: seconds to wait for another process's lock on a file, as
    --lock-timeout (None: its default). ``keep`` and ``exclude`` as in ``scan``."""
    job = _job(PATCH, to, symbols, keep, exclude, inplace=inplace, output=output, fsync=fsync,
               output_dir=output_dir, lock_timeout=lock_timeout)
    return run(paths, job, raise_errors)


def audit(paths: Paths, exclude: Globs = (), raise_errors: bool = True) -> Audit:
    """What `elfpatch audit` reports: unique names that several files (and packages) define; nothing written.
    ``result.to_json()`` is the ``--json`` document; ``result.exit_status()`` the CLI's status."""
    from elfpatch.auditing.collisions import audit_job, run_audit

    names = _paths(paths)
    job = audit_job(_globs(exclude, "exclude"))
    job.check_paths(names)
    result = run_audit(names, job)
    if raise_errors and result.errors:
        _raise(result.errors[0])
    return result


@overload
def list_initializers(paths: str | os.PathLike[str]) -> dict[str, Any]: ...


@overload
def list_initializers(paths: list[Any] | tuple[Any, ...], exclude: Globs = (),
                      raise_errors: bool = True) -> list[dict[str, Any]]: ...


def list_initializers(paths: Paths, exclude: Globs = (),
                      raise_errors: bool = True) -> dict[str, Any] | list[dict[str, Any]]:
    """What `elfpatch inits` lists. One path (a string, as before): its listing, ``{"path", "init", "fini",
    "warnings"}``. A list of paths: one entry per file, as the ``--json`` document's ``files``, ``{"path",
    "status", "error", "init", "fini", "warnings"}``; a directory gives the ELF executables and shared objects
    of its tree, less those ``exclude`` (--exclude) matches. A file that fails raises its ElfPatchError, or
    with ``raise_errors=False`` is an entry with status "error" and no listing."""
    from elfpatch.inits import order as inits

    if isinstance(paths, (str, bytes, os.PathLike)):
        path = os.fsdecode(paths)
        if os.path.isdir(path):
            raise ElfPatchError("a directory: pass [path] to list the ELF files of its tree", path)
        return inits.list_initializers(path)
    return [_entry(path, walk_error, raise_errors) for path, walk_error in _elf_paths(paths, exclude)]


def _elf_paths(paths: Paths, exclude: Globs) -> list[tuple[str, ElfPatchError | None]]:
    from elfpatch.targets.elftree import elf_paths

    return list(elf_paths(_paths(paths), Exclude(_globs(exclude, "exclude"))))


def _entry(path: str, walk_error: ElfPatchError | None, raise_errors: bool) -> dict[str, Any]:
    """One ``files`` entry of `inits --json` for ``path`` (the warnings logged before a failure kept)."""
    from elfpatch.inits.entry import file_entry

    entry, exc = file_entry(path, walk_error)
    if exc is not None and raise_errors:
        raise exc
    return entry
