"""What a PATH can be. Each kind opens its bytes, finds the ELF images inside, plans their edits and commits
them through elfpatch.write: a plain ELF file here; trees, ar archives and wheels in their own modules."""
from __future__ import annotations

import os
import struct
import sys
from typing import Callable

from elfpatch.errors import ElfPatchError, ParseError
from elfpatch.report import ERROR, FileReport
from elfpatch.symbols import STB_GLOBAL, NameFilter

PATCH, CHECK, DRY_RUN = "patch", "check", "dry-run"


def _warn(path: str, message: str) -> None:
    print(f"elfpatch: warning: {path}: {message}", file=sys.stderr)


class Job:
    """What `elfpatch unique` was asked to do, shared by every target kind."""

    def __init__(self, mode: str = PATCH, to: int = STB_GLOBAL, names: NameFilter | None = None,
                 inplace: bool = False, output: str | None = None, fsync: bool = False,
                 warn: Callable[[str, str], None] = _warn) -> None:
        self.mode = mode
        self.to = to
        self.names = names if names is not None else NameFilter()
        self.inplace = inplace
        self.output = output
        self.fsync = fsync
        self.warn = warn

    @property
    def writes(self) -> bool:
        return self.mode == PATCH


class Outcome:
    """The reports of one PATH, and how many files a tree walk passed over (not ELF, archive or wheel)."""

    def __init__(self, reports: list[FileReport] | None = None, skipped: int = 0) -> None:
        self.reports = reports if reports is not None else []
        self.skipped = skipped


def error_report(path: str, exc: ElfPatchError, member: str | None = None) -> FileReport:
    return FileReport(path, ERROR, error=exc.message, member=member)


def process(path: str, job: Job) -> Outcome:
    """Run ``job`` on one PATH; failures become error reports, never exceptions."""
    try:
        return _dispatch(path, job)
    except ElfPatchError as exc:
        return Outcome([error_report(path, exc)])
    except (struct.error, ValueError, IndexError, OverflowError) as exc:
        # A low-level parse failure the bounds checks did not phrase: still one line, still exit 2.
        return Outcome([error_report(path, ParseError(f"malformed file ({exc})"))])


def _dispatch(path: str, job: Job) -> Outcome:
    from elfpatch.targets.elf import process_elf

    if os.path.isdir(path):
        raise ElfPatchError("is a directory", path)
    return Outcome([process_elf(path, job)])
