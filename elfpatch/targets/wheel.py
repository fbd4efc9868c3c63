"""A wheel: every ELF member patched, RECORD rewritten, everything else copied byte for byte.

Only ELF members are inflated (the first four bytes decide); unchanged members are copied with their local
headers and compressed data verbatim, so nothing is recompressed but what changed. The new wheel is written
to an exclusive temp file beside the target, verified (every changed member re-inflated and its symbol
tables checked against the plan), then renamed over the original (or to -o OUT).
"""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from elfpatch import zipfmt
from elfpatch.elffile import ELFMAG, ElfFile
from elfpatch.errors import ElfPatchError, UnsupportedError, VerifyError, WriteError
from elfpatch.plan import check_old_bytes, plan_image, verify_image
from elfpatch.report import SKIPPED, UNCHANGED, FileReport
from elfpatch.targets.elf import status_for
from elfpatch.write import Source, copy_metadata, create_temp, fsync_dir

if TYPE_CHECKING:
    from elfpatch.targets import Job

# A member that claims to inflate to more than this is refused before anything is allocated.
MAX_MEMBER = int(os.environ.get("ELFPATCH_MAX_MEMBER", 8 << 30))
SIGNATURES = ("RECORD.jws", "RECORD.p7s")


def _record_name(entries: list[zipfmt.Entry]) -> str | None:
    for e in entries:
        parts = e.name.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "RECORD":
            return e.name
    return None


def _record_hash(blob: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).rstrip(b"=").decode()


def process_wheel(path: str, job: Job) -> list[FileReport]:
    if job.writes and job.inplace:
        raise ElfPatchError("--inplace cannot patch a wheel (its members are compressed); use the default "
                            "mode or -o", path)
    writes = job.writes and not job.output
    with Source(path, lock=writes) as src:
        entries, comment = zipfmt.read_entries(src.data, path)
        writer = _Writer(src, entries, comment, job) if job.output else None
        reports: list[FileReport] = []
        try:
            for i, e in enumerate(entries):
                blob = _patch_member(src.data, e, path, job, reports)
                if blob is not None and writer is None:
                    # The first change: start the new wheel, with every entry before this one copied as is.
                    writer = _Writer(src, entries, comment, job)
                    for before in entries[:i]:
                        writer.add(before, None)
                if writer is not None:
                    writer.add(e, blob)
            if writer is not None:
                writer.finish()
        finally:
            if writer is not None:
                writer.close()
        if not reports:
            reports.append(FileReport(path, UNCHANGED))  # a wheel without ELF members
        return reports


def _patch_member(data: bytes, e: zipfmt.Entry, path: str, job: Job,
                  reports: list[FileReport]) -> bytearray | None:
    """Report one member; return its patched bytes when the job rewrites it, else None."""
    if e.name.endswith("/") or e.usize < 4:
        return None
    start, _ = e.data_span(data, path)
    if zipfmt.inflate(data, e, start, path, MAX_MEMBER, max_length=4) != ELFMAG:
        return None
    name = f"{path}[{e.name}]"
    blob = zipfmt.inflate(data, e, start, path, MAX_MEMBER)
    try:
        plan = plan_image(ElfFile(blob, name), job.to, job.names)
    except UnsupportedError as exc:
        reports.append(FileReport(path, SKIPPED, reason=exc.message, member=e.name))
        return None
    except ElfPatchError as exc:
        raise ElfPatchError(f"member {e.name}: {exc.message}", path) from exc
    reports.append(FileReport(path, status_for(plan, job), plan.rows, plan.kept, member=e.name))
    if not (job.writes and plan.edits):
        return None
    check_old_bytes(blob, plan.edits)
    for edit in plan.edits:
        blob[edit.offset] = edit.new
    verify_image(ElfFile(blob, name), plan)  # before compression; the writer then checks its CRCs
    return blob


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
        self.changed: dict[str, bytes] = {}  # member name -> RECORD hash and size of the new bytes
        self.written: list[zipfmt.Entry] = []
        self.deferred: list[zipfmt.Entry] = []
        self.pending: deque = deque()  # (entry, None to copy | (crc, size, compressed chunk futures))
        self.pool = ThreadPoolExecutor(os.cpu_count() or 1)
        self.fd, self.tmp = create_temp(self.target)
        self.out = os.fdopen(self.fd, "w+b", closefd=False)

    def add(self, e: zipfmt.Entry, blob: bytes | None) -> None:
        try:
            if e.name == self.record:
                self.record_entry = e  # rewritten last
            elif e.name in self.signatures:
                self.deferred.append(e)  # kept only if nothing changed
            elif blob is not None:
                self.changed[e.name] = f"{_record_hash(blob)},{len(blob)}".encode()
                futures = zipfmt.deflate_parallel(blob, self.pool.submit)
                self.pending.append((e, (zlib.crc32(blob), len(blob), futures)))
            else:
                self.pending.append((e, None))
            self._drain(wait=False)
        except OSError as exc:
            raise WriteError(f"cannot write the patched wheel: {exc.strerror or exc}", self.path) from exc

    def _copy(self, e: zipfmt.Entry) -> None:
        """An unchanged entry: local header, compressed data and data descriptor, byte for byte."""
        _, end = e.data_span(self.src.data, self.path)
        self.written.append(e._replace(offset=self.out.tell()))
        self.out.write(self.src.data[e.offset : end])

    def _drain(self, wait: bool) -> None:
        """Write the queued entries, in order, as far as their compression has finished (or all, with wait):
        the next members are inflated and planned while the pool compresses the previous ones."""
        while self.pending:
            e, job = self.pending[0]
            if job is not None:
                crc, size, futures = job
                if not wait and not all(f.done() for f in futures):
                    return
                self.written.append(zipfmt.write_local(self.out, e, [f.result() for f in futures], crc, size,
                                                       zipfmt.DEFLATED))
            else:
                self._copy(e)
            self.pending.popleft()

    def finish(self) -> None:
        try:
            self._drain(wait=True)
            for e in self.deferred:
                if self.changed:
                    self.job.warn(self.path, f"removed {e.name}: the signature no longer matches the patched wheel")
                else:
                    self._copy(e)
            dropped = {e.name for e in self.deferred} if self.changed else set()
            if self.record_entry is not None:
                text = _new_record(self.src.data, self.record_entry, self.changed, dropped, self.path)
                self.written.append(zipfmt.write_local(self.out, self.record_entry, zipfmt.deflate(text),
                                                       zlib.crc32(text), len(text), zipfmt.DEFLATED))
            elif self.changed:
                self.job.warn(self.path, "has no .dist-info/RECORD to update")
            zipfmt.write_central(self.out, self.written, self.comment)
            self.out.flush()
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
        self.out.close()
        os.close(self.fd)
        if self.tmp:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass


def _new_record(data: bytes, entry: zipfmt.Entry, changed: dict[str, bytes], dropped: set[str],
                path: str) -> bytes:
    start, _ = entry.data_span(data, path)
    old = zipfmt.inflate(data, entry, start, path, MAX_MEMBER).decode("utf-8")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in csv.reader(io.StringIO(old)):
        if not row or row[0] == entry.name or row[0] in dropped:
            continue
        if row[0] in changed:
            row = [row[0], *changed[row[0]].decode().split(",")]
        writer.writerow(row)
    writer.writerow([entry.name, "", ""])  # RECORD itself: last, without a hash
    return out.getvalue().encode("utf-8")
