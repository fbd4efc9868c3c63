"""The symbols at addresses, from one symbol table: the one symbolizer. At each address the best function
symbol, by one rule for every user (the `inits` listing, the --siof/--dtors analysis):

1. a function (STT_FUNC or STT_GNU_IFUNC) before an untyped (STT_NOTYPE) symbol;
2. then a global or weak symbol before a local one;
3. then, among aliases of one rank (``__attribute__((alias))``, a C++ constructor's C1/C2 or destructor's
   D1/D2 names), the entry latest in the table. The linker's order of aliases means nothing in itself; the
   rule is kept because --siof/--dtors have always named by it (the `inits` listing used to take the first);

and data objects (STT_OBJECT, the latest sized entry at an address, else the latest) apart. Named nothing, so never
chosen, and dropped before any entry is ranked (so that none hides a real symbol at its address): undefined entries
(st_shndx 0), unnamed ones (st_name 0), untyped ARM/AArch64 mapping symbols ``$x``/``$d`` and local labels ``.L``,
and entries whose name offset is past the string table. That last is a malformed table, yet a warning on the file
(``ElfFile.warn``), not a ParseError: the listing's addresses and order need no name, and an error would fail whole
listings that work (the entry may be at no address anyone asks about).

Column by column at C speed: st_info classifies every entry through one translate(), st_name's and st_shndx's
bytes (strided slices of the table) drop the unnamed and undefined ones, itertools.compress keeps the wanted
entries, an untyped entry's first name bytes are read through map() over the string table, and nothing loops in
Python per symbol (a 530k-symbol table costs a few tenths of a second); a name is decoded only when it is asked
for.
"""
from __future__ import annotations

import sys
from itertools import compress, repeat
from typing import Iterable, Sequence

from elfpatch.elf.const import (
    ST_SHNDX_OFFSET,
    STB_LOCAL,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_NOTYPE,
    STT_OBJECT,
    st_bind,
    st_type,
)
from elfpatch.elf.file import SymbolTable

# st_info -> the classes kept (0: dropped), ranked so that FUNC beats NOTYPE and GLOBAL beats LOCAL.
_NOTYPE_LOCAL, _NOTYPE_GLOBAL, _FUNC_LOCAL, _FUNC_GLOBAL, _OBJECT = 1, 2, 3, 4, 5


def _classify(st_info: int) -> int:
    typ, local = st_type(st_info), st_bind(st_info) == STB_LOCAL
    if typ in (STT_FUNC, STT_GNU_IFUNC):
        return _FUNC_LOCAL if local else _FUNC_GLOBAL
    if typ == STT_NOTYPE:
        return _NOTYPE_LOCAL if local else _NOTYPE_GLOBAL
    return _OBJECT if typ == STT_OBJECT else 0


_CLASS = bytes(_classify(b) for b in range(256))
_ONLY = {c: bytes(1 if b == c else 0 for b in range(256)) for c in range(1, 6)}
_NONZERO = bytes([0] + [255] * 255)
_DOLLAR, _DOT, _ELL = (bytes(1 if b == ord(c) else 0 for b in range(256)) for c in "$.L")
_FLIP = bytes([1, 0] + [0] * 254)  # a 0/1 flag inverted


def _nonzero(blob: bytes, ent: int, n: int, offset: int, width: int) -> int:
    """Byte i is 0xFF when entry i's field of ``width`` bytes at ``offset`` is not zero, else 0: its bytes'
    strided slices OR-ed, whatever the byte order."""
    column = 0
    for k in range(offset, offset + width):
        column |= int.from_bytes(blob[k::ent], "little")
    return int.from_bytes(column.to_bytes(n, "little").translate(_NONZERO), "little")


class TableSymbols:
    """One table's symbols by address: ``functions`` (address -> index of the best function symbol there),
    ``objects`` (address -> index of a data object there), and each entry's ``st_name`` and ``st_size``."""

    def __init__(self, table: SymbolTable, only: set[int] | None = None) -> None:
        """``only``: the addresses asked about (the others' entries are not ranked; the table is still checked
        whole for names past its string table)."""
        self.table = table
        elf = table.elf
        ent, n = table.entsize, table.count
        blob = elf.read(table.offset, n * ent)
        names, values, sizes = _columns(table, blob)
        self.names, self.sizes = names, sizes
        info = table.info_bytes().translate(_CLASS)
        # Defined (st_shndx not 0), named (st_name not 0, at offset 0 in both classes) entries of a kept class,
        # less those whose name is past the string table.
        kept = (_nonzero(blob, ent, n, ST_SHNDX_OFFSET[elf.elfclass], 2) & _nonzero(blob, ent, n, 0, 4)
                & int.from_bytes(info.translate(_NONZERO), "little"))
        kept &= ~self._past_strings(kept)
        if only is not None:  # 0xFF for each entry at an address asked about (a 0/1 byte times 0xFF)
            kept &= int.from_bytes(bytes(map(only.__contains__, values)), "little") * 0xFF
        classes = (int.from_bytes(info, "little") & kept).to_bytes(n, "little")
        index = range(n)
        self.functions: dict[int, int] = {}
        # Lowest rank first, so that a better symbol at the same address replaces it.
        for cls in (_NOTYPE_LOCAL, _NOTYPE_GLOBAL, _FUNC_LOCAL, _FUNC_GLOBAL):
            mask = classes.translate(_ONLY[cls])
            if cls in (_NOTYPE_LOCAL, _NOTYPE_GLOBAL):  # mapping symbols and local labels out before ranking
                at, which = list(compress(values, mask)), list(compress(index, mask))
                mask = self._not_labels(compress(names, mask))
                values_, index_ = compress(at, mask), compress(which, mask)
            else:
                values_, index_ = compress(values, mask), compress(index, mask)
            self.functions.update(zip(values_, index_))
        mask = classes.translate(_ONLY[_OBJECT])
        self.objects: dict[int, int] = dict(zip(compress(values, mask), compress(index, mask)))
        # A zero-size marker (crtstuff's __TMC_END__, the linker's __bss_start) shares its address with the
        # object laid out there: the sized one names the address, whatever the table's order.
        markers = {a for a, j in self.objects.items() if not sizes[j]}
        if markers:
            for a, j in zip(compress(values, mask), compress(index, mask)):
                if a in markers and sizes[j]:
                    self.objects[a] = j

    def _past_strings(self, kept: int) -> int:
        """0xFF for each entry of ``kept`` whose name offset is past the string table (the file is warned)."""
        size, names = self.table.str_size, self.names
        if not len(names) or max(names) < size:
            return 0
        past = int.from_bytes(bytes(map(size.__le__, names)), "little") * 0xFF & kept
        count = bin(past).count("1") // 8
        if count:
            self.table.elf.warn(f"{self.table.name}: the name offset of {count} symbol{'s' if count != 1 else ''} "
                                f"is past its string table ({size} bytes); not used as a name")
        return past

    def _not_labels(self, st_names: Iterable[int]) -> bytes:
        """1 for each of ``st_names`` (offsets inside the string table) that names no mapping symbol (``$``)
        or local label (``.L``), else 0: their first two bytes read through map(), no Python loop."""
        offsets = list(st_names)
        if not offsets:
            return b""
        with self.table.strings_view() as strings:
            heads = bytes(map(strings.__getitem__, offsets))
            last = len(strings) - 1  # a name's second byte, or its first again at the table's end (then no ".L")
            seconds = bytes(map(strings.__getitem__, map(min, map((1).__add__, offsets), repeat(last))))
        label = int.from_bytes(heads.translate(_DOLLAR), "little") | (
            int.from_bytes(heads.translate(_DOT), "little") & int.from_bytes(seconds.translate(_ELL), "little"))
        return label.to_bytes(len(offsets), "little").translate(_FLIP)

    def st_name(self, i: int) -> int:
        return self.names[i]

    def function_names(self, addresses: set[int]) -> dict[int, str]:
        """The name of the best function symbol at each of ``addresses`` that has a named one."""
        out = {}
        for addr in addresses:
            i = self.functions.get(addr)
            if i is None:
                continue
            st_name = self.st_name(i)  # inside the string table: entries past it were dropped
            head = self.table.name_head(st_name, 2)
            if head[:1] != b"$" and head != b".L":
                out[addr] = self.table.string(st_name)
        return out


def _columns(table: SymbolTable, blob: bytes) -> tuple[Sequence[int], Sequence[int], Sequence[int]]:
    """Every entry's st_name, st_value and st_size: strided views of the table's bytes in the host's byte
    order, else unpacked (slower, and only for cross-built files)."""
    elf = table.elf
    if elf.little == (sys.byteorder == "little"):
        words = memoryview(blob).cast("Q" if elf.elfclass == 64 else "I")
        stride = table.entsize // words.itemsize
        return memoryview(blob).cast("I")[0 :: table.entsize // 4], words[1::stride], words[2::stride]
    rows = list(table.entries())
    return [r.st_name for r in rows], [r.st_value for r in rows], [r.st_size for r in rows]
