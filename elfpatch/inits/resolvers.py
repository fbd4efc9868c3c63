"""ifunc resolvers: code that runs while the loader relocates the file, before any of its initializers.

An ``STT_GNU_IFUNC`` symbol's value is its resolver, which the loader calls to fill the GOT slots naming it
(``R_*_IRELATIVE`` for a local one): during relocation, before the file's DT_PREINIT/DT_INIT/init arrays run.
A resolver that reads an object one of the file's initializers builds reads it before construction, always;
one whose walk is not proven may read anything. Either makes the file's analysis incomplete, with a note."""
from __future__ import annotations

from typing import Callable

from elfpatch.elf.const import SHN_UNDEF, STT_GNU_IFUNC, st_type
from elfpatch.elf.file import ElfFile
from elfpatch.inits.image import Image
from elfpatch.inits.siof import constructors
from elfpatch.inits.walk import Summary, Walker

_SHOWN = 3  # names listed in a note
MAX_RESOLVERS = 256  # walked; a file with more (a static program's libc) is noted as not walked
_IFUNC = bytes(st_type(b) == STT_GNU_IFUNC for b in range(256))  # st_info -> 1 for STT_GNU_IFUNC


def _resolvers(elf: ElfFile) -> set[int]:
    """The addresses of the file's defined ifunc symbols: their st_info bytes scanned at C speed (a 530k-entry
    .symtab decoded entry by entry costs half a second), only those entries decoded."""
    out = set()
    for t in elf.symbol_tables():
        flags = t.info_bytes().translate(_IFUNC)
        i = flags.find(1)
        while i >= 0:
            e = t.entry(i)
            if e.st_shndx != SHN_UNDEF and e.st_value:
                out.add(e.st_value)
            i = flags.find(1, i + 1)
    return out


def resolvers(elf: ElfFile) -> set[int]:
    """The resolvers the loader runs (none where there are more than MAX_RESOLVERS: resolver_notes says so)."""
    found = _resolvers(elf)
    return found if len(found) <= MAX_RESOLVERS else set()


def resolver_stores(elf: ElfFile, walker: Walker, depth: int) -> set[int]:
    """The objects the file's resolvers store into or hand on: changed before any initializer runs, so their
    load-time words are not what an initializer reads."""
    out: set[int] = set()
    for addr in sorted(resolvers(elf)):
        s = walker.walk(addr, (), depth)
        out.update(s.constructs, s.call_stores, s.escaped)
    return out


def resolver_notes(elf: ElfFile, image: Image | None, walker: Walker | None, summaries: list, depth: int,
                   proven: Callable[[Summary], bool]) -> list[str]:
    """Notes on this file's ifunc resolvers that read an object an initializer builds, or whose walk is not
    proven (each walked ``depth`` calls deep)."""
    if image is None or walker is None:
        return []
    # (names from the image's symbolizer: a symbol's own name offset may be past its table)
    resolvers = {a: image.function_name(a) or f"{a:#x}" for a in _resolvers(elf)}
    if not resolvers:
        return []
    if len(resolvers) > MAX_RESOLVERS:
        return [f"{len(resolvers)} ifunc resolvers run during relocation, before any initializer: not walked "
                f"(more than {MAX_RESOLVERS})"]
    built = constructors(summaries)
    reads, unproven = set(), []
    for addr, name in sorted(resolvers.items()):
        s = walker.walk(addr, (), depth)
        reads |= {o for o in s.reads if o in built}
        if not proven(s):
            unproven.append(name)
    notes = []
    if reads:
        names = [image.symbol_at(o) or f"{o:#x}" for o in sorted(reads)[:_SHOWN]]
        notes.append("ifunc resolver(s) run during relocation, before any initializer, and read object(s) an "
                     "initializer builds: " + ", ".join(names))
    if unproven:
        notes.append("ifunc resolver(s) run during relocation, before any initializer, whose walk is not proven: "
                     + ", ".join(unproven[:_SHOWN]))
    return notes
