"""Just enough of the zip format for wheels: read the central directory with bounds checks, copy unchanged
entries byte for byte, write changed ones, write a new central directory.

Member names are only ever strings in this module; nothing is extracted to the file system.
"""
from __future__ import annotations

import bisect
import mmap
import struct
import zlib
from array import array
from typing import BinaryIO, Iterable, Iterator, NamedTuple

from elfpatch.errors import ParseError
from elfpatch.formats.spans import Piece, write_pieces

EOCD = struct.Struct("<4sHHHHIIH")  # end of central directory
EOCD64_LOCATOR = struct.Struct("<4sIQI")
EOCD64 = struct.Struct("<4sQHHIIQQQQ")
CDH = struct.Struct("<4sHHHHHHIIIHHHHHII")  # central directory header
LFH = struct.Struct("<4sHHHHHIIIHH")  # local file header
STORED, DEFLATED = 0, 8
FLAG_DATA_DESCRIPTOR = 0x08
ZIP64_LIMIT = 0xFFFFFFFF


_new_entry = tuple.__new__  # Entry(*fields) without the Python-level __new__: a million entries add up


class Entry(NamedTuple):
    name: str
    raw_name: bytes
    version_made: int
    version_needed: int
    flags: int
    method: int
    mtime: int
    mdate: int
    crc: int
    csize: int
    usize: int
    extra: bytes
    comment: bytes
    internal_attr: int
    external_attr: int
    offset: int  # of the local header

    def data_span(self, data: bytes | mmap.mmap, path: str) -> tuple[int, int]:
        """(start of the compressed data, end of the entry including any data descriptor)."""
        if self.offset + LFH.size > len(data):
            raise ParseError(f"zip member {self.name!r}: local header past the end", path)
        sig, _, _, _, _, _, _, _, _, nlen, elen = LFH.unpack_from(data, self.offset)
        if sig != b"PK\x03\x04":
            raise ParseError(f"zip member {self.name!r}: bad local header", path)
        start = self.offset + LFH.size + nlen + elen
        end = start + self.csize
        if end > len(data):
            raise ParseError(f"zip member {self.name!r}: data runs past the end of the file", path)
        if self.flags & FLAG_DATA_DESCRIPTOR:
            end += 4 if bytes(data[end : end + 4]) == b"PK\x07\x08" else 0
            end += 20 if self._zip64() else 12
            if end > len(data):
                raise ParseError(f"zip member {self.name!r}: data descriptor past the end", path)
        return start, end

    def _zip64(self) -> bool:
        return self.csize >= ZIP64_LIMIT or self.usize >= ZIP64_LIMIT or b"\x01\x00" in self.extra[:2]


def _zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4 : pos + 4 + size]
        if tag == 1:
            vals = [v for (v,) in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]
            if usize == ZIP64_LIMIT and vals:
                usize = vals.pop(0)
            if csize == ZIP64_LIMIT and vals:
                csize = vals.pop(0)
            if offset == ZIP64_LIMIT and vals:
                offset = vals.pop(0)
        pos += 4 + size
    return usize, csize, offset


def read_entries(data: bytes | mmap.mmap, path: str) -> tuple[Directory, bytes]:
    """The central directory's entries, in order, and the archive comment."""
    directory = Directory(data, path)
    return directory, directory.comment


class Directory:
    """The central directory of the zip file in ``data``, checked once when read: bounds, every name given
    once, and members that overlap neither each other nor the directory (64 entries naming one member's data
    would make it inflate 64 times). Entries are parsed again on each access, so a zip of a million members
    holds 8 bytes per member, not a million objects."""

    def __init__(self, data: bytes | mmap.mmap, path: str) -> None:
        self.data, self.path = data, path
        size = len(data)
        search_from = max(0, size - EOCD.size - 0xFFFF)
        pos = data.rfind(b"PK\x05\x06", search_from)
        if pos < 0 or pos + EOCD.size > size:
            raise ParseError("not a zip file (no end of central directory)", path)
        _, disk, _, on_disk, count, cd_size, cd_off, clen = EOCD.unpack_from(data, pos)
        self.comment = bytes(data[pos + EOCD.size : pos + EOCD.size + clen])
        if disk != 0:
            raise ParseError("multi-disk zip files are not supported", path)
        loc = pos - EOCD64_LOCATOR.size
        if loc >= 0 and bytes(data[loc : loc + 4]) == b"PK\x06\x07":
            _, _, eocd64_off, _ = EOCD64_LOCATOR.unpack_from(data, loc)
            if eocd64_off + EOCD64.size > size:
                raise ParseError("zip64 end of central directory past the end", path)
            _, _, _, _, _, _, on_disk, count, cd_size, cd_off = EOCD64.unpack_from(data, eocd64_off)
        if on_disk != count:  # one disk: readers that count one field or the other would see other members
            raise ParseError(f"zip end of central directory counts {on_disk} and {count} entries", path)
        if cd_off + cd_size > size or count * CDH.size > cd_size:
            raise ParseError("zip central directory runs past the end of the file", path)
        self.start, self.end = cd_off, cd_off + cd_size
        self._at = array("Q")  # where each entry's central header is
        starts, ends, names = array("Q"), array("Q"), array("q")
        p = cd_off
        for _ in range(count):
            self._at.append(p)
            e, p = self._parse(p)
            starts.append(e.offset)
            ends.append(e.data_span(data, path)[1])
            names.append(hash(e.name))
        if p != self.end:  # zipfile reads headers up to the directory's size, not its count: both must agree
            raise ParseError(f"zip central directory holds more than its {count} entries", path)
        self._check_names(names)
        del names
        self._check_layout(starts, ends)

    def __len__(self) -> int:
        return len(self._at)

    def __getitem__(self, i: int) -> Entry:
        return self._parse(self._at[i])[0]

    def __iter__(self) -> Iterator[Entry]:
        for p in self._at:
            yield self._parse(p)[0]

    def _parse(self, p: int) -> tuple[Entry, int]:
        """The entry whose central header is at ``p``, and where the next one starts."""
        data, path = self.data, self.path
        if p + CDH.size > self.end:
            raise ParseError("zip central directory truncated", path)
        (sig, vmade, vneed, flags, method, mtime, mdate, crc, csize, usize, nlen, elen, clen, _disk,
         iattr, eattr, off) = CDH.unpack_from(data, p)
        if sig != b"PK\x01\x02":
            raise ParseError("bad zip central directory entry", path)
        end = p + CDH.size + nlen + elen + clen
        if end > self.end:
            raise ParseError("zip central directory entry runs past its directory", path)
        rest = data[p + CDH.size : end]  # one slice (bytes, also from a map), then its three fields
        raw_name, extra, comment = rest[:nlen], rest[nlen : nlen + elen], rest[nlen + elen :]
        if extra:
            usize, csize, off = _zip64_extra(extra, usize, csize, off)
        if raw_name.isascii():  # the same in UTF-8 and cp437, and far faster to decode
            name = raw_name.decode("ascii")
        else:
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", "replace")
        return _new_entry(Entry, (name, raw_name, vmade, vneed, flags, method, mtime, mdate, crc, csize, usize,
                                  extra, comment, iattr, eattr, off)), end

    def _check_names(self, hashes: array) -> None:
        """Refuse a name given twice (what would an installer extract?): equal hashes, then equal names."""
        ordered = sorted(hashes)
        twice = {a for a, b in zip(ordered, ordered[1:]) if a == b}
        del ordered
        if not twice:
            return
        seen: set[str] = set()
        for i, h in enumerate(hashes):
            if h in twice:
                name = self[i].name
                if name in seen:
                    raise ParseError(f"zip member {name!r} appears twice; refusing an ambiguous zip file", self.path)
                seen.add(name)

    def _check_layout(self, starts: array, ends: array) -> None:
        """Refuse members whose bytes (local header, data, data descriptor) overlap another's or the
        central directory's."""
        n = len(starts)
        ordered = starts if all(starts[i] < starts[i + 1] for i in range(n - 1)) else array("Q", sorted(starts))
        for i in range(n):
            k = i if ordered is starts else bisect.bisect_left(ordered, starts[i])
            nxt = ordered[k + 1] if k + 1 < n else self.start
            if (k + 1 < n and nxt == starts[i]) or ends[i] > nxt:
                other = self._at_offset(nxt, i) if nxt != self.start else "the central directory"
                raise ParseError(f"zip member {self[i].name!r} overlaps {other}; refusing overlapping members",
                                 self.path)

    def _at_offset(self, offset: int, not_index: int) -> str:
        for i, p in enumerate(self._at):
            e = self._parse(p)[0]
            if e.offset == offset and i != not_index:
                return f"member {e.name!r}"
        return "another member"


class Written:
    """The entries of a zip being written, in order, for its central directory. An entry copied from the
    ``source`` directory is held as its index there and its new offset (16 bytes); only new entries are held
    whole."""

    def __init__(self, source: Directory) -> None:
        self.source = source
        self._index = array("q")  # index in source, or -1: the next entry of self._new
        self._offset = array("Q")
        self._new: list[Entry] = []

    def copied(self, index: int, offset: int) -> None:
        self._index.append(index)
        self._offset.append(offset)

    def append(self, entry: Entry) -> None:
        self._index.append(-1)
        self._offset.append(entry.offset)
        self._new.append(entry)

    def __len__(self) -> int:
        return len(self._index)

    def __iter__(self) -> Iterator[Entry]:
        new = iter(self._new)
        for index, offset in zip(self._index, self._offset):
            yield next(new) if index < 0 else _new_entry(Entry, self.source[index][:-1] + (offset,))


def same_entries(read: Iterable[Entry], written: Iterable[Entry]) -> bool:
    """Whether a directory read back lists what was written: names, offsets, CRCs and sizes, in order."""
    a, b = iter(read), iter(written)
    for x, y in zip(a, b):
        if (x.name, x.offset, x.crc, x.csize, x.usize) != (y.name, y.offset, y.crc, y.csize, y.usize):
            return False
    return next(a, None) is None and next(b, None) is None


# Deflate cannot expand data by more than ~1032:1 (258-byte matches in 2 bits, rounded up): a member whose
# header claims more than that is lying, and is refused before a buffer of the claimed size is allocated.
MAX_RATIO = 1032


def check_claim(entry: Entry, path: str, limit: int) -> None:
    """Refuse a member whose claimed size is over ``limit`` or more than its compressed data can hold."""
    if entry.usize > limit:
        raise ParseError(f"zip member {entry.name!r} claims {entry.usize} bytes, over the {limit}-byte limit", path)
    if entry.method == STORED and entry.usize != entry.csize:
        raise ParseError(f"zip member {entry.name!r}: stored, but its sizes differ", path)
    if entry.method == DEFLATED and entry.usize > entry.csize * MAX_RATIO + 1024:
        raise ParseError(f"zip member {entry.name!r} claims {entry.usize} bytes from {entry.csize} compressed, "
                         "more than deflate can give", path)


def inflate(data: bytes | mmap.mmap, entry: Entry, start: int, path: str, limit: int,
            max_length: int = -1) -> bytearray:
    """The uncompressed bytes of a small ``entry`` (or the first ``max_length`` bytes of any), never more
    than ``limit`` nor more than its header claims (which ``check_claim`` bounds by what the compressed data
    can hold). Large members are inflated piece by piece with ``inflate_chunks`` instead."""
    check_claim(entry, path, limit)
    want = entry.usize if max_length < 0 else min(max_length, entry.usize)
    src = memoryview(data)[start : start + entry.csize]
    if len(src) != entry.csize:
        raise ParseError(f"zip member {entry.name!r}: data runs past the end of the file", path)
    if entry.method == STORED:
        out = bytearray(src[:want])
    elif entry.method != DEFLATED:
        raise ParseError(f"zip member {entry.name!r}: compression method {entry.method} not supported", path)
    else:
        steps = (src[i : i + IN_STEP] for i in range(0, len(src), IN_STEP))
        out = bytearray().join(inflate_chunks(steps, want, entry, path, prefix=max_length >= 0))
    if max_length < 0 and zlib.crc32(out) != entry.crc:
        raise ParseError(f"zip member {entry.name!r}: CRC mismatch", path)
    return out


IN_STEP = 1 << 20  # compressed input per decompress call, so that unconsumed_tail stays small
# Most output one decompress call may give: a member that inflates 1000:1 must not come out in one piece.
# Every inflate loop (this module's, zsplice's check and its block index) hands output on in pieces of this
# size; tests vary it.
OUT_STEP = 4 << 20


def inflate_raw(src: Iterable[bytes | memoryview], limit: int) -> Iterator[bytes]:
    """The output of the raw deflate stream given in pieces ``src``, in pieces of at most ``OUT_STEP`` bytes.
    It stops as soon as more than ``limit`` bytes came out (the last piece then ends one byte past ``limit``),
    so a stream that inflates to more than it may costs nothing more. Raises zlib.error for corrupt data and
    EOFError when the input ends before the stream does."""
    d = zlib.decompressobj(-15)
    total = 0
    for chunk in src:
        while True:
            cap = min(OUT_STEP, limit + 1 - total)
            piece = d.decompress(chunk, cap)
            chunk = d.unconsumed_tail
            total += len(piece)
            if piece:
                yield piece
            if total > limit or d.eof:
                return
            # A full piece may leave output pending in zlib even when all input is consumed: call again.
            if not chunk and len(piece) < cap:
                break
    raise EOFError


def inflate_chunks(src: Iterable[bytes | memoryview], want: int, entry: Entry, path: str,
                   prefix: bool = False) -> Iterator[bytes]:
    """Inflate the raw deflate data given in pieces ``src`` into pieces of output that total exactly ``want``
    bytes (with ``prefix``: the first ``want`` bytes of a longer output)."""
    pos = 0
    ended = True
    try:
        for piece in inflate_raw(src, want):
            if pos + len(piece) > want:
                if prefix:
                    yield piece[: want - pos]
                    return
                raise ParseError(f"zip member {entry.name!r}: inflates to more than its header says", path)
            yield piece
            pos += len(piece)
            if prefix and pos == want:
                return
    except EOFError:
        ended = False
    except zlib.error as exc:
        raise ParseError(f"zip member {entry.name!r}: {exc}", path) from exc
    if pos != want:
        raise ParseError(f"zip member {entry.name!r}: inflates to a size other than its header says", path)
    if not ended:
        raise ParseError(f"zip member {entry.name!r}: compressed data ends before its stream does", path)


def deflate(data: bytes, level: int = 6) -> bytes:
    """Raw deflate of ``data`` in one piece (small members, RECORD)."""
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def write_local(out: BinaryIO, entry: Entry, payload: bytes | list[Piece], crc: int, usize: int,
                method: int) -> Entry:
    """Write a new local header and ``payload`` (bytes, or pieces: bytes and spans of files); returns the entry
    as the central directory must list it."""
    offset = out.tell()
    pieces = payload if isinstance(payload, list) else [payload]
    csize = sum(len(p) for p in pieces)
    zip64 = usize >= ZIP64_LIMIT or csize >= ZIP64_LIMIT
    extra = struct.pack("<HHQQ", 1, 16, usize, csize) if zip64 else b""
    flags = entry.flags & ~FLAG_DATA_DESCRIPTOR
    vneed = max(entry.version_needed, 45 if zip64 else 20)
    out.write(LFH.pack(b"PK\x03\x04", vneed, flags, method, entry.mtime, entry.mdate, crc,
                       ZIP64_LIMIT if zip64 else csize, ZIP64_LIMIT if zip64 else usize,
                       len(entry.raw_name), len(extra)))
    out.write(entry.raw_name)
    out.write(extra)
    write_pieces(out, pieces)
    central_extra = _strip_zip64(entry.extra)
    return entry._replace(version_needed=vneed, flags=flags, method=method, crc=crc, csize=csize, usize=usize,
                          offset=offset, extra=central_extra)


def _strip_zip64(extra: bytes) -> bytes:
    out, pos = b"", 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        if tag != 1:
            out += extra[pos : pos + 4 + size]
        pos += 4 + size
    return out


def write_central(out: BinaryIO, entries: Iterable[Entry], comment: bytes) -> None:
    cd_off = out.tell()
    count = 0
    for e in entries:
        count += 1
        big = e.usize >= ZIP64_LIMIT or e.csize >= ZIP64_LIMIT or e.offset >= ZIP64_LIMIT
        extra = _strip_zip64(e.extra)
        if big:
            extra = struct.pack("<HHQQQ", 1, 24, e.usize, e.csize, e.offset) + extra
        out.write(CDH.pack(b"PK\x01\x02", e.version_made, max(e.version_needed, 45 if big else 0), e.flags,
                           e.method, e.mtime, e.mdate, e.crc, ZIP64_LIMIT if big else e.csize,
                           ZIP64_LIMIT if big else e.usize, len(e.raw_name), len(extra), len(e.comment), 0,
                           e.internal_attr, e.external_attr, ZIP64_LIMIT if big else e.offset))
        out.write(e.raw_name)
        out.write(extra)
        out.write(e.comment)
    cd_end = out.tell()
    cd_size = cd_end - cd_off
    if count >= 0xFFFF or cd_off >= ZIP64_LIMIT or cd_size >= ZIP64_LIMIT:
        out.write(EOCD64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, cd_size, cd_off))
        out.write(EOCD64_LOCATOR.pack(b"PK\x06\x07", 0, cd_end, 1))
        out.write(EOCD.pack(b"PK\x05\x06", 0, 0, min(count, 0xFFFF), min(count, 0xFFFF),
                            min(cd_size, ZIP64_LIMIT), min(cd_off, ZIP64_LIMIT), len(comment)))
    else:
        out.write(EOCD.pack(b"PK\x05\x06", 0, 0, count, count, cd_size, cd_off, len(comment)))
    out.write(comment)
