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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from elfpatch.elf.loadorder import Load


def _exported(path: str, undefined: bool = False) -> set[str]:
    """The names an object's dynamic symbol table defines (``undefined``: those it imports)."""
    with Source(path) as src:
        elf = ElfFile(src.data, path)
        return {sym.name for t in elf.symbol_tables() if t.name == ".dynsym" for sym in t
                if (sym.st_shndx == SHN_UNDEF) == undefined and sym.name}


def defined_before(load: Load) -> frozenset[str] | None:
    """The symbols defined by the objects ``load`` initializes before its root (None: one of them could not be
    read; nothing is then taken as ordered). The caller resolves the load once (`inits --deps` lists it too)."""
    order = list(load.init_order)
    earlier = order[: order.index(0)] if 0 in order else []
    names: set[str] = set()
    try:
        for i in earlier:
            names |= _exported(load.objects[i].info.path)
    except (ElfPatchError, OSError):
        return None
    return frozenset(names)


def defined_in(load: Load) -> frozenset[str] | None:
    """The symbols some object of ``load`` defines (None: one could not be read): a function the root calls that
    none defines is its loader's (a program that dlopens it, with -rdynamic) or no one's."""
    names: set[str] = set()
    try:
        for o in load.objects:
            names |= _exported(o.info.path)
    except (ElfPatchError, OSError):
        return None
    return frozenset(names)


def imported_by_others(load: Load) -> frozenset[str] | None:
    """The symbols the objects of ``load`` other than its root import (None: one could not be read): the
    root's exported objects their code may read."""
    names: set[str] = set()
    try:
        for o in load.objects[1:]:
            names |= _exported(o.info.path, undefined=True)
    except (ElfPatchError, OSError):
        return None
    return frozenset(names)
