"""A wheel's RECORD (PEP 376, PEP 427) and its signatures, as the wheel writer sees them: both are held back to
the end; RECORD is then copied as it is, or rewritten with the new hash and size of every changed member, and
a signature over RECORD (``RECORD.jws``, ``RECORD.p7s``) is kept only when nothing changed."""
from __future__ import annotations

import base64
import csv
import io
import mmap
from concurrent.futures import Future
from typing import Callable, Iterable

from elfpatch.errors import ParseError
from elfpatch.formats import zipfmt

SIGNATURES = ("RECORD.jws", "RECORD.p7s")


def record_name(entries: Iterable[zipfmt.Entry]) -> str | None:
    for e in entries:
        parts = e.name.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "RECORD":
            return e.name
    return None


def record_hash(sha256: bytes) -> str:
    """RECORD's form of a SHA-256 digest (PEP 376: urlsafe base64 without padding)."""
    return "sha256=" + base64.urlsafe_b64encode(sha256).rstrip(b"=").decode()


class Record:
    """RECORD, the signatures over it, and what changed: the member name -> (future of its (CRC-32, RECORD
    hash), size) of every changed member."""

    def __init__(self, entries: Iterable[zipfmt.Entry]) -> None:
        self.name = record_name(entries)
        dist_info = self.name.rsplit("/", 1)[0] if self.name else None
        self.signatures = {f"{dist_info}/{s}" for s in SIGNATURES} if dist_info else set()
        self.entry: tuple[int, zipfmt.Entry] | None = None  # RECORD: (its index in the source, its entry)
        self.deferred: list[tuple[int, zipfmt.Entry]] = []
        self.changed: dict[str, tuple[Future, int]] = {}

    def holds(self, index: int, e: zipfmt.Entry) -> bool:
        """Whether ``e`` (entry ``index`` of the source) is RECORD or a signature over it, which are written
        last (by ``finish``)."""
        if e.name == self.name:
            self.entry = (index, e)
        elif e.name in self.signatures:
            self.deferred.append((index, e))
        else:
            return False
        return True

    def finish(self, data: bytes | mmap.mmap, path: str, limit: int, warn: Callable[[str, str], None],
               copy: Callable[[int, zipfmt.Entry], None], write: Callable[[zipfmt.Entry, bytes], None]) -> None:
        """Write the held-back entries: each signature copied (nothing changed) or dropped, then RECORD copied
        or rewritten (``write`` gets its entry and new text)."""
        dropped = set()
        for index, e in self.deferred:
            if self.changed:
                warn(path, f"removed {e.name}: the signature no longer matches the patched wheel")
                dropped.add(e.name)
            else:
                copy(index, e)
        if self.entry is not None:
            index, e = self.entry
            if self.changed:
                write(e, new_record(data, e, self.changed, dropped, path, limit))
            else:
                copy(index, e)
        elif self.changed:
            warn(path, "has no .dist-info/RECORD to update")


def new_record(data: bytes | mmap.mmap, entry: zipfmt.Entry, changed: dict[str, tuple[Future, int]], dropped: set[str],
               path: str, limit: int) -> bytes:
    start, _ = entry.data_span(data, path)
    try:
        old = zipfmt.inflate(data, entry, start, path, limit).decode("utf-8")
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

