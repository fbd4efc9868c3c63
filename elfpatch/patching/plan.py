"""Edits are recorded first, checked against the bytes they replace, applied once, then verified.

An ImagePlan belongs to one ELF image at byte offset ``base`` of a file (0 for a plain ELF file, the
member's data offset inside an ar archive). It remembers every st_info byte of every symbol table as it was,
so that verification can prove that exactly the planned bytes, and no other st_info byte, changed.
"""
from __future__ import annotations

from elfpatch.elf.const import STB_GNU_UNIQUE
from elfpatch.elf.file import ElfFile
from elfpatch.elf.records import Record
from elfpatch.elf.symbols import (
    NameFilter,
    binding_name,
    demangle,
    osabi_name,
    rebind,
    unique_applies,
    unique_indexes,
)
from elfpatch.errors import UnsupportedError, VerifyError
from elfpatch.patching.edits import Edit
from elfpatch.report import SymbolRow


class TableState(Record):
    name: str
    offset: int
    nsyms: int
    info: bytes  # every entry's st_info before the edit


class ImagePlan:
    """The planned edits of one image, the report rows they came from, and the tables as they were."""

    def __init__(self, base: int = 0) -> None:
        self.base = base
        self.tables: list[TableState] = []
        self.rows: list[SymbolRow] = []
        self.edits: list[Edit] = []
        self.kept = 0
        self.warnings: list[str] = []  # where the section headers and the loader's view part ways


def plan_image(elf: ElfFile, to: int, names: NameFilter, base: int = 0) -> ImagePlan:
    """Find the unique symbols of both tables, select them by name, and plan their rebinding to ``to``.

    Raises UnsupportedError for an OSABI where binding 10 is not STB_GNU_UNIQUE.
    """
    tables = elf.symbol_tables()
    plan = ImagePlan(base)
    plan.warnings = list(elf.warnings)
    target = binding_name(to)
    seen: set[int] = set()  # st_info bytes two views share are edited (and reported) once
    for table in tables:
        info = table.info_bytes()
        plan.tables.append(TableState(table.name, table.offset, table.count, info))
        hits = unique_indexes(info)
        if hits and not unique_applies(elf.osabi):
            raise UnsupportedError(f"EI_OSABI {elf.osabi} ({osabi_name(elf.osabi)}) gives binding 10 another "
                                   "meaning than STB_GNU_UNIQUE; left alone", elf.path)
        for index in hits:
            offset = table.info_offset(index)
            if offset in seen:
                continue
            seen.add(offset)
            sym = table.symbol(index)
            pretty = demangle(sym.name)
            blind = names.blind_spot(sym.name, pretty)
            if blind is not None and blind not in plan.warnings:
                plan.warnings.append(blind)
            if not names.selects(sym.name, pretty):
                plan.kept += 1
                continue
            plan.rows.append(SymbolRow(sym.name, pretty, table.name, index, binding_name(STB_GNU_UNIQUE), target))
            plan.edits.append(Edit(base + sym.info_offset, sym.st_info, rebind(sym.st_info, to),
                                   f"{table.name}[{index}] {sym.name}"))
    return plan


def verify_image(elf: ElfFile, plan: ImagePlan) -> None:
    """Re-read the symbol tables of the written image and confirm that they equal the plan: the planned
    st_info bytes have their new value and every other st_info byte is as it was."""
    tables = elf.symbol_tables()
    if [(t.name, t.offset, t.count) for t in tables] != [(t.name, t.offset, t.nsyms) for t in plan.tables]:
        raise VerifyError("symbol tables differ from the ones planned against")
    changes = {e.offset - plan.base: e.new for e in plan.edits}
    for table, before in zip(tables, plan.tables):
        want = bytearray(before.info)
        first = table.info_offset(0)
        for off, new in changes.items():
            i, rem = divmod(off - first, table.entsize)
            if rem == 0 and 0 <= i < len(want):
                want[i] = new
        if table.info_bytes() != want:
            raise VerifyError(f"{table.name}: written symbol bindings differ from the plan")

