"""Re-deflate an edited zip member without recompressing all of it.

A one-byte edit in a 400 MB library would otherwise cost a full deflate of 400 MB. Instead:

1. ``inflate_indexed`` inflates the original raw deflate stream through zlib's own ``inflate(Z_BLOCK)`` (via
   ctypes on the libz that Python's zlib module uses) and records every block boundary: the bit offset of a
   block header in the compressed data and the uncompressed offset where that block starts. The compressed
   data is a ``Span`` of the input file and the output goes out in windows: a member of any size costs a few
   MiB of memory.
2. ``segments`` splits the member into stretches to copy and stretches to compress. A stretch of original
   blocks is copied bit for bit when no edited byte lies inside it or within the 32 KiB before it: deflate
   back-references reach at most 32 KiB back, so those blocks inflate to the same bytes after the edit.
   Copied stretches start at byte-aligned boundaries (one in eight is), so they are copied byte for byte.
3. ``assemble`` writes the pieces in order: fresh deflate for the edited stretches (ending in a sync flush,
   on a byte boundary, or Z_FINISH at the end), spans of the original data for the copied ones (copied by
   the kernel, never read into the process), and after a copied
   stretch that ends mid-byte an empty stored block, which byte-aligns the stream without adding data.

The caller must verify the result by inflating it (``check_stream``): the splice is exact by construction,
and the check makes that a fact about the bytes written rather than about this code.
"""
from __future__ import annotations

import bisect
import ctypes
import zlib
from concurrent.futures import Future
from mmap import mmap
from typing import Callable, NamedTuple, Sequence, Union

from elfpatch.errors import ParseError, VerifyError
from elfpatch.formats import zipfmt
from elfpatch.formats.spans import Piece, Scratch, Span, chunks

WINDOW = 32768  # deflate's back-reference limit
MIN_COPY = 64 << 10  # a copied stretch shorter than this (uncompressed) is not worth a splice
Z_OK, Z_STREAM_END, Z_NEED_DICT, Z_BUF_ERROR, Z_NO_FLUSH, Z_BLOCK = 0, 1, 2, -5, 0, 5
# zlib ends a block every ~16K symbols: 16 KiB of output or more. The index keeps at most INDEX_BLOCKS
# boundaries plus one per BLOCK_OUTPUT bytes of the member; a stream of far more blocks than its output
# warrants (millions of empty ones: 10 bits each) is inflated on without the index, and its member is
# re-deflated whole. Time and memory then follow the member's size, not its block count.
INDEX_BLOCKS = 4096
BLOCK_OUTPUT = 4096


class Boundary(NamedTuple):
    bit: int  # offset in bits into the compressed data of a block header
    pos: int  # uncompressed offset where that block's output starts


class Fresh(NamedTuple):
    start: int  # uncompressed range to deflate anew
    end: int


class Copy(NamedTuple):
    bit: int  # byte-aligned start in the compressed data
    end_bit: int  # bit where the next block header starts, or -1: to the end of the stream
    start: int  # the uncompressed range it inflates to
    end: int


Segment = Union[Fresh, Copy]


class _ZStream(ctypes.Structure):
    _fields_ = [
        ("next_in", ctypes.c_void_p), ("avail_in", ctypes.c_uint), ("total_in", ctypes.c_ulong),
        ("next_out", ctypes.c_void_p), ("avail_out", ctypes.c_uint), ("total_out", ctypes.c_ulong),
        ("msg", ctypes.c_char_p), ("state", ctypes.c_void_p), ("zalloc", ctypes.c_void_p),
        ("zfree", ctypes.c_void_p), ("opaque", ctypes.c_void_p), ("data_type", ctypes.c_int),
        ("adler", ctypes.c_ulong), ("reserved", ctypes.c_ulong),
    ]


_libz: ctypes.CDLL | None | bool = False


def libz() -> ctypes.CDLL | None:
    """The system zlib, or None where it cannot be loaded (then members are recompressed whole)."""
    global _libz
    if _libz is False:
        try:
            lib = ctypes.CDLL("libz.so.1")
            lib.zlibVersion.restype = ctypes.c_char_p
            lib.inflateInit2_.argtypes = [ctypes.POINTER(_ZStream), ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
            lib.inflate.argtypes = [ctypes.POINTER(_ZStream), ctypes.c_int]
            lib.inflateEnd.argtypes = [ctypes.POINTER(_ZStream)]
            _libz = lib
        except (OSError, AttributeError):
            _libz = None
    return _libz  # type: ignore[return-value]


def inflate_indexed(raw: Span, usize: int, write: Callable[[memoryview], None], name: str,
                    path: str) -> list[Boundary] | None:
    """Inflate the raw deflate stream ``raw`` into exactly ``usize`` bytes, handed to ``write`` in order in
    windows (each view is reused after ``write`` returns), and list its block boundaries; None when libz is
    unavailable (then nothing was written), an empty list when the stream has too many blocks to index.
    Raises ParseError when the stream is corrupt or inflates to any size other than ``usize`` (it stops one
    byte past the claim)."""
    lib = libz()
    if lib is None:
        return None
    return _IndexedInflate(lib, raw, usize, write, name, path).run()


class _IndexedInflate:
    """One ``inflate_indexed`` run: zlib's stream, the output window it writes into, and the boundaries
    found so far."""

    def __init__(self, lib: ctypes.CDLL, raw: Span, usize: int, write: Callable[[memoryview], None], name: str,
                 path: str) -> None:
        self.lib, self.raw, self.usize, self.write, self.name, self.path = lib, raw, usize, write, name, path
        self.size = max(1, min(usize, zipfmt.OUT_STEP))
        self.window = ctypes.create_string_buffer(self.size)
        self.addr = ctypes.addressof(self.window)
        self.view = memoryview(self.window).cast("B")
        self.base = 0  # the uncompressed offset of window[0]
        self.spare = ctypes.create_string_buffer(1)
        self.strm = _ZStream()
        # A raw stream starts with a block header at bit 0; inflate(Z_BLOCK) reports every later one.
        self.boundaries = [Boundary(0, 0)]
        self.budget = INDEX_BLOCKS + usize // BLOCK_OUTPUT
        self.flush = Z_BLOCK
        self.fed = 0  # compressed bytes handed to zlib so far
        self.chunk = b""  # the input zlib reads from: kept alive here while it does
        self.stalls = 0

    def run(self) -> list[Boundary]:
        lib, strm = self.lib, self.strm
        if lib.inflateInit2_(ctypes.byref(strm), -15, lib.zlibVersion(), ctypes.sizeof(_ZStream)) != Z_OK:
            raise MemoryError("zlib inflateInit2 failed")
        try:
            while not self._step():
                pass
        finally:
            lib.inflateEnd(ctypes.byref(strm))
        if strm.total_out != self.usize:
            raise self._error("inflates to a size other than its header says")
        if strm.total_out > self.base:
            self.write(self.view[: strm.total_out - self.base])
        return self.boundaries

    def _error(self, what: str) -> ParseError:
        return ParseError(f"zip member {self.name!r}: {what}", self.path)

    def _step(self) -> bool:
        """One call of inflate, with input and room to write; True at the end of the stream."""
        strm = self.strm
        if strm.avail_in == 0 and self.fed < len(self.raw):
            self._feed()
        if strm.avail_out == 0:
            self._make_room()
        before = (strm.total_in, strm.total_out)
        ret = self.lib.inflate(ctypes.byref(strm), self.flush)
        if strm.total_out > self.usize:
            raise self._error("inflates to more than its header says")
        if ret == Z_STREAM_END:
            return True
        if ret not in (Z_OK, Z_BUF_ERROR):
            raise self._error(strm.msg.decode("ascii", "replace") if strm.msg else f"zlib error {ret}")
        if self.flush == Z_BLOCK and strm.data_type & 128 and not strm.data_type & 64:  # before a block header
            self._mark_boundary()
        self._check_progress(before)
        return False

    def _feed(self) -> None:
        self.chunk = self.raw.read(self.fed, zipfmt.IN_STEP)
        self.strm.next_in = ctypes.cast(ctypes.c_char_p(self.chunk), ctypes.c_void_p)
        self.strm.avail_in = len(self.chunk)
        self.fed += len(self.chunk)

    def _make_room(self) -> None:
        """Point zlib's output at the rest of the window, handing a full one on first; once the claimed size
        is reached, at a one-byte spare: a byte written there means the header lied."""
        strm = self.strm
        if strm.total_out >= self.usize:
            strm.next_out, strm.avail_out = ctypes.addressof(self.spare), 1
            return
        if strm.total_out - self.base == self.size:
            self.write(self.view)
            self.base = strm.total_out
        strm.next_out = self.addr + strm.total_out - self.base
        strm.avail_out = min(self.size - (strm.total_out - self.base), self.usize - strm.total_out)

    def _mark_boundary(self) -> None:
        """Record the block header zlib stopped before; past the budget, stop indexing (see INDEX_BLOCKS)."""
        strm = self.strm
        bit = strm.total_in * 8 - (strm.data_type & 7)
        if bit != self.boundaries[-1].bit:
            self.boundaries.append(Boundary(bit, strm.total_out))
        if len(self.boundaries) > self.budget:
            self.boundaries, self.flush = [], Z_NO_FLUSH

    def _check_progress(self, before: tuple[int, int]) -> None:
        """zlib moved neither input nor output: the data ended early, or (a third time) it never will."""
        strm = self.strm
        if (strm.total_in, strm.total_out) != before:
            self.stalls = 0
            return
        if strm.avail_in == 0 and self.fed >= len(self.raw):
            raise self._error("compressed data ends before its stream does")
        self.stalls += 1
        if self.stalls > 2:  # zlib made no progress with input and room to write: never loop on it
            raise self._error("inflate makes no progress")


# Rough costs on one core, to choose between reusing blocks at a byte boundary (copied as they are) and at any
# other boundary (shifted into place bit by bit): deflate at level 6 costs ~45 ns per uncompressed byte, the
# shift ~2.2 ns per compressed byte.
DEFLATE_NS, SHIFT_NS = 45, 2.2


def _block_type(raw: Span, bit: int) -> int:
    """BTYPE of the block whose header starts at ``bit`` (0 stored, 1 fixed, 2 dynamic)."""
    head = int.from_bytes(raw.read(bit // 8, 2), "little") >> (bit % 8)
    return (head >> 1) & 3


def segments(boundaries: Sequence[Boundary], raw: Span, size: int, edits: Sequence[int],
             min_copy: int = MIN_COPY) -> list[Segment]:
    """The member's uncompressed range [0, size) as fresh and copied stretches, in order (see the module doc).
    ``edits``: the uncompressed offsets of the changed bytes.

    A stretch copied from a boundary that is not on a byte boundary is shifted into place, which would move
    the byte-alignment padding of a stored block inside it: such a stretch stops before any stored block."""
    blocks = _Blocks(boundaries, raw)
    n, pos = blocks.n, blocks.pos
    out: list[Segment] = []
    done = 0
    for lo, hi in _gaps(edits):
        # Blocks i..limit-1 lie inside the gap; limit == n means through the final block.
        limit = n if hi is None else bisect.bisect_right(pos, hi) - 1
        i = bisect.bisect_left(pos, lo)
        while i < limit:
            if blocks.stored[i] and not blocks.aligned[i]:
                i += 1
                continue
            i, end = blocks.stretch(i, limit)
            end_pos = pos[end] if end < n else size
            if end_pos - pos[i] >= min_copy:
                if pos[i] > done:
                    out.append(Fresh(done, pos[i]))
                out.append(Copy(boundaries[i].bit, boundaries[end].bit if end < n else -1, pos[i], end_pos))
                done = end_pos
            i = end if end > i else i + 1
    if done < size or not out:
        out.append(Fresh(done, size))
    return out


def _gaps(edits: Sequence[int]) -> list[tuple[int, int | None]]:
    """Where original blocks may be reused: [0, first edit], [edit + 1 + WINDOW, next edit], ..., to the end
    (None)."""
    gaps: list[tuple[int, int | None]] = []
    lo = 0
    for e in sorted(edits):
        if e >= lo:
            gaps.append((lo, e))
        lo = max(lo, e + 1 + WINDOW)
    gaps.append((lo, None))
    return gaps


def _next_true(flags: list[bool]) -> list[int]:
    """For each index i (and len(flags)), the first index >= i whose flag is set; len(flags) for none."""
    n = len(flags)
    nxt = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        nxt[i] = i if flags[i] else nxt[i + 1]
    return nxt


class _Blocks:
    """The block boundaries of a stream with what ``segments`` asks of them: byte-aligned or not, stored
    block or not, and the next boundary of each kind."""

    def __init__(self, boundaries: Sequence[Boundary], raw: Span) -> None:
        self.boundaries, self.raw = boundaries, raw
        self.n = len(boundaries)
        self.pos = [b.pos for b in boundaries]
        self.aligned = [b.bit % 8 == 0 for b in boundaries]
        self.stored = [_block_type(raw, b.bit) == 0 for b in boundaries]
        self.next_aligned = _next_true(self.aligned)
        self.next_stored = _next_true(self.stored)

    def bit_at(self, i: int) -> int:
        return self.boundaries[i].bit if i < self.n else len(self.raw) * 8

    def stretch(self, i: int, limit: int) -> tuple[int, int]:
        """(first, end): the blocks to copy from boundary ``i`` on, before ``limit``. A stretch that must be
        shifted stops before a stored block; it starts at the next byte-aligned boundary instead when
        deflating the blocks skipped costs less than shifting the stretch."""
        end = limit if self.aligned[i] else min(limit, self.next_stored[i])
        a = self.next_aligned[i]
        if not self.aligned[i] and a < limit:
            if (self.pos[a] - self.pos[i]) * DEFLATE_NS < (self.bit_at(end) - self.bit_at(i)) / 8 * SHIFT_NS:
                return a, limit
        return i, end


def _deflate_piece(data: memoryview, level: int, final: bool) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(zlib.Z_FINISH if final else zlib.Z_FULL_FLUSH)


def _align(tail: int, rest: int) -> bytes:
    """After copied blocks that end ``rest`` bits into a byte (those bits: ``tail``), an empty stored block
    (BFINAL=0, BTYPE=00, padding to the byte boundary, LEN=0, NLEN=0xFFFF) puts the stream back on a byte
    boundary without adding data."""
    return bytes((tail,)) + (b"\0" if rest + 3 > 8 else b"") + b"\0\0\xff\xff"


def _shifted(raw: Span, bit: int, end_bit: int, to_end: bool, spill: Callable[[], Scratch] | None = None,
             step: int = 1 << 20) -> list[Piece]:
    """The bits [bit, end_bit) of ``raw`` moved to start on a byte boundary, and then aligned (or, at the end
    of the stream, with the last bits in a byte of their own). With ``spill``, the shifted bytes go to a
    scratch file it gives (and come back as its span) instead of staying in memory."""
    first, k = divmod(bit, 8)
    nbits = end_bit - bit
    whole = nbits // 8
    out: list[Piece] = []
    store = spill() if spill is not None and whole > step else None
    for i in range(0, whole, step):
        n = min(step, whole - i)
        seg = raw.read(first + i, n + 1)  # one byte more: its low bits end the last byte
        moved = (int.from_bytes(seg, "little") >> k).to_bytes(len(seg), "little")[:n]
        if store is not None:
            store.append(moved)
        else:
            out.append(moved)
    if store is not None:
        out.append(store.piece())
    rest = nbits % 8
    if rest:
        at = bit + whole * 8
        tail = (int.from_bytes(raw.read(at // 8, 2), "little") >> (at % 8)) & ((1 << rest) - 1)
        out.append(bytes((tail,)) if to_end else _align(tail, rest))
    return out


def assemble(raw: Span | None, blob: bytes | bytearray | mmap, segs: Sequence[Segment], submit: Callable,
             level: int = 6, chunk: int = 2 << 20, spill: Callable[[], Scratch] | None = None) -> list:
    """The new compressed member as a list of pieces in order: bytes, spans of ``raw``, and futures
    (from ``submit``) of deflated or shifted pieces; ``resolve`` waits for them. Fresh stretches are cut
    into ``chunk``-sized pieces deflated in parallel, each ending in a full flush (so they concatenate), the
    very last in Z_FINISH. ``spill``: where long shifted stretches go (see ``_shifted``)."""
    view = memoryview(blob)
    pieces: list = []
    for k, seg in enumerate(segs):
        if isinstance(seg, Fresh):
            starts = list(range(seg.start, seg.end, chunk)) or [seg.start]
            for i in starts:
                final = k == len(segs) - 1 and i == starts[-1]
                pieces.append(submit(_deflate_piece, view[i : min(i + chunk, seg.end)], level, final))
            continue
        assert raw is not None  # only Fresh stretches without an original stream
        to_end = seg.end_bit < 0  # through the original final block
        end_bit = len(raw) * 8 if to_end else seg.end_bit
        if seg.bit % 8:
            pieces.append(submit(_shifted, raw, seg.bit, end_bit, to_end, spill))
            continue
        whole, rest = divmod(end_bit, 8)
        pieces.append(raw.sub(seg.bit // 8, whole))
        if rest:  # only when not to_end: the stream's length in bits is a whole number of bytes
            pieces.append(_align(raw.read(whole, 1)[0] & ((1 << rest) - 1), rest))
    return pieces


def resolve(pieces: Sequence) -> list[Piece]:
    """The pieces ``assemble`` returned, with every future waited for and every list flattened."""
    out: list[Piece] = []
    for p in pieces:
        if isinstance(p, Future):
            p = p.result()
        if isinstance(p, list):
            out.extend(p)
        else:
            out.append(p)
    return out


def check_stream(pieces: Sequence[Piece], size: int, crc: int, name: str, path: str) -> None:
    """Inflate the assembled stream and check that it gives ``size`` bytes with CRC-32 ``crc`` (zlib releases
    the GIL for both, so checks of several members run in parallel)."""
    got, pos = 0, 0
    try:
        for data in zipfmt.inflate_raw(chunks(pieces, zipfmt.IN_STEP), size):
            pos += len(data)
            got = zlib.crc32(data, got)
    except zlib.error as exc:
        raise VerifyError(f"zip member {name!r}: the re-deflated stream is corrupt ({exc})", path) from exc
    except EOFError:
        pos = -1  # the stream ends early
    if pos > size:
        raise VerifyError(f"zip member {name!r}: the re-deflated stream inflates to too much", path)
    if pos != size or got != crc:
        raise VerifyError(f"zip member {name!r}: the re-deflated stream does not inflate to the patched bytes", path)
