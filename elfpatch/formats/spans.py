"""Byte ranges of an open file, read and copied without mapping them or holding them whole.

A wheel member can be gigabytes. Pages of a map that the process touches count as its own memory, so
copying an unchanged member out of a map of the input, or holding an inflated member in a buffer, makes
memory grow with the wheel. A ``Span`` is read with pread in bounded steps and copied with
copy_file_range, in the kernel; a ``Scratch`` holds an inflated member in an unlinked temp file, of which
only the pages the reader touches are ever mapped.
"""
from __future__ import annotations

import mmap
import os
import tempfile
import zlib
from typing import BinaryIO, Iterable, Iterator, Union

from elfpatch.errors import ParseError
from elfpatch.fs.copy import copy_fd

STEP = 1 << 20


class Span:
    """``length`` bytes at ``offset`` of the open file ``fd``."""

    __slots__ = ("fd", "offset", "length")

    def __init__(self, fd: int, offset: int, length: int) -> None:
        self.fd, self.offset, self.length = fd, offset, length

    def __len__(self) -> int:
        return self.length

    def read(self, start: int, n: int) -> bytes:
        """Bytes [start, start + n) of the span (fewer only at its end)."""
        n = max(0, min(n, self.length - start))
        out = os.pread(self.fd, n, self.offset + start)
        while len(out) < n:  # pread may return short; a zero-length read means the file shrank
            more = os.pread(self.fd, n - len(out), self.offset + start + len(out))
            if not more:
                raise ParseError("the file shrank while it was read")
            out += more
        return out

    def chunks(self, step: int = STEP) -> Iterator[bytes]:
        for i in range(0, self.length, step):
            yield self.read(i, step)

    def sub(self, start: int, end: int) -> Span:
        return Span(self.fd, self.offset + start, end - start)


Piece = Union[bytes, bytearray, memoryview, Span]


def chunks(pieces: Iterable[Piece], step: int = STEP) -> Iterator[bytes | memoryview]:
    """The bytes of ``pieces`` in order, in steps of at most ``step``."""
    for p in pieces:
        if isinstance(p, Span):
            yield from p.chunks(step)
        else:
            view = memoryview(p)
            for i in range(0, len(view), step):
                yield view[i : i + step]


def write_pieces(out: BinaryIO, pieces: Iterable[Piece]) -> None:
    """Append ``pieces`` to ``out``: bytes through its buffer, spans with copy_file_range."""
    for p in pieces:
        if isinstance(p, Span):
            out.flush()
            pos = out.tell()
            copy_fd(p.fd, out.fileno(), p.length, p.offset, pos)
            out.seek(pos + p.length)
        else:
            out.write(p)


# Members up to this size are held in memory: writing a file costs more than the memory they take.
MEMORY_LIMIT = int(os.environ.get("ELFPATCH_SCRATCH_IN_MEMORY", 32 << 20))


class Scratch:
    """Room for one member's bytes, filled once in order (``append``, which keeps the CRC-32 of what was
    written), then given to the reader and the one-byte edits (``map``; ``size``: what it must hold by then).

    Up to ``MEMORY_LIMIT`` bytes it is a buffer. Beyond, it is an unlinked temp file, mapped shared and
    writable, so only the pages the reader touches are ever resident; unlinked from the start, so even a
    killed run leaves nothing behind. The file is in ``directory`` when it can be created there, else in
    the system temp directory."""

    def __init__(self, size: int, directory: str | None, in_memory: bool | None = None) -> None:
        self.size = size
        self.pos = 0
        self.crc = 0
        self.buf: bytearray | None = None
        self.file = None
        self.fd = -1
        self._map: mmap.mmap | None = None
        if in_memory if in_memory is not None else size <= MEMORY_LIMIT:
            self.buf = bytearray(size)
            return
        try:
            self.file = tempfile.TemporaryFile(dir=directory)
        except OSError:  # a read-only directory (--check on a wheel that cannot be written)
            self.file = tempfile.TemporaryFile()
        self.fd = self.file.fileno()

    @property
    def held(self) -> int:
        """How many of its bytes are in memory."""
        return len(self.buf) if self.buf is not None else 0

    def append(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        self.crc = zlib.crc32(view, self.crc)
        if self.buf is not None:
            if self.pos + len(view) > len(self.buf):
                raise ParseError(f"more than the {len(self.buf)} bytes claimed")
            self.buf[self.pos : self.pos + len(view)] = view
            self.pos += len(view)
            return
        while view:
            n = os.pwrite(self.fd, view, self.pos)
            self.pos += n
            view = view[n:]

    def map(self) -> bytearray | mmap.mmap:
        if self.pos != self.size:
            raise ParseError(f"holds {self.pos} bytes, not {self.size}")
        if self.buf is not None:
            return self.buf
        if self._map is None:
            self._map = mmap.mmap(self.fd, self.size, access=mmap.ACCESS_WRITE)
        return self._map

    def piece(self) -> Piece:
        """What was appended so far."""
        if self.buf is not None:
            return memoryview(self.buf)[: self.pos]
        return Span(self.fd, 0, self.pos)

    def close(self) -> None:
        self.buf = None
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a view still points into the map; the GC unmaps it
                pass
            self._map = None
        if self.file is not None:
            self.file.close()
            self.file = None

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
