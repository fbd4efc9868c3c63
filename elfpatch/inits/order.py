"""What runs when an ELF file is loaded and unloaded, in the order glibc runs it (elf/dl-init.c, dl-fini.c).

At load: DT_PREINIT_ARRAY (the main executable only), DT_INIT, the legacy .ctors list (which the old crtstuff
walked from inside DT_INIT, last entry first), then DT_INIT_ARRAY by index. At exit or dlclose:
DT_FINI_ARRAY from the last index down, DT_FINI, then the legacy .dtors list (walked from inside DT_FINI,
first entry first). Each entry's address is the relocated slot (relocs.py), named from .symtab, else
.dynsym, and GCC's ``_GLOBAL__sub_I_<file>`` names give the translation unit and the priority.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from itertools import compress
from typing import Any

from elfpatch.elf.const import (
    DT_FINI,
    DT_FINI_ARRAY,
    DT_FINI_ARRAYSZ,
    DT_INIT,
    DT_INIT_ARRAY,
    DT_INIT_ARRAYSZ,
    DT_PREINIT_ARRAY,
    DT_PREINIT_ARRAYSZ,
    ET_DYN,
    ET_EXEC,
    SHT_FINI_ARRAY,
    SHT_INIT_ARRAY,
    SHT_NOBITS,
    SHT_PREINIT_ARRAY,
    STB_LOCAL,
    STT_FILE,
    STT_FUNC,
    st_bind,
    st_type,
)
from elfpatch.elf.file import ElfFile, SymbolTable
from elfpatch.elf.relocs import Relocator, Target
from elfpatch.elf.symbolize import TableSymbols
from elfpatch.elf.symbolize import _columns as table_columns
from elfpatch.errors import UnsupportedError, warn

INIT_KINDS = ("preinit_array", "init", "ctors", "init_array")
FINI_KINDS = ("fini_array", "fini", "dtors")
# Kinds whose non-toolchain entries count as static initializers for --max.
COUNTED_KINDS = frozenset({"preinit_array", "init_array", "ctors"})
# The toolchain's own entries: GCC's crtstuff (frame_dummy, __do_global_dtors_aux, and the pre-init_array
# __do_global_ctors_aux), crti's _init/_fini, and compiler-rt's crtbegin (__do_init, __do_fini).
TOOLCHAIN_NAMES = frozenset({"frame_dummy", "__do_global_dtors_aux", "__do_global_ctors_aux", "_init",
                             "_fini", "__do_init", "__do_fini"})

# GCC: _GLOBAL__sub_I_<file>, _GLOBAL__sub_I.00101_<file> (GCC >= 11), _GLOBAL__sub_I_00101_0_<file>
# (older); sub_D for destructors under -fno-use-cxa-atexit. <file> is the source's basename with characters
# not valid in a label turned into "_", or, for non-PIC code, the first global symbol the file defines.
_GCC_CDTOR = re.compile(r"_GLOBAL__sub_[ID](?:[._](\d{5})(?:_\d+)?)?_(.+)", re.DOTALL)
_CLANG_PRIO = re.compile(r"_GLOBAL__[ID]_(\d{6})")  # clang's init_priority functions: no file in the name
_CLONE_KINDS = frozenset({"lto_priv", "constprop", "isra", "part", "cold", "localalias"})


def _strip_clone_suffixes(name: str) -> str:
    """``name`` without GCC's clone suffixes (``.constprop.0``, ``.part.1.cold``, ...), taken off from the end
    one at a time: each character is looked at once (a regex anchored with ``$`` retried the match from every
    dot, quadratic in a name of many dots)."""
    end = len(name)
    while True:
        dot = name.rfind(".", 0, end)
        if dot < 0:
            return name[:end]
        word = name[dot + 1 : end]
        if word.isdecimal():  # a clone number: the word before it must be a clone kind
            kind = name.rfind(".", 0, dot)
            if kind < 0 or name[kind + 1 : dot] not in _CLONE_KINDS:
                return name[:end]
            end = kind
        elif word in _CLONE_KINDS:
            end = dot
        else:
            return name[:end]


def parse_cdtor_name(name: str | None) -> tuple[str | None, int | None]:
    """(source file, priority) from a compiler-generated initializer or finalizer name."""
    if not name:
        return None, None
    name = _strip_clone_suffixes(name)
    m = _CLANG_PRIO.fullmatch(name)
    if m:
        return None, int(m.group(1))
    m = _GCC_CDTOR.fullmatch(name)
    if not m:
        return None, None
    prio, tail = m.group(1), m.group(2)
    if prio is not None and int(prio) > 65535:  # not a priority: a file whose name starts with digits
        prio, tail = None, name[len("_GLOBAL__sub_I_"):]
    # A tail without a dot names the first global symbol of a non-PIC file, not the file.
    return (tail if "." in tail else None), (int(prio) if prio is not None else None)


def is_executable(elf: ElfFile) -> bool:
    """Whether glibc would treat this file as a main program (only those get DT_PREINIT_ARRAY run)."""
    return elf.is_executable()


class _Layout:
    """Where the arrays and functions are: from the dynamic section as the loader reads it, or for a static
    executable (no PT_DYNAMIC) from the section headers, as its start-up code does."""

    def __init__(self, elf: ElfFile) -> None:
        self.arrays: dict[str, tuple[int, int]] = {}  # kind -> (vaddr, size in bytes)
        self.funcs: dict[str, int] = {}  # "init"/"fini" -> vaddr
        self.legacy: dict[str, tuple[int, int]] = {}  # "ctors"/"dtors" -> (vaddr, size)
        if elf.dynamic():
            self._from_dynamic(elf)
        else:
            self._from_sections(elf)
        if not is_executable(elf):
            self.arrays.pop("preinit_array", None)  # glibc ignores it outside the main program
        # Legacy lists have no dynamic tag: only section headers find them.
        for sec in elf.sections:
            if sec.name in (".ctors", ".dtors") and sec.sh_type != SHT_NOBITS and sec.sh_addr:
                self.legacy[sec.name[1:]] = (sec.sh_addr, sec.sh_size)
        # The toolchain's _init/_fini sit at the start of .init/.fini: that names them even when stripped.
        self.section_starts = {sec.sh_addr for sec in elf.sections if sec.name in (".init", ".fini")}

    def _from_dynamic(self, elf: ElfFile) -> None:
        for kind, tag, size_tag in (("preinit_array", DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ),
                                    ("init_array", DT_INIT_ARRAY, DT_INIT_ARRAYSZ),
                                    ("fini_array", DT_FINI_ARRAY, DT_FINI_ARRAYSZ)):
            addr = elf.dynamic_value(tag)
            if addr is not None:
                self.arrays[kind] = (addr, elf.dynamic_value(size_tag) or 0)
        for kind, tag in (("init", DT_INIT), ("fini", DT_FINI)):
            addr = elf.dynamic_value(tag)
            if addr:
                self.funcs[kind] = addr

    def _from_sections(self, elf: ElfFile) -> None:
        """A static executable's start-up code finds the arrays by the linker's section bounds."""
        by_type = {SHT_PREINIT_ARRAY: "preinit_array", SHT_INIT_ARRAY: "init_array",
                   SHT_FINI_ARRAY: "fini_array"}
        for sec in elf.sections:
            if sec.sh_type in by_type and sec.sh_addr:
                self.arrays[by_type[sec.sh_type]] = (sec.sh_addr, sec.sh_size)
            elif sec.name in (".init", ".fini") and sec.sh_addr and sec.sh_size:
                self.funcs[sec.name[1:]] = sec.sh_addr

    def ranges(self, wordsize: int) -> list[tuple[int, int]]:
        spans = list(self.arrays.values()) + list(self.legacy.values())
        return [(addr, addr + size - size % wordsize) for addr, size in spans]


class _Symbolizer:
    """Names for addresses: the best function symbol at each address, from .symtab first, then .dynsym."""

    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf
        tables = {t.name: t for t in elf.symbol_tables()}
        self.tables = [tables[n] for n in (".symtab", ".dynsym") if n in tables]

    def names(self, addresses: set[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for table in self.tables:
            wanted = addresses - found.keys()
            if wanted:
                found.update(self._scan(table, wanted))
        return found

    def _scan(self, table: Any, wanted: set[int]) -> dict[int, str]:
        return TableSymbols(table, wanted).function_names(wanted)  # the one symbolizer


def _demangle(name: str | None) -> str | None:
    if not name:
        return None
    try:
        from elfpatch.elf.symbols import demangle
    except ImportError:  # pragma: no cover - symbols.py is another engineer's module
        return None
    return demangle(name)


def initializers(elf: ElfFile) -> dict[str, list[dict[str, Any]]]:
    """``{"init": [...], "fini": [...]}`` for one parsed image, each list in execution order."""
    if elf.e_type not in (ET_EXEC, ET_DYN):
        raise UnsupportedError(f"ELF type {elf.e_type} is not an executable or shared object: the loader "
                               "never runs it (the linker orders an object file's initializers)", elf.path)
    layout = _Layout(elf)
    ws = elf.elfclass // 8
    reloc = Relocator(elf, layout.ranges(ws))
    raw: dict[str, list[tuple[int | None, Target]]] = {}  # kind -> [(index, Target)] in execution order
    for kind, (addr, size) in layout.arrays.items():
        raw[kind] = list(enumerate(reloc.words(addr, size // ws)))
    for kind, addr in layout.funcs.items():
        raw[kind] = [(None, Target(addr, None))]
    for kind, (addr, size) in layout.legacy.items():
        raw[kind] = _legacy_list(reloc.words(addr, size // ws), ws)
    raw.get("fini_array", []).reverse()
    raw.get("ctors", []).reverse()

    names = _Symbolizer(elf).names({t.value for entries in raw.values() for _, t in entries
                                    if t.value is not None})
    out: dict[str, list[dict[str, Any]]] = {"init": [], "fini": []}
    for side, kinds in (("init", INIT_KINDS), ("fini", FINI_KINDS)):
        for kind in kinds:
            for index, target in raw.get(kind, ()):
                out[side].append(_entry(kind, index, target, names, layout.section_starts))
    _add_file_sources(elf, out["init"] + out["fini"])
    return out


def _add_file_sources(elf: ElfFile, entries: list[dict[str, Any]]) -> None:
    """``source`` for entries whose name does not give it (GCC names a PIE or non-PIC unit's initializer after
    its first global symbol): the STT_FILE symbol that precedes the function's local symbol in .symtab."""
    wanted = {e["address"] for e in entries if e["source"] is None and e["address"] is not None
              and not e["toolchain"]}
    table = next((t for t in elf.symbol_tables() if t.name == ".symtab"), None)
    if not wanted or table is None:
        return
    found = _file_of(table, wanted)
    for e in entries:
        if e["source"] is None and e["address"] in found:
            e["source"] = table.string(found[e["address"]])


# st_info -> 1 for a symbol that is not local, of type STT_FILE, of type STT_FUNC
_NOT_LOCAL, _IS_FILE, _IS_FUNC = (bytes(1 if test(b) else 0 for b in range(256)) for test in (
    lambda b: st_bind(b) != STB_LOCAL, lambda b: st_type(b) == STT_FILE, lambda b: st_type(b) == STT_FUNC))


def _file_of(table: SymbolTable, wanted: set[int]) -> dict[int, int]:
    """Per address of ``wanted``, the st_name of the STT_FILE symbol last before the first local STT_FUNC
    symbol at it that has one (0 or none: no file). Every local symbol comes first in .symtab: past them, no
    file owns a symbol. Read column by column: only the functions at a wanted address are looked at in Python
    (libtorch_cpu.so's .symtab has 530k entries)."""
    st_names, values, _sizes = table_columns(table, table.elf.read(table.offset, table.count * table.entsize))
    info = table.info_bytes()
    local = info.translate(_NOT_LOCAL).find(1)
    info = info[: local if local >= 0 else len(info)]
    files = list(compress(range(len(info)), info.translate(_IS_FILE)))
    funcs = list(compress(range(len(info)), info.translate(_IS_FUNC)))
    hits = compress(funcs, map(wanted.__contains__, compress(values, info.translate(_IS_FUNC))))
    found: dict[int, int] = {}
    for i in hits:
        value = values[i]
        at = bisect_left(files, i) - 1
        if value not in found and at >= 0 and st_names[files[at]]:
            found[value] = st_names[files[at]]
    return found


def _legacy_list(words: list[Target], ws: int) -> list[tuple[int | None, Target]]:
    """The function entries of a .ctors/.dtors list: after the leading -1, up to the terminating 0."""
    minus_one = (1 << (ws * 8)) - 1
    entries: list[tuple[int | None, Target]] = []
    for index, target in enumerate(words):
        if target.value == 0 and target.symbol is None:
            break
        if target.value == minus_one:
            if index == 0:
                continue
            break
        entries.append((index, target))
    return entries


def _entry(kind: str, index: int | None, target: Target, names: dict[int, str],
           section_starts: set[int]) -> dict[str, Any]:
    address = target.value
    symbol = names.get(address) if address is not None else None
    symbol = symbol or target.symbol
    source, priority = parse_cdtor_name(symbol)
    if symbol:
        toolchain = symbol in TOOLCHAIN_NAMES
    else:
        toolchain = kind in ("init", "fini") and address in section_starts
    return {"kind": kind, "index": index, "address": address, "symbol": symbol,
            "demangled": _demangle(symbol), "source": source, "priority": priority, "toolchain": toolchain}


def slot_addresses(elf: ElfFile, entries: list[dict[str, Any]]) -> list[int | None]:
    """The address of the word each entry's function is read from (None: DT_INIT/DT_FINI, which hold it): the
    loader relocates that word, by symbol lookup when its relocation names one."""
    layout = _Layout(elf)
    spans = {**layout.arrays, **layout.legacy}
    ws = elf.elfclass // 8
    return [spans[e["kind"]][0] + e["index"] * ws if e["kind"] in spans and e["index"] is not None else None
            for e in entries]


def static_initializer_count(listing: dict[str, Any]) -> int:
    """What --max counts: preinit_array, init_array and .ctors entries that are not the toolchain's own."""
    return sum(1 for e in listing["init"] if e["kind"] in COUNTED_KINDS and not e["toolchain"])


def list_initializers(path: str) -> dict[str, Any]:
    """``{"path", "init", "fini", "warnings"}`` for the ELF file at ``path``: what runs at load and at unload, in order.

    Raises ElfPatchError (ParseError, UnsupportedError, ...) with a one-line message for bad input."""
    from elfpatch.fs.source import Source

    with Source(path) as src:
        elf = ElfFile(src.data, path)
        listing = initializers(elf)
    for message in elf.warnings:  # e.g. unusable section headers: listed from PT_DYNAMIC, names from .dynsym
        warn(path, message)
    return {"path": path, **listing, "warnings": list(elf.warnings)}
