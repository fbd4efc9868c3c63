"""One home for each ELF fact: constants and the st_info split in elf/const.py, the header, the symbol entry and
the string tables read in elf/file.py only, and loadorder independent of inits. Read from the sources, so a
second copy fails here."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool

import elfpatch
from elfpatch.elf import const
from elfpatch.elf.file import ElfFile, SymbolTable
from elfpatch.elf.loadorder import MULTIARCH, PLATFORM

PACKAGE = Path(elfpatch.__file__).parent
ELF_NAME = re.compile(r"(?:DT|PT|SHT|SHN|STB|STT|ET|EM|DF_1|ELFCLASS|ELFDATA|ELFOSABI|PN)_[A-Z0-9_]+$|ELFMAG$")


def modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(PACKAGE)): ast.parse(p.read_text()) for p in PACKAGE.rglob("*.py")}


def test_elf_constants_are_defined_once() -> None:
    defined: dict[str, list[str]] = {}
    for name, tree in modules().items():
        for node in ast.walk(tree):
            # A name like DT_NEEDED given a string is a label (dlcheck's reasons), not the ELF number.
            if isinstance(node, ast.Assign) and not (isinstance(node.value, ast.Constant)
                                                     and isinstance(node.value.value, str)):
                for target in node.targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    for n in names:
                        if isinstance(n, ast.Name) and ELF_NAME.match(n.id):
                            defined.setdefault(name, []).append(n.id)
    assert list(defined) == ["elf/const.py"], {k: v for k, v in defined.items() if k != "elf/const.py"}


def test_symbol_entries_and_headers_are_decoded_in_elffile_only() -> None:
    for name, tree in modules().items():
        if name == "elf/file.py":
            continue
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not strings & {"IBBHQQ", "IIIBBH"}, f"{name} decodes symbol entries itself"
        assert not any(s.startswith("HHI") for s in strings), f"{name} parses the ELF header itself"


def test_loadorder_does_not_import_inits() -> None:
    tree = modules()["elf/loadorder.py"]
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and (m == "elfpatch.inits" or m.startswith("elfpatch.inits."))}


def test_one_dynamic_string_reader(unique_build: Path) -> None:
    """DT_NEEDED/DT_SONAME strings and the loader's symbol names come from the same DT_STRTAB span, with the
    same bounds: an offset past DT_STRSZ fails the same way whoever asks."""
    elf = ElfFile((unique_build / "libuser.so").read_bytes(), "libuser.so")
    table = elf.loader_table()
    assert elf.dynstr() == (table.str_offset, table.str_size)
    assert "libholder_v1.so" in elf.dynamic_strings(1)  # DT_NEEDED
    size = elf.dynstr()[1]
    for read in (elf.dynamic_string, table.string):
        try:
            read(size)
        except elfpatch.ElfPatchError as exc:
            assert "past" in exc.message
        else:
            raise AssertionError(f"{read} read past DT_STRSZ")


def _text(node: ast.AST) -> str:
    return ast.unparse(node)


def test_st_info_is_split_in_elf_const_only() -> None:
    """Binding and type come out of st_info through st_bind/st_type (and go in through st_info_of), nowhere
    else by hand."""
    for name, tree in modules().items():
        if name == "elf/const.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant) and "info" in _text(node.left):
                split = (isinstance(node.op, ast.RShift) and node.right.value == 4) or (
                    isinstance(node.op, ast.BitAnd) and node.right.value == 0xF)
                assert not split, f"{name}: {_text(node)} splits st_info by hand"


HEADER_FIELDS = {"e_type", "e_machine", "p_type", "p_flags", "sh_type", "sh_flags", "d_tag"}


def test_header_fields_are_compared_with_named_constants() -> None:
    """``p.p_type == 1 and p.p_flags & 1`` says nothing to a reader: PT_LOAD and PF_X do."""
    for name, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
                sides = [node.left, node.right]
            else:
                continue
            fields = [s for s in sides if isinstance(s, ast.Attribute) and s.attr in HEADER_FIELDS]
            numbers = [s for s in sides if isinstance(s, ast.Constant) and type(s.value) is int]
            assert not (fields and numbers), f"{name}: {_text(node)} compares a header field with a raw number"


def test_machines_are_named() -> None:
    """The multiarch and $PLATFORM tables are keyed by EM_ names, and 64-bit SPARC is EM_SPARCV9 (43), the
    e_machine of sparc64 Linux binaries (EM_SPARC, 2, is 32-bit only)."""
    named = {v for k, v in vars(const).items() if k.startswith("EM_")}
    assert {m for m, _bits, _little in MULTIARCH} <= named and set(PLATFORM) <= named
    assert MULTIARCH[(const.EM_SPARCV9, 64, False)] == "sparc64-linux-gnu"
    assert (2, 64, False) not in MULTIARCH


def test_string_tables_are_read_in_elf_file_only() -> None:
    """A name is read through its table (``string``, ``name_head``), which bounds it by the table: no other
    module indexes the file at ``str_offset + st_name`` itself."""
    for name, tree in modules().items():
        if name == "elf/file.py":
            continue
        uses = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "str_offset"]
        assert not uses, f"{name} reads a string table by hand (line {uses[0].lineno if uses else 0})"


def test_name_head_is_bounded_by_its_table(unique_build: Path) -> None:
    elf = ElfFile((unique_build / "libuser.so").read_bytes(), "libuser.so")
    table = elf.loader_table()
    index = next(i for i in range(table.count) if table.symbol(i).name)
    name, st_name = table.symbol(index).name, table.entry(index).st_name
    assert table.name_head(st_name, 2) == name.encode()[:2] and table.name_head(st_name, 999)[:len(name) + 1] \
        == name.encode() + b"\0"
    assert table.name_head(table.str_size - 1, 64) == b"\0"  # the table's last byte, nothing after it
    assert table.name_head(table.str_size, 4) == b"" and table.name_head(-1, 4) == b""


def test_one_symbolizer() -> None:
    """Which symbol names a function's address is decided in elf/symbolize.py only (the `inits` listing and
    the --siof analysis used to rank symbols each their own way)."""
    for name, tree in modules().items():
        if name in ("elf/const.py", "elf/symbolize.py"):
            continue
        if name == "inits/crossload.py":  # which undefined names a module imports (any untyped reference): no rank
            continue
        uses = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "STT_NOTYPE"]
        assert not uses, f"{name} ranks function symbols itself (line {uses[0] if uses else 0})"


SYMBOLS_C = """
void global_fn(void) {}
void weak_alias(void) __attribute__((weak, alias("global_fn")));
static void local_fn(void) {}
void (*keep)(void) = local_fn;
__asm__(".text\\n.globl untyped\\nuntyped:\\n.type local_typed, @function\\nlocal_typed:\\nret\\n"
        ".size local_typed, 1\\n");
int data_object = 1;
"""


def test_the_symbolizer_ranks_functions_before_untyped_and_global_before_local(tmp_path: Path) -> None:
    from elfpatch.elf.symbolize import TableSymbols

    require_tool("gcc", packages="gcc")
    (tmp_path / "s.c").write_text(SYMBOLS_C)
    lib = tmp_path / "libs.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-o", str(lib), str(tmp_path / "s.c")], check=True)
    elf = ElfFile(lib.read_bytes(), str(lib))
    table = next(t for t in elf.symbol_tables() if t.name == ".symtab")
    syms = {s.name: s for s in table}
    symbols = TableSymbols(table)
    at = {a: table.symbol(i).name for a, i in symbols.functions.items()}
    assert at[syms["global_fn"].st_value] in ("global_fn", "weak_alias")  # a global FUNC and a weak one: same rank
    assert at[syms["untyped"].st_value] == "local_typed"  # a LOCAL FUNC beats a GLOBAL NOTYPE
    assert at[syms["local_fn"].st_value] == "local_fn"
    assert syms["data_object"].st_value in symbols.objects and syms["data_object"].st_value not in at
    wanted = {syms["untyped"].st_value, syms["data_object"].st_value}
    assert symbols.function_names(wanted) == {syms["untyped"].st_value: "local_typed"}


# A constructor with global, weak and local aliases at its address; a local constructor with a local alias
# (in .symtab only, so no .dynsym name stands in for it).
ALIASES_C = """
__attribute__((constructor)) void ctor(void) {}
void ctor_alias(void) __attribute__((alias("ctor")));
void ctor_weak(void) __attribute__((weak, alias("ctor")));
static void ctor_local(void) __attribute__((alias("ctor"), used));
__attribute__((constructor)) static void local_ctor(void) {}
static void local_alias(void) __attribute__((alias("local_ctor"), used));
"""


def _aliases_library(tmp_path: Path, elfclass: int) -> Path:
    require_tool("gcc", packages="gcc")
    (tmp_path / "a.c").write_text(ALIASES_C)
    lib = tmp_path / f"liba{elfclass}.so"
    flags = ["-m32", "-nostdlib"] if elfclass == 32 else []  # no 32-bit C library needed: nothing is called
    run = subprocess.run(["gcc", "-shared", "-fPIC", "-O0", *flags, "-o", str(lib), str(tmp_path / "a.c")],
                         capture_output=True, text=True)
    if run.returncode and elfclass == 32:
        pytest.skip(f"gcc cannot build an ELFCLASS32 library here: {run.stderr.strip()[-200:]}")
    assert run.returncode == 0, run.stderr
    assert ElfFile(lib.read_bytes(), str(lib)).elfclass == elfclass
    return lib


def _functions_at(table: SymbolTable, name: str) -> tuple[int, list[tuple[int, str, bool]]]:
    """``name``'s address and the defined function entries there: (index, name, local), in table order."""
    rows = list(table.entries())
    addr = next(r.st_value for i, r in enumerate(rows) if table.symbol(i).name == name)
    return addr, [(i, table.symbol(i).name, const.st_bind(r.st_info) == const.STB_LOCAL)
                  for i, r in enumerate(rows) if r.st_value == addr and r.st_shndx
                  and const.st_type(r.st_info) == const.STT_FUNC]


def _names_at(lib: Path, addr: int) -> tuple[str | None, str | None, str | None]:
    """The name at ``addr`` from the symbolizer, from the Image the --siof/--dtors analysis reads, and in the
    `inits` listing."""
    from elfpatch.elf.symbolize import TableSymbols
    from elfpatch.inits.image import Image
    from elfpatch.inits.order import list_initializers

    elf = ElfFile(lib.read_bytes(), str(lib))
    table = next(t for t in elf.symbol_tables() if t.name == ".symtab")
    index = TableSymbols(table).functions.get(addr)
    listed = [e["symbol"] for e in list_initializers(str(lib))["init"] if e["address"] == addr]
    assert len(listed) == 1
    return (table.symbol(index).name if index is not None else None), Image(elf).function_name(addr), listed[0]


@pytest.mark.parametrize("elfclass", [64, 32])
def test_aliases_are_named_by_the_latest_global_entry_in_the_listing_and_the_analysis(
        tmp_path: Path, elfclass: int) -> None:
    """Aliases of one rank at one address: the entry latest in the table names it, for the `inits` listing as
    for --siof/--dtors (which have named by that rule; the listing used to take the first); a local alias
    never beats a global or weak one."""
    lib = _aliases_library(tmp_path, elfclass)
    elf = ElfFile(lib.read_bytes(), str(lib))
    addr, at = _functions_at(next(t for t in elf.symbol_tables() if t.name == ".symtab"), "ctor")
    exported = [name for _i, name, local in at if not local]
    assert len(exported) == 3 and any(local for *_x, local in at)  # ctor, ctor_alias, ctor_weak; ctor_local
    assert _names_at(lib, addr) == (exported[-1],) * 3  # not exported[0], the first entry


@pytest.mark.parametrize("elfclass", [64, 32])
def test_an_unnamed_function_entry_never_names_its_address(tmp_path: Path, elfclass: int) -> None:
    """A function entry without a name (st_name 0) sharing its address with a named constructor gives way to
    it: the listing printed "?" for the constructor and the analysis an empty name."""
    lib = _aliases_library(tmp_path, elfclass)
    data = bytearray(lib.read_bytes())
    table = next(t for t in ElfFile(bytes(data), str(lib)).symbol_tables() if t.name == ".symtab")
    addr, at = _functions_at(table, "local_ctor")
    assert [name for _i, name, _local in at] in (["local_ctor", "local_alias"], ["local_alias", "local_ctor"])
    latest, kept = at[-1][0], at[0][1]  # the entry that names the address, and the alias left
    start = table.offset + latest * table.entsize  # st_name: the entry's first 4 bytes in both classes
    data[start:start + 4] = bytes(4)
    crafted = tmp_path / "unnamed.so"
    crafted.write_bytes(data)
    rows = list(ElfFile(bytes(data), str(crafted)).symbol_tables())
    assert next(t for t in rows if t.name == ".symtab").entry(latest).st_name == 0
    assert _names_at(crafted, addr) == (kept,) * 3
    assert _names_at(lib, addr) == (at[-1][1],) * 3  # untouched, the latest entry names it
