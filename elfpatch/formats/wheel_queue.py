"""The wheel writer's queue: entries written in order while a thread pool re-deflates the changed members
(zlib and hashlib release the GIL), so that the next members are inflated and planned meanwhile. Bounded: at
most ``HELD`` bytes of changed members in memory, ``INFLIGHT`` changed members and ``QUEUED`` entries wait at
once; past that the queue writes its head, waiting for its compression."""
from __future__ import annotations

import hashlib
import mmap
import zlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO, NamedTuple

from elfpatch.formats import zipfmt, zsplice
from elfpatch.formats.spans import Piece, Scratch, Span, chunks, write_pieces
from elfpatch.formats.wheel_record import record_hash

HELD = 128 << 20  # changed members' bytes held in memory while the pool compresses them
INFLIGHT = 16  # changed members waiting to be written
QUEUED = 4096  # entries of any kind waiting (a million unchanged members behind a changed one)
LEVEL = 6  # deflate level of the re-deflated stretches (zlib's default, as pip and wheel use)


class Patched(NamedTuple):
    """A member's patched bytes, and what the writer needs to re-deflate only the stretches that changed."""

    scratch: Scratch  # the patched bytes; the queue closes it once the entry is written
    edits: list[int]  # offsets of the changed bytes in the member
    raw: Span | None  # the original compressed data (None: stored, or no block index)
    boundaries: list[zsplice.Boundary] | None


class _Pending(NamedTuple):
    position: int  # in the source directory
    entry: zipfmt.Entry
    pieces: list | None  # None: copy the entry as it is; else bytes, spans and futures, in order
    digests: Future | None  # of (CRC-32, RECORD hash) of the new bytes
    size: int
    method: int
    scratch: Scratch | None  # the patched bytes, closed once the entry is written


def _digests(piece: Piece) -> tuple[int, str]:
    crc, sha = 0, hashlib.sha256()
    for chunk in chunks([piece]):
        crc = zlib.crc32(chunk, crc)
        sha.update(chunk)
    return crc, record_hash(sha.digest())


class Queue:
    """Entries on their way into ``out`` (listed in ``written``): unchanged ones copied byte for byte from
    ``src_fd``, changed ones re-deflated by ``pool`` (the original blocks reused between the edits), each
    re-deflated stream then inflated back in the pool (``checks``) against the patched bytes."""

    def __init__(self, src_fd: int, data: bytes | mmap.mmap, path: str, out: BinaryIO, written: zipfmt.Written,
                 pool: ThreadPoolExecutor, scratch_dir: str) -> None:
        self.src_fd, self.data, self.path = src_fd, data, path
        self.out, self.written, self.pool, self.scratch_dir = out, written, pool, scratch_dir
        self.pending: deque[_Pending] = deque()
        self.checks: list[Future] = []
        self.spills: list[Scratch] = []  # shifted stretches of re-deflated members, read by the checks
        self.held = 0  # bytes of the queued members' scratches in memory
        self.inflight = 0  # queued changed members

    def put(self, index: int, e: zipfmt.Entry, patched: Patched | None) -> Future | None:
        """Queue entry ``index`` of the source (``patched``: its new bytes); the future of the new bytes'
        (CRC-32, RECORD hash) for a changed member."""
        digests = None
        if patched is None:
            self.pending.append(_Pending(index, e, None, None, e.usize, e.method, None))
        else:
            scratch = patched.scratch
            digests = self.pool.submit(_digests, scratch.piece())
            if e.method == zipfmt.STORED:  # stays stored: the patched bytes are the data
                pieces = [scratch.piece()]
            else:
                pieces = self._deflate(patched)
            method = zipfmt.STORED if e.method == zipfmt.STORED else zipfmt.DEFLATED
            self.pending.append(_Pending(index, e, pieces, digests, scratch.size, method, scratch))
            self.held += scratch.held
            self.inflight += 1
        self.drain(wait=False)
        while self.held > HELD or self.inflight > INFLIGHT or len(self.pending) > QUEUED:
            self._write_head()
        return digests

    def copy(self, index: int, e: zipfmt.Entry) -> None:
        """An unchanged entry: local header, compressed data and data descriptor, byte for byte."""
        _, end = e.data_span(self.data, self.path)
        self.written.copied(index, self.out.tell())
        write_pieces(self.out, [Span(self.src_fd, e.offset, end - e.offset)])

    def _deflate(self, p: Patched) -> list:
        """The new compressed data of a changed member: the original blocks reused between its edits."""
        size = p.scratch.size
        if p.raw is not None and p.boundaries is not None:
            segs = zsplice.segments(p.boundaries, p.raw, size, p.edits)
        else:
            segs = [zsplice.Fresh(0, size)]
        return zsplice.assemble(p.raw, p.scratch.map(), segs, self.pool.submit, LEVEL, spill=self._spill)

    def _spill(self) -> Scratch:
        scratch = Scratch(0, self.scratch_dir, in_memory=False)
        self.spills.append(scratch)
        return scratch

    def drain(self, wait: bool) -> None:
        """Write the queued entries, in order, as far as their compression has finished (or all, with wait)."""
        while self.pending and self._write_head(wait):
            pass

    def _write_head(self, wait: bool = True) -> bool:
        """Write the first queued entry, waiting for its compression with ``wait``; False if not ready."""
        item = self.pending[0]
        if item.pieces is None:
            self.copy(item.position, item.entry)
        else:
            assert item.digests is not None  # a changed member always has them
            waits = [p for p in item.pieces if isinstance(p, Future)] + [item.digests]
            if not wait and not all(f.done() for f in waits):
                return False
            pieces = zsplice.resolve(item.pieces)
            crc = item.digests.result()[0]
            self.written.append(zipfmt.write_local(self.out, item.entry, pieces, crc, item.size, item.method))
            if item.method == zipfmt.DEFLATED:
                self.checks.append(self.pool.submit(zsplice.check_stream, pieces, item.size, crc,
                                                    item.entry.name, self.path))
        if item.scratch is not None:
            self.held -= item.scratch.held
            self.inflight -= 1
            item.scratch.close()  # the checks read only the original data, the fresh pieces and the spills
        self.pending.popleft()
        return True

    def close(self) -> None:
        """Release every scratch (the pool must be shut down first: its tasks read them)."""
        for item in self.pending:
            if item.scratch is not None:
                item.scratch.close()
        self.pending.clear()
        self.checks.clear()
        for scratch in self.spills:
            scratch.close()
