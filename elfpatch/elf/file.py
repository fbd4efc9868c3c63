"""A bounds-checked, read-only view of one ELF image, with both of its views of the symbols.

Word size and byte order are decided once, in the header parser; every offset, size and count is checked
against the image before use, and every failure is a ParseError with a one-line message. Works on any
buffer (bytes, mmap, memoryview) without copying it, so a 400 MB library costs no more memory than its
symbol tables.

Two views. The loader never reads section headers: it finds the dynamic section at PT_DYNAMIC's p_vaddr
(mapped through PT_LOAD, not at p_offset), the dynamic symbol table at DT_SYMTAB with its strings at
DT_STRTAB/DT_STRSZ, and its size from DT_HASH or a walk of DT_GNU_HASH. That table is always read and is
authoritative. Section headers are a second view for tools (``.symtab`` exists only there); they are read
too, may describe the loader's table differently (packers ship decoys), and may be unusable altogether:
what that changes is recorded in ``warnings`` instead of failing a file whose loader view is complete.
"""
from __future__ import annotations

import struct
import sys
from array import array
from itertools import compress
from operator import itemgetter

from elfpatch.elf.const import (
    DF_1_PIE,
    DT_FLAGS_1,
    DT_GNU_HASH,
    DT_HASH,
    DT_JMPREL,
    DT_NULL,
    DT_PLTRELSZ,
    DT_REL,
    DT_RELA,
    DT_RELASZ,
    DT_RELSZ,
    DT_STRSZ,
    DT_STRTAB,
    DT_SYMENT,
    DT_SYMTAB,
    EI_NIDENT,
    ELFCLASS32,
    ELFCLASS64,
    ELFDATA2LSB,
    ELFDATA2MSB,
    ELFMAG,
    ET_DYN,
    ET_EXEC,
    PN_XNUM,
    PT_DYNAMIC,
    PT_INTERP,
    PT_LOAD,
    SHN_XINDEX,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_STRTAB,
    SHT_SYMTAB,
    ST_INFO_OFFSET,
    ST_SHNDX_OFFSET,
    SYM_ENTSIZE,
    st_bind,
    st_type,
)
from elfpatch.elf.records import Record
from elfpatch.errors import ParseError

TYPE_CHECKING = False  # typing is not imported on the read path
if TYPE_CHECKING:
    import mmap
    from typing import Iterable, Iterator, Union

    Buffer = Union[bytes, bytearray, memoryview, mmap.mmap]

# A limit so that a file claiming billions of entries fails fast instead of allocating.
MAX_HEADERS = 1 << 16
LOADER_TABLE = ".dynsym"  # the label of the loader's table in reports (rows keep "table": ".dynsym")


class ElfHeader(Record):
    """e_ident's class, byte order and OSABI, and the ELF header's fields as stored (before extended
    numbering is resolved: that needs section header 0)."""

    elfclass: int  # 32 or 64
    little: bool
    osabi: int
    e_type: int
    e_machine: int
    e_version: int
    e_entry: int
    e_phoff: int
    e_shoff: int
    e_flags: int
    e_ehsize: int
    e_phentsize: int
    e_phnum: int
    e_shentsize: int
    e_shnum: int
    e_shstrndx: int


# The ELF header after e_ident, by (class, little-endian): built once, not per file (a tree has thousands).
_EHDR = {(c, le): struct.Struct(("<" if le else ">") + ("HHI{w}{w}{w}IHHHHHH".format(w="Q" if c == 64 else "I")))
         for c in (32, 64) for le in (False, True)}


_SHDR_FORMAT = {64: "IIQQQQIIQQ", 32: "IIIIIIIIII"}  # a section header, by class

# The Structs files ask for, by byte order then format: made once per process, not once per image (a
# tree's check reads ten thousand images, each asking for half a dozen). Bounded, for formats made up by
# callers of ``ElfFile.struct``.
_STRUCTS: dict[str, dict[str, struct.Struct]] = {"<": {}, ">": {}}
_MAX_STRUCTS = 64


def parse_header(data: Buffer, path: str = "<memory>") -> ElfHeader:
    """The ELF header at the start of ``data``: the one place e_ident and the header are decoded."""
    if len(data) < EI_NIDENT or bytes(data[:4]) != ELFMAG:
        raise ParseError("not an ELF file", path)
    ei_class, ei_data = data[4], data[5]
    if ei_class not in (ELFCLASS32, ELFCLASS64):
        raise ParseError(f"bad ELF class {ei_class}", path)
    if ei_data not in (ELFDATA2LSB, ELFDATA2MSB):
        raise ParseError(f"bad ELF data encoding {ei_data}", path)
    elfclass = 64 if ei_class == ELFCLASS64 else 32
    little = ei_data == ELFDATA2LSB
    fmt = _EHDR[elfclass, little]
    if len(data) < EI_NIDENT + fmt.size:
        raise ParseError(f"ELF header at offset 0x10 size {fmt.size:#x} runs past the end of the file", path)
    return tuple.__new__(ElfHeader, (elfclass, little, data[7], *fmt.unpack_from(data, EI_NIDENT)))


class Segment(Record):
    p_type: int
    p_flags: int
    p_offset: int
    p_vaddr: int
    p_filesz: int
    p_memsz: int


class Section(Record):
    shndx: int
    name: str
    sh_type: int
    sh_flags: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_info: int
    sh_entsize: int


class Symbol(Record):
    symndx: int
    name: str
    st_value: int
    st_size: int
    st_info: int
    st_other: int
    st_shndx: int
    info_offset: int  # image offset of the st_info byte: the one byte a binding edit touches

    @property
    def bind(self) -> int:
        return st_bind(self.st_info)

    @property
    def type(self) -> int:
        return st_type(self.st_info)


class SymEntry(Record):
    """One symbol-table entry's fields in gABI order, whatever the class stores them in."""

    st_name: int
    st_value: int
    st_size: int
    st_info: int
    st_other: int
    st_shndx: int


# Elf64_Sym stores st_name, st_info, st_other, st_shndx, st_value, st_size; Elf32_Sym stores st_name,
# st_value, st_size, st_info, st_other, st_shndx.
_SYM_FORMAT = {64: "IBBHQQ", 32: "IIIBBH"}
# Byte translations for column-wise selection: 1 where a byte is (not) zero, 1 where st_info has a type.
_NONZERO, _ZERO = bytes([0] + [1] * 255), bytes([1] + [0] * 255)
_TYPE_IS = {t: bytes(1 if b & 0xF == t else 0 for b in range(256)) for t in range(16)}


def _entry(elfclass: int, fields: tuple[int, ...]) -> SymEntry:
    if elfclass == 64:
        st_name, info, other, shndx, value, size = fields
        return SymEntry(st_name, value, size, info, other, shndx)
    return SymEntry(*fields)


class SymbolTable:
    """One symbol table with its string table, already bounds-checked. ``name`` is its report label:
    ``.dynsym`` for the loader's table, ``.symtab``, or ``.dynsym(section N)`` for a SHT_DYNSYM section that
    is not where the loader's table is."""

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

    @property
    def end(self) -> int:
        return self.offset + self.count * self.entsize

    def info_bytes(self) -> bytes:
        """st_info of every entry, in index order, taken with one strided slice (no per-symbol Python)."""
        start = self.offset + ST_INFO_OFFSET[self.elf.elfclass]
        return bytes(self.elf.data[start : self.end : self.entsize])

    def info_offset(self, index: int) -> int:
        return self.offset + index * self.entsize + ST_INFO_OFFSET[self.elf.elfclass]

    def string(self, st_name: int) -> str:
        if st_name >= self.str_size:
            raise ParseError(f"{self.name}: symbol name offset {st_name} past its string table", self.elf.path)
        return self.elf.cstring(self.str_offset + st_name, self.str_offset + self.str_size)

    def name_head(self, st_name: int, n: int) -> bytes:
        """The first ``n`` bytes at ``st_name`` in the string table (fewer at its end), not decoded: a test of a
        name's prefix that costs no decode (b"" for an offset outside the table)."""
        if not 0 <= st_name < self.str_size:
            return b""
        start = self.str_offset + st_name
        return bytes(self.elf.data[start : min(start + n, self.str_offset + self.str_size)])

    def strings_view(self) -> memoryview:
        """The whole string table without a copy (a large ``.strtab`` costs tens of milliseconds to copy), for
        reading many names' bytes by index; release it (``with``) before the file is closed."""
        self.elf.check_range(self.str_offset, self.str_size)
        return memoryview(self.elf.data)[self.str_offset : self.str_offset + self.str_size]

    def strings(self) -> bytes:
        """The whole string table (bounds-checked when the table was found): for testing many names' first
        bytes at once, at C speed."""
        return self.elf.read(self.str_offset, self.str_size)

    def names_of(self, defined: bool, st_type: int | None = None) -> list[str]:
        """The non-empty names of the entries that are defined (st_shndx not SHN_UNDEF) or undefined, and of
        type ``st_type`` if given, in table order: read column by column (st_shndx's and st_info's strided
        bytes pick the entries at C speed), only the names picked decoded. A bad name offset is the ParseError
        symbol() gives."""
        blob = self.elf.read(self.offset, self.count * self.entsize)
        ent, at = self.entsize, ST_SHNDX_OFFSET[self.elf.elfclass]
        shndx = int.from_bytes(blob[at::ent], "little") | int.from_bytes(blob[at + 1 :: ent], "little")
        keep = shndx.to_bytes(self.count, "little").translate(_NONZERO if defined else _ZERO)
        if st_type is not None:
            info = blob[ST_INFO_OFFSET[self.elf.elfclass] :: ent].translate(_TYPE_IS[st_type])
            keep = (int.from_bytes(keep, "little") & int.from_bytes(info, "little")).to_bytes(self.count, "little")
        strings = self.strings()
        names = []
        for n in compress(self._st_names(blob), keep):
            end = strings.find(b"\0", n) if n < self.str_size else -1
            name = strings[n:end].decode("utf-8", "surrogateescape") if end >= 0 else self.string(n)  # raises
            if name:
                names.append(name)
        return names

    def _st_names(self, blob: bytes) -> Iterable[int]:
        """Every entry's st_name (the first word of both classes' entries) from the table's bytes."""
        if self.elf.little == (sys.byteorder == "little"):
            return memoryview(blob).cast("I")[:: self.entsize // 4]
        s = self.elf.struct("I")
        return (s.unpack_from(blob, i)[0] for i in range(0, len(blob), self.entsize))

    def entry(self, index: int) -> SymEntry:
        if not 0 <= index < self.count:
            raise ParseError(f"{self.name}: symbol index {index} out of range", self.elf.path)
        return _entry(self.elf.elfclass, self.elf.unpack(_SYM_FORMAT[self.elf.elfclass],
                                                          self.offset + index * self.entsize))

    def entries(self) -> Iterator[SymEntry]:
        """Every entry, decoded from one read of the table (for scans over all symbols)."""
        s = self.elf.struct(_SYM_FORMAT[self.elf.elfclass])
        for fields in s.iter_unpack(self.elf.read(self.offset, self.count * self.entsize)):
            yield _entry(self.elf.elfclass, fields)

    def symbol(self, index: int) -> Symbol:
        st_name, value, size, info, other, shndx = self.entry(index)
        return Symbol(index, self.string(st_name), value, size, info, other, shndx, self.info_offset(index))

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


def _sections_fast(raw: list[tuple[int, ...]], names: str, first: int = 0) -> list[Section]:
    """The sections of a name table that is ASCII and ends in NUL (every real one): each name is then
    terminated and its str offsets are its byte offsets, so one decode serves every name. The same result as
    the general path, at a third of its cost (a tree of static archives has tens of thousands of sections).
    ``first``: the index of ``raw``'s first row."""
    find, size, make = names.find, len(names), tuple.__new__
    return [make(Section, (i, names[sh_name:find("\0", sh_name)] if sh_name < size else "", sh_type, flags, addr,
                           off, sh_size, link, info, entsize))
            for i, (sh_name, sh_type, flags, addr, off, sh_size, link, info, _align, entsize) in enumerate(raw, first)]


_SH_TYPE = itemgetter(1)  # a section header row's sh_type


def _where(values: list[int], value: int) -> list[int]:
    """The indexes of ``value`` in ``values``, in order (list.count and list.index: no Python step per item,
    and no ValueError raised at the end, which cost more than the search)."""
    found: list[int] = []
    at = -1
    for _ in range(values.count(value)):
        at = values.index(value, at + 1)
        found.append(at)
    return found


# (name, offset, count, str_offset, str_size): a SymbolTable without its file
TableSpec = tuple[str, int, int, int, int]


def _spec(table: SymbolTable) -> TableSpec:
    return (table.name, table.offset, table.count, table.str_offset, table.str_size)


class ElfFile:
    """Headers, segments, sections, dynamic tags and symbol tables of one ELF image."""

    def __init__(self, data: Buffer, path: str = "<memory>") -> None:
        self.data = data
        self.path = path
        self.size = len(data)
        self.header = h = parse_header(data, path)
        self.elfclass, self.little, self.osabi = h.elfclass, h.little, h.osabi
        self.endian = "<" if self.little else ">"
        (self.e_type, self.e_machine, self.e_version, self.e_entry, self.e_phoff, self.e_shoff,
         self.e_flags, self.e_ehsize, self.e_phentsize, self.e_phnum, self.e_shentsize, self.e_shnum,
         self.e_shstrndx) = h[3:]
        self._word = "Q" if self.elfclass == 64 else "I"
        self._structs = _STRUCTS[self.endian]
        self._segments: list[Segment] | None = None
        self._load_spans: list[tuple[int, int, int]] | None = None
        self._dynseg: tuple[Segment | None] | None = None
        self._sections: list[Section] | None = None
        # The section headers as unpacked rows, checked but not yet named (``_section_rows``), and their
        # names' table decoded: the symbol tables need only their own few sections named.
        self._rows: list[tuple[int, ...]] | None = None
        self._names = ""
        self._symsecs: list[Section] | None = None
        self._dynamic: list[tuple[int, int]] | None = None
        self._values: dict[int, int] | None = None
        # The tables found, cached as plain tuples (TableSpec): a cached SymbolTable would point back at this
        # file, a reference cycle per image that only the cyclic GC frees (a fifth of a tree's check).
        self._tables: list[TableSpec] | None = None
        self._loader: tuple[TableSpec | None] | None = None
        self._hashed: tuple[TableSpec | None] | None = None
        self.warnings: list[str] = []  # where the section view and the loader's view part ways
        # relocs.Relocator's indexes of the relocation tables, built once per file (they point at no file)
        self.relocation_indexes: dict[int, object] = {}

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    # -- raw access, all bounds-checked -------------------------------------------------------------

    def check_range(self, offset: int, size: int, what: str = "data") -> None:
        if offset < 0 or size < 0 or offset > self.size or size > self.size - offset:
            raise ParseError(f"{what} at offset {offset:#x} size {size:#x} runs past the end of the file",
                             self.path)

    def read(self, offset: int, size: int) -> bytes:
        self.check_range(offset, size)
        return bytes(self.data[offset : offset + size])

    def struct(self, fmt: str) -> struct.Struct:
        """A Struct for ``fmt`` in this file's byte order (cached for every file of that byte order)."""
        s = self._structs.get(fmt)
        if s is None:
            s = struct.Struct(self.endian + fmt)
            if len(self._structs) < _MAX_STRUCTS:
                self._structs[fmt] = s
        return s

    def unpack(self, fmt: str, offset: int) -> tuple[int, ...]:
        s = self.struct(fmt)
        self.check_range(offset, s.size)
        return s.unpack_from(self.data, offset)

    def _array(self, code: str, offset: int, size: int) -> array[int]:
        """``size`` bytes at ``offset`` as an array of unsigned words (code "I" or "Q") in this file's byte
        order: one read, no per-word Python."""
        words = array(code, self.read(offset, size - size % array(code).itemsize))
        if self.little != (sys.byteorder == "little"):
            words.byteswap()
        return words

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
    def _shdr_format(self) -> str:
        return _SHDR_FORMAT[self.elfclass]

    def _section_zero(self, why: str) -> tuple[int, ...]:
        """Section header 0, which holds the real counts under extended numbering."""
        fmt = self._shdr_format
        if self.e_shoff == 0:
            raise ParseError(f"{why}, but there is no section header 0 (e_shoff is 0)", self.path)
        if self.e_shentsize < self.struct(fmt).size:
            raise ParseError(f"{why}, but e_shentsize {self.e_shentsize} is too small for section header 0",
                             self.path)
        self.check_range(self.e_shoff, self.struct(fmt).size, f"section header 0 ({why})")
        return self.unpack(fmt, self.e_shoff)

    @property
    def phnum(self) -> int:
        """The number of program headers: e_phnum, or under PN_XNUM section header 0's sh_info."""
        if self.e_phnum != PN_XNUM:
            return self.e_phnum
        return self._section_zero("e_phnum is PN_XNUM")[7]

    @property
    def segments(self) -> list[Segment]:
        if self._segments is None:
            self._segments = self._read_segments()
        return self._segments

    def _read_segments(self) -> list[Segment]:
        phnum = self.phnum
        if self.e_phoff == 0 or phnum == 0:
            return []
        fmt = "IIQQQQQQ" if self.elfclass == 64 else "IIIIIIII"
        if self.e_phentsize < self.struct(fmt).size:
            raise ParseError(f"program header entry size {self.e_phentsize} too small", self.path)
        rows = self.header_table(self.e_phoff, phnum, self.e_phentsize, fmt, "program headers")
        make = tuple.__new__  # the record without its Python-level constructor (every file has a dozen)
        if self.elfclass == 64:
            return [make(Segment, (p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz))
                    for p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, _align in rows]
        return [make(Segment, (p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz))
                for p_type, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, p_flags, _align in rows]

    @property
    def sections(self) -> list[Section]:
        """The section headers; [] when there are none, and also when they are unusable but the loader's
        view is complete (a warning says so). Unusable headers and no loader view: ParseError."""
        if self._sections is None:
            rows = self._section_rows()
            if self._sections is None:  # (names that are not plain ASCII were decoded one by one already)
                self._sections = _sections_fast(rows, self._names)
        return self._sections

    def _section_rows(self) -> list[tuple[int, ...]]:
        """The section headers as unpacked rows, checked as ``sections`` checks them (the same errors, the
        same fallback to none), without building a record for each."""
        if self._rows is None:
            try:
                self._rows = self._read_section_rows()
            except ParseError as exc:
                if self._hashed_table() is None or not self._loads_in_file():
                    raise
                self._rows, self._sections = [], []
                self.warn(f"section headers unusable ({exc.message}): .symtab could not be read; the loader's "
                          "dynamic symbol table (PT_DYNAMIC) was read")
        return self._rows

    def _section(self, rows: list[tuple[int, ...]], index: int) -> Section:
        """Section ``index`` of ``rows`` as a record (the one of ``sections`` when they were all built)."""
        if self._sections is not None:
            return self._sections[index]
        return _sections_fast([rows[index]], self._names, index)[0]

    def _symbol_sections(self) -> list[Section]:
        """The SHT_SYMTAB and SHT_DYNSYM sections, in index order: found without a Python step per section,
        and only they are named (an archive member has tens of other sections)."""
        if self._symsecs is None:
            rows = self._section_rows()
            types = list(map(_SH_TYPE, rows))
            self._symsecs = [self._section(rows, i)
                             for i in sorted(_where(types, SHT_SYMTAB) + _where(types, SHT_DYNSYM))]
        return self._symsecs

    def _static_executable(self) -> bool:
        """An ET_EXEC with PT_LOADs in the file and no PT_DYNAMIC: the kernel runs it without section headers,
        and no loader ever reads its symbols (its initializers, though, are found through sections only)."""
        types = {seg.p_type for seg in self.segments}
        return self.e_type == ET_EXEC and PT_LOAD in types and PT_DYNAMIC not in types and self._loads_in_file()

    def _loads_in_file(self) -> bool:
        """Whether every PT_LOAD's file bytes are in the file: a cut file maps, but touching the missing pages
        kills the process (SIGBUS), so its loader view is not complete."""
        return all(seg.p_offset + seg.p_filesz <= self.size for seg in self.segments if seg.p_type == PT_LOAD)

    def _read_section_rows(self) -> list[tuple[int, ...]]:
        if self.e_shoff == 0:
            return []
        fmt = self._shdr_format
        if self.e_shentsize < self.struct(fmt).size:
            raise ParseError(f"section header entry size {self.e_shentsize} too small", self.path)
        shnum, shstrndx = self._section_counts()
        if shnum == 0:
            return []
        if shnum > MAX_HEADERS * 16:
            raise ParseError(f"implausible section count {shnum}", self.path)
        raw = self.header_table(self.e_shoff, shnum, self.e_shentsize, fmt, "section headers")
        names = self._section_names(raw, shstrndx)
        if names.isascii() and (not names or names[-1] == 0):
            self._names = names.decode("ascii")  # every name terminated: named on demand, all alike
        else:  # each name decoded (and checked to be terminated) now, as unusable headers must fail here
            self._sections = [Section(i, self._section_name(names, sh_name), sh_type, flags, addr, off, size, link,
                                      info, entsize)
                              for i, (sh_name, sh_type, flags, addr, off, size, link, info, _align, entsize)
                              in enumerate(raw)]
        return raw

    def _section_counts(self) -> tuple[int, int]:
        """(section count, index of the section name table), through extended numbering where it is used."""
        shnum, shstrndx = self.e_shnum, self.e_shstrndx
        if shnum == 0 or shstrndx == SHN_XINDEX:
            # Extended numbering: the real values live in section header 0 (sh_size, sh_link).
            first = self._section_zero("e_shnum is 0" if shnum == 0 else "e_shstrndx is SHN_XINDEX")
            if shnum == 0:
                shnum = first[5]
            if shstrndx == SHN_XINDEX:
                shstrndx = first[6]
        return shnum, shstrndx

    def _section_names(self, raw: list[tuple[int, ...]], shstrndx: int) -> bytes:
        """The section name table's bytes; empty when the header names none (every section is then unnamed)."""
        if not 0 < shstrndx < len(raw):
            return b""
        _, _, _, _, names_off, names_size, _, _, _, _ = raw[shstrndx]
        self.check_range(names_off, names_size, "section name table")
        return self.read(names_off, names_size)

    def _section_name(self, names: bytes, sh_name: int) -> str:
        if sh_name >= len(names):
            return ""
        end = names.find(b"\0", sh_name)
        if end < 0:
            raise ParseError(f"unterminated section name at offset {sh_name:#x}", self.path)
        return names[sh_name:end].decode("utf-8", "surrogateescape")

    def header_table(self, offset: int, count: int, entsize: int, fmt: str, what: str) -> list[tuple[int, ...]]:
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

    def is_executable(self) -> bool:
        """Whether glibc treats this file as a main program (only those get DT_PREINIT_ARRAY run)."""
        if self.e_type == ET_EXEC:
            return True
        if self.e_type != ET_DYN:
            return False
        if any(seg.p_type == PT_INTERP for seg in self.segments):
            return True
        return bool((self.dynamic_value(DT_FLAGS_1) or 0) & DF_1_PIE)

    # -- addresses ---------------------------------------------------------------------------------

    def _load_segment(self, vaddr: int) -> Segment | None:
        for seg in self.segments:
            if seg.p_type == PT_LOAD and seg.p_vaddr <= vaddr < seg.p_vaddr + seg.p_filesz:
                return seg
        return None

    def _loads(self) -> list[tuple[int, int, int]]:
        """(p_vaddr, p_vaddr + p_filesz, p_offset) of each PT_LOAD in order: what ``vaddr_to_offset`` maps
        through, a few times per file."""
        if self._load_spans is None:
            self._load_spans = [(seg.p_vaddr, seg.p_vaddr + seg.p_filesz, seg.p_offset) for seg in self.segments
                                if seg.p_type == PT_LOAD]
        return self._load_spans

    def vaddr_to_offset(self, vaddr: int, size: int = 1) -> int:
        """File offset of ``vaddr`` through PT_LOAD, the way the loader maps it."""
        for start, end, offset in self._loads():
            if start <= vaddr and vaddr + size <= end:
                off = offset + (vaddr - start)
                self.check_range(off, size, f"address {vaddr:#x}")
                return off
        raise ParseError(f"address {vaddr:#x} is not in any loaded segment", self.path)

    # -- dynamic section ---------------------------------------------------------------------------

    def dynamic(self) -> list[tuple[int, int]]:
        """(d_tag, d_val) pairs up to DT_NULL: from PT_DYNAMIC as the loader reads it (at p_vaddr), or the
        SHT_DYNAMIC section of a file without one."""
        if self._dynamic is None:
            self._dynamic = self._read_dynamic()
        return self._dynamic

    def _dynamic_segment(self) -> Segment | None:
        if self._dynseg is None:  # (asked three times per file: kept)
            self._dynseg = (next((seg for seg in self.segments if seg.p_type == PT_DYNAMIC), None),)
        return self._dynseg[0]

    def _read_dynamic(self) -> list[tuple[int, int]]:
        fmt = "qQ" if self.elfclass == 64 else "iI"
        step = self.struct(fmt).size
        seg = self._dynamic_segment()
        if seg is not None:
            # glibc: l_ld = l_addr + p_vaddr, read up to DT_NULL. p_offset is not used, so a file whose
            # p_offset points elsewhere still has this dynamic section; its extent is the loaded bytes.
            load = self._load_segment(seg.p_vaddr)
            if load is None:
                raise ParseError(f"PT_DYNAMIC address {seg.p_vaddr:#x} is not in any loaded segment", self.path)
            offset = self.vaddr_to_offset(seg.p_vaddr, step)
            if seg.p_offset != offset:
                self.warn(f"PT_DYNAMIC's p_offset {seg.p_offset:#x} is not where its p_vaddr {seg.p_vaddr:#x} maps "
                          f"({offset:#x}): read at p_vaddr, as the loader reads it")
            # past the end of the file there is nothing to read
            size = min(load.p_offset + load.p_filesz, self.size) - offset
        else:
            for sec in self.sections if self.e_shoff else ():
                if sec.sh_type == SHT_DYNAMIC:
                    offset, size = sec.sh_offset, sec.sh_size
                    break
            else:
                return []
        self.check_range(offset, size, "dynamic section")
        out: list[tuple[int, int]] = []
        end, pos, chunk = offset + size - size % step, offset, step * 64
        while pos < end:  # in slices: a missing DT_NULL costs no per-entry read
            # d_tag read unsigned: the tag as a mask of the word's bits would give it (DT_NULL is 0 either way)
            words = self._array(self._word, pos, min(chunk, end - pos))
            tags = words[0::2]
            try:
                stop = tags.index(DT_NULL)
            except ValueError:
                stop = -1
            if stop >= 0:
                out.extend(zip(tags[:stop], words[1::2]))
                return out
            out.extend(zip(tags, words[1::2]))
            if len(out) > MAX_HEADERS:
                raise ParseError(f"no DT_NULL in the first {MAX_HEADERS} dynamic entries", self.path)
            pos, chunk = pos + chunk, step * 256  # the first slice holds most files' whole section
        return out

    def dynamic_value(self, tag: int) -> int | None:
        """The value of the last ``tag`` entry, or None: glibc's elf_get_dynamic_info overwrites its slot for
        each entry, so a repeated tag means its last value to the loader."""
        if self._values is None:
            self._values = dict(self.dynamic())
        return self._values.get(tag)

    def dynstr(self) -> tuple[int, int] | None:
        """(file offset, size) of the dynamic string table (DT_STRTAB, DT_STRSZ), or None without one."""
        addr, size = self.dynamic_value(DT_STRTAB), self.dynamic_value(DT_STRSZ)
        if addr is None and size is None:
            return None
        if addr is None or size is None:
            raise ParseError("DT_STRTAB and DT_STRSZ must come together", self.path)
        return self.vaddr_to_offset(addr, max(size, 1)), size

    def dynamic_string(self, offset: int) -> str:
        """The dynamic string at ``offset`` into DT_STRTAB (DT_NEEDED, DT_SONAME, symbol names...)."""
        span = self.dynstr()
        if span is None:
            raise ParseError("dynamic string wanted, but there is no DT_STRTAB", self.path)
        base, size = span
        if offset >= size:
            raise ParseError(f"dynamic string offset {offset} past DT_STRSZ {size}", self.path)
        return self.cstring(base + offset, base + size)

    def dynamic_strings(self, tag: int) -> list[str]:
        """The strings of every ``tag`` entry (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH), in order."""
        return [self.dynamic_string(v) for t, v in self.dynamic() if t == tag]

    # -- symbol tables -----------------------------------------------------------------------------

    def loader_table(self) -> SymbolTable | None:
        """The dynamic symbol table as glibc finds it: DT_SYMTAB through PT_DYNAMIC, mapped through
        PT_LOAD, its size from DT_HASH or DT_GNU_HASH. None without PT_DYNAMIC or DT_SYMTAB, and when no
        hash table gives the size (then glibc finds none of its symbols either)."""
        if self._loader is None:  # (the first answer is the one made: only the specs are kept, see __init__)
            table = self._hashed_table()
            table = self._extend(table) if table is not None else None
            self._loader = (_spec(table) if table is not None else None,)
            return table
        return self._table(self._loader[0])

    def _hashed_table(self) -> SymbolTable | None:
        """The loader's table as far as its hash tables reach (no section header read)."""
        if self._hashed is None:
            table = self._read_hashed_table()
            self._hashed = (_spec(table) if table is not None else None,)
            return table
        return self._table(self._hashed[0])

    def _read_hashed_table(self) -> SymbolTable | None:
        if self._dynamic_segment() is None:
            return None
        symtab = self.dynamic_value(DT_SYMTAB)
        if symtab is None or (self.dynamic_value(DT_HASH) is None and self.dynamic_value(DT_GNU_HASH) is None):
            return None
        entsize = SYM_ENTSIZE[self.elfclass]
        syment = self.dynamic_value(DT_SYMENT)
        if syment not in (None, entsize):
            raise ParseError(f"DT_SYMENT {syment}, expected {entsize}", self.path)
        span = self.dynstr()
        if span is None:
            raise ParseError("DT_SYMTAB without DT_STRTAB/DT_STRSZ", self.path)
        count = self.dynamic_symbol_count()
        sym_off = self.vaddr_to_offset(symtab, max(count * entsize, 1))
        return SymbolTable(self, LOADER_TABLE, sym_off, count, *span)

    def symbol_tables(self) -> list[SymbolTable]:
        """The loader's table first (always read when there is one), then every SHT_SYMTAB and SHT_DYNSYM
        section that is not the same table. Where the views disagree, both are kept and ``warnings`` says
        how; a section table that cannot be read safely is left out with a warning while the loader's view
        stands (and is an error without one)."""
        if self._tables is None:
            tables = self._symbol_tables()
            self._tables = [_spec(t) for t in tables]
            return tables
        return [SymbolTable(self, *spec) for spec in self._tables]

    def _table(self, spec: TableSpec | None) -> SymbolTable | None:
        return SymbolTable(self, *spec) if spec is not None else None

    def _symbol_tables(self) -> list[SymbolTable]:
        _ = self.segments  # broken program headers make a broken file, even where only sections are used
        loader = self.loader_table()
        try:
            rows = self._section_rows()
        except ParseError as exc:
            if not self._static_executable():
                raise
            self.warn(f"section headers unusable ({exc.message}): .symtab could not be read; a static executable "
                      "(no PT_DYNAMIC) has no symbol the loader reads")
            return []
        tables = [loader] if loader is not None else []
        for sec in self._symbol_sections():
            table = self._admit_section_table(sec, rows, tables, loader)
            if table is not None:
                tables.append(table)
        if loader is not None and not any(sec.sh_type == SHT_DYNSYM for sec in self._symbol_sections()) and rows:
            self.warn("no section header describes the loader's dynamic symbol table (DT_SYMTAB): it was read "
                      "through PT_DYNAMIC")
        if loader is None and not rows and self.dynamic_value(DT_SYMTAB) is not None:
            raise ParseError("no section headers and neither DT_HASH nor DT_GNU_HASH: symbol count unknown",
                             self.path)
        return tables

    def _admit_section_table(self, sec: Section, rows: list[tuple[int, ...]], tables: list[SymbolTable],
                             loader: SymbolTable | None) -> SymbolTable | None:
        """The symbol table section ``sec`` as a table to read besides ``tables``, or None when it is the
        loader's own or is left out. With the loader's view to stand on, a bad section is a warning; without
        it, an error."""
        label = ".dynsym" if sec.sh_type == SHT_DYNSYM else ".symtab"
        try:
            table = self._section_table(sec, rows, label)
        except ParseError as exc:
            if loader is None:
                raise
            self.warn(f"{label} (section {sec.shndx}) could not be read: {exc.message}")
            return None
        if loader is not None and (table.offset, table.count) == (loader.offset, loader.count):
            return None  # the loader's own table: read (and edited) once
        clash = self._clash(table, tables, loader)
        if clash:
            if loader is None:
                raise ParseError(f"{label}: {clash}", self.path)
            self.warn(f"{label} (section {sec.shndx}, at {table.offset:#x} with {table.count} entries) not "
                      f"read: {clash}")
            return None
        if loader is not None and sec.sh_type == SHT_DYNSYM:
            table.name = f".dynsym(section {sec.shndx})"
            self.warn(f"section {sec.shndx} ({sec.name or 'unnamed'}) is a SHT_DYNSYM table at "
                      f"{table.offset:#x} with {table.count} entries, but the loader's DT_SYMTAB is at "
                      f"{loader.offset:#x} with {loader.count}: both are read")
        return table

    def _extend(self, loader: SymbolTable) -> SymbolTable:
        """The loader's table with the size of a SHT_DYNSYM section that starts where it does and is larger.
        A GNU hash walk finds only the symbols lookups reach: the undefined ones before them (and all of an
        executable's, which exports nothing) are still entries, read by relocations through their index."""
        entsize = loader.entsize
        for sec in self._symbol_sections():
            if sec.sh_type == SHT_DYNSYM and sec.sh_offset == loader.offset and sec.sh_size > loader.count * entsize \
                    and sec.sh_entsize in (0, entsize) and sec.sh_size % entsize == 0 \
                    and sec.sh_size <= self.size - sec.sh_offset:
                end = sec.sh_offset + sec.sh_size
                # Not over anything else the loader reads: a section grown over .dynstr is no symbol table there.
                if any(start < end and loader.end < start + size for start, size, _ in self._loader_spans(loader)):
                    return loader
                return SymbolTable(self, loader.name, loader.offset, sec.sh_size // entsize, loader.str_offset,
                                   loader.str_size)
        return loader

    def _section_table(self, sec: Section, rows: list[tuple[int, ...]], label: str) -> SymbolTable:
        entsize = SYM_ENTSIZE[self.elfclass]
        if sec.sh_entsize not in (0, entsize):
            raise ParseError(f"{label}: entry size {sec.sh_entsize}, expected {entsize}", self.path)
        if sec.sh_size % entsize:
            raise ParseError(f"{label}: size {sec.sh_size} is not a multiple of {entsize}", self.path)
        self.check_range(sec.sh_offset, sec.sh_size, label)
        if not 0 < sec.sh_link < len(rows) or rows[sec.sh_link][1] != SHT_STRTAB:
            raise ParseError(f"{label}: string table link {sec.sh_link} is not a string table", self.path)
        _, _, _, _, str_offset, str_size, _, _, _, _ = rows[sec.sh_link]
        self.check_range(str_offset, str_size, f"{label} string table")
        return SymbolTable(self, label, sec.sh_offset, sec.sh_size // entsize, str_offset, str_size)

    def _clash(self, table: SymbolTable, accepted: list[SymbolTable], loader: SymbolTable | None) -> str | None:
        """Why editing ``table``'s st_info bytes could damage what another view relies on, or None: it
        overlaps an accepted table out of step with its entries (its st_info bytes would be another field
        there), or bytes the loader reads (headers, dynamic section, strings, hash and relocation tables)."""
        for other in accepted:
            if table.offset < other.end and other.offset < table.end and \
                    (table.offset - other.offset) % table.entsize:
                return f"it overlaps {other.name} at {other.offset:#x} out of step with its entries"
        if loader is not None:
            for start, size, what in self._loader_spans(loader):
                if table.offset < start + size and start < table.end:
                    return f"it overlaps {what}, which the loader reads"
        return None

    def _loader_spans(self, loader: SymbolTable) -> list[tuple[int, int, str]]:
        """(file offset, size, what) of the structures the loader reads besides its symbol table."""
        word = self.elfclass // 8
        spans = [(0, max(self.e_ehsize, 1), "the ELF header"),
                 (self.e_phoff, len(self.segments) * self.e_phentsize, "the program headers"),
                 (loader.str_offset, loader.str_size, "the dynamic string table")]
        seg = self._dynamic_segment()
        if seg is not None:
            spans.append((self.vaddr_to_offset(seg.p_vaddr, 1), (len(self.dynamic()) + 1) * 2 * word,
                          "the dynamic section"))
        sizes = {DT_HASH: None, DT_GNU_HASH: None, DT_RELA: DT_RELASZ, DT_REL: DT_RELSZ, DT_JMPREL: DT_PLTRELSZ}
        for tag, size_tag in sizes.items():
            addr = self.dynamic_value(tag)
            if addr is None:
                continue
            try:
                if size_tag is not None:
                    size = self.dynamic_value(size_tag) or 0
                elif tag == DT_HASH:
                    nbucket, nchain = self.unpack("II", self.vaddr_to_offset(addr, 8))
                    size = 8 + 4 * (nbucket + nchain)
                else:  # DT_GNU_HASH: header, bloom words, buckets, then one chain word per hashed symbol
                    nbuckets, symoffset, bloom, _ = self.unpack("IIII", self.vaddr_to_offset(addr, 16))
                    size = 16 + bloom * word + 4 * nbuckets + 4 * max(loader.count - symoffset, 0)
                spans.append((self.vaddr_to_offset(addr, 1), size, f"dynamic tag {tag:#x}'s table"))
            except ParseError:
                continue  # not loaded: nothing the loader reads there
        return spans

    def dynamic_symbol_count(self) -> int:
        """How many dynamic symbols the loader's lookups can reach: DT_HASH's nchain (the table's size), a
        walk of DT_GNU_HASH's buckets and chains (glibc uses only that one when both exist), or the larger
        of the two."""
        counts: list[int] = []
        hash_addr = self.dynamic_value(DT_HASH)
        if hash_addr is not None:
            off = self.vaddr_to_offset(hash_addr, 8)
            _nbucket, nchain = self.unpack("II", off)
            self._plausible_count(nchain)
            counts.append(nchain)
        gnu = self.dynamic_value(DT_GNU_HASH)
        if gnu is not None:
            counts.append(self._gnu_hash_count(gnu))
        if not counts:
            raise ParseError("neither DT_HASH nor DT_GNU_HASH: symbol count unknown", self.path)
        return max(counts)

    def _gnu_hash_count(self, addr: int) -> int:
        off = self.vaddr_to_offset(addr, 16)
        nbuckets, symoffset, bloom_size, _shift = self.unpack("IIII", off)
        words = self.elfclass // 8
        buckets_off = off + 16 + bloom_size * words
        self.check_range(buckets_off, nbuckets * 4, "DT_GNU_HASH buckets")
        chains_off = buckets_off + nbuckets * 4
        last = max(self._array("I", buckets_off, nbuckets * 4), default=0)
        if last < symoffset:
            self._plausible_count(symoffset)
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
