"""The few facts about a shared object that explain why it stays loaded: read from the file, never loaded."""
from __future__ import annotations

import mmap
import os
from functools import lru_cache
from typing import NamedTuple

from elfpatch.elffile import DT_NEEDED, DT_STRSZ, DT_STRTAB, SHN_UNDEF, ElfFile
from elfpatch.errors import ElfPatchError
from elfpatch.symbols import unique_applies, unique_indexes

DT_SONAME = 14
DT_FLAGS_1 = 0x6FFFFFFB
DF_1_NODELETE = 0x8
# What GCC calls to register a thread_local's destructor; glibc keeps the object loaded until it has run.
THREAD_ATEXIT = frozenset({"__cxa_thread_atexit", "__cxa_thread_atexit_impl"})


class ObjectFacts(NamedTuple):
    soname: str | None
    needed: list[str]  # DT_NEEDED, in order
    nodelete_flag: bool  # DF_1_NODELETE (linked with -z nodelete)
    unique: list[str]  # STB_GNU_UNIQUE symbols the object defines in .dynsym (what the loader sees)
    thread_local_dtors: bool  # imports __cxa_thread_atexit(_impl): registers thread_local destructors
    defined: frozenset[str] = frozenset()  # every symbol the object defines in .dynsym


def object_facts(path: str) -> ObjectFacts | None:
    """The facts, or None when ``path`` cannot be read as an ELF file (then it explains nothing). Cached by
    the file's identity and mtime: one dlcheck run asks about the same objects many times."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _cached_facts(path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=256)
def _cached_facts(path: str, *identity: int) -> ObjectFacts | None:
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _facts(ElfFile(data, path))
    except (OSError, ValueError, ElfPatchError):
        return None


def _facts(elf: ElfFile) -> ObjectFacts:
    strings = _dynstr(elf)
    needed, soname, flags_1 = [], None, 0
    for tag, val in elf.dynamic():
        if tag == DT_NEEDED and strings is not None:
            needed.append(strings(val))
        elif tag == DT_SONAME and strings is not None:
            soname = strings(val)
        elif tag == DT_FLAGS_1:
            flags_1 = val
    unique, tls_dtors, defined = [], False, set()
    for table in elf.symbol_tables():
        if table.name != ".dynsym":
            continue
        if unique_applies(elf.osabi):
            for i in unique_indexes(table.info_bytes()):
                sym = table.symbol(i)
                if sym.st_shndx != SHN_UNDEF:
                    unique.append(sym.name)
        for sym in table:
            if sym.st_shndx == SHN_UNDEF:
                tls_dtors = tls_dtors or sym.name in THREAD_ATEXIT
            elif sym.name:
                defined.add(sym.name)
    return ObjectFacts(soname, needed, bool(flags_1 & DF_1_NODELETE), unique, tls_dtors, frozenset(defined))


def _dynstr(elf: ElfFile):
    addr, size = elf.dynamic_value(DT_STRTAB), elf.dynamic_value(DT_STRSZ)
    if addr is None or size is None:
        return None
    base = elf.vaddr_to_offset(addr, max(size, 1))
    return lambda off: elf.cstring(base + off, base + size)


def defines_unique(path: str, symbol: str) -> bool:
    """Whether ``path`` defines ``symbol`` as STB_GNU_UNIQUE in its ``.dynsym``."""
    facts = object_facts(path)
    return facts is not None and symbol in facts.unique


def needs(facts: ObjectFacts, path: str, target: ObjectFacts | None) -> bool:
    """Whether an object with ``facts`` names ``path`` (whose facts are ``target``) in its DT_NEEDED: by
    soname, by file name, or by the path itself (a DT_NEEDED with a slash)."""
    names = {os.path.basename(path), path}
    if target is not None and target.soname:
        names.add(target.soname)
    return any(n in names for n in facts.needed)
