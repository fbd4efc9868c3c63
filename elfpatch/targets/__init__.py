"""What a PATH can be. Each kind opens its bytes, finds the ELF images inside, plans their edits and commits
them through elfpatch.write: a plain ELF file here; trees, ar archives and wheels in their own modules."""
from __future__ import annotations

import os
import struct
import sys
from dataclasses import dataclass, field
from typing import Callable

from elfpatch.errors import ElfPatchError, ParseError
from elfpatch.report import ERROR, FileReport
from elfpatch.symbols import STB_GLOBAL, NameFilter

PATCH, CHECK, DRY_RUN = "patch", "check", "dry-run"


def _warn(path: str, message: str) -> None:
    print(f"elfpatch: warning: {path}: {message}", file=sys.stderr)


@dataclass
class Job:
    """What `elfpatch unique` was asked to do, shared by every target kind."""

    mode: str = PATCH
    to: int = STB_GLOBAL
    names: NameFilter = field(default_factory=NameFilter)
    inplace: bool = False
    output: str | None = None
    fsync: bool = False
    warn: Callable[[str, str], None] = _warn

    @property
    def writes(self) -> bool:
        return self.mode == PATCH


@dataclass
class Outcome:
    reports: list[FileReport] = field(default_factory=list)
    skipped: int = 0  # files a tree walk passed over (not ELF, archive or wheel)


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
