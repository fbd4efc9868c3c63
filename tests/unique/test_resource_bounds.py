"""Inputs that claim more than they hold — billions of symbols, huge hash tables, archive members and wheel
members far larger than the file — are refused without allocating more than the file's own size: every count
and size is checked against the bytes actually there before anything is sized from it."""
from __future__ import annotations

import shutil
import struct
import subprocess
import tracemalloc
import zipfile
from pathlib import Path
from typing import Callable

import pytest
from targets.helpers import build_wheel, wheel_files

import elfpatch
from elfpatch.elf.const import DT_GNU_HASH, DT_STRSZ, PN_XNUM, PT_DYNAMIC
from elfpatch.elf.file import ElfFile
from unique.helpers import drop_section_headers
from unique.lies import set_shdr
from unique.test_broken_input import Mutation, dynamic_entry, hash_table_field, poke, poke_section

SLACK = 256 << 10  # Python objects of one scan (reports, a few headers): far below any honest claim here
BILLIONS = 24 * 3_000_000_000  # sh_size of a .dynsym with three billion Elf64_Sym entries

def section_zero(field: str, value: int) -> Mutation:
    """Set a field of section header 0 (where extended numbering keeps the real counts)."""
    def mutate(data: bytearray, elf: ElfFile) -> None:
        set_shdr(data, elf, 0, field, value)
    return mutate


def both(*mutations: Mutation) -> Mutation:
    def mutate(data: bytearray, elf: ElfFile) -> None:
        for m in mutations:
            m(data, elf)
    return mutate


def no_dt_null(data: bytearray, elf: ElfFile) -> None:
    """The dynamic section's DT_NULL becomes another tag: the walk goes on to the end of the loaded bytes."""
    seg = next(s for s in elf.segments if s.p_type == PT_DYNAMIC)
    pos = seg.p_offset + len(elf.dynamic()) * 16
    struct.pack_into("<q", data, pos, 0x6FFF_F000)


# name: (drop section headers first, mutation, refused). Not refused: the lie is in the section view alone, and
# the file is processed from the loader's view (with a warning) -- still within the file's size.
ELF_LIES: dict[str, tuple[bool, Mutation, bool]] = {
    "shnum-65535": (False, poke(0x3C, "H", 0xFFFF), False),
    "dynsym-3e9-symbols": (False, poke_section(".dynsym", "sh_size", BILLIONS), False),
    "symtab-3e9-symbols": (False, poke_section(".symtab", "sh_size", BILLIONS), False),
    "dynsym-2^60-bytes": (False, poke_section(".dynsym", "sh_size", 1 << 60), False),
    "gnu-hash-2^31-buckets": (True, hash_table_field(DT_GNU_HASH, 0, 0x7FFF_FFFF), True),
    "gnu-hash-2^31-bloom-words": (True, hash_table_field(DT_GNU_HASH, 2, 0x7FFF_FFFF), True),
    "gnu-hash-2^31-buckets-with-sections": (False, hash_table_field(DT_GNU_HASH, 0, 0x7FFF_FFFF), True),
    "dynstr-2^40-bytes": (True, dynamic_entry(DT_STRSZ, 1 << 40), True),
    "pn-xnum-2^32-phdrs": (False, both(poke(0x38, "H", PN_XNUM), section_zero("sh_info", 0xFFFF_FFFF)), True),
    "shnum0-2^60-sections": (False, both(poke(0x3C, "H", 0), section_zero("sh_size", 1 << 60)), False),
    "shstrndx-xindex-2^32": (False, both(poke(0x3E, "H", 0xFFFF), section_zero("sh_link", 0xFFFF_FFFF)), False),
    "dynamic-without-dt-null": (True, no_dt_null, False),
}


def peak_of_scan(path: Path) -> tuple[int, str]:
    """Peak traced allocation of one elfpatch.scan(path), and the error it raised."""
    tracemalloc.start()
    try:
        elfpatch.scan(path)
    except elfpatch.ElfPatchError as exc:
        error = str(exc)
    else:
        error = ""
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, error


def assert_bounded(path: Path, mutate: Callable[[bytearray], None], refused: bool = True) -> None:
    """Scan ``path`` as it is (paying imports and first-call caches), then with ``mutate`` applied: refused,
    naming the file (or, ``refused`` False, read from the loader's view), with no more allocated than the
    file's size, and the file untouched."""
    elfpatch.scan(path)
    data = bytearray(path.read_bytes())
    mutate(data)
    before = bytes(data)
    path.write_bytes(before)
    peak, error = peak_of_scan(path)
    if refused:
        assert error.startswith(str(path)), f"refused, naming the file: {error!r}"
    else:
        assert error == "", error
    assert peak < len(before) + SLACK, f"{peak} bytes allocated for a {len(before)}-byte file"
    assert path.read_bytes() == before


@pytest.mark.parametrize("name", sorted(ELF_LIES))
def test_elf_claims_are_refused_within_the_file_size(unique_build: Path, tmp_path: Path, name: str) -> None:
    no_sections, mutate, refused = ELF_LIES[name]
    path = tmp_path / "lib.so"
    shutil.copy(unique_build / "libholder_v1.so", path)
    if no_sections:
        drop_section_headers(path)
    assert_bounded(path, lambda data: mutate(data, ElfFile(bytes(data), str(path))), refused)
    if not refused:
        (report,) = elfpatch.scan(path)
        assert {s.table for s in report.symbols} >= {".dynsym"} and len(report.symbols) >= 2
        assert report.warnings or no_sections or len(report.symbols) == 4, "a table not read is reported"


def poke_ar_size(value: bytes) -> Callable[[bytearray], None]:
    def mutate(data: bytearray) -> None:
        member = data.index(b"\x7fELF") - 60  # the ELF member's header
        data[member + 48 : member + 58] = value.ljust(10)
    return mutate


def poke_zip(signature: bytes, offset: int, value: int, width: int) -> Callable[[bytearray], None]:
    """Set a field of the last record with ``signature`` (central entry or end record)."""
    def mutate(data: bytearray) -> None:
        pos = data.rfind(signature)
        data[pos + offset : pos + offset + width] = value.to_bytes(width, "little")
    return mutate


CONTAINER_LIES: dict[str, Callable[[bytearray], None]] = {
    "ar-member-9999999999-bytes": poke_ar_size(b"9999999999"),
    "whl-member-inflates-to-4GB": poke_zip(b"PK\x01\x02", 24, 0xFFFF_FFF0, 4),
    "whl-member-4GB-compressed": poke_zip(b"PK\x01\x02", 20, 0xFFFF_FFF0, 4),
    "whl-65535-entries": poke_zip(b"PK\x05\x06", 10, 0xFFFF, 2),
    "whl-directory-4GB": poke_zip(b"PK\x05\x06", 12, 0xFFFF_FFF0, 4),
}


@pytest.mark.parametrize("name", sorted(CONTAINER_LIES))
def test_container_claims_are_refused_within_the_file_size(unique_build: Path, tmp_path: Path, name: str) -> None:
    if name.startswith("ar-"):
        path = tmp_path / "libholder.a"
        shutil.copy(unique_build / "holder_v1.o", tmp_path / "holder.o")
        subprocess.run(["ar", "rcs", str(path), "holder.o"], check=True, cwd=tmp_path)
    else:
        files = wheel_files(unique_build / "libholder_v1.so")
        files["holderpkg/zz.so"] = (unique_build / "libholder_v1.so").read_bytes()  # the last central entry
        path = build_wheel(tmp_path, files, record=False)
        with zipfile.ZipFile(path) as z:
            assert z.namelist()[-1] == "holderpkg/zz.so"
    assert_bounded(path, CONTAINER_LIES[name])



@pytest.mark.parametrize("length", [63, 64, 65, 320, 321, 415])
def test_the_dynamic_section_is_read_to_its_dt_null_across_slices(tmp_path: Path, length: int) -> None:
    """The dynamic section is read in slices (64 entries, then 256 at a time): a DT_NULL on either side of a
    slice's edge ends it there, and every entry before it is read, in order."""
    src, lib = tmp_path / "dt.c", tmp_path / "libdt.so"
    src.write_text("int f(void) { return 1; }\n")
    # 400 spare DT_NULL entries after the real ones: room to move the end of the section
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,--spare-dynamic-tags=400", "-o", str(lib), str(src)], check=True)
    data = bytearray(lib.read_bytes())
    elf = ElfFile(bytes(data))
    honest = elf.dynamic()
    seg = next(s for s in elf.segments if s.p_type == PT_DYNAMIC)
    assert seg.p_filesz // 16 > length > len(honest)
    fillers = [(0x6FFF_F000 + i, i) for i in range(length - len(honest))]  # tags no reader acts on
    for i, entry in enumerate(fillers):
        struct.pack_into(elf.endian + "qQ", data, seg.p_offset + (len(honest) + i) * 16, *entry)
    assert ElfFile(bytes(data)).dynamic() == honest + fillers


def test_structs_are_shared_between_images_and_bounded(unique_build: Path) -> None:
    """A Struct is made once per format and byte order for every image (not once per image); formats a
    caller makes up (a count in the format, say) do not grow that cache past its bound."""
    from elfpatch.elf import file as elffile

    data = (unique_build / "libholder_v1.so").read_bytes()
    a, b = ElfFile(data), ElfFile(data)
    assert a.struct("IIII") is b.struct("IIII") and a.struct("IIII").format == a.endian + "IIII"
    for n in range(1, 3 * elffile._MAX_STRUCTS):
        assert a.struct(f"{n}I").size == 4 * n
    assert len(elffile._STRUCTS[a.endian]) <= elffile._MAX_STRUCTS
