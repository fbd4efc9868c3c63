"""An image's reader is freed by reference counting alone: no reference cycle between an ElfFile and the symbol
tables it caches. A cycle per image left every image of a tree (and its view of the file) alive until the
cyclic GC ran, which then took a fifth of `unique --check` over a library directory."""
from __future__ import annotations

import gc
import weakref
from pathlib import Path

from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import STB_GLOBAL, NameFilter
from elfpatch.patching.plan import plan_image


def test_an_elf_file_is_freed_without_the_cyclic_gc(unique_build: Path) -> None:
    data = (unique_build / "libholder_v1.so").read_bytes()
    gc.disable()
    try:
        elf = ElfFile(data, "libholder_v1.so")
        plan = plan_image(elf, STB_GLOBAL, NameFilter())  # reads both views: loader table, sections, .symtab
        assert len(plan.rows) == 4 and elf.loader_table() is not None
        ref = weakref.ref(elf)
        del elf
        assert ref() is None, "a reference cycle keeps the image alive until the cyclic GC runs"
    finally:
        gc.enable()
