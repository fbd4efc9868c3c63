"""Inputs that claim more than they hold — billions of symbols, huge hash tables, archive members and wheel
members far larger than the file — are refused without allocating more than the file's own size: every count
and size is checked against the bytes actually there before anything is sized from it."""
from __future__ import annotations

import shutil
import subprocess
import tracemalloc
import zipfile
from pathlib import Path
from typing import Callable

import pytest
from targets.helpers import build_wheel, wheel_files

import elfpatch
from elfpatch.elffile import DT_GNU_HASH, DT_STRSZ, ElfFile
from unique.helpers import drop_section_headers
from unique.test_broken_input import Mutation, dynamic_entry, hash_table_field, poke, poke_section

SLACK = 256 << 10  # Python objects of one scan (reports, a few headers): far below any honest claim here
BILLIONS = 24 * 3_000_000_000  # sh_size of a .dynsym with three billion Elf64_Sym entries

ELF_LIES: dict[str, tuple[bool, Mutation]] = {  # name: (drop section headers first, mutation)
    "shnum-65535": (False, poke(0x3C, "H", 0xFFFF)),
    "dynsym-3e9-symbols": (False, poke_section(".dynsym", "sh_size", BILLIONS)),
    "symtab-3e9-symbols": (False, poke_section(".symtab", "sh_size", BILLIONS)),
    "dynsym-2^60-bytes": (False, poke_section(".dynsym", "sh_size", 1 << 60)),
    "gnu-hash-2^31-buckets": (True, hash_table_field(DT_GNU_HASH, 0, 0x7FFF_FFFF)),
    "gnu-hash-2^31-bloom-words": (True, hash_table_field(DT_GNU_HASH, 2, 0x7FFF_FFFF)),
    "dynstr-2^40-bytes": (True, dynamic_entry(DT_STRSZ, 1 << 40)),
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


def assert_bounded(path: Path, mutate: Callable[[bytearray], None]) -> None:
    """Scan ``path`` as it is (paying imports and first-call caches), then with ``mutate`` applied: refused,
    naming the file, with no more allocated than the file's size, and the file untouched."""
    elfpatch.scan(path)
    data = bytearray(path.read_bytes())
    mutate(data)
    before = bytes(data)
    path.write_bytes(before)
    peak, error = peak_of_scan(path)
    assert error.startswith(str(path)), f"refused, naming the file: {error!r}"
    assert peak < len(before) + SLACK, f"{peak} bytes allocated for a {len(before)}-byte file"
    assert path.read_bytes() == before


@pytest.mark.parametrize("name", sorted(ELF_LIES))
def test_elf_claims_are_refused_within_the_file_size(unique_build: Path, tmp_path: Path, name: str) -> None:
    no_sections, mutate = ELF_LIES[name]
    path = tmp_path / "lib.so"
    shutil.copy(unique_build / "libholder_v1.so", path)
    if no_sections:
        drop_section_headers(path)
    assert_bounded(path, lambda data: mutate(data, ElfFile(bytes(data), str(path))))


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

