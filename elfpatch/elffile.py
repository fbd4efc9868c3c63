"""A bounds-checked, read-only view of one ELF image.

Word size and byte order are decided once, in the constructor; every offset, size and count is checked
against the image before use, and every failure is a ParseError with a one-line message. Works on any
buffer (bytes, mmap, memoryview) without copying it, so a 400 MB library costs no more memory than its
symbol tables.
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple, Union

from elfpatch.errors import ParseError

Buffer = Union[bytes, bytearray, memoryview, "mmap.mmap"]  # noqa: F821 - mmap only in the annotation

ELFMAG = b"\x7fELF"
ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB, ELFDATA2MSB = 1, 2

# e_type
ET_REL, ET_EXEC, ET_DYN, ET_CORE = 1, 2, 3, 4

# sh_type
SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 0, 1, 2, 3
SHT_RELA, SHT_HASH, SHT_DYNAMIC, SHT_NOBITS, SHT_REL, SHT_DYNSYM = 4, 5, 6, 8, 9, 11
SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY = 14, 15, 16
SHT_RELR = 19
SHN_UNDEF, SHN_LORESERVE, SHN_XINDEX = 0, 0xFF00, 0xFFFF

# p_type
PT_LOAD, PT_DYNAMIC = 1, 2

# d_tag
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB = 0, 1, 4, 5, 6
DT_STRSZ, DT_SYMENT = 10, 11
DT_GNU_HASH = 0x6FFFFEF5

# Symbol-table entry sizes, and where st_info sits inside one.
SYM_ENTSIZE = {32: 16, 64: 24}
ST_INFO_OFFSET = {32: 12, 64: 4}
ST_SHNDX_OFFSET = {32: 14, 64: 6}  # the 2-byte st_shndx (SHN_UNDEF, 0, reads the same in both byte orders)

# A limit so that a file claiming billions of entries fails fast instead of allocating.
MAX_HEADERS = 1 << 16


class Segment(NamedTuple):
    p_type: int
    p_flags: int
    p_offset: int
    p_vaddr: int
    p_filesz: int
    p_memsz: int


class Section(NamedTuple):
    index: int
    name: str
    sh_type: int
    sh_flags: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_info: int
    sh_entsize: int


class Symbol(NamedTuple):
    index: int
    name: str
    st_value: int
    st_size: int
    st_info: int
    st_other: int
    st_shndx: int
    info_offset: int  # image offset of the st_info byte: the one byte a binding edit touches

    @property
    def bind(self) -> int:
        return self.st_info >> 4

    @property
    def type(self) -> int:
        return self.st_info & 0xF


class SymbolTable:
    """One symbol table (``.dynsym`` or ``.symtab``) with its string table, already bounds-checked."""

    def __init__(self, elf: ElfFile, name: str, offset: int, count: int, str_offset: int, str_size: int):
        self.elf = elf
        self.name = name
        self.offset = offset
        self.count = count
        self.entsize = SYM_ENTSIZE[elf.elfclass]
        self.str_offset = str_offset
        self.str_size = str_size

    def __len__(self) -> int:
        return self.count

    def info_bytes(self) -> bytes:
        """st_info of every entry, in index order, taken with one strided slice (no per-symbol Python)."""
        start = self.offset + ST_INFO_OFFSET[self.elf.elfclass]
        return bytes(self.elf.data[start : self.offset + self.count * self.entsize : self.entsize])

    def info_offset(self, index: int) -> int:
        return self.offset + index * self.entsize + ST_INFO_OFFSET[self.elf.elfclass]

    def string(self, st_name: int) -> str:
        if st_name >= self.str_size:
            raise ParseError(f"{self.name}: symbol name offset {st_name} past its string table", self.elf.path)
        return self.elf.cstring(self.str_offset + st_name, self.str_offset + self.str_size)

    def symbol(self, index: int) -> Symbol:
        if not 0 <= index < self.count:
            raise ParseError(f"{self.name}: symbol index {index} out of range", self.elf.path)
        off = self.offset + index * self.entsize
        if self.elf.elfclass == 64:
            st_name, info, other, shndx, value, size = self.elf.unpack("IBBHQQ", off)
        else:
            st_name, value, size, info, other, shndx = self.elf.unpack("IIIBBH", off)
        return Symbol(index, self.string(st_name), value, size, info, other, shndx,
                      off + ST_INFO_OFFSET[self.elf.elfclass])

    def __iter__(self) -> Iterator[Symbol]:
        for i in range(self.count):
            yield self.symbol(i)


def _find_nul(data: Buffer, start: int, end: int) -> int:
    """Where the first NUL byte in data[start:end] is, or -1; also for a memoryview (an archive member read in
    place), which has no find: searched in growing steps, as names are mostly short."""
    if not isinstance(data, memoryview):
        return data.find(b"\0", start, end)
    pos, step = start, 64
    while pos < end:
        at = bytes(data[pos : min(end, pos + step)]).find(b"\0")
        if at >= 0:
            return pos + at
        pos, step = pos + step, min(step * 2, 1 << 16)
    return -1


class ElfFile:
    """Headers, segments, sections, dynamic tags and symbol tables of one ELF image."""

    def __init__(self, data: Buffer, path: str = "<memory>") -> None:
        self.data = data
        self.path = path
        self.size = len(data)
        if self.size < 16 or bytes(data[:4]) != ELFMAG:
            raise ParseError("not an ELF file", path)
        ei_class, ei_data = data[4], data[5]
        if ei_class not in (ELFCLASS32, ELFCLASS64):
            raise ParseError(f"bad ELF class {ei_class}", path)
        if ei_data not in (ELFDATA2LSB, ELFDATA2MSB):
            raise ParseError(f"bad ELF data encoding {ei_data}", path)
        self.elfclass = 64 if ei_class == ELFCLASS64 else 32
        self.little = ei_data == ELFDATA2LSB
        self.endian = "<" if self.little else ">"
        self.osabi = data[7]
        self._word = "Q" if self.elfclass == 64 else "I"
        self._structs: dict[str, struct.Struct] = {}
        w = self._word
        (self.e_type, self.e_machine, self.e_version, self.e_entry, self.e_phoff, self.e_shoff,
         self.e_flags, self.e_ehsize, self.e_phentsize, self.e_phnum, self.e_shentsize, self.e_shnum,
         self.e_shstrndx) = self.unpack(f"HHI{w}{w}{w}IHHHHHH", 16)
        self._segments: list[Segment] | None = None
        self._sections: list[Section] | None = None
        self._dynamic: list[tuple[int, int]] | None = None

    # -- raw access, all bounds-checked -------------------------------------------------------------

    def check_range(self, offset: int, size: int, what: str = "data") -> None:
        if offset < 0 or size < 0 or offset > self.size or size > self.size - offset:
            raise ParseError(f"{what} at offset {offset:#x} size {size:#x} runs past the end of the file",
                             self.path)

    def read(self, offset: int, size: int) -> bytes:
        self.check_range(offset, size)
        return bytes(self.data[offset : offset + size])

    def struct(self, fmt: str) -> struct.Struct:
        """A Struct for ``fmt`` in this file's byte order (cached)."""
        s = self._structs.get(fmt)
        if s is None:
            s = self._structs[fmt] = struct.Struct(self.endian + fmt)
        return s

    def unpack(self, fmt: str, offset: int) -> tuple:
        s = self.struct(fmt)
        self.check_range(offset, s.size)
        return s.unpack_from(self.data, offset)

    def word(self, offset: int) -> int:
        """One address-sized word (4 or 8 bytes)."""
        return self.unpack(self._word, offset)[0]

    def cstring(self, offset: int, end: int) -> str:
        """The NUL-terminated string at ``offset``, which must end before ``end``."""
        end = min(end, self.size)
        if not 0 <= offset < end:
            raise ParseError(f"string offset {offset:#x} out of range", self.path)
        stop = _find_nul(self.data, offset, end)
        if stop < 0:
            raise ParseError(f"unterminated string at offset {offset:#x}", self.path)
        return bytes(self.data[offset:stop]).decode("utf-8", "surrogateescape")

    # -- headers -----------------------------------------------------------------------------------

    @property
    def segments(self) -> list[Segment]:
        if self._segments is None:
            self._segments = self._read_segments()
        return self._segments

    def _read_segments(self) -> list[Segment]:
        if self.e_phoff == 0 or self.e_phnum == 0:
            return []
        fmt = "IIQQQQQQ" if self.elfclass == 64 else "IIIIIIII"
        if self.e_phentsize < self.struct(fmt).size:
            raise ParseError(f"program header entry size {self.e_phentsize} too small", self.path)
        out = []
        for f in self.header_table(self.e_phoff, self.e_phnum, self.e_phentsize, fmt, "program headers"):
            if self.elfclass == 64:
                p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, _align = f
            else:
                p_type, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, p_flags, _align = f
            out.append(Segment(p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz))
        return out

    @property
    def sections(self) -> list[Section]:
        if self._sections is None:
            self._sections = self._read_sections()
        return self._sections

    def _read_sections(self) -> list[Section]:
        if self.e_shoff == 0:
            return []
        w = self._word
        fmt = f"II{w}{w}{w}{w}II{w}{w}"
        if self.e_shentsize < self.struct(fmt).size:
            raise ParseError(f"section header entry size {self.e_shentsize} too small", self.path)
        shnum, shstrndx = self.e_shnum, self.e_shstrndx
        if shnum == 0 or shstrndx == SHN_XINDEX:
            # More than SHN_LORESERVE sections: the real values live in section header 0.
            first = self.unpack(fmt, self.e_shoff)
            if shnum == 0:
                shnum = first[5]
            if shstrndx == SHN_XINDEX:
                shstrndx = first[6]
        if shnum == 0:
            return []
        if shnum > MAX_HEADERS * 16:
            raise ParseError(f"implausible section count {shnum}", self.path)
        raw = self.header_table(self.e_shoff, shnum, self.e_shentsize, fmt, "section headers")
        names = b""
        if 0 < shstrndx < shnum:
            _, _, _, _, names_off, names_size, _, _, _, _ = raw[shstrndx]
            names = self.read(names_off, names_size)
        out = []
        for i, (sh_name, sh_type, flags, addr, off, size, link, info, _align, entsize) in enumerate(raw):
            name = ""
            if sh_name < len(names):
                end = names.find(b"\0", sh_name)
                if end < 0:
                    raise ParseError(f"unterminated section name at offset {sh_name:#x}", self.path)
                name = names[sh_name:end].decode("utf-8", "surrogateescape")
            out.append(Section(i, name, sh_type, flags, addr, off, size, link, info, entsize))
        return out

    def header_table(self, offset: int, count: int, entsize: int, fmt: str, what: str) -> list[tuple]:
        """``count`` entries of ``entsize`` bytes at ``offset``, each unpacked with ``fmt`` (one read)."""
        s = self.struct(fmt)
        self.check_range(offset, count * entsize, what)
        blob = bytes(self.data[offset : offset + count * entsize])
        if entsize == s.size:
            return list(s.iter_unpack(blob))
        return [s.unpack_from(blob, i * entsize) for i in range(count)]

    def section_by_name(self, name: str) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def section_data(self, section: Section) -> bytes:
        if section.sh_type == SHT_NOBITS:
            return b""
        return self.read(section.sh_offset, section.sh_size)

    # -- addresses ---------------------------------------------------------------------------------

    def vaddr_to_offset(self, vaddr: int, size: int = 1) -> int:
        """File offset of ``vaddr`` through PT_LOAD, the way the loader maps it."""
        for seg in self.segments:
            if seg.p_type == PT_LOAD and seg.p_vaddr <= vaddr and vaddr + size <= seg.p_vaddr + seg.p_filesz:
                off = seg.p_offset + (vaddr - seg.p_vaddr)
                self.check_range(off, size, f"address {vaddr:#x}")
                return off
        raise ParseError(f"address {vaddr:#x} is not in any loaded segment", self.path)

    # -- dynamic section ---------------------------------------------------------------------------

    def dynamic(self) -> list[tuple[int, int]]:
        """(d_tag, d_val) pairs up to DT_NULL, from PT_DYNAMIC (or the SHT_DYNAMIC section of a file
        without program headers)."""
        if self._dynamic is None:
            self._dynamic = self._read_dynamic()
        return self._dynamic

    def _read_dynamic(self) -> list[tuple[int, int]]:
        offset = size = None
        for seg in self.segments:
            if seg.p_type == PT_DYNAMIC:
                offset, size = seg.p_offset, seg.p_filesz
                break
        else:
            for sec in self.sections:
                if sec.sh_type == SHT_DYNAMIC:
                    offset, size = sec.sh_offset, sec.sh_size
                    break
        if offset is None:
            return []
        self.check_range(offset, size, "dynamic section")
        fmt = "qQ" if self.elfclass == 64 else "iI"
        step = self.struct(fmt).size
        out = []
        for pos in range(offset, offset + size - step + 1, step):
            tag, val = self.unpack(fmt, pos)
            if tag == DT_NULL:
                break
            out.append((tag & (0xFFFFFFFFFFFFFFFF if self.elfclass == 64 else 0xFFFFFFFF), val))
        return out

    def dynamic_value(self, tag: int) -> int | None:
        for t, v in self.dynamic():
            if t == tag:
                return v
        return None

    # -- symbol tables -----------------------------------------------------------------------------

    def symbol_tables(self) -> list[SymbolTable]:
        """``.dynsym`` and ``.symtab`` (by section type), or the dynamic symbol table found through
        PT_DYNAMIC when the file has no section headers."""
        tables = []
        _ = self.segments  # broken program headers make a broken file, even where only sections are used
        sections = self.sections
        for sec in sections:
            if sec.sh_type not in (SHT_SYMTAB, SHT_DYNSYM):
                continue
            label = ".dynsym" if sec.sh_type == SHT_DYNSYM else ".symtab"
            entsize = SYM_ENTSIZE[self.elfclass]
            if sec.sh_entsize not in (0, entsize):
                raise ParseError(f"{label}: entry size {sec.sh_entsize}, expected {entsize}", self.path)
            if sec.sh_size % entsize:
                raise ParseError(f"{label}: size {sec.sh_size} is not a multiple of {entsize}", self.path)
            self.check_range(sec.sh_offset, sec.sh_size, label)
            if not 0 < sec.sh_link < len(sections) or sections[sec.sh_link].sh_type != SHT_STRTAB:
                raise ParseError(f"{label}: string table link {sec.sh_link} is not a string table", self.path)
            strtab = sections[sec.sh_link]
            self.check_range(strtab.sh_offset, strtab.sh_size, f"{label} string table")
            tables.append(SymbolTable(self, label, sec.sh_offset, sec.sh_size // entsize,
                                      strtab.sh_offset, strtab.sh_size))
        if not sections:
            dyn = self._dynsym_from_dynamic()
            if dyn is not None:
                tables.append(dyn)
        return tables

    def _dynsym_from_dynamic(self) -> SymbolTable | None:
        symtab, strtab, strsz = (self.dynamic_value(t) for t in (DT_SYMTAB, DT_STRTAB, DT_STRSZ))
        if symtab is None:
            return None
        if strtab is None or strsz is None:
            raise ParseError("DT_SYMTAB without DT_STRTAB/DT_STRSZ", self.path)
        entsize = SYM_ENTSIZE[self.elfclass]
        syment = self.dynamic_value(DT_SYMENT)
        if syment not in (None, entsize):
            raise ParseError(f"DT_SYMENT {syment}, expected {entsize}", self.path)
        count = self.dynamic_symbol_count()
        sym_off = self.vaddr_to_offset(symtab, max(count * entsize, 1))
        str_off = self.vaddr_to_offset(strtab, max(strsz, 1))
        return SymbolTable(self, ".dynsym", sym_off, count, str_off, strsz)

    def dynamic_symbol_count(self) -> int:
        """How many dynamic symbols there are, from DT_HASH's nchain or a walk of DT_GNU_HASH."""
        hash_addr = self.dynamic_value(DT_HASH)
        if hash_addr is not None:
            off = self.vaddr_to_offset(hash_addr, 8)
            _nbucket, nchain = self.unpack("II", off)
            self._plausible_count(nchain)
            return nchain
        gnu = self.dynamic_value(DT_GNU_HASH)
        if gnu is not None:
            return self._gnu_hash_count(gnu)
        raise ParseError("no section headers and neither DT_HASH nor DT_GNU_HASH: symbol count unknown",
                         self.path)

    def _gnu_hash_count(self, addr: int) -> int:
        off = self.vaddr_to_offset(addr, 16)
        nbuckets, symoffset, bloom_size, _shift = self.unpack("IIII", off)
        words = self.elfclass // 8
        buckets_off = off + 16 + bloom_size * words
        self.check_range(buckets_off, nbuckets * 4, "DT_GNU_HASH buckets")
        chains_off = buckets_off + nbuckets * 4
        buckets = self.struct(f"{nbuckets}I").unpack_from(self.data, buckets_off) if nbuckets else ()
        last = max(buckets, default=0)
        if last < symoffset:
            return symoffset
        # Walk the last bucket's chain to its end (low bit set) to find the highest symbol index.
        index = last
        limit = self.size // SYM_ENTSIZE[self.elfclass]  # no more symbols than the file can hold
        while True:
            if index >= limit:
                raise ParseError("DT_GNU_HASH chain does not end within the file's symbol capacity", self.path)
            pos = chains_off + (index - symoffset) * 4
            (h,) = self.unpack("I", pos)
            if h & 1:
                break
            index += 1
        self._plausible_count(index + 1)
        return index + 1

    def _plausible_count(self, count: int) -> None:
        if count * SYM_ENTSIZE[self.elfclass] > self.size:
            raise ParseError(f"symbol count {count} larger than the file can hold", self.path)


def is_elf(head: bytes) -> bool:
    return head[:4] == ELFMAG
