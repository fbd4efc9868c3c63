"""One home for each ELF fact: constants in elfconst, the header, the symbol entry and the dynamic strings decoded
in elffile only, and loadorder independent of inits. Read from the sources, so a second copy fails here."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import elfpatch
from elfpatch.elf.file import ElfFile

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
    assert "elfpatch.inits.order" not in imported


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
