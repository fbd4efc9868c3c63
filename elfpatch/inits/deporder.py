"""What the load initializes before a file (`inits --deps`): the symbols its earlier objects define.

A library's dependencies run their initializers before it, and a program's libraries before the program
(glibc's order, elfpatch.elf.loadorder). An object another module defines and one of those earlier objects exports
has been through its initializers when this file's run: a read of it is ordered by the load.
"""
from __future__ import annotations

from elfpatch.elf.const import SHN_UNDEF
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfPatchError
from elfpatch.fs.source import Source


def _exported(path: str) -> set[str]:
    """The names an object's dynamic symbol table defines."""
    with Source(path) as src:
        elf = ElfFile(src.data, path)
        return {sym.name for t in elf.symbol_tables() if t.name == ".dynsym" for sym in t
                if sym.st_shndx != SHN_UNDEF and sym.name}


def defined_before(path: str) -> frozenset[str] | None:
    """The symbols defined by the objects the load of ``path`` initializes before it (None: the load could not
    be resolved; nothing is then taken as ordered)."""
    from elfpatch.elf.loadorder import resolve

    try:
        load = resolve(path)
        order = list(load.init_order)
        earlier = order[: order.index(0)] if 0 in order else []
        names: set[str] = set()
        for i in earlier:
            names |= _exported(load.objects[i].info.path)
    except (ElfPatchError, OSError):
        return None
    return frozenset(names)
