"""Pointers the loader writes once and nothing changes after: what a word of read-only data holds.

A reference global (``Config& names = g_config;``), a constant pointer table (``Config* const tbl[] = {&a}``)
or a vtable live in ``.data.rel.ro`` (RELRO: made read-only once relocated, before any initializer runs) or in
``.rodata``. Loading such a word yields the address its relocation names (PIC), or the word in place
(non-PIC), so a load through it reaches a named object: the walk sees the object, not an unknown pointer.
Writable data is read only by InitialPointers, whose answer is the word's value *before* any initializer runs:
the walk uses it to see where a pointer global (``Obj* p = &g;``, ``int (*f)() = fn;``, an object's vptr) points,
and the analysis proves separately that nothing changed it before the load (see analysis._initial_held).
"""
from __future__ import annotations

from elfpatch.elf.const import ET_EXEC, PT_GNU_RELRO, PT_LOAD, SHF_ALLOC, SHF_EXECINSTR, SHF_TLS, SHF_WRITE, SHT_NOBITS
from elfpatch.elf.file import ElfFile
from elfpatch.elf.relocs import Relocator


def _constant_ranges(elf: ElfFile) -> list[tuple[int, int]]:
    """[lo, hi) of the data no code can write and whose words are pointers when code loads one to use it: the
    RELRO segment, and in a non-PIC executable (ET_EXEC: no relocations, every word in place) the read-only
    sections too. A PIC file's read-only sections hold no pointers (those need relocating: RELRO)."""
    ranges = [(p.p_vaddr, p.p_vaddr + p.p_memsz) for p in elf.segments if p.p_type == PT_GNU_RELRO]
    if elf.e_type == ET_EXEC:
        ranges += [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections
                   if s.sh_flags & SHF_ALLOC and not s.sh_flags & (SHF_WRITE | SHF_EXECINSTR) and s.sh_addr]
    return ranges


class _Words:
    """Words of some address ranges, each resolved through the file's relocations once and remembered (None:
    outside the ranges, or not resolvable); the relocation tables are read on first use (a large library's
    cost seconds)."""

    def __init__(self, elf: ElfFile, ranges: list[tuple[int, int]]) -> None:
        self._elf = elf
        self._ranges = ranges
        self._reloc: Relocator | None = None
        self._cache: dict[int, int | str | None] = {}
        self._own: dict[int, str | None] = {}

    def _relocator(self, addr: int) -> Relocator | None:
        if not any(lo <= addr < hi for lo, hi in self._ranges):
            return None
        if self._reloc is None:
            self._reloc = Relocator(self._elf, self._ranges)
        return self._reloc

    def word(self, addr: int) -> int | str | None:
        """The address (or, bound to another module, the symbol name) the word at ``addr`` holds."""
        if addr in self._cache:
            return self._cache[addr]
        reloc = self._relocator(addr)
        value = self._resolve(reloc, addr) if reloc is not None else None
        self._cache[addr] = value
        return value

    def own_name(self, addr: int) -> str | None:
        """The name of this file's own default-visibility definition that the word's relocation names (a
        vtable's slot, ``int (*fp)() = get_port;``): the loader binds it to the first definition in the lookup
        scope, which another object may hold; None for none."""
        if addr not in self._own:
            reloc = self._relocator(addr)
            self._own[addr] = reloc.own_default_name(addr) if reloc is not None else None
        return self._own[addr]

    def _resolve(self, reloc: Relocator, addr: int) -> int | str | None:
        return reloc.pointee(addr)


class ConstantPointers(_Words):
    """The relocated value of a word in constant data (None: not constant data, or not resolvable)."""

    def __init__(self, elf: ElfFile) -> None:
        super().__init__(elf, _constant_ranges(elf))


class InitialPointers(_Words):
    """The address a pointer word of writable data holds when the file is loaded, before any initializer runs
    (None: not writable data, not a pointer, or not resolvable). In a PIC file a word is a pointer only when a
    relocation names it (an int's bytes never are); in a non-PIC executable (no relocations) when its value
    lies in the file's loaded image. RELRO and the GOT are not asked here: ConstantPointers and the GOT say
    those, and their words never change."""

    def __init__(self, elf: ElfFile) -> None:
        relro = [(p.p_vaddr, p.p_vaddr + p.p_memsz) for p in elf.segments if p.p_type == PT_GNU_RELRO]
        super().__init__(elf, [(s.sh_addr, s.sh_addr + s.sh_size) for s in elf.sections
                               if s.sh_flags & SHF_ALLOC and s.sh_flags & SHF_WRITE and not s.sh_flags & SHF_TLS
                               and s.sh_type != SHT_NOBITS and s.sh_addr and s.name not in (".got", ".got.plt")
                               and not any(lo <= s.sh_addr < hi for lo, hi in relro)])
        self._loaded = [(p.p_vaddr, p.p_vaddr + p.p_memsz) for p in elf.segments if p.p_type == PT_LOAD]

    def _resolve(self, reloc: Relocator, addr: int) -> int | str | None:
        if self._elf.e_type != ET_EXEC and not reloc.relocated(addr):
            return None  # PIC: a word no relocation names holds no address
        value = reloc.pointee(addr)
        if isinstance(value, int) and not any(lo <= value < hi for lo, hi in self._loaded):
            return None  # not an address in this file: an integer
        return value
