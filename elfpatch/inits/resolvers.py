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


def resolver_notes(elf: ElfFile, image: Image | None, walker: Walker | None, summaries: list, depth: int,
                   proven: Callable[[Summary], bool]) -> list[str]:
    """Notes on this file's ifunc resolvers that read an object an initializer builds, or whose walk is not
    proven (each walked ``depth`` calls deep)."""
    if image is None or walker is None:
        return []
    # (names from the image's symbolizer: a symbol's own name offset may be past its table)
    resolvers = {e.st_value: image.function_name(e.st_value) or f"{e.st_value:#x}"
                 for t in elf.symbol_tables() for e in t.entries()
                 if st_type(e.st_info) == STT_GNU_IFUNC and e.st_shndx != SHN_UNDEF and e.st_value}
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
