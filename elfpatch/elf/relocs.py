"""What an address-sized word of an image holds once the loader has relocated it.

Only the words asked for are resolved (a few array slots), so a library with 200k relocations costs one pass
over its tables and no per-relocation objects. The loader's rules, by table:

- DT_RELA: the value is the addend, plus the symbol's value for a symbol relocation (R_X86_64_64 and
  friends; GNU ld emits those for exported constructor functions). lld leaves the slot itself zero.
- DT_REL: the addend is the word in place (i686, ARM): the value is that word, plus the symbol's value.
- DT_RELR (packed relative relocations): only adds the load bias to the word in place, so the word already
  is the link-time value; the bitmaps need no decoding for that.
- No relocation (non-PIC executables, static executables): the word is already the absolute address.

Values are link-time addresses (what nm shows): the load bias the loader adds is never part of them.
"""
from __future__ import annotations

import struct
import sys
from itertools import compress, count, repeat
from operator import and_
from typing import Iterable, NamedTuple

from elfpatch.elf.const import (
    DT_REL,
    DT_RELA,
    DT_RELAENT,
    DT_RELASZ,
    DT_RELENT,
    DT_RELSZ,
    EM_AARCH64,
    EM_MIPS,
    EM_X86_64,
    R_AARCH64_COPY,
    R_IRELATIVE,
    R_X86_64_COPY,
    SHN_UNDEF,
    STV_DEFAULT,
)
from elfpatch.elf.file import ElfFile, Symbol, SymbolTable
from elfpatch.errors import ElfPatchError, ParseError


class Target(NamedTuple):
    """A relocated word: ``value`` is None when it binds to a symbol this file does not define."""

    value: int | None
    symbol: str | None  # the symbol a symbol relocation names; None for relative relocations and plain words


class _Reloc(NamedTuple):
    sym: int
    addend: int | None  # None: the addend is the word in place (REL)
    rtype: int = 0  # the relocation type (R_*), r_info's low bits


class _Index:
    """A relocation table in the host's byte order, indexed once per file and shared by its Relocators (a large
    library's table is then read once, not once per set of ranges, and no Relocator copies its entries): each
    word's last entry that is not R_*_NONE, found by r_offset. Its columns are read at C speed (a 300k-entry
    table in a few hundredths of a second); the _Reloc is made for the words asked about alone."""

    def __init__(self, blob: bytes, size: int, wordsize: int, rela: bool, info: tuple[int, int]) -> None:
        self.shift, self.mask = info
        mask = info[1]
        k = size // wordsize
        words = memoryview(blob).cast("Q" if wordsize == 8 else "I")
        self.infos = words[1::k]
        self.addends = memoryview(blob).cast("q" if wordsize == 8 else "i")[2::k] if rela else None
        wanted = list(map(bool, map(and_, self.infos.tolist(), repeat(mask))))
        self.rows = dict(zip(compress(words[0::k].tolist(), wanted), compress(count(), wanted)))  # the last wins

    def get(self, vaddr: int) -> _Reloc | None:
        row = self.rows.get(vaddr)
        return None if row is None else self._reloc(row)

    def items(self) -> Iterable[tuple[int, _Reloc]]:
        return ((vaddr, self._reloc(row)) for vaddr, row in self.rows.items())

    def _reloc(self, row: int) -> _Reloc:
        info = self.infos[row]
        return _Reloc(info >> self.shift, self.addends[row] if self.addends is not None else None, info & self.mask)


class Relocator:
    """Resolves words whose addresses fall inside ``ranges`` ([start, end) link-time address pairs)."""

    def __init__(self, elf: ElfFile, ranges: list[tuple[int, int]]) -> None:
        self.elf = elf
        self.ranges = [(lo, hi) for lo, hi in ranges if hi > lo]
        self.wordsize = elf.elfclass // 8
        # Each table read, in table order (a later one's entry for a word replaces an earlier one's): a dict of
        # the entries in the ranges, or a file-wide _Index shared with the file's other Relocators.
        self._tables: list[dict[int, _Reloc] | _Index] = []
        self._irelative = R_IRELATIVE.get(elf.e_machine)
        self._dynsym: SymbolTable | None = None
        # EM_MIPS: its r_info layout differs (and its relocations add to the word in place): read the word.
        if self.ranges and elf.e_machine != EM_MIPS and elf.dynamic():
            self._read_table(DT_REL, DT_RELSZ, DT_RELENT, rela=False)
            self._read_table(DT_RELA, DT_RELASZ, DT_RELAENT, rela=True)

    def _wanted(self, vaddr: int) -> bool:
        return any(lo <= vaddr < hi for lo, hi in self.ranges)

    def _table_bytes(self, addr_tag: int, size_tag: int) -> bytes | None:
        addr, size = self.elf.dynamic_value(addr_tag), self.elf.dynamic_value(size_tag)
        if addr is None or not size:
            return None
        return self.elf.read(self.elf.vaddr_to_offset(addr, size), size)

    def _read_table(self, addr_tag: int, size_tag: int, ent_tag: int, rela: bool) -> None:
        name = "DT_RELA" if rela else "DT_REL"
        blob = self._table_bytes(addr_tag, size_tag)
        if blob is None:
            return
        w = "Q" if self.wordsize == 8 else "I"
        fmt = self.elf.struct(w + w + (("q" if self.wordsize == 8 else "i") if rela else ""))
        ent = self.elf.dynamic_value(ent_tag)
        if ent is not None and ent != fmt.size:
            raise ParseError(f"{name} entry size {ent}, expected {fmt.size}", self.elf.path)
        blob = blob[: len(blob) - len(blob) % fmt.size]
        lo = min(r[0] for r in self.ranges)
        hi = max(r[1] for r in self.ranges)
        shift, mask = (32, 0xFFFFFFFF) if self.wordsize == 8 else (8, 0xFF)
        if self.elf.little == (sys.byteorder == "little"):
            index = self.elf.relocation_indexes.get(addr_tag)
            if not isinstance(index, _Index):
                index = _Index(blob, fmt.size, self.wordsize, rela, (shift, mask))
                self.elf.relocation_indexes[addr_tag] = index
            self._tables.append(index)
            return
        relocs: dict[int, _Reloc] = {}
        for entry in self._in_span(blob, fmt, lo, hi):
            r_offset = entry[0]
            if not lo <= r_offset < hi or not self._wanted(r_offset):
                continue
            r_info = entry[1]
            if r_info & mask == 0:  # R_*_NONE
                continue
            relocs[r_offset] = _Reloc(r_info >> shift, entry[2] if rela else None, r_info & mask)
        self._tables.append(relocs)

    @property
    def _relocs(self) -> dict[int, _Reloc]:
        """Every relocation in the ranges, as word() finds them, in one dict (for tests and debugging)."""
        out: dict[int, _Reloc] = {}
        for table in self._tables:
            out.update((vaddr, reloc) for vaddr, reloc in table.items() if self._wanted(vaddr))
        return out

    def _entry(self, vaddr: int) -> _Reloc | None:
        """The relocation of the word at ``vaddr`` (in the ranges), the last table's that names it."""
        if not self._wanted(vaddr):
            return None
        for table in reversed(self._tables):
            reloc = table.get(vaddr)
            if reloc is not None:
                return reloc
        return None

    def _in_span(self, blob: bytes, fmt: struct.Struct, lo: int, hi: int) -> Iterable[tuple]:
        """The entries whose r_offset is in [lo, hi): the r_offset column is filtered at C speed when the file's
        byte order is the host's (a 200k-entry table then costs milliseconds, not a Python loop)."""
        if self.elf.little != (sys.byteorder == "little") or not blob:
            return fmt.iter_unpack(blob)
        words = memoryview(blob).cast("Q" if self.wordsize == 8 else "I")
        offsets = words[:: fmt.size // self.wordsize].tolist()
        return [fmt.unpack_from(blob, i * fmt.size) for i, off in enumerate(offsets) if lo <= off < hi]

    def _symbol(self, index: int) -> tuple[str, int | None]:
        """Name and link-time value (None when undefined here) of dynamic symbol ``index``."""
        sym = self._table().symbol(index)
        return sym.name, (None if sym.st_shndx == SHN_UNDEF else sym.st_value)

    def _table(self) -> SymbolTable:
        if self._dynsym is None:  # r_info's symbol index is into the loader's table (DT_SYMTAB)
            self._dynsym = self.elf.loader_table() or next(
                (t for t in self.elf.symbol_tables() if t.name == ".dynsym"), None)  # no hash table: sections
            if self._dynsym is None:
                raise ParseError("symbol relocation without a dynamic symbol table", self.elf.path)
        return self._dynsym

    def ifunc(self, vaddr: int) -> bool:
        """Whether an R_*_IRELATIVE fills the word at ``vaddr``: its value is what the resolver at the addend
        returns when the file is loaded (an ifunc's implementation), not known here."""
        reloc = self._entry(vaddr)
        return reloc is not None and self._irelative is not None and reloc.rtype == self._irelative

    def own_symbol(self, vaddr: int) -> Symbol | None:
        """The dynamic symbol the relocation of the word at ``vaddr`` names when this file defines it (the
        loader binds it to the first definition in the lookup scope: perhaps another object's); None for
        none, an undefined one, or one that cannot be read."""
        reloc = self._entry(vaddr)
        if reloc is None or reloc.sym == 0:
            return None
        try:
            sym = self._table().symbol(reloc.sym)
        except ElfPatchError:
            return None
        return sym if sym.st_shndx != SHN_UNDEF else None

    def own_default_name(self, vaddr: int) -> str | None:
        """The name of own_symbol(vaddr) when it has default visibility (the loader may bind the word to
        another object's definition of it); None otherwise."""
        sym = self.own_symbol(vaddr)
        return sym.name if sym is not None and sym.st_other & 3 == STV_DEFAULT else None

    def word(self, vaddr: int) -> Target:
        """The relocated value of the word at link-time address ``vaddr``."""
        reloc = self._entry(vaddr)
        if reloc is not None and reloc.addend is not None:
            base = reloc.addend
        else:
            base = self.elf.word(self.elf.vaddr_to_offset(vaddr, self.wordsize))
        if reloc is None or reloc.sym == 0:
            return Target(base & self._mask, None)
        name, value = self._symbol(reloc.sym)
        if value is None:
            return Target(None, name)
        return Target((value + base) & self._mask, name)

    def relocated(self, vaddr: int) -> bool:
        """Whether a relocation (in ``ranges``) names the word at ``vaddr``."""
        return self._entry(vaddr) is not None

    def pointee(self, vaddr: int) -> int | str | None:
        """What the word at ``vaddr`` points to once relocated: an address, or (bound to another module) a
        symbol's name; None for a null word or one that cannot be read (past the file, a broken symbol index):
        not resolvable, never fatal to the caller's analysis."""
        try:
            t = self.word(vaddr)
        except ElfPatchError:
            return None
        value = t.value if t.value is not None else t.symbol
        return None if value == 0 else value

    @property
    def _mask(self) -> int:
        return (1 << (self.wordsize * 8)) - 1

    def words(self, vaddr: int, count: int) -> list[Target]:
        """``count`` consecutive words from ``vaddr`` (the whole range is checked first: a corrupt size fails
        at once instead of after walking a segment word by word)."""
        if count:
            self.elf.vaddr_to_offset(vaddr, count * self.wordsize)
        return [self.word(vaddr + i * self.wordsize) for i in range(count)]


_COPY = {EM_X86_64: R_X86_64_COPY, EM_AARCH64: R_AARCH64_COPY}


def copy_targets(elf: ElfFile) -> set[int]:
    """The addresses ``elf``'s copy relocations fill (RELA only: x86-64 and AArch64): a program's copies of
    libraries' objects, which those libraries' initializers build."""
    kind = _COPY.get(elf.e_machine)
    addr, size = elf.dynamic_value(DT_RELA), elf.dynamic_value(DT_RELASZ)
    if kind is None or addr is None or not size or elf.elfclass != 64:
        return set()
    fmt = elf.struct("QQq")
    blob = elf.read(elf.vaddr_to_offset(addr, size), size)
    out = set()
    for off in range(0, len(blob) - len(blob) % fmt.size, fmt.size):
        offset, info, _addend = fmt.unpack_from(blob, off)
        if info & 0xFFFFFFFF == kind:
            out.add(offset)
    return out
