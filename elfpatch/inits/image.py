"""The facts about one image that the initializer analysis looks up by address: which function starts where
(and where it ends), which data object covers an address, what a GOT slot holds once relocated, and which
PLT stub jumps through which slot.

Symbols come from ``.symtab`` (``.dynsym`` when stripped) in one strided pass per table; names are decoded only
for the addresses the analysis meets. GOT slots are resolved by relocs.Relocator (plus DT_JMPREL, which holds
the PLT's JUMP_SLOT relocations).
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Sequence, Union

from elfpatch.elf.const import (
    DF_SYMBOLIC,
    DT_FLAGS,
    DT_JMPREL,
    DT_PLTGOT,
    DT_PLTREL,
    DT_PLTRELSZ,
    DT_RELA,
    DT_RELAENT,
    DT_RELENT,
    DT_SYMBOLIC,
    EM_X86_64,
    PF_W,
    PF_X,
    PT_DYNAMIC,
    PT_GNU_RELRO,
    PT_LOAD,
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHF_TLS,
    SHF_WRITE,
    SHT_NOBITS,
)
from elfpatch.elf.file import ElfFile, Section, SymbolTable
from elfpatch.elf.relocs import Relocator
from elfpatch.elf.symbolize import TableSymbols
from elfpatch.elf.symbols import guard_variable
from elfpatch.errors import ElfPatchError
from elfpatch.inits.extents import eh_frame_extents

MAX_FUNCTION = 1 << 16  # a function with no size and no FDE is swept at most this far (up to the next start first)
UNSIZED_SPAN = 256  # bytes of data read as the object at an address no sized symbol covers (a stripped file's)
# Data that no initializer constructs and that a read of says nothing about order: the ABI's own objects.
_NOT_DATA_PREFIXES = ("_ZTV", "_ZTI", "_ZTS", "_ZTT", "_ZGV", "__dso_handle", "__TMC_END__", "_GLOBAL_OFFSET",
                      "_DYNAMIC", "__init_array", "__fini_array", "__bss_start", "_edata", "_end")

Value = Union[int, str]


class _GotRelocator(Relocator):
    """Relocator that also reads the PLT's relocation table (JUMP_SLOT entries live only there)."""

    def __init__(self, elf: ElfFile, ranges: list[tuple[int, int]]) -> None:
        super().__init__(elf, ranges)
        if self.ranges and elf.dynamic() and elf.dynamic_value(DT_JMPREL) is not None:
            rela = elf.dynamic_value(DT_PLTREL) == DT_RELA
            self._read_table(DT_JMPREL, DT_PLTRELSZ, DT_RELAENT if rela else DT_RELENT, rela=rela)


MAX_GOT = 1 << 24


def _joined(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` with those that touch or overlap made one (``.got`` then ``.got.plt``, as GNU ld lays them
    out): a relocation table is then filtered at C speed, not entry by entry (see Relocator)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _loader_got(elf: ElfFile) -> list[tuple[int, int]]:
    """Where the GOT is in a file without section headers, as GNU ld lays it out: ``.got`` from the end of the
    dynamic section (PT_DYNAMIC) to ``.got.plt`` (DT_PLTGOT: three reserved words, then one slot per PLT
    relocation), or to the end of PT_GNU_RELRO. Nothing when the tags do not say (the GOT is then not read)."""
    pltgot = elf.dynamic_value(DT_PLTGOT)
    dyn = next((p for p in elf.segments if p.p_type == PT_DYNAMIC), None)
    relro = next((p for p in elf.segments if p.p_type == PT_GNU_RELRO), None)
    word = elf.elfclass // 8
    relent = elf.dynamic_value(DT_RELAENT if elf.dynamic_value(DT_PLTREL) == DT_RELA else DT_RELENT) or 3 * word
    lo = dyn.p_vaddr + dyn.p_memsz if dyn is not None else pltgot
    hi = max(pltgot + word * (3 + (elf.dynamic_value(DT_PLTRELSZ) or 0) // relent) if pltgot else 0,
             relro.p_vaddr + relro.p_memsz if relro is not None else 0)
    if lo is None or not 0 < hi - lo <= MAX_GOT:
        return []
    return [(lo, hi)]


class Image:
    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf
        tables = {t.name: t for t in elf.symbol_tables()}
        self.stripped = ".symtab" not in tables
        self.table = tables.get(".symtab") or tables.get(".dynsym")
        self.writable = [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections
                         if s.sh_flags & SHF_ALLOC and s.sh_flags & SHF_WRITE and s.sh_addr]
        if not elf.sections:  # no section headers: the writable segments (PF_W)
            self.writable = [(p.p_vaddr, p.p_vaddr + p.p_memsz) for p in elf.segments
                             if p.p_type == PT_LOAD and p.p_flags & PF_W]
        self.code = [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections
                     if s.sh_flags & SHF_EXECINSTR and s.sh_addr and s.sh_type != SHT_NOBITS]
        if not self.code:  # no section headers: the executable segments
            self.code = [(p.p_vaddr, p.p_vaddr + p.p_filesz) for p in elf.segments
                         if p.p_type == PT_LOAD and p.p_flags & PF_X]
        # The sections an address can lie in (not .tdata/.tbss: a TLS template overlaps the sections after it).
        self._alloc = sorted((s for s in elf.sections if s.sh_flags & SHF_ALLOC and not s.sh_flags & SHF_TLS
                              and s.sh_addr and s.sh_size), key=lambda s: s.sh_addr)
        self._alloc_starts = [s.sh_addr for s in self._alloc]
        self.plt = [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections if s.name.startswith(".plt")]
        got = [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections if s.name in (".got", ".got.plt")]
        if not elf.sections:
            got = _loader_got(elf)
        self.got_ranges = got
        self._reloc = _GotRelocator(elf, _joined(got)) if got else None
        self._plt_lo = min((lo for lo, _ in self.plt), default=0)
        self._plt_hi = max((hi for _, hi in self.plt), default=0)
        spans = self.writable + got
        # Where a data reference worth a look can point: the writable sections and the GOT.
        self.data_span = (min((lo for lo, _ in spans), default=0), max((hi for _, hi in spans), default=0))
        self._got_cache: dict[int, Value | None] = {}
        self._in_code: dict[int, bool] = {}
        self._object_at: dict[int, tuple[int, str] | None] = {}
        self._name_cache: dict[int, str] = {}
        self._ends: dict[int, int] = {}
        self._load_symbols()
        self.extents = eh_frame_extents(elf)
        if not elf.sections and elf.e_machine == EM_X86_64:
            self.plt = self._loader_plt()
            self._plt_lo = min((lo for lo, _ in self.plt), default=0)
            self._plt_hi = max((hi for _, hi in self.plt), default=0)
        self._disagree: set[int] = set()  # sized function symbols whose FDE says another end
        # A shared library's own exported names reached through its GOT bind to the first definition in the
        # lookup scope, which an object loaded before it may hold (a program's): not when it is the program,
        # or linked -Bsymbolic (its own definitions first).
        self._interposable = not elf.is_executable() and elf.dynamic_value(DT_SYMBOLIC) is None \
            and not (elf.dynamic_value(DT_FLAGS) or 0) & DF_SYMBOLIC
        self._own: dict[int, str | None] = {}
        self._exported: frozenset[str] | None = None

    # -- symbols -------------------------------------------------------------------------------------

    def _load_symbols(self) -> None:
        """Function starts and data objects from the symbol table, column by column at C speed: st_info
        classifies every entry through one translate(), itertools.compress keeps the wanted entries, and
        nothing loops in Python per symbol (a 530k-symbol table costs a few tenths of a second)."""
        self._funcs: dict[int, int] = {}  # address -> index of the best function symbol there
        self._objects: dict[int, int] = {}  # address -> index of an object symbol there
        self._guard_names: set[str] | None = None
        self._guard_at: dict[int, str | None] = {}
        self._names: Sequence[int] = ()
        self._sizes: Sequence[int] = ()
        if self.table is not None:
            self._scan(self.table)
        self._func_starts = sorted(self._funcs)
        self._obj_starts = sorted(self._objects)

    def _scan(self, table: SymbolTable) -> None:
        symbols = TableSymbols(table)  # the one symbolizer (elf/symbolize.py)
        self._names, self._sizes = symbols.names, symbols.sizes
        self._funcs.update(symbols.functions)
        self._objects = symbols.objects

    def _name_of(self, i: int) -> str:
        name = self._name_cache.get(i)
        if name is None:
            assert self.table is not None  # symbol indices exist only when there is a table
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
        assert table is not None  # symbol indices exist only when there is a table
        if not 0 <= st_name < table.str_size:
            return ""
        head = table.name_head(st_name, 64)
        if any(m in head for m in markers):
            return self._name_of(i)
        return ""

    def is_function(self, addr: int) -> bool:
        return addr in self._funcs

    def function_start(self, addr: int) -> bool:
        """A function starts at ``addr``: its symbol, or in a stripped file (local functions have no symbol)
        the FDE that starts there."""
        return addr in self._funcs or (self.stripped and self.extents.is_start(addr))

    def function_end(self, addr: int) -> int:
        """Where the function at ``addr`` ends: its symbol's size, else the FDE covering it (.eh_frame), else a
        guess (see extent_known): the next function or FDE start, the code section's end, MAX_FUNCTION."""
        end = self._ends.get(addr)
        if end is None:
            end = self._ends[addr] = self._function_end(addr)  # asked again at each call the walk meets
        return end

    def _function_end(self, addr: int) -> int:
        i = self._funcs.get(addr)
        size = self._sizes[i] if i is not None else 0
        fde = self.extents.end_of(addr)
        if size:
            if fde is not None and fde != addr + size and self.extents.is_start(addr):
                self._disagree.add(addr)
                return max(fde, addr + size)  # code the unwinder says is the function's is decoded too
            return addr + size
        if fde is not None:
            return fde
        i = bisect_right(self._func_starts, addr)
        end = self._func_starts[i] if i < len(self._func_starts) else addr + MAX_FUNCTION
        end = min(end, self.extents.next_start(addr) or end)
        for lo, hi in self.code:
            if lo <= addr < hi:
                end = min(end, hi)
        return min(end, addr + MAX_FUNCTION)

    def extent_known(self, addr: int) -> bool:
        """Whether function_end(addr) is known (a symbol's size or an FDE), not guessed: past a guessed end the
        decoder keeps only the code reachable from ``addr``."""
        i = self._funcs.get(addr)
        return bool(i is not None and self._sizes[i]) or self.extents.end_of(addr) is not None

    def notes(self) -> list[str]:
        """What the image's own facts leave open (bad .eh_frame data, sizes the FDEs contradict)."""
        out = list(self.extents.notes)
        if self._disagree:
            out.append(f"{len(self._disagree)} function symbol(s) whose size and .eh_frame extent disagree (the "
                       "size is used): " + ", ".join(self.function_name(a) or f"{a:#x}" for a in
                                                    sorted(self._disagree)[:5]))
        return out

    def function_containing(self, addr: int) -> int | None:
        """The start of the last function symbol at or before ``addr`` (None: none)."""
        i = bisect_right(self._func_starts, addr) - 1
        return self._func_starts[i] if i >= 0 else None

    def is_call_target(self, addr: int) -> bool:
        """A function start (a symbol or an FDE) or a PLT stub: what a real call instruction goes to."""
        return addr in self._funcs or self._plt_lo <= addr < self._plt_hi or self.extents.is_start(addr)

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

    def object_size(self, start: int) -> int | None:
        """The size the symbol of the data object starting at ``start`` gives (None: no such symbol, or 0)."""
        j = self._objects.get(start)
        return (self._sizes[j] or None) if j is not None else None

    def _find_object(self, addr: int) -> tuple[int, str] | None:
        if not any(lo <= addr < hi for lo, hi in self.writable):
            return None
        i = bisect_right(self._obj_starts, addr) - 1
        if i < 0:
            return self._unnamed(addr)
        start = self._obj_starts[i]
        j = self._objects[start]
        if not (addr == start or addr < start + self._sizes[j]):
            return self._unnamed(addr)
        name = self._name_of(j)
        if name.startswith(_NOT_DATA_PREFIXES):
            return None if self._sizes[j] else self._unnamed(addr)  # a marker (__bss_start) names no object
        return start, name

    def _unnamed(self, addr: int) -> tuple[int, str] | None:
        """A stripped file's object without a symbol, known by its exact address ("" its name), in the sections
        that hold program data (not the GOT, RELRO constants, the init arrays or .tm_clone_table). Where an
        object starts and ends is not known: an address is one object, so an access at another offset is
        another; analysis keeps only those an initializer builds or stores into (see inits.unnamed)."""
        if not self.stripped or any(lo <= addr < hi for lo, hi in self.got_ranges):
            return None
        if not self.elf.sections:  # the loader's view: writable, and not made read-only after relocation
            relro = ((p.p_vaddr, p.p_vaddr + p.p_memsz) for p in self.elf.segments if p.p_type == PT_GNU_RELRO)
            return None if any(lo <= addr < hi for lo, hi in relro) else (addr, "")
        section = self.section_name(addr) or ""
        if section in (".data", ".bss") or (section.startswith((".data.", ".bss."))
                                            and not section.startswith(".data.rel.ro")):
            return addr, ""
        return None

    def symbol_at(self, addr: int) -> str | None:
        """A name for an address: the function starting there, else the object covering it."""
        name = self.function_name(addr)
        if name is not None:
            return name
        hit = self._covering(addr)
        return self._name_of(hit[1]) if hit is not None else None

    def _covering(self, addr: int) -> tuple[int, int] | None:
        """(start, symbol index) of the object symbol covering ``addr`` (any section; a zero-size one covers
        its own address)."""
        i = bisect_right(self._obj_starts, addr) - 1
        if i >= 0:
            start = self._obj_starts[i]
            j = self._objects[start]
            if addr == start or addr < start + self._sizes[j]:
                return start, j
        return None

    def data_extent(self, addr: int) -> tuple[int, int]:
        """[start, end) of the data around ``addr`` worth reading as one object: the sized object symbol covering
        it (any section: RELRO constants too), else UNSIZED_SPAN bytes from ``addr`` within its section."""
        hit = self._covering(addr)
        if hit is not None and self._sizes[hit[1]]:
            return hit[0], hit[0] + self._sizes[hit[1]]
        section = self._section(addr)
        end = addr + UNSIZED_SPAN
        return addr, end if section is None else min(end, section.sh_addr + section.sh_size)

    def guarded(self, name: str) -> bool:
        """Whether an object has an ABI guard variable (inline and template variables, local statics)."""
        if self._guard_names is None:  # built on first use: only --siof asks
            # Tested on the string table's bytes: decoding every object's name costs a second on libtorch.
            assert self.table is not None  # objects (what is asked about) exist only when there is a table
            head, names = self.table.name_head, self._names
            self._guard_names = {self._name_of(j) for j in self._objects.values()
                                 if head(names[j] & 0xFFFFFFFF, 4) == b"_ZGV"}
        return guard_variable(name) in self._guard_names

    def section_name(self, addr: int) -> str | None:
        """The allocated section ``addr`` lies in (None: none, or no section headers)."""
        section = self._section(addr)
        return section.name if section is not None else None

    def _section(self, addr: int) -> Section | None:
        i = bisect_right(self._alloc_starts, addr) - 1
        if i >= 0 and addr < self._alloc[i].sh_addr + self._alloc[i].sh_size:
            return self._alloc[i]
        return None

    def is_guard(self, addr: int) -> bool:
        return self.guard_name(addr) is not None

    def guard_name(self, addr: int) -> str | None:
        """The name of the ABI guard variable (``_ZGV...``) at ``addr``; None: none."""
        if addr not in self._guard_at:
            name = self.symbol_at(addr)
            self._guard_at[addr] = name if name and name.startswith("_ZGV") else None
        return self._guard_at[addr]

    def _loader_plt(self) -> list[tuple[int, int]]:
        """The PLT of an x86-64 file without section headers: the FDE that starts with PLT0 (``push
        [rip + GOT+8]``, the first of an executable segment's first FDEs to do so), and the FDEs right after it
        that start with a stub (``[endbr64] [bnd] jmp [rip + slot]``: .plt.got, .plt.sec)."""
        pltgot = self.elf.dynamic_value(DT_PLTGOT)
        starts = [self.extents.next_start(lo - 1) for lo, _ in self.code]
        for start in (a for a in starts[:4] if a is not None):
            for _ in range(4):
                head = self._head(start)
                if pltgot is not None and head[:2] == b"\xff\x35" and \
                        start + 6 + int.from_bytes(head[2:6], "little", signed=True) == pltgot + 8:
                    return self._stubs_from(start)
                nxt = self.extents.next_start(start)
                if nxt is None:
                    break
                start = nxt
        return []

    def _stubs_from(self, start: int) -> list[tuple[int, int]]:
        spans = []
        end = self.extents.end_of(start)
        while end is not None:
            spans.append((start, end))
            start, end = end, self.extents.end_of(end)
            if end is None or not any(self._head(start)[k:k + 2] == b"\xff\x25" for k in (0, 1, 4, 5)):
                break
        return spans

    def _head(self, addr: int) -> bytes:
        try:
            return self.read_code(addr, 8)
        except ElfPatchError:
            return b""

    # -- code and the GOT ----------------------------------------------------------------------------

    def read_code(self, addr: int, size: int) -> bytes:
        return self.elf.read(self.elf.vaddr_to_offset(addr, size), size)

    def exported(self) -> frozenset[str]:
        """The names this file's dynamic symbol table defines (another module may name those)."""
        if self._exported is None:
            self._exported = frozenset(n for t in self.elf.symbol_tables() if t.name == ".dynsym"
                                       for n in t.names_of(True))
        return self._exported

    @property
    def may_interpose(self) -> bool:
        """Whether another object's definitions may interpose this file's own exported names (see __init__)."""
        return self._interposable

    def interposable(self, slot: int) -> str | None:
        """The name of this file's own default-visibility definition that the GOT slot at ``slot`` is relocated
        to, when another object's definition may interpose it (see __init__); None otherwise."""
        if not self._interposable or self._reloc is None:
            return None
        if slot not in self._own:
            self._own[slot] = self._reloc.own_default_name(slot) \
                if any(lo <= slot < hi for lo, hi in self.got_ranges) else None
        return self._own[slot]

    def ifunc_slot(self, addr: int) -> bool:
        """Whether an R_*_IRELATIVE fills the GOT slot at ``addr`` (an ifunc: its value is the implementation
        the resolver picks when the file is loaded, never the resolver itself)."""
        return self._reloc is not None and self._reloc.ifunc(addr)

    def got(self, addr: int) -> Value | None:
        """What GOT slot ``addr`` holds once relocated: an address here, an external symbol's name, or None
        when ``addr`` is not a GOT slot."""
        if addr in self._got_cache:
            return self._got_cache[addr]
        value: Value | None = None
        if self._reloc is not None and any(lo <= addr < hi for lo, hi in self.got_ranges) \
                and not self.ifunc_slot(addr):  # what an ifunc's resolver picks is not known
            value = self._reloc.pointee(addr)
        self._got_cache[addr] = value
        return value
