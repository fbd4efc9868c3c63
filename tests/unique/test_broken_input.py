"""Broken inputs: one stderr line naming the file, exit status 2, the file byte-identical, in every mode."""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Callable

import pytest
from helpers import run_main
from jsonschema_check import cli_json

from elfpatch.elf.const import DT_GNU_HASH, DT_HASH, DT_SYMTAB, PT_DYNAMIC
from elfpatch.elf.file import ElfFile
from unique.helpers import drop_section_headers, info_offsets

Mutation = Callable[[bytearray, ElfFile], None]
SHDR_FIELDS = {"sh_offset": (24, "Q"), "sh_size": (32, "Q"), "sh_link": (40, "I"), "sh_entsize": (56, "Q")}


def poke_section(name: str, field: str, value: int) -> Mutation:
    def mutate(data: bytearray, elf: ElfFile) -> None:
        sec = elf.section_by_name(name)
        off, fmt = SHDR_FIELDS[field]
        struct.pack_into("<" + fmt, data, elf.e_shoff + sec.shndx * elf.e_shentsize + off, value)
    return mutate


def poke(offset: int, fmt: str, value: int) -> Mutation:
    def mutate(data: bytearray, elf: ElfFile) -> None:
        struct.pack_into("<" + fmt, data, offset, value)
    return mutate


def truncate(size: int) -> Mutation:
    def mutate(data: bytearray, elf: ElfFile) -> None:
        n = size if size >= 0 else len(data) + size
        del data[n:]
    return mutate


def unique_name_out_of_range(data: bytearray, elf: ElfFile) -> None:
    table = next(t for t in elf.symbol_tables() if t.name == ".dynsym")
    index = next(s.symndx for s in table if s.bind == 10)
    struct.pack_into("<I", data, table.offset + index * table.entsize, table.str_size + 5)


def unterminated_dynstr(data: bytearray, elf: ElfFile) -> None:
    sec = elf.section_by_name(".dynstr")
    data[sec.sh_offset : sec.sh_offset + sec.sh_size] = b"A" * sec.sh_size


def dynamic_entry(tag: int, value: int) -> Mutation:
    def mutate(data: bytearray, elf: ElfFile) -> None:
        seg = next(s for s in elf.segments if s.p_type == PT_DYNAMIC)
        for pos in range(seg.p_offset, seg.p_offset + seg.p_filesz, 16):
            if struct.unpack_from("<q", data, pos)[0] == tag:
                struct.pack_into("<Q", data, pos + 8, value)
                return
        raise AssertionError(f"no dynamic tag {tag:#x}")
    return mutate


def hash_table_field(tag: int, index: int, value: int) -> Mutation:
    def mutate(data: bytearray, elf: ElfFile) -> None:
        off = elf.vaddr_to_offset(elf.dynamic_value(tag), 16)
        struct.pack_into("<I", data, off + 4 * index, value)
    return mutate


def dynamic_vaddr(value: int) -> Mutation:
    def mutate(data: bytearray, elf: ElfFile) -> None:
        index = next(i for i, s in enumerate(elf.segments) if s.p_type == PT_DYNAMIC)
        struct.pack_into("<Q", data, elf.e_phoff + index * elf.e_phentsize + 16, value)
    return mutate


# The loader's view (PT_DYNAMIC, DT_SYMTAB, its strings) or the file itself is broken: nothing usable remains.
WITH_SECTIONS: dict[str, Mutation] = {
    "empty": truncate(0),
    "ident-only": truncate(15),
    "header-cut": truncate(40),
    "half": truncate(-5000),
    "bad-class": poke(4, "B", 3),
    "bad-data": poke(5, "B", 0),
    "phoff-past-end": poke(0x20, "Q", 1 << 50),
    "name-out-of-range": unique_name_out_of_range,
    "unterminated-strings": unterminated_dynstr,
    "dynamic-vaddr-not-loaded": dynamic_vaddr(0x7FFF_0000_0000),
    "symtab-not-loaded": dynamic_entry(DT_SYMTAB, 0x7FFF_0000_0000),
}

# Only the section view is broken: the loader's view is complete, so the file is processed from it, and the
# report says what could not be read (these were errors before the loader's view was always read).
SECTION_VIEW_BROKEN: dict[str, Mutation] = {
    "last-byte-cut": truncate(-1),
    "shoff-past-end": poke(0x28, "Q", 1 << 40),
    "shoff-overflow": poke(0x28, "Q", (1 << 64) - 8),
    "shnum-huge": poke(0x3C, "H", 0xFFFF),
    "shentsize-zero": poke(0x3A, "H", 0),
    "dynsym-size-huge": poke_section(".dynsym", "sh_size", 1 << 60),
    "dynsym-size-odd": poke_section(".dynsym", "sh_size", 25),
    "dynsym-offset-past-end": poke_section(".dynsym", "sh_offset", 1 << 33),
    "dynsym-entsize-zero-size": poke_section(".dynsym", "sh_entsize", 7),
    "dynsym-link-out-of-range": poke_section(".dynsym", "sh_link", 999),
    "dynsym-link-to-itself": poke_section(".dynsym", "sh_link", 0),
    "symtab-link-not-strtab": poke_section(".symtab", "sh_link", 1),
    "dynstr-past-end": poke_section(".dynstr", "sh_offset", 1 << 40),
    # in step with .dynsym, but over the ELF header and the hash table: never edited
    "symtab-over-headers": poke_section(".symtab", "sh_offset", 0),
    "symtab-over-dynstr": poke_section(".symtab", "sh_offset", 940),  # over .dynstr
}

WITHOUT_SECTIONS: dict[str, Mutation] = {
    "symtab-not-loaded": dynamic_entry(DT_SYMTAB, 0x7FFF_0000_0000),
    "gnu-hash-not-loaded": dynamic_entry(DT_GNU_HASH, 0x7FFF_0000_0000),
    "gnu-hash-buckets-huge": hash_table_field(DT_GNU_HASH, 0, 0x7FFF_FFFF),
    "gnu-hash-bloom-huge": hash_table_field(DT_GNU_HASH, 2, 0x7FFF_FFFF),
}


def broken(src: Path, tmp_path: Path, name: str, mutate: Mutation) -> Path:
    data = bytearray(src.read_bytes())
    mutate(data, ElfFile(bytes(data), str(src)))
    path = tmp_path / f"{name}.so"
    path.write_bytes(bytes(data))
    return path


def assert_rejected(path: Path) -> None:
    before = path.read_bytes()
    for mode in ([], ["--check"], ["-n"], ["--inplace"], ["--json"]):
        proc = run_main("unique", *mode, str(path))
        assert proc.returncode == 2, (mode, proc.stdout, proc.stderr)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"elfpatch: error: {path}: "), (mode, proc.stderr)
        assert path.read_bytes() == before, mode
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("name", sorted(WITH_SECTIONS))
def test_broken_file_is_rejected(unique_build: Path, tmp_path: Path, name: str) -> None:
    assert_rejected(broken(unique_build / "libholder_v1.so", tmp_path, name, WITH_SECTIONS[name]))


@pytest.mark.parametrize("name", sorted(SECTION_VIEW_BROKEN))
def test_broken_section_view_falls_back_to_the_loaders(unique_build: Path, tmp_path: Path, name: str) -> None:

    path = broken(unique_build / "libholder_v1.so", tmp_path, name, SECTION_VIEW_BROKEN[name])
    before = path.read_bytes()
    proc = run_main("unique", "--check", "--json", str(path))
    entry = cli_json(proc.stdout)["files"][0]
    assert proc.returncode == 1 and proc.stderr == "" and path.read_bytes() == before
    assert entry["warnings"], "what could not be read is reported"
    assert {s["name"] for s in entry["symbols"] if s["table"] == ".dynsym"} == {"_ZN6HolderIiE5valueE",
                                                                                  "_ZZ7countervE1c"}
    proc = run_main("unique", str(path), check=True)
    assert "  warning: " in proc.stdout
    changed = [i for i, (x, y) in enumerate(zip(before, path.read_bytes())) if x != y]
    table = ElfFile(before).loader_table()
    loader = {table.info_offset(i) for i in range(table.count)}
    assert set(changed) <= info_offsets(before) and len(loader & set(changed)) == 2
    assert run_main("unique", "--check", str(path)).returncode == 0


@pytest.mark.parametrize("name", sorted(WITHOUT_SECTIONS))
def test_broken_file_without_section_headers_is_rejected(unique_build: Path, tmp_path: Path, name: str) -> None:
    src = tmp_path / "noshdr.so"
    src.write_bytes((unique_build / "libholder_v1.so").read_bytes())
    drop_section_headers(src)
    assert_rejected(broken(src, tmp_path, name, WITHOUT_SECTIONS[name]))


def test_sysv_hash_nchain_larger_than_the_file(tmp_path: Path) -> None:
    import subprocess

    from conftest import NATIVE

    lib = tmp_path / "sysv.so"
    subprocess.run(["g++", "-fPIC", "-shared", "-DHOLDER_VERSION=1", "-Wl,--hash-style=sysv", "-o", str(lib),
                    str(NATIVE / "unique" / "holder.cpp")], check=True)
    drop_section_headers(lib)
    assert_rejected(broken(lib, tmp_path, "nchain", hash_table_field(DT_HASH, 1, 0xFFFF_FFFF)))


def test_directory_and_special_files(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo.so"
    os.mkfifo(fifo)  # must be refused, not opened and waited on
    for path in (Path("/dev/null"), fifo):
        proc = run_main("unique", str(path))
        assert proc.returncode == 2 and proc.stderr.startswith(f"elfpatch: error: {path}: ")
