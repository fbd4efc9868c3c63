"""The facts about one image that the initializer analysis looks up by address: which function starts where
(and where it ends), which data object covers an address, what a GOT slot holds once relocated, and which
PLT stub jumps through which slot.

Symbols come from ``.symtab`` (``.dynsym`` when stripped) in one strided pass per table; names are decoded only
for the addresses the analysis meets. GOT slots are resolved by relocs.Relocator (plus DT_JMPREL, which holds
the PLT's JUMP_SLOT relocations).
"""
from __future__ import annotations

import sys
from bisect import bisect_right
from itertools import compress
from typing import Sequence, Union

from elfpatch.elfconst import (
    DT_JMPREL,
    DT_PLTREL,
    DT_PLTRELSZ,
    DT_RELA,
    DT_RELAENT,
    DT_RELENT,
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHF_WRITE,
    SHT_NOBITS,
    ST_SHNDX_OFFSET,
    STB_LOCAL,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_NOTYPE,
    STT_OBJECT,
)
from elfpatch.elffile import ElfFile, SymbolTable
from elfpatch.errors import ElfPatchError
from elfpatch.relocs import Relocator

MAX_FUNCTION = 1 << 20  # a size-less function is swept at most this far (up to the next symbol first)
# Data that no initializer constructs and that a read of says nothing about order: the ABI's own objects.
_NOT_DATA_PREFIXES = ("_ZTV", "_ZTI", "_ZTS", "_ZTT", "_ZGV", "__dso_handle", "__TMC_END__", "_GLOBAL_OFFSET",
                      "_DYNAMIC", "__init_array", "__fini_array", "__bss_start", "_edata", "_end")

Value = Union[int, str]
# st_info -> the classes kept (0: dropped), ranked so that FUNC beats NOTYPE and GLOBAL beats LOCAL.
_NOTYPE_LOCAL, _NOTYPE_GLOBAL, _FUNC_LOCAL, _FUNC_GLOBAL, _OBJECT = 1, 2, 3, 4, 5


def _classify(st_info: int) -> int:
    typ, local = st_info & 0xF, (st_info >> 4) == STB_LOCAL
    if typ in (STT_FUNC, STT_GNU_IFUNC):
        return _FUNC_LOCAL if local else _FUNC_GLOBAL
    if typ == STT_NOTYPE:
        return _NOTYPE_LOCAL if local else _NOTYPE_GLOBAL
    return _OBJECT if typ == STT_OBJECT else 0


_CLASS = bytes(_classify(b) for b in range(256))
_ONLY = {c: bytes(1 if b == c else 0 for b in range(256)) for c in range(1, 6)}
_NONZERO = bytes([0] + [255] * 255)


class _GotRelocator(Relocator):
    """Relocator that also reads the PLT's relocation table (JUMP_SLOT entries live only there)."""

    def __init__(self, elf: ElfFile, ranges: list[tuple[int, int]]) -> None:
        super().__init__(elf, ranges)
        if self.ranges and elf.dynamic() and elf.dynamic_value(DT_JMPREL) is not None:
            rela = elf.dynamic_value(DT_PLTREL) == DT_RELA
            self._read_table(DT_JMPREL, DT_PLTRELSZ, DT_RELAENT if rela else DT_RELENT, rela=rela)


class Image:
    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf
        tables = {t.name: t for t in elf.symbol_tables()}
        self.stripped = ".symtab" not in tables
        self.table = tables.get(".symtab") or tables.get(".dynsym")
        self.writable = [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections
                         if s.sh_flags & SHF_ALLOC and s.sh_flags & SHF_WRITE and s.sh_addr]
        self.code = [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections
                     if s.sh_flags & SHF_EXECINSTR and s.sh_addr and s.sh_type != SHT_NOBITS]
        if not self.code:  # no section headers: the executable segments
            self.code = [(p.p_vaddr, p.p_vaddr + p.p_filesz) for p in elf.segments if p.p_type == 1 and p.p_flags & 1]
        self.plt = [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections if s.name.startswith(".plt")]
        got = [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections if s.name in (".got", ".got.plt")]
        self.got_ranges = got
        self._reloc = _GotRelocator(elf, got) if got else None
        self._plt_lo = min((lo for lo, _ in self.plt), default=0)
        self._plt_hi = max((hi for _, hi in self.plt), default=0)
        spans = self.writable + got
        # Where a data reference worth a look can point: the writable sections and the GOT.
        self.data_span = (min((lo for lo, _ in spans), default=0), max((hi for _, hi in spans), default=0))
        self._got_cache: dict[int, Value | None] = {}
        self._in_code: dict[int, bool] = {}
        self._object_at: dict[int, tuple[int, str] | None] = {}
        self._name_cache: dict[int, str] = {}
        self._load_symbols()

    # -- symbols -------------------------------------------------------------------------------------

    def _load_symbols(self) -> None:
        """Function starts and data objects from the symbol table, column by column at C speed: st_info
        classifies every entry through one translate(), itertools.compress keeps the wanted entries, and
        nothing loops in Python per symbol (a 530k-symbol table costs a few tenths of a second)."""
        self._funcs: dict[int, int] = {}  # address -> index of the best function symbol there
        self._objects: dict[int, int] = {}  # address -> index of an object symbol there
        self._guard_names: set[str] | None = None
        self._names: Sequence[int] = ()
        self._sizes: Sequence[int] = ()
        if self.table is not None:
            self._scan(self.table)
        self._func_starts = sorted(self._funcs)
        self._obj_starts = sorted(self._objects)

    def _scan(self, table: SymbolTable) -> None:
        elf = self.elf
        ent, n = table.entsize, table.count
        blob = elf.read(table.offset, n * ent)
        info = table.info_bytes()
        sh = ST_SHNDX_OFFSET[elf.elfclass]  # undefined entries (st_shndx 0) are dropped
        shndx = int.from_bytes(blob[sh::ent], "little") | int.from_bytes(blob[sh + 1::ent], "little")
        defined = shndx.to_bytes(n, "little").translate(_NONZERO)
        classes = (int.from_bytes(info.translate(_CLASS), "little")
                   & int.from_bytes(defined, "little")).to_bytes(n, "little")
        if elf.little == (sys.byteorder == "little"):
            words = memoryview(blob).cast("Q" if elf.elfclass == 64 else "I")
            stride = ent // words.itemsize
            if elf.elfclass == 64:
                names, values, sizes = words[0::stride], words[1::stride], words[2::stride]
            else:
                names, values, sizes = words[0::stride], words[1::stride], words[2::stride]
        else:  # a foreign byte order: unpack (slower, and only for cross-built files)
            rows = list(table.entries())
            names, values, sizes = [r.st_name for r in rows], [r.st_value for r in rows], [r.st_size for r in rows]
        self._names, self._sizes = names, sizes
        index = range(n)
        # Lowest rank first, so that a better symbol at the same address replaces it.
        for cls in (_NOTYPE_LOCAL, _NOTYPE_GLOBAL, _FUNC_LOCAL, _FUNC_GLOBAL):
            mask = classes.translate(_ONLY[cls])
            found = dict(zip(compress(values, mask), compress(index, mask)))
            if cls in (_NOTYPE_LOCAL, _NOTYPE_GLOBAL):  # mapping symbols ($x, $d) and local labels are no functions
                found = {a: i for a, i in found.items() if not self._label(i)}
            self._funcs.update(found)
        mask = classes.translate(_ONLY[_OBJECT])
        self._objects = dict(zip(compress(values, mask), compress(index, mask)))

    def _label(self, i: int) -> bool:
        table = self.table
        st_name = self._names[i] & 0xFFFFFFFF
        if not 0 < st_name < table.str_size:
            return True
        head = bytes(self.elf.data[table.str_offset + st_name: table.str_offset + st_name + 2])
        return head[:1] == b"$" or head == b".L"

    def _name_of(self, i: int) -> str:
        name = self._name_cache.get(i)
        if name is None:
            name = self._name_cache[i] = self.table.string(self._names[i] & 0xFFFFFFFF)
        return name

    def function_name(self, addr: int) -> str | None:
        i = self._funcs.get(addr)
        return self._name_of(i) if i is not None else None

    def call_name(self, addr: int, markers: tuple[bytes, ...]) -> str | None:
        """The function's name when its first 64 bytes contain one of ``markers`` (or it is short enough to be
        read whole), "" when they do not, None when no function symbol starts at ``addr``."""
        i = self._funcs.get(addr)
        if i is None:
            return None
        st_name = self._names[i] & 0xFFFFFFFF
        table = self.table
        if not 0 <= st_name < table.str_size:
            return ""
        start = table.str_offset + st_name
        head = bytes(self.elf.data[start: start + 64])
        if any(m in head for m in markers):
            return self._name_of(i)
        return ""

    def is_function(self, addr: int) -> bool:
        return addr in self._funcs

    def function_end(self, addr: int) -> int:
        i = self._funcs.get(addr)
        size = self._sizes[i] if i is not None else 0
        if size:
            return addr + size
        i = bisect_right(self._func_starts, addr)
        end = self._func_starts[i] if i < len(self._func_starts) else addr + MAX_FUNCTION
        for lo, hi in self.code:
            if lo <= addr < hi:
                end = min(end, hi)
        return min(end, addr + MAX_FUNCTION)

    def function_containing(self, addr: int) -> int | None:
        """The start of the last function symbol at or before ``addr`` (None: none)."""
        i = bisect_right(self._func_starts, addr) - 1
        return self._func_starts[i] if i >= 0 else None

    def is_call_target(self, addr: int) -> bool:
        """A function start or a PLT stub: what a real call instruction goes to."""
        return addr in self._funcs or self._plt_lo <= addr < self._plt_hi

    def in_plt(self, addr: int) -> bool:
        return any(lo <= addr < hi for lo, hi in self.plt)

    def in_code(self, addr: int) -> bool:
        hit = self._in_code.get(addr)
        if hit is None:
            hit = self._in_code[addr] = any(lo <= addr < hi for lo, hi in self.code)
        return hit

    def object_at(self, addr: int) -> tuple[int, str] | None:
        """(start, symbol) of the writable data object covering ``addr``; None for anything else."""
        if addr in self._object_at:
            return self._object_at[addr]
        hit = self._object_at[addr] = self._find_object(addr)
        return hit

    def object_start(self, addr: int) -> int | None:
        """The start of the writable data object covering ``addr`` (None: none)."""
        hit = self.object_at(addr)
        return hit[0] if hit is not None else None

    def _find_object(self, addr: int) -> tuple[int, str] | None:
        if not any(lo <= addr < hi for lo, hi in self.writable):
            return None
        i = bisect_right(self._obj_starts, addr) - 1
        if i < 0:
            return None
        start = self._obj_starts[i]
        j = self._objects[start]
        if not (addr == start or addr < start + self._sizes[j]):
            return None
        name = self._name_of(j)
        if name.startswith(_NOT_DATA_PREFIXES):
            return None
        return start, name

    def symbol_at(self, addr: int) -> str | None:
        """A name for an address: the function starting there, else the object covering it."""
        name = self.function_name(addr)
        if name is not None:
            return name
        i = bisect_right(self._obj_starts, addr) - 1
        if i >= 0:
            start = self._obj_starts[i]
            j = self._objects[start]
            if addr == start or addr < start + self._sizes[j]:
                return self._name_of(j)
        return None

    def guarded(self, name: str) -> bool:
        """Whether an object has an ABI guard variable (inline and template variables, local statics)."""
        if self._guard_names is None:  # built on first use: only --siof asks
            # Tested on the string table's bytes: decoding every object's name costs a second on libtorch.
            data, base, size, names = self.elf.data, self.table.str_offset, self.table.str_size, self._names
            self._guard_names = {self._name_of(j) for j in self._objects.values()
                                 if 0 < (o := names[j] & 0xFFFFFFFF) < size and data[base + o: base + o + 4] == b"_ZGV"}
        guard = "_ZGV" + (name[2:] if name.startswith("_Z") else f"{len(name.encode())}{name}")
        return guard in self._guard_names

    def is_guard(self, addr: int) -> bool:
        name = self.symbol_at(addr)
        return bool(name and name.startswith("_ZGV"))

    # -- code and the GOT ----------------------------------------------------------------------------

    def read_code(self, addr: int, size: int) -> bytes:
        return self.elf.read(self.elf.vaddr_to_offset(addr, size), size)

    def got(self, addr: int) -> Value | None:
        """What GOT slot ``addr`` holds once relocated: an address here, an external symbol's name, or None
        when ``addr`` is not a GOT slot."""
        if addr in self._got_cache:
            return self._got_cache[addr]
        value: Value | None = None
        if self._reloc is not None and any(lo <= addr < hi for lo, hi in self.got_ranges):
            try:
                t = self._reloc.word(addr)
            except ElfPatchError:  # a slot past the file, or a broken symbol index: not resolvable, not fatal
                t = None
            if t is not None:
                value = t.value if t.value is not None else t.symbol
                if value == 0:
                    value = None
        self._got_cache[addr] = value
        return value
