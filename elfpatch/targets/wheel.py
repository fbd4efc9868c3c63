"""A wheel: every ELF member patched, RECORD rewritten, everything else copied byte for byte.

Only ELF members are inflated (the first four bytes decide); unchanged members are copied with their local
headers and compressed data verbatim, so nothing is recompressed but what changed, and of a changed member
only the stretches around its edited bytes (zsplice: the original deflate blocks in between are reused).
Memory stays bounded whatever the sizes: an ELF member over 32 MiB is inflated into an unlinked temp file
(``Scratch``) of which only the pages the reader touches are mapped, at most ``HELD`` bytes of smaller ones
are in memory at once, and compressed data is copied by the kernel (``Span``), never read into the process.
Member names are only ever strings: nothing is extracted to the file system. The new wheel is written to an
exclusive temp file beside the target, verified (every changed member's new stream inflated and checked
against the patched bytes' size and CRC, the central directory re-read), then renamed over the original
(or to -o OUT); a failure leaves the original untouched and no temp file behind.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import zlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, NamedTuple

from elfpatch import zipfmt, zsplice
from elfpatch.elfconst import ELFMAG
from elfpatch.elffile import ElfFile
from elfpatch.errors import ElfPatchError, ParseError, UnsupportedError, VerifyError, WriteError
from elfpatch.plan import check_old_bytes, plan_image, verify_image
from elfpatch.report import SKIPPED, UNCHANGED, FileReport
from elfpatch.spans import Piece, Scratch, Span, chunks, write_pieces
from elfpatch.targets.elf import status_for
from elfpatch.write import Source, copy_metadata, create_temp, fsync_dir, replace_atomic

if TYPE_CHECKING:
    from elfpatch.targets import Job

# A member that claims to inflate to more than this is refused before anything is allocated.
MAX_MEMBER = int(os.environ.get("ELFPATCH_MAX_MEMBER", 8 << 30))
SIGNATURES = ("RECORD.jws", "RECORD.p7s")
HELD = 128 << 20  # changed members' bytes held in memory while the pool compresses them
INFLIGHT = 16  # changed members waiting to be written
LEVEL = 6  # deflate level of the re-deflated stretches (zlib's default, as pip and wheel use)


class Patched(NamedTuple):
    """A member's patched bytes, and what the writer needs to re-deflate only the stretches that changed."""

    scratch: Scratch  # the patched bytes; the writer closes it once the entry is written
    edits: list[int]  # offsets of the changed bytes in the member
    raw: Span | None  # the original compressed data (None: stored, or no block index)
    boundaries: list[zsplice.Boundary] | None


def _record_name(entries: list[zipfmt.Entry]) -> str | None:
    for e in entries:
        parts = e.name.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "RECORD":
            return e.name
    return None


def _record_hash(sha256: bytes) -> str:
    """RECORD's form of a SHA-256 digest (PEP 376: urlsafe base64 without padding)."""
    return "sha256=" + base64.urlsafe_b64encode(sha256).rstrip(b"=").decode()


def _check_names(entries: list[zipfmt.Entry], path: str) -> None:
    seen: set[str] = set()
    for e in entries:
        if e.name in seen:
            raise ParseError(f"zip member {e.name!r} appears twice; refusing an ambiguous wheel", path)
        seen.add(e.name)


def process_wheel(path: str, job: Job) -> list[FileReport]:
    if job.writes and job.inplace:
        raise ElfPatchError("--inplace cannot patch a wheel (its members are compressed); use the default "
                            "mode or -o", path)
    writes = job.writes and not job.output
    with Source(path, lock=writes) as src:
        entries, comment = zipfmt.read_entries(src.data, path)
        _check_names(entries, path)
        writer = None  # started at the first change; -o of an unchanged wheel is a byte-identical copy
        reports: list[FileReport] = []
        try:
            for i, e in enumerate(entries):
                patched = _patch_member(src, e, path, job, reports)
                if patched is not None and writer is None:
                    # The first change: start the new wheel, with every entry before this one copied as is.
                    writer = _Writer(src, entries, comment, job)
                    for before in entries[:i]:
                        writer.add(before, None)
                if writer is not None:
                    writer.add(e, patched)
            if writer is not None:
                writer.finish()
            elif job.writes and job.output:
                replace_atomic(src, [], lambda buf: None, output=job.output, fsync=job.fsync)
        finally:
            if writer is not None:
                writer.close()
        if not reports:
            reports.append(FileReport(path, UNCHANGED))  # a wheel without ELF members
        return reports


def _extract(src: Source, e: zipfmt.Entry, start: int, path: str, index: bool, scratch: Scratch) -> Patched:
    """Inflate the member into ``scratch``; with ``index``, also list its deflate block boundaries (for a
    partial re-deflate)."""
    zipfmt.check_claim(e, path, MAX_MEMBER)
    raw = Span(src.fd, start, e.csize)
    boundaries = None
    if e.method == zipfmt.DEFLATED:
        if index:
            boundaries = zsplice.inflate_indexed(raw, e.usize, scratch.append, e.name, path)
        if boundaries is None:
            for piece in zipfmt.inflate_chunks(raw.chunks(), e.usize, e, path):
                scratch.append(piece)
    elif e.method == zipfmt.STORED:
        for piece in raw.chunks():
            scratch.append(piece)
    else:
        raise ParseError(f"zip member {e.name!r}: compression method {e.method} not supported", path)
    if scratch.crc != e.crc:
        raise ParseError(f"zip member {e.name!r}: CRC mismatch", path)
    return Patched(scratch, [], raw if boundaries is not None else None, boundaries)


def _patch_member(src: Source, e: zipfmt.Entry, path: str, job: Job, reports: list[FileReport]) -> Patched | None:
    """Report one member; return its patched bytes when the job rewrites it, else None."""
    if e.name.endswith("/") or e.usize < 4 or job.exclude.excludes(e.name):
        return None
    if e.flags & 1:
        raise ParseError(f"zip member {e.name!r} is encrypted; wheels never are", path)
    start, _ = e.data_span(src.data, path)
    if zipfmt.inflate(src.data, e, start, path, MAX_MEMBER, max_length=4) != ELFMAG:
        return None
    name = f"{path}[{e.name}]"
    target = job.output or src.real
    try:
        scratch = Scratch(e.usize, os.path.dirname(os.path.abspath(target)))
    except OSError as exc:
        raise WriteError(f"cannot create a temp file to inflate member {e.name}: {exc.strerror or exc}",
                         path) from exc
    keep = False
    try:
        member = _extract(src, e, start, path, job.writes, scratch)
        blob = scratch.map()
        try:
            image = ElfFile(blob, name)
            plan = plan_image(image, job.to, job.names)
        except UnsupportedError as exc:
            reports.append(FileReport(path, SKIPPED, reason=exc.message, member=e.name))
            return None
        except ElfPatchError as exc:
            raise exc.within(f"member {e.name}", path) from exc
        reports.append(FileReport(path, status_for(plan, job), plan.rows, plan.kept, warnings=plan.warnings,
                                  member=e.name))
        if job.inspect is not None:
            reports[-1].facts = job.inspect(image, True)
        if not (job.writes and plan.edits):
            return None
        check_old_bytes(blob, plan.edits)
        for edit in plan.edits:
            blob[edit.offset] = edit.new
        verify_image(ElfFile(blob, name), plan)  # before compression; the writer then checks the new stream
        keep = True
        return member._replace(edits=[edit.offset for edit in plan.edits])
    except OSError as exc:
        raise WriteError(f"cannot inflate member {e.name} into a temp file: {exc.strerror or exc}", path) from exc
    finally:
        if not keep:
            scratch.close()


class _Pending(NamedTuple):
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
    return crc, _record_hash(sha.digest())


class _Writer:
    """The new wheel, written entry by entry to an exclusive temp file beside the target."""

    def __init__(self, src: Source, entries: list[zipfmt.Entry], comment: bytes, job: Job) -> None:
        self.src, self.comment, self.job = src, comment, job
        self.path = src.path
        self.target = os.path.abspath(job.output) if job.output else src.real
        self.record = _record_name(entries)
        self.record_entry: zipfmt.Entry | None = None
        dist_info = self.record.rsplit("/", 1)[0] if self.record else None
        self.signatures = {f"{dist_info}/{s}" for s in SIGNATURES} if dist_info else set()
        self.changed: dict[str, tuple[Future, int]] = {}  # member name -> digests and size of the new bytes
        self.written: list[zipfmt.Entry] = []
        self.deferred: list[zipfmt.Entry] = []
        self.pending: deque[_Pending] = deque()
        self.checks: list[Future] = []  # inflating each re-deflated member back, in the pool
        self.spills: list[Scratch] = []  # shifted stretches of re-deflated members, read by the checks
        self.held = 0  # bytes of the queued members' scratches in memory
        self.inflight = 0  # queued changed members
        self.scratch_dir = os.path.dirname(self.target)
        self.workers = _workers()
        self.pool = ThreadPoolExecutor(self.workers)
        self.fd, self.tmp = create_temp(self.target)
        self.out = os.fdopen(self.fd, "w+b", closefd=False)

    def add(self, e: zipfmt.Entry, patched: Patched | None) -> None:
        try:
            if e.name == self.record:
                self.record_entry = e  # rewritten last
            elif e.name in self.signatures:
                self.deferred.append(e)  # kept only if nothing changed
            elif patched is not None:
                scratch = patched.scratch
                digests = self.pool.submit(_digests, scratch.piece())  # zlib and hashlib release the GIL
                self.changed[e.name] = (digests, scratch.size)
                if e.method == zipfmt.STORED:  # stays stored: the patched bytes are the data
                    pieces = [scratch.piece()]
                    self.pending.append(_Pending(e, pieces, digests, scratch.size, zipfmt.STORED, scratch))
                else:
                    self.pending.append(_Pending(e, self._deflate(patched), digests, scratch.size, zipfmt.DEFLATED,
                                                 scratch))
            else:
                self.pending.append(_Pending(e, None, None, e.usize, e.method, None))
            if patched is not None:
                self.held += patched.scratch.held
                self.inflight += 1
            # The pool compresses while the next members are read, with a bounded number of members and of
            # bytes in flight.
            self._drain(wait=False)
            while self.held > HELD or self.inflight > INFLIGHT:
                self._write_head()
        except OSError as exc:
            raise WriteError(f"cannot write the patched wheel: {exc.strerror or exc}", self.path) from exc

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

    def _copy(self, e: zipfmt.Entry) -> None:
        """An unchanged entry: local header, compressed data and data descriptor, byte for byte."""
        _, end = e.data_span(self.src.data, self.path)
        self.written.append(e._replace(offset=self.out.tell()))
        write_pieces(self.out, [Span(self.src.fd, e.offset, end - e.offset)])

    def _drain(self, wait: bool) -> None:
        """Write the queued entries, in order, as far as their compression has finished (or all, with wait):
        the next members are inflated and planned while the pool deflates the previous ones."""
        while self.pending and self._write_head(wait):
            pass

    def _write_head(self, wait: bool = True) -> bool:
        """Write the first queued entry, waiting for its compression with ``wait``; False if not ready."""
        item = self.pending[0]
        if item.pieces is None:
            self._copy(item.entry)
        else:
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

    def finish(self) -> None:
        try:
            self._drain(wait=True)
            dropped = set()
            for e in self.deferred:
                if self.changed:
                    self.job.warn(self.path, f"removed {e.name}: the signature no longer matches the patched wheel")
                    dropped.add(e.name)
                else:
                    self._copy(e)
            if self.record_entry is not None:
                if self.changed:
                    text = _new_record(self.src.data, self.record_entry, self.changed, dropped, self.path)
                    self.written.append(zipfmt.write_local(self.out, self.record_entry, zipfmt.deflate(text),
                                                           zlib.crc32(text), len(text), zipfmt.DEFLATED))
                else:
                    self._copy(self.record_entry)
            elif self.changed:
                self.job.warn(self.path, "has no .dist-info/RECORD to update")
            zipfmt.write_central(self.out, self.written, self.comment)
            self.out.flush()
            for check in self.checks:
                check.result()  # raises VerifyError: the new stream does not inflate to the patched bytes
            copy_metadata(self.src.stat, self.src.fd, self.fd, self.path, owner=self.job.output is None)
            if self.job.fsync:
                os.fsync(self.fd)
            self._verify()
            os.replace(self.tmp, self.target)
            self.tmp = ""
            if self.job.fsync:
                fsync_dir(os.path.dirname(self.target))
        except OSError as exc:
            raise WriteError(f"cannot write the patched wheel: {exc.strerror or exc}", self.path) from exc

    def _verify(self) -> None:
        """Re-read the written central directory: every entry where it was written, with its size and CRC."""
        import mmap

        with mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ) as m:
            entries, _ = zipfmt.read_entries(m, self.path)
            if [(e.name, e.offset, e.crc, e.csize, e.usize) for e in entries] != [
                    (e.name, e.offset, e.crc, e.csize, e.usize) for e in self.written]:
                raise VerifyError("the written wheel's directory differs from what was written", self.path)
            for e in entries:
                e.data_span(m, self.path)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        for item in self.pending:
            if item.scratch is not None:
                item.scratch.close()
        self.pending.clear()
        self.checks.clear()
        for scratch in self.spills:
            scratch.close()
        self.out.close()
        os.close(self.fd)
        if self.tmp:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass


def _workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _new_record(data: bytes, entry: zipfmt.Entry, changed: dict[str, tuple[Future, int]], dropped: set[str],
                path: str) -> bytes:
    start, _ = entry.data_span(data, path)
    try:
        old = zipfmt.inflate(data, entry, start, path, MAX_MEMBER).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(f"{entry.name} is not UTF-8", path) from exc
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    listed = set()
    try:  # newline="": a bare CR ends a row, as in the installers' splitlines() reading of RECORD
        rows = list(csv.reader(io.StringIO(old, newline="")))
    except csv.Error as exc:
        raise ParseError(f"{entry.name} is not a CSV file: {exc}", path) from exc
    for row in rows:
        if not row or row[0] == entry.name or row[0] in dropped:
            continue
        if row[0] in changed:
            digests, size = changed[row[0]]
            row = [row[0], digests.result()[1], str(size)]
            listed.add(row[0])
        writer.writerow(row)
    for name in sorted(changed.keys() - listed):  # a changed member RECORD forgot: list it now
        digests, size = changed[name]
        writer.writerow([name, digests.result()[1], str(size)])
    writer.writerow([entry.name, "", ""])  # RECORD itself: last, without a hash
    return out.getvalue().encode("utf-8")
