"""Function extents from ``.eh_frame``: every FDE says where one function (or one part of it, a ``.cold`` split)
starts and how long it is. A stripped library keeps them (the unwinder needs them), so they bound decoding
where there is no ``.symtab``, and check sizes where there is.

``.eh_frame`` is found as the unwinder finds it: through PT_GNU_EH_FRAME's ``.eh_frame_hdr`` (its
``eh_frame_ptr``) when the file has no section headers, else the section. The header's binary search table
(initial location, FDE address; sorted) gives every FDE's start at C speed, and an FDE is read only when a
function's end is asked; without a usable table every record is read in one pass. Records are CIEs and FDEs
(LSB "Exception Frames"); an FDE's ``pc_begin`` uses its CIE's pointer encoding (the ``R`` augmentation,
DW_EH_PE_*). Every length and offset is checked against the file: bad data is a note (the extents read so far
still count), never an exception.
"""
from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from typing import Callable

from elfpatch.elf.const import PT_GNU_EH_FRAME, PT_LOAD, SHT_NOBITS
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfPatchError

# DW_EH_PE_* (LSB 10.6.2): the low nibble is the value's format, the next three bits what it is relative to.
DW_EH_PE_absptr, DW_EH_PE_uleb128, DW_EH_PE_udata2, DW_EH_PE_udata4, DW_EH_PE_udata8 = 0x00, 0x01, 0x02, 0x03, 0x04
DW_EH_PE_sleb128, DW_EH_PE_sdata2, DW_EH_PE_sdata4, DW_EH_PE_sdata8 = 0x09, 0x0A, 0x0B, 0x0C
DW_EH_PE_pcrel, DW_EH_PE_datarel, DW_EH_PE_indirect, DW_EH_PE_omit = 0x10, 0x30, 0x80, 0xFF
_FIXED = {DW_EH_PE_udata2: "H", DW_EH_PE_udata4: "I", DW_EH_PE_udata8: "Q",
          DW_EH_PE_sdata2: "h", DW_EH_PE_sdata4: "i", DW_EH_PE_sdata8: "q"}
MAX_RECORDS = 4_000_000  # far above any real library (libLLVM-15: ~100k FDEs); a bound on crafted input


class EhFrameError(ElfPatchError):
    """Bad .eh_frame data (reported as a note: the extents parsed so far still count)."""


class Extents:
    """The FDEs' extents: ``starts`` sorted, relative to ``base``; ``end_at(i)`` is the i-th FDE's end (None:
    unreadable), computed when asked (the .eh_frame_hdr table gives the starts at C speed: libtorch_cpu.so
    has 335k FDEs)."""

    def __init__(self, starts: array, base: int, end_at: Callable[[int], int | None], notes: list[str]) -> None:
        self.starts, self.base, self._end_at, self.notes = starts, base, end_at, notes

    def end_of(self, addr: int) -> int | None:
        """The end of the FDE covering ``addr`` (None: no FDE covers it)."""
        i = bisect_right(self.starts, addr - self.base) - 1
        if i < 0:
            return None
        end = self._end_at(i)
        return end if end is not None and addr < end else None

    def start_of(self, addr: int) -> int | None:
        """The start of the FDE covering ``addr`` (None: no FDE covers it)."""
        i = bisect_right(self.starts, addr - self.base) - 1
        if i < 0:
            return None
        end = self._end_at(i)
        return self.base + self.starts[i] if end is not None and addr < end else None

    def next_start(self, addr: int) -> int | None:
        """The first FDE start after ``addr``: no function runs past it."""
        i = bisect_right(self.starts, addr - self.base)
        return self.base + self.starts[i] if i < len(self.starts) else None

    def is_start(self, addr: int) -> bool:
        i = bisect_right(self.starts, addr - self.base) - 1
        return i >= 0 and self.starts[i] == addr - self.base

    def spans(self) -> list[tuple[int, int | None]]:
        """Every (start, end): for checks and tests (the analysis asks one address at a time)."""
        return [(self.base + s, self._end_at(i)) for i, s in enumerate(self.starts)]


class _Reader:
    """Bounded reads inside [lo, hi) of the file, addressed by file offset."""

    def __init__(self, elf: ElfFile, lo: int, hi: int) -> None:
        self.data, self.lo, self.hi = elf.data, lo, min(hi, elf.size)
        self.word = 8 if elf.elfclass == 64 else 4
        self.endian = elf.endian

    def fixed(self, fmt: str, off: int) -> int:
        s = struct.calcsize(fmt)
        if not self.lo <= off <= self.hi - s:
            raise EhFrameError(f".eh_frame: a field at offset {off:#x} runs past its data")
        return struct.unpack_from(self.endian + fmt, self.data, off)[0]

    def leb(self, off: int, signed: bool) -> tuple[int, int]:
        value = shift = 0
        while True:
            if off >= self.hi or shift > 63:
                raise EhFrameError(f".eh_frame: a LEB128 at offset {off:#x} does not end")
            b = self.data[off]
            off += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if signed and b & 0x40:
            value -= 1 << shift
        return value, off

    def cstring(self, off: int) -> tuple[bytes, int]:
        end = bytes(self.data[off: min(self.hi, off + 64)]).find(b"\0")
        if end < 0:
            raise EhFrameError(f".eh_frame: augmentation string at offset {off:#x} does not end")
        return bytes(self.data[off: off + end]), off + end + 1

    def encoded(self, enc: int, off: int, vaddr_of, datarel: int | None) -> tuple[int, int]:
        """A DW_EH_PE-encoded pointer at file offset ``off``: (value, offset after it)."""
        fmt = enc & 0x0F
        if fmt == DW_EH_PE_absptr:
            value, nxt = self.fixed("Q" if self.word == 8 else "I", off), off + self.word
        elif fmt in (DW_EH_PE_uleb128, DW_EH_PE_sleb128):
            value, nxt = self.leb(off, fmt == DW_EH_PE_sleb128)
        elif fmt in _FIXED:
            value, nxt = self.fixed(_FIXED[fmt], off), off + struct.calcsize(_FIXED[fmt])
        else:
            raise EhFrameError(f".eh_frame: pointer encoding {enc:#x} is not valid")
        app = enc & 0x70
        if app == DW_EH_PE_pcrel:
            value += vaddr_of(off)
        elif app == DW_EH_PE_datarel and datarel is not None:
            value += datarel
        elif app:
            raise EhFrameError(f".eh_frame: pointer encoding {enc:#x} is not supported")
        return value & ((1 << (8 * self.word)) - 1), nxt


def _locate(elf: ElfFile) -> tuple[int, int, int, int | None] | None:
    """(file offset, end offset, link-time address, .eh_frame_hdr address) of .eh_frame, or None."""
    sec = elf.section_by_name(".eh_frame") if elf.sections else None
    hdr = next((p for p in elf.segments if p.p_type == PT_GNU_EH_FRAME), None)
    hdr_addr = hdr.p_vaddr if hdr is not None else None
    if sec is not None and sec.sh_type != SHT_NOBITS and sec.sh_size:
        return sec.sh_offset, sec.sh_offset + sec.sh_size, sec.sh_addr, hdr_addr
    if hdr is None:
        return None
    # .eh_frame_hdr: version, eh_frame_ptr_enc, fde_count_enc, table_enc, then eh_frame_ptr.
    r = _Reader(elf, hdr.p_offset, hdr.p_offset + hdr.p_filesz)
    if r.fixed("B", hdr.p_offset) != 1:
        raise EhFrameError(".eh_frame_hdr: version is not 1")
    enc = r.fixed("B", hdr.p_offset + 1)
    addr, _ = r.encoded(enc, hdr.p_offset + 4, lambda o: hdr.p_vaddr + o - hdr.p_offset, hdr.p_vaddr)
    load = next((p for p in elf.segments if p.p_type == PT_LOAD and p.p_vaddr <= addr < p.p_vaddr + p.p_filesz),
                None)
    if load is None:
        raise EhFrameError(f".eh_frame_hdr: eh_frame_ptr {addr:#x} is not in a loaded segment")
    off = load.p_offset + addr - load.p_vaddr  # no size known: the records run to a zero terminator
    return off, load.p_offset + load.p_filesz, addr, hdr_addr


def _cie_encoding(r: _Reader, off: int, end: int, vaddr_of, datarel: int | None) -> int:
    """The FDE pointer encoding a CIE at ``off`` (its version byte) gives, DW_EH_PE_absptr by default."""
    version = r.fixed("B", off)
    aug, p = r.cstring(off + 1)
    if b"eh" in aug:
        p += r.word
    _, p = r.leb(p, False)  # code alignment
    _, p = r.leb(p, True)  # data alignment
    p = p + 1 if version == 1 else r.leb(p, False)[1]  # return address register
    if not aug.startswith(b"z"):
        return DW_EH_PE_absptr
    _, p = r.leb(p, False)  # augmentation data length
    for ch in aug[1:]:
        if p >= end:
            break
        if ch == ord("R"):
            return r.fixed("B", p)
        if ch == ord("P"):
            _, p = r.encoded(r.fixed("B", p) & 0x7F, p + 1, vaddr_of, datarel)
        elif ch == ord("L"):
            p += 1
        elif ch not in b"SBG":
            break  # an augmentation this parser does not know: its data cannot be skipped
    return DW_EH_PE_absptr


def _records(r: _Reader, off: int, end: int, vaddr_of, datarel: int | None, starts: array, ends: array) -> None:
    """Appends the start and end of every FDE from ``off`` to ``end`` (or a zero terminator)."""
    cies: dict[int, int] = {}
    for _ in range(MAX_RECORDS):
        if off + 4 > end:
            return
        length = r.fixed("I", off)
        if length == 0:
            return  # the terminator
        body = off + 4
        if length == 0xFFFFFFFF:
            length, body = r.fixed("Q", off + 4), off + 12
        nxt = body + length
        if nxt > end or length < 4:
            raise EhFrameError(f".eh_frame: record at offset {off:#x} runs past its data")
        cie_ptr = r.fixed("I", body)
        if cie_ptr == 0:
            cies[off] = _cie_encoding(r, body + 4, nxt, vaddr_of, datarel)
        else:
            enc = cies.get(body - cie_ptr)  # the CIE pointer counts back from itself to the CIE's length field
            if enc is None:
                raise EhFrameError(f".eh_frame: FDE at offset {off:#x} names no CIE before it")
            if enc != DW_EH_PE_omit:
                start, p = r.encoded(enc, body + 4, vaddr_of, datarel)
                size, _ = r.encoded(enc & 0x0F, p, vaddr_of, datarel)
                _add(start, size, off, starts, ends)
        off = nxt
    raise EhFrameError(f".eh_frame: more than {MAX_RECORDS} records")


def _add(start: int, size: int, off: int, starts: array, ends: array) -> None:
    """One FDE's [start, start + size), if it covers code; one past the address space is a lying record."""
    if start and size > 0:
        if start + size >= 1 << 64:
            raise EhFrameError(f".eh_frame: FDE at offset {off:#x} runs past the address space")
        starts.append(start)
        ends.append(start + size)


def _full_parse(elf: ElfFile, where: tuple, notes: list[str]) -> Extents:
    """Every record of .eh_frame, read in one pass."""
    starts, ends = array("Q"), array("Q")  # 16 bytes an FDE
    off, end, addr, hdr = where
    try:
        _records(_Reader(elf, off, end), off, end, lambda o: addr + o - off, hdr, starts, ends)
    except ElfPatchError as exc:
        notes.append(f"{exc.message}; function extents read up to there")
    if any(starts[i] > starts[i + 1] for i in range(len(starts) - 1)):  # the linker writes them in address order
        pairs = sorted(zip(starts, ends))
        starts, ends = array("Q", (s for s, _ in pairs)), array("Q", (e for _, e in pairs))
    return Extents(starts, 0, ends.__getitem__, notes)


def _table(elf: ElfFile, where: tuple, notes: list[str]) -> Extents | None:
    """The extents from .eh_frame_hdr's search table when it has the usual encodings (fde_count udata4, table
    datarel sdata4), each FDE's end read when asked; None: no usable table."""
    hdr = next((p for p in elf.segments if p.p_type == PT_GNU_EH_FRAME), None)
    if hdr is None or elf.endian != "<" or hdr.p_filesz < 12 or not 0 <= hdr.p_offset <= elf.size - hdr.p_filesz:
        return None
    head = bytes(elf.data[hdr.p_offset: hdr.p_offset + 4])
    if head[0] != 1 or head[2] != DW_EH_PE_udata4 or head[3] != DW_EH_PE_datarel | DW_EH_PE_sdata4:
        return None
    ptr_size = {DW_EH_PE_sdata4: 4, DW_EH_PE_udata4: 4, DW_EH_PE_pcrel | DW_EH_PE_sdata4: 4}.get(head[1])
    if ptr_size is None:
        return None
    at = hdr.p_offset + 4 + ptr_size
    count = int.from_bytes(elf.data[at: at + 4], "little")
    if count > (hdr.p_filesz - (at + 4 - hdr.p_offset)) // 8:
        raise EhFrameError(".eh_frame_hdr: its table runs past the segment")
    table = array("i", bytes(elf.data[at + 4: at + 4 + 8 * count]))
    off, end, addr, _ = where
    reader, cache = _Reader(elf, off, end), {}
    cies: dict[int, int] = {}
    fdes, base = table[1::2], hdr.p_vaddr

    def end_at(i: int) -> int | None:
        if i not in cache:
            cache[i] = _one_fde(reader, off + base + fdes[i] - addr, addr - off, base, base + table[2 * i], cies,
                                notes)
        return cache[i]

    return Extents(table[0::2], base, end_at, notes)


def _one_fde(r: _Reader, off: int, delta: int, datarel: int, start: int, cies: dict, notes: list[str]) -> int | None:
    """The end of the FDE at file offset ``off`` when it starts at ``start`` as the table says (else None)."""
    try:
        length, cie_ptr = r.fixed("I", off), r.fixed("I", off + 4)
        if length in (0, 0xFFFFFFFF) or cie_ptr == 0 or off + 4 + length > r.hi:
            raise EhFrameError(f".eh_frame: no FDE at offset {off:#x}, where .eh_frame_hdr says one is")
        cie = off + 4 - cie_ptr
        enc = cies.get(cie)
        if enc is None:
            if not r.lo <= cie < off or r.fixed("I", cie + 4) != 0:
                raise EhFrameError(f".eh_frame: FDE at offset {off:#x} names no CIE")
            enc = cies[cie] = _cie_encoding(r, cie + 8, cie + 4 + r.fixed("I", cie), lambda o: o + delta, datarel)
        if enc == DW_EH_PE_pcrel | DW_EH_PE_sdata4:  # what GCC and clang emit: two words, no general decoding
            begin, size = r.fixed("i", off + 8) + off + 8 + delta, r.fixed("i", off + 12)
        else:
            begin, p = r.encoded(enc, off + 8, lambda o: o + delta, datarel)
            size, _ = r.encoded(enc & 0x0F, p, lambda o: o + delta, datarel)
    except ElfPatchError as exc:
        if len(notes) < 5:
            notes.append(exc.message)
        return None
    return begin + size if begin == start and size > 0 else None


def eh_frame_extents(elf: ElfFile) -> Extents:
    """The FDEs' extents, sorted by start. Never raises: bad data is a note (the extents read still count)."""
    notes: list[str] = []
    try:
        where = _locate(elf)
        if where is not None:
            return _table(elf, where, notes) or _full_parse(elf, where, notes)
    except ElfPatchError as exc:  # EhFrameError, or a header the file does not hold
        notes.append(f"{exc.message}; no function extents")
    return Extents(array("Q"), 0, lambda _i: None, notes)
