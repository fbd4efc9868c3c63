"""The few facts about a shared object that explain why it stays loaded: read from the file, never loaded."""
from __future__ import annotations

import mmap
import os
from functools import lru_cache
from typing import NamedTuple

from elfpatch.elf.const import DF_1_NODELETE, DT_FLAGS_1, DT_NEEDED, DT_SONAME, SHN_UNDEF
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import unique_applies, unique_indexes
from elfpatch.errors import ElfPatchError

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
    needed = elf.dynamic_strings(DT_NEEDED)
    sonames = elf.dynamic_strings(DT_SONAME)
    flags_1 = elf.dynamic_value(DT_FLAGS_1) or 0
    unique, tls_dtors, defined = [], False, set()
    table = elf.loader_table()  # what the loader sees, whatever the section headers say
    if table is not None:
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
    return ObjectFacts(sonames[0] if sonames else None, needed, bool(flags_1 & DF_1_NODELETE), unique, tls_dtors,
                       frozenset(defined))


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
