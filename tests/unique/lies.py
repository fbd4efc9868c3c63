"""Header lies, made by editing the headers of real built libraries: each one leaves what glibc reads (PT_LOAD,
PT_DYNAMIC at its p_vaddr, DT_SYMTAB/DT_STRTAB, the hash tables) as it was, and makes the section headers (or
PT_DYNAMIC's p_offset, or e_phnum) say something else. Any ELF class and byte order."""
from __future__ import annotations

import struct
from typing import Callable

from elfpatch.elf.const import PN_XNUM, PT_DYNAMIC, SHT_DYNSYM, SHT_PROGBITS, STB_GNU_UNIQUE
from elfpatch.elf.file import ElfFile

# (offset, format) of header fields, by ELF class.
EHDR = {64: {"e_phoff": (0x20, "Q"), "e_shoff": (0x28, "Q"), "e_phnum": (0x38, "H"), "e_shentsize": (0x3A, "H"),
             "e_shnum": (0x3C, "H"), "e_shstrndx": (0x3E, "H")},
        32: {"e_phoff": (0x1C, "I"), "e_shoff": (0x20, "I"), "e_phnum": (0x2C, "H"), "e_shentsize": (0x2E, "H"),
             "e_shnum": (0x30, "H"), "e_shstrndx": (0x32, "H")}}
SHDR = {64: {"sh_type": (4, "I"), "sh_offset": (24, "Q"), "sh_size": (32, "Q"), "sh_link": (40, "I"),
             "sh_info": (44, "I")},
        32: {"sh_type": (4, "I"), "sh_offset": (16, "I"), "sh_size": (20, "I"), "sh_link": (24, "I"),
             "sh_info": (28, "I")}}
PHDR = {64: {"p_offset": (8, "Q")}, 32: {"p_offset": (4, "I")}}

Lie = Callable[[bytes], bytes]


def _put(data: bytearray, elf: ElfFile, offset: int, fmt: str, value: int) -> None:
    struct.pack_into(elf.endian + fmt, data, offset, value)


def set_ehdr(data: bytearray, elf: ElfFile, field: str, value: int) -> None:
    off, fmt = EHDR[elf.elfclass][field]
    _put(data, elf, off, fmt, value)


def set_shdr(data: bytearray, elf: ElfFile, index: int, field: str, value: int) -> None:
    off, fmt = SHDR[elf.elfclass][field]
    _put(data, elf, elf.e_shoff + index * elf.e_shentsize + off, fmt, value)


def _dynsym_section(elf: ElfFile) -> int:
    (sec,) = [s for s in elf.sections if s.sh_type == SHT_DYNSYM]
    return sec.shndx


def _append(data: bytearray, blob: bytes, align: int = 16) -> int:
    """Append ``blob`` after the last byte (past the section headers: the loader maps nothing there)."""
    data.extend(b"\0" * (-len(data) % align))
    at = len(data)
    data.extend(blob)
    return at


def _lie(edit: Callable[[bytearray, ElfFile], None]) -> Lie:
    def apply(image: bytes) -> bytes:
        data = bytearray(image)
        edit(data, ElfFile(image))
        return bytes(data)
    apply.__doc__ = edit.__doc__
    return apply


@_lie
def drop_dynsym(data: bytearray, elf: ElfFile) -> None:
    """The section headers leave .dynsym out: its header is a NULL one."""
    i = _dynsym_section(elf)
    start = elf.e_shoff + i * elf.e_shentsize
    data[start : start + elf.e_shentsize] = bytes(elf.e_shentsize)


@_lie
def retype_dynsym(data: bytearray, elf: ElfFile) -> None:
    """.dynsym is called SHT_PROGBITS."""
    set_shdr(data, elf, _dynsym_section(elf), "sh_type", SHT_PROGBITS)


@_lie
def shrink_dynsym(data: bytearray, elf: ElfFile) -> None:
    """.dynsym's sh_size stops before its first unique symbol."""
    table = elf.loader_table()
    first = min(i for i, b in enumerate(table.info_bytes()) if b >> 4 == STB_GNU_UNIQUE)
    set_shdr(data, elf, _dynsym_section(elf), "sh_size", first * table.entsize)


@_lie
def grow_dynsym(data: bytearray, elf: ElfFile) -> None:
    """.dynsym's sh_size runs on over .dynstr (whose bytes must not be taken for symbols and edited)."""
    i = _dynsym_section(elf)
    table = elf.loader_table()
    grown = elf.sections[i].sh_size + table.str_size + table.entsize
    set_shdr(data, elf, i, "sh_size", grown - grown % table.entsize)


@_lie
def decoy_dynsym(data: bytearray, elf: ElfFile) -> None:
    """.dynsym points at a zeroed copy of itself (what some Android protectors ship)."""
    i = _dynsym_section(elf)
    at = _append(data, bytes(elf.sections[i].sh_size))
    set_shdr(data, elf, i, "sh_offset", at)


@_lie
def copied_dynsym(data: bytearray, elf: ElfFile) -> None:
    """.dynsym points at a copy of itself elsewhere in the file (tools read the copy, the loader the original)."""
    i = _dynsym_section(elf)
    sec = elf.sections[i]
    at = _append(data, bytes(data[sec.sh_offset : sec.sh_offset + sec.sh_size]))
    set_shdr(data, elf, i, "sh_offset", at)


@_lie
def single_null_shdr(data: bytearray, elf: ElfFile) -> None:
    """One section header, the NULL one."""
    set_ehdr(data, elf, "e_shnum", 1)
    set_ehdr(data, elf, "e_shstrndx", 0)


@_lie
def no_section_headers(data: bytearray, elf: ElfFile) -> None:
    """No section headers at all (sstrip)."""
    for field in ("e_shoff", "e_shnum", "e_shstrndx"):
        set_ehdr(data, elf, field, 0)


@_lie
def dynamic_offset(data: bytearray, elf: ElfFile) -> None:
    """PT_DYNAMIC's p_offset points at zeros (an empty dynamic section there); its p_vaddr, which the loader
    uses, still maps to the real one. No section headers either, so nothing else leads to .dynsym."""
    (index,) = [i for i, s in enumerate(elf.segments) if s.p_type == PT_DYNAMIC]
    at = _append(data, bytes(elf.segments[index].p_filesz))  # all of p_filesz readable there: zeros
    off, fmt = PHDR[elf.elfclass]["p_offset"]
    _put(data, elf, elf.e_phoff + index * elf.e_phentsize + off, fmt, at)
    for field in ("e_shoff", "e_shnum", "e_shstrndx"):
        set_ehdr(data, elf, field, 0)


@_lie
def dynamic_offset_with_sections(data: bytearray, elf: ElfFile) -> None:
    """PT_DYNAMIC's p_offset points at zeros; the section headers stay."""
    (index,) = [i for i, s in enumerate(elf.segments) if s.p_type == PT_DYNAMIC]
    at = _append(data, bytes(elf.segments[index].p_filesz))  # all of p_filesz readable there: zeros
    off, fmt = PHDR[elf.elfclass]["p_offset"]
    _put(data, elf, elf.e_phoff + index * elf.e_phentsize + off, fmt, at)


@_lie
def shdrs_past_eof(data: bytearray, elf: ElfFile) -> None:
    """e_shoff far past the end of the file."""
    set_ehdr(data, elf, "e_shoff", 1 << 30)


@_lie
def shentsize_zero(data: bytearray, elf: ElfFile) -> None:
    """e_shentsize 0."""
    set_ehdr(data, elf, "e_shentsize", 0)


@_lie
def shnum_zero_hdr0_past_eof(data: bytearray, elf: ElfFile) -> None:
    """e_shnum 0 (the count would be in section header 0), and section header 0 past the end of the file."""
    set_ehdr(data, elf, "e_shnum", 0)
    set_ehdr(data, elf, "e_shoff", 1 << 30)


@_lie
def pn_xnum(data: bytearray, elf: ElfFile) -> None:
    """e_phnum is PN_XNUM: the real count is in section header 0's sh_info (valid ELF; glibc refuses it)."""
    set_shdr(data, elf, 0, "sh_info", elf.e_phnum)
    set_ehdr(data, elf, "e_phnum", PN_XNUM)


@_lie
def shnum_extended(data: bytearray, elf: ElfFile) -> None:
    """e_shnum 0 and e_shstrndx SHN_XINDEX: the real values are in section header 0's sh_size and sh_link."""
    set_shdr(data, elf, 0, "sh_size", elf.e_shnum)
    set_shdr(data, elf, 0, "sh_link", elf.e_shstrndx)
    set_ehdr(data, elf, "e_shnum", 0)
    set_ehdr(data, elf, "e_shstrndx", 0xFFFF)


# Lies glibc loads the file through (the loader judges them); the name is the test id.
LOADER_LIES: dict[str, Lie] = {
    "drop-dynsym": drop_dynsym,
    "retype-dynsym": retype_dynsym,
    "shrink-dynsym": shrink_dynsym,
    "grow-dynsym": grow_dynsym,
    "decoy-dynsym": decoy_dynsym,
    "copied-dynsym": copied_dynsym,
    "single-null-shdr": single_null_shdr,
    "dynamic-offset": dynamic_offset,
    "shdrs-past-eof": shdrs_past_eof,
    "shentsize-zero": shentsize_zero,
    "shnum0-hdr0-past-eof": shnum_zero_hdr0_past_eof,
}
# Valid extended numbering: readelf and LIEF judge (glibc does not load PN_XNUM files).
EXTENDED: dict[str, Lie] = {"pn-xnum": pn_xnum, "shnum-extended": shnum_extended}
# Lies after which .symtab can no longer be read (the section headers are unusable or gone).
SYMTAB_LOST = {"single-null-shdr", "dynamic-offset", "shdrs-past-eof", "shentsize-zero", "shnum0-hdr0-past-eof"}
# readelf and LIEF read the dynamic section at PT_DYNAMIC's p_offset: they cannot judge that lie.
P_OFFSET_READERS_FOOLED = {"dynamic-offset"}
