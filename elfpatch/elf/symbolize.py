"""The symbols at addresses, from one symbol table: the one symbolizer. At each address the best function
symbol, by one rule for every user (the `inits` listing, the --siof/--dtors analysis):

1. a function (STT_FUNC or STT_GNU_IFUNC) before an untyped (STT_NOTYPE) symbol;
2. then a global or weak symbol before a local one;
3. then, among aliases of one rank (``__attribute__((alias))``, a C++ constructor's C1/C2 or destructor's
   D1/D2 names), the entry latest in the table. The linker's order of aliases means nothing in itself; the
   rule is kept because --siof/--dtors have always named by it (the `inits` listing used to take the first);

and data objects (STT_OBJECT, the latest entry at an address) apart. Named nothing, so never chosen: undefined
entries (st_shndx 0), unnamed ones (st_name 0), ARM/AArch64 mapping symbols ``$x``/``$d`` and local labels ``.L``.

Column by column at C speed: st_info classifies every entry through one translate(), st_name's and st_shndx's
bytes (strided slices of the table) drop the unnamed and undefined ones, itertools.compress keeps the wanted
entries, and nothing loops in Python per symbol (a 530k-symbol table costs a few tenths of a second); a name is
decoded only when it is asked for.
"""
from __future__ import annotations

import sys
from itertools import compress
from typing import Sequence

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

    def __init__(self, table: SymbolTable) -> None:
        self.table = table
        self.functions: dict[int, int] = {}
        elf = table.elf
        ent, n = table.entsize, table.count
        blob = elf.read(table.offset, n * ent)
        info = table.info_bytes()
        # Undefined (st_shndx 0) and unnamed (st_name 0, at offset 0 in both classes) entries are dropped.
        kept = _nonzero(blob, ent, n, ST_SHNDX_OFFSET[elf.elfclass], 2) & _nonzero(blob, ent, n, 0, 4)
        classes = (int.from_bytes(info.translate(_CLASS), "little") & kept).to_bytes(n, "little")
        names: Sequence[int]
        values: Sequence[int]
        sizes: Sequence[int]
        if elf.little == (sys.byteorder == "little"):
            words = memoryview(blob).cast("Q" if elf.elfclass == 64 else "I")
            stride = ent // words.itemsize
            names, values, sizes = words[0::stride], words[1::stride], words[2::stride]
        else:  # a foreign byte order: unpack (slower, and only for cross-built files)
            rows = list(table.entries())
            names, values, sizes = [r.st_name for r in rows], [r.st_value for r in rows], [r.st_size for r in rows]
        self.names, self.sizes = names, sizes  # a 64-bit entry's first word also holds st_info..st_shndx
        index = range(n)
        # Lowest rank first, so that a better symbol at the same address replaces it.
        for cls in (_NOTYPE_LOCAL, _NOTYPE_GLOBAL, _FUNC_LOCAL, _FUNC_GLOBAL):
            mask = classes.translate(_ONLY[cls])
            found = dict(zip(compress(values, mask), compress(index, mask)))
            if cls in (_NOTYPE_LOCAL, _NOTYPE_GLOBAL):  # mapping symbols ($x, $d) and local labels are no functions
                found = {a: i for a, i in found.items() if not self.label(i)}
            self.functions.update(found)
        mask = classes.translate(_ONLY[_OBJECT])
        self.objects: dict[int, int] = dict(zip(compress(values, mask), compress(index, mask)))

    def st_name(self, i: int) -> int:
        return self.names[i] & 0xFFFFFFFF

    def label(self, i: int) -> bool:
        """Whether entry ``i`` names no function: no name, a mapping symbol or a local label."""
        st_name = self.st_name(i)
        if not 0 < st_name < self.table.str_size:
            return True
        head = self.table.name_head(st_name, 2)
        return head[:1] == b"$" or head == b".L"

    def function_names(self, addresses: set[int]) -> dict[int, str]:
        """The name of the best function symbol at each of ``addresses`` that has a named one."""
        out = {}
        for addr in addresses:
            i = self.functions.get(addr)
            if i is None:
                continue
            st_name = self.st_name(i)
            head = self.table.name_head(st_name, 2)
            if st_name and head[:1] != b"$" and head != b".L":
                out[addr] = self.table.string(st_name)  # a name offset past the table is a ParseError
        return out
