"""The column-wise symbol readers the `inits` analysis uses on large tables (SymbolTable.names_of, and the
STT_FILE source lookup of the listing) give what a walk over every entry gives: checked against that walk, the
reference, on native fixture builds (x86-64 and AArch64, PIE and shared, GCC and clang), and on a table whose
name offset lies past its string table (the same ParseError)."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest
from helpers import NATIVE

from elfpatch.elf.const import SHN_UNDEF, STB_LOCAL, STT_FILE, STT_FUNC, STT_OBJECT, st_bind, st_type
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ParseError
from elfpatch.inits.order import _file_of


def _builds() -> list[Path]:
    """The SIOF fixtures' x86-64 and AArch64 builds (PIE, shared, GCC and clang, -O0 and -O2), and the listing's."""
    dirs = ("siof/build/gcc-O0", "siof/build/clang-O2", "siof/build/a64-gcc-O2", "siof/build/siof/O2",
            "init_order/build")
    found = sorted(p for d in dirs for p in (NATIVE / d).glob("**/*")
                   if p.is_file() and p.read_bytes()[:4] == b"\x7fELF")
    assert found, "make fixtures builds the native fixtures"
    return found


def _tables(path: Path) -> list:
    return ElfFile(path.read_bytes(), str(path)).symbol_tables()


@pytest.mark.parametrize("defined", [True, False])
@pytest.mark.parametrize("typ", [None, STT_OBJECT, STT_FUNC])
def test_names_of_is_the_walk_over_every_entry(defined: bool, typ: int | None) -> None:
    """Guarantee: names_of(defined, type) lists, in table order, exactly the non-empty names of the entries
    whose st_shndx is (not) SHN_UNDEF and whose type is ``typ``."""
    checked = 0
    for path in _builds():
        for table in _tables(path):
            want = [s.name for s in table if (s.st_shndx != SHN_UNDEF) == defined
                    and (typ is None or s.type == typ) and s.name]
            assert table.names_of(defined, typ) == want, (path, table.name)
            checked += len(want)
    assert checked  # some table had such names


def _file_of_walk(table, wanted: set[int]) -> dict[int, int]:
    """The reference: one pass over the local symbols, the last STT_FILE's st_name carried along."""
    current = None
    found: dict[int, int] = {}
    for st_name, value, _size, info, _other, _shndx in table.entries():
        if st_bind(info) != STB_LOCAL:
            break
        if st_type(info) == STT_FILE:
            current = st_name or None
        elif st_type(info) == STT_FUNC and value in wanted and current is not None and value not in found:
            found[value] = current
    return found


def test_file_of_is_the_walk_over_the_local_symbols() -> None:
    """Guarantee: the source file of a function address is the STT_FILE symbol last before its first local
    STT_FUNC symbol that has one, as the walk over the local symbols finds it."""
    hits = 0
    for path in _builds():
        for table in _tables(path):
            if table.name != ".symtab":
                continue
            wanted = {s.st_value for s in table if s.type == STT_FUNC}
            want = _file_of_walk(table, wanted)
            assert _file_of(table, wanted) == want, path
            hits += len(want)
    assert hits


def test_names_of_a_name_past_the_string_table_is_the_parse_error(tmp_path: Path) -> None:
    """Guarantee: a selected entry whose name offset is past the string table fails as symbol() fails."""
    path, table, i = next((p, t, i) for p in _builds() for t in _tables(p) if t.name == ".dynsym"
                          for i in range(t.count) if t.symbol(i).st_shndx != SHN_UNDEF and t.symbol(i).name)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, table.offset + i * table.entsize, table.str_size + 5)
    bad = next(t for t in ElfFile(bytes(data), str(path)).symbol_tables() if t.name == ".dynsym")
    with pytest.raises(ParseError) as want:
        bad.symbol(i)
    with pytest.raises(ParseError) as got:
        bad.names_of(True)
    assert str(got.value) == str(want.value)


def test_symbolizer_asked_about_some_addresses_names_them_as_the_whole_table() -> None:
    """Guarantee: TableSymbols(table, only) names each address of ``only`` as TableSymbols(table) does (the
    listing asks about its few initializers only), also where several symbols share an address."""
    from elfpatch.elf.symbolize import TableSymbols

    named = 0
    for path in _builds():
        for table in _tables(path):
            whole = TableSymbols(table)
            only = set(list(whole.functions)[::3]) | {0, 1}
            got = TableSymbols(table, only).function_names(only)
            assert got == whole.function_names(only), (path, table.name)
            named += len(got)
    assert named


def test_symbolizer_asked_about_some_addresses_still_warns_of_names_past_the_table(tmp_path: Path) -> None:
    """Guarantee: a name offset past the string table is warned about whatever addresses are asked about."""
    from elfpatch.elf.symbolize import TableSymbols

    path = next(p for p in _builds() if any(t.name == ".symtab" for t in _tables(p)))
    data = bytearray(path.read_bytes())
    table = next(t for t in ElfFile(bytes(data), str(path)).symbol_tables() if t.name == ".symtab")
    i = next(i for i in range(table.count) if table.symbol(i).type == STT_FUNC and table.symbol(i).st_shndx)
    struct.pack_into("<I", data, table.offset + i * table.entsize, table.str_size + 5)
    elf = ElfFile(bytes(data), str(path))
    TableSymbols(next(t for t in elf.symbol_tables() if t.name == ".symtab"), {1})
    assert any("past its string table" in w for w in elf.warnings)


def test_the_symbolizer_leaves_no_view_of_a_mapped_file_open() -> None:
    """Guarantee: ranking a table's labels reads its string table through a view that is released (a mapped
    file can be closed after; an open view would make mmap.close() fail)."""
    import mmap

    from elfpatch.elf.symbolize import TableSymbols

    path = next(p for p in _builds() if any(t.name == ".symtab" for t in _tables(p)))
    with path.open("rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    table = next(t for t in ElfFile(mapped, str(path)).symbol_tables() if t.name == ".symtab")
    ranked = TableSymbols(table)
    assert ranked.functions
    mapped.close()  # BufferError if a view were still exported
