"""The facts about one image that the initializer analysis looks up by address: which function starts where
(and where it ends), which data object covers an address, what a GOT slot holds once relocated, and which
PLT stub jumps through which slot.

Symbols come from ``.symtab`` (``.dynsym`` when stripped) in one strided pass per table; names are decoded only
for the addresses the analysis meets. GOT slots are resolved by relocs.Relocator (plus DT_JMPREL, which holds
the PLT's JUMP_SLOT relocations).
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Union

from elfpatch.elffile import SHT_NOBITS, ElfFile
from elfpatch.relocs import DT_RELAENT, DT_RELENT, Relocator

DT_PLTRELSZ, DT_PLTREL, DT_JMPREL = 2, 20, 23
DT_RELA_TAG = 7
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_FILE, STT_TLS, STT_GNU_IFUNC = 0, 1, 2, 4, 6, 10
STB_LOCAL = 0
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
MAX_FUNCTION = 1 << 20  # a size-less function is swept at most this far (up to the next symbol first)
# Data that no initializer constructs and that a read of says nothing about order: the ABI's own objects.
_NOT_DATA_PREFIXES = ("_ZTV", "_ZTI", "_ZTS", "_ZTT", "_ZGV", "__dso_handle", "__TMC_END__", "_GLOBAL_OFFSET",
                      "_DYNAMIC", "__init_array", "__fini_array", "__bss_start", "_edata", "_end")

Value = Union[int, str]


class _GotRelocator(Relocator):
    """Relocator that also reads the PLT's relocation table (JUMP_SLOT entries live only there)."""

    def __init__(self, elf: ElfFile, ranges: list[tuple[int, int]]) -> None:
        super().__init__(elf, ranges)
        if self.ranges and elf.dynamic() and elf.dynamic_value(DT_JMPREL) is not None:
            rela = elf.dynamic_value(DT_PLTREL) == DT_RELA_TAG
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
        got = [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections if s.name in (".got", ".got.plt")]
        self.got_ranges = got
        self._reloc = _GotRelocator(elf, got) if got else None
        self._got_cache: dict[int, Value | None] = {}
        self._load_symbols()

    # -- symbols -------------------------------------------------------------------------------------

    def _load_symbols(self) -> None:
        funcs: dict[int, tuple[tuple[int, int], int, int]] = {}  # addr -> (rank, st_name, size)
        objects: dict[int, tuple[int, int]] = {}  # addr -> (size, st_name), the largest at an address
        guards: list[int] = []  # st_name of every _ZGV symbol
        table = self.table
        if table is None:
            self._finish({}, {}, [])
            return
        elf = self.elf
        fmt = "IBBHQQ" if elf.elfclass == 64 else "IIIBBH"
        blob = elf.read(table.offset, table.count * table.entsize)
        data, stroff, strsize = elf.data, table.str_offset, table.str_size
        is64 = elf.elfclass == 64
        for fields in elf.struct(fmt).iter_unpack(blob):
            if is64:
                st_name, info, _o, shndx, value, size = fields
            else:
                st_name, value, size, info, _o, shndx = fields
            if shndx == 0 or st_name == 0 or st_name >= strsize:
                continue
            typ = info & 0xF
            if typ == STT_FUNC or typ == STT_GNU_IFUNC or typ == STT_NOTYPE:
                if typ == STT_NOTYPE:
                    head = data[stroff + st_name: stroff + st_name + 2]
                    if head[:1] == b"$" or head == b".L":  # mapping symbols and local labels
                        continue
                rank = (0 if typ != STT_NOTYPE else 1, 1 if (info >> 4) == STB_LOCAL else 0)
                old = funcs.get(value)
                if old is None or rank < old[0]:
                    funcs[value] = (rank, st_name, size if size or old is None else old[2])
            elif typ == STT_OBJECT:
                if data[stroff + st_name: stroff + st_name + 4] == b"_ZGV":
                    guards.append(st_name)
                old = objects.get(value)
                if old is None or size > old[0]:
                    objects[value] = (size, st_name)
        self._finish(funcs, objects, guards)

    def _finish(self, funcs: dict, objects: dict, guards: list[int]) -> None:
        self._funcs = funcs
        self._func_starts = sorted(funcs)
        self._obj_starts = sorted(objects)
        self._objects = objects
        self._guard_names = {self.name(g) for g in guards}

    def name(self, st_name: int) -> str:
        return self.table.string(st_name)

    def function_name(self, addr: int) -> str | None:
        f = self._funcs.get(addr)
        return self.name(f[1]) if f else None

    def is_function(self, addr: int) -> bool:
        return addr in self._funcs

    def function_end(self, addr: int) -> int:
        f = self._funcs.get(addr)
        size = f[2] if f else 0
        if size:
            return addr + size
        i = bisect_right(self._func_starts, addr)
        end = self._func_starts[i] if i < len(self._func_starts) else addr + MAX_FUNCTION
        for lo, hi in self.code:
            if lo <= addr < hi:
                end = min(end, hi)
        return min(end, addr + MAX_FUNCTION)

    def in_code(self, addr: int) -> bool:
        return any(lo <= addr < hi for lo, hi in self.code)

    def object_at(self, addr: int) -> tuple[int, str] | None:
        """(start, symbol) of the writable data object covering ``addr``; None for anything else."""
        if not any(lo <= addr < hi for lo, hi in self.writable):
            return None
        i = bisect_right(self._obj_starts, addr) - 1
        if i < 0:
            return None
        start = self._obj_starts[i]
        size, st_name = self._objects[start]
        if not (addr == start or addr < start + size):
            return None
        name = self.name(st_name)
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
            size, st_name = self._objects[start]
            if addr == start or addr < start + size:
                return self.name(st_name)
        return None

    def guarded(self, name: str) -> bool:
        """Whether an object has an ABI guard variable (inline and template variables, local statics)."""
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
            except Exception:  # noqa: BLE001 - a slot past the file: not resolvable, not fatal
                t = None
            if t is not None:
                value = t.value if t.value is not None else t.symbol
                if value == 0:
                    value = None
        self._got_cache[addr] = value
        return value
