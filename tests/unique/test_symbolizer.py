"""The one symbolizer (elf/symbolize.py) on what names nothing: mapping symbols and local labels, and a name
offset past the string table. Each test names the guarantee it checks, through the `inits` listing and the
Image the --siof/--dtors analysis reads alike."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import run_main
from jsonschema_check import cli_json

from elfpatch.elf.file import ElfFile, SymbolTable

# An untyped local symbol, then a label at its address, later in .symtab; the address is a constructor's.
LABEL_LAST_S = """
.text
real_name:
{label}:
    ret
.section .init_array,"aw"
.quad real_name
"""
# A constructor at an address named by an untyped local symbol and a function symbol.
TWO_NAMES_S = """
.text
real_name:
.type bad_fn, @function
bad_fn:
    ret
.section .init_array,"aw"
.quad real_name
"""


def build(tmp_path: Path, source: str) -> Path:
    """A shared library of ``source`` (no C library; local labels kept in .symtab)."""
    (tmp_path / "s.s").write_text(source)
    lib = tmp_path / "libs.so"
    subprocess.run(["gcc", "-shared", "-nostdlib", "-Wa,-L", "-o", str(lib), str(tmp_path / "s.s")], check=True)
    return lib


def symtab(lib: Path) -> SymbolTable:
    return next(t for t in ElfFile(lib.read_bytes(), str(lib)).symbol_tables() if t.name == ".symtab")


def index_of(table: SymbolTable, name: str) -> int:
    return next(i for i in range(table.count) if table.symbol(i).name == name)


def named(lib: Path) -> tuple[dict, str | None]:
    """The constructor's entry in `inits --dtors --json` (the listing, with the analysis run), and the name the
    analysis's Image gives its address."""
    from elfpatch.inits.image import Image

    proc = run_main("inits", "--dtors", "--json", str(lib))
    assert proc.returncode == 0, proc.stderr
    (entry,) = cli_json(proc.stdout)["files"]
    (ctor,) = [e for e in entry["init"] if e["kind"] == "init_array"]
    return entry | {"ctor": ctor}, Image(ElfFile(lib.read_bytes(), str(lib))).function_name(ctor["address"])


@pytest.mark.parametrize("label", ['"$x"', ".Lhere"], ids=["mapping symbol", "local label"])
def test_a_label_after_a_symbol_never_hides_it(label: str, tmp_path: Path) -> None:
    """Guarantee: a mapping symbol or local label names nothing, so it never hides a real symbol. An untyped
    local symbol and, later in .symtab, a label at the same address (a constructor's): the listing and the
    analysis both name it by the symbol (the listing printed "?": the label had replaced it, then was
    dropped)."""
    lib = build(tmp_path, LABEL_LAST_S.format(label=label))
    table = symtab(lib)
    assert index_of(table, "real_name") < index_of(table, label.strip('"'))  # the label comes last
    entry, analysed = named(lib)
    assert entry["ctor"]["symbol"] == "real_name" and analysed == "real_name"


@pytest.mark.parametrize("faulty", ["bad_fn", "real_name"], ids=["function entry", "untyped entry"])
def test_a_name_offset_past_the_string_table_is_one_behaviour(faulty: str, tmp_path: Path) -> None:
    """Guarantee: a malformed table gets one behaviour, whatever the entry's type: an entry whose name offset
    is past the string table names nothing, the listing (and the analysis) goes on with the next symbol at
    its address, and the file's warnings say so. (A function entry failed the whole listing with a
    ParseError; an untyped one was dropped without a word.)"""
    lib = build(tmp_path, TWO_NAMES_S)
    table = symtab(lib)
    data = bytearray(lib.read_bytes())
    at = table.offset + index_of(table, faulty) * table.entsize  # st_name: an entry's first 4 bytes
    data[at:at + 4] = (table.str_size + 64).to_bytes(4, "little")
    lib.write_bytes(bytes(data))
    entry, analysed = named(lib)
    other = "real_name" if faulty == "bad_fn" else "bad_fn"
    assert entry["ctor"]["symbol"] == other and analysed == other
    assert [w for w in entry["warnings"] if ".symtab: the name offset of 1 symbol is past its string table" in w], entry
