"""A wheel: every ELF member patched, RECORD rewritten, everything else copied byte for byte.

Only ELF members are inflated (the first four bytes decide); unchanged members are copied with their local
headers and compressed data verbatim, so nothing is recompressed but what changed, and of a changed member
only the stretches around its edited bytes (zsplice: the original deflate blocks in between are reused).
Memory stays bounded whatever the sizes: an ELF member over 32 MiB is inflated into an unlinked temp file
(``Scratch``) of which only the pages the reader touches are mapped, at most ``wheel_queue.HELD`` bytes of
smaller ones are in memory at once, compressed data is copied by the kernel (``Span``), never read into the
process, and the central directory costs a few bytes per member (``zipfmt.Directory``, ``zipfmt.Written``).
Member names are only ever strings: nothing is extracted to the file system. The new wheel goes through the
one commit protocol (elfpatch.fs.commit: a temp beside the target, metadata, identity check), verified (every
changed member's new stream inflated and checked against the patched bytes' size and CRC, the central
directory re-read), then renamed over the original (or to -o OUT); a failure leaves the original untouched
and no temp file behind.
"""
from __future__ import annotations

import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

from elfpatch.elf.const import ELFMAG
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfPatchError, ParseError, UnsupportedError, VerifyError, WriteError
from elfpatch.formats import zipfmt, zsplice
from elfpatch.formats.spans import Scratch, Span
from elfpatch.formats.wheel_queue import Patched, Queue
from elfpatch.formats.wheel_record import SIGNATURES, Record
from elfpatch.fs.commit import open_temp, replace_atomic
from elfpatch.fs.source import Source
from elfpatch.patching.edits import check_old_bytes
from elfpatch.patching.plan import ImagePlan, plan_image, verify_image
from elfpatch.report import SKIPPED, UNCHANGED, FileReport
from elfpatch.targets import open_source
from elfpatch.targets.elf import status_for

TYPE_CHECKING = False  # typing is not imported on the read path
if TYPE_CHECKING:
    import mmap

    from elfpatch.fs.source import Place
    from elfpatch.targets import Job


def _max_member() -> int:
    """ELFPATCH_MAX_MEMBER (bytes), checked: a bad value is the setting's error, not every wheel's."""
    text = os.environ.get("ELFPATCH_MAX_MEMBER")
    if text is None:
        return 8 << 30
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if value <= 0:
        raise ElfPatchError(f"invalid setting ELFPATCH_MAX_MEMBER={text!r}: want a positive byte count")
    return value


# A member that claims to inflate to more than this is refused before anything is allocated.
_MAX_MEMBER_ERROR: ElfPatchError | None
try:
    MAX_MEMBER = _max_member()
except ElfPatchError as _exc:
    MAX_MEMBER, _MAX_MEMBER_ERROR = 0, _exc
else:
    _MAX_MEMBER_ERROR = None


def _is_record_or_signature(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] in ("RECORD", *SIGNATURES)


def process_wheel(path: str, job: Job, place: Place | None = None) -> list[FileReport]:
    if job.writes and job.inplace:
        raise ElfPatchError("--inplace cannot patch a wheel (its members are compressed); use the default "
                            "mode or -o", path)
    if _MAX_MEMBER_ERROR is not None:
        raise ElfPatchError(_MAX_MEMBER_ERROR.message, path)
    with open_source(path, job, place) as src:
        entries, comment = zipfmt.read_entries(src.data, path)  # names given once, members not overlapping
        reports: list[FileReport] = []
        _patch_entries(src, entries, comment, path, job, reports)
        if not reports:
            reports.append(FileReport(path, UNCHANGED))  # a wheel without ELF members
        return reports


def _patch_entries(src: Source, entries: zipfmt.Directory, comment: bytes, path: str, job: Job,
                   reports: list[FileReport]) -> None:
    """Report every member and, when one changes, write the new wheel entry by entry."""
    writer = None  # started at the first change; -o of an unchanged wheel is a byte-identical copy
    try:
        for i, e in enumerate(entries):
            patched = _patch_member(src, e, path, job, reports)
            if patched is not None and writer is None:
                # The first change: start the new wheel, with every entry before this one copied as is.
                writer = _Writer(src, entries, comment, job)
                for j, before in enumerate(islice(entries, i)):
                    writer.add(j, before, None)
            if writer is not None:
                writer.add(i, e, patched)
        if writer is not None:
            writer.finish()
        elif job.writes and job.output:
            replace_atomic(src, [], lambda buf: None, output=job.output, fsync=job.fsync)
    finally:
        if writer is not None:
            writer.close()


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
    return Patched(scratch, [], raw if boundaries else None, boundaries or None)


def _patch_member(src: Source, e: zipfmt.Entry, path: str, job: Job, reports: list[FileReport]) -> Patched | None:
    """Report one member; return its patched bytes when the job rewrites it, else None."""
    start = _elf_member_start(src, e, path, job, reports)
    if start is None:
        return None
    name = f"{path}[{e.name}]"
    scratch = _scratch_for(src, e, path, job)
    keep = False  # the scratch file lives on only inside a returned Patched
    try:
        member = _extract(src, e, start, path, job.writes, scratch)
        blob = scratch.map()
        plan = _plan_member(blob, name, e, path, job, reports)
        if plan is None or not (job.writes and plan.edits):
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


def _elf_member_start(src: Source, e: zipfmt.Entry, path: str, job: Job, reports: list[FileReport]) -> int | None:
    """Where the compressed data of an ELF member to patch starts; None for a member left as it is (a
    directory, excluded, not ELF: only its first four bytes are inflated to tell, or RECORD and its
    signatures, which the writer owns)."""
    if e.name.endswith("/") or e.usize < 4 or job.exclude.excludes(e.name):
        return None
    if e.flags & 1:
        raise ParseError(f"zip member {e.name!r} is encrypted; wheels never are", path)
    start, _ = e.data_span(src.data, path)
    if zipfmt.inflate(src.data, e, start, path, MAX_MEMBER, max_length=4) != ELFMAG:
        return None
    if _is_record_or_signature(e.name):
        reports.append(FileReport(path, SKIPPED, member=e.name, reason="the wheel's RECORD or its signature is "
                                  "rewritten or dropped by the wheel writer, never patched as a member"))
        return None
    return start


def _scratch_for(src: Source, e: zipfmt.Entry, path: str, job: Job) -> Scratch:
    """An unlinked temp file to inflate the member into. Beside the target only when the run writes there
    anyway; read-only modes use $TMPDIR."""
    scratch_dir = os.path.dirname(os.path.abspath(job.output or src.real)) if job.writes else None
    try:
        return Scratch(e.usize, scratch_dir)
    except OSError as exc:
        raise WriteError(f"cannot create a temp file to inflate member {e.name}: {exc.strerror or exc}",
                         path) from exc


def _plan_member(blob: bytearray | mmap.mmap, name: str, e: zipfmt.Entry, path: str, job: Job,
                 reports: list[FileReport]) -> ImagePlan | None:
    """Plan and report the inflated member; None when it is skipped (an unsupported image is reported, not
    fatal: the other members are still patched)."""
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
    return plan


class _Writer:
    """The new wheel, written entry by entry to an exclusive temp file beside the target: RECORD and its
    signatures held back to the end (``Record``), the other entries written in order while the pool
    re-deflates the changed ones (``Queue``), every entry listed for the central directory (``Written``)."""

    def __init__(self, src: Source, entries: zipfmt.Directory, comment: bytes, job: Job) -> None:
        self.src, self.comment, self.job = src, comment, job
        self.path = src.path
        self.target = os.path.abspath(job.output) if job.output else src.real
        self.record = Record(entries)
        self.written = zipfmt.Written(entries)
        self.scratch_dir = os.path.dirname(self.target)
        self.workers = _workers()
        self.pool = ThreadPoolExecutor(self.workers)
        self.temp, self.dest = open_temp(src, job.output)  # the one commit protocol (elfpatch.fs.commit)
        self.fd = self.temp.fd
        self.out = os.fdopen(self.fd, "w+b", closefd=False)
        self.queue = Queue(src.fd, src.data, self.path, self.out, self.written, self.pool, self.scratch_dir)

    def add(self, index: int, e: zipfmt.Entry, patched: Patched | None) -> None:
        """Entry ``index`` of the source (``patched``: its new bytes, when it changed)."""
        try:
            if self.record.holds(index, e):
                if patched is not None:
                    patched.scratch.close()
                return
            digests = self.queue.put(index, e, patched)
            if patched is not None:
                assert digests is not None  # a changed member always has them
                self.record.changed[e.name] = (digests, patched.scratch.size)
        except OSError as exc:
            raise WriteError(f"cannot write the patched wheel: {exc.strerror or exc}", self.path) from exc

    def _write_record(self, e: zipfmt.Entry, text: bytes) -> None:
        self.written.append(zipfmt.write_local(self.out, e, zipfmt.deflate(text), zlib.crc32(text), len(text),
                                               zipfmt.DEFLATED))

    def finish(self) -> None:
        try:
            self.queue.drain(wait=True)
            self.record.finish(self.src.data, self.path, MAX_MEMBER, self.job.warn, self.queue.copy,
                               self._write_record)
            zipfmt.write_central(self.out, self.written, self.comment)
            self.out.flush()
            for check in self.queue.checks:
                check.result()  # raises VerifyError: the new stream does not inflate to the patched bytes
            self.temp.commit(self.src, self._verify, owner=self.job.output is None, fsync=self.job.fsync)
        except OSError as exc:
            raise WriteError(f"cannot write the patched wheel: {exc.strerror or exc}", self.path) from exc

    def _verify(self, m: bytes | mmap.mmap) -> None:
        """Re-read the written central directory: every entry where it was written, with its size and CRC."""
        entries, _ = zipfmt.read_entries(m, self.path)
        if not zipfmt.same_entries(entries, self.written):
            raise VerifyError("the written wheel's directory differs from what was written", self.path)
        for e in entries:
            e.data_span(m, self.path)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.queue.close()
        self.out.close()
        self.temp.close()
        if self.dest is not self.src.place:
            self.dest.close()


def _workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
