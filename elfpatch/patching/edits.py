"""An edit is one byte at a file offset, with the value it must replace; here it is checked and applied, to a
buffer (a wheel member inflated in memory) or to an open file (a temp copy, or the file itself for
--inplace). Planning (elfpatch.patching.plan) only records edits; committing (elfpatch.fs.commit) calls these."""
from __future__ import annotations

import os

from elfpatch.elf.records import Record
from elfpatch.errors import VerifyError, WriteError
from elfpatch.fs import teststop

TYPE_CHECKING = False
if TYPE_CHECKING:
    import mmap
    from typing import Iterable, Sequence


class Edit(Record):
    offset: int  # in the file, not the image
    old: int
    new: int
    why: str


def check_old_bytes(data: bytes | bytearray | memoryview | mmap.mmap, edits: Sequence[Edit]) -> None:
    """Refuse to apply edits to bytes that are no longer what the plan read (the file changed under us)."""
    for e in edits:
        if e.offset >= len(data) or data[e.offset] != e.old:
            raise VerifyError(f"byte at {e.offset:#x} ({e.why}) changed since it was read; nothing written")


def apply_to_buffer(data: bytearray | memoryview, edits: Iterable[Edit]) -> None:
    for e in edits:
        data[e.offset] = e.new


def check_fd(fd: int, edits: Iterable[Edit]) -> None:
    """check_old_bytes for an open file, one pread per edit."""
    for e in edits:
        if os.pread(fd, 1, e.offset) != bytes((e.old,)):
            raise VerifyError(f"byte at {e.offset:#x} ({e.why}) is not what the plan read; nothing written")


def apply_to_fd(fd: int, edits: Iterable[Edit], phase: str = "") -> None:
    """pwrite each new byte; ``phase``: the test stop point met after the first one (elfpatch.fs.teststop)."""
    for i, e in enumerate(edits):
        if os.pwrite(fd, bytes((e.new,)), e.offset) != 1:
            raise WriteError(f"short write at {e.offset:#x}")
        if i == 0 and phase:
            teststop.stop(phase)


def reverted(edits: Iterable[Edit]) -> list[Edit]:
    """The edits that put the old bytes back."""
    return [Edit(e.offset, e.new, e.old, e.why) for e in edits]
