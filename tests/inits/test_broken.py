"""Bad input: every failure is an ElfPatchError with a one-line message (exit 2 on the command line), never
another exception; files without section headers still list everything the loader runs."""
from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from helpers import case, drop_section_headers, run_main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_own_error

from elfpatch.elf.const import DT_INIT_ARRAYSZ, DT_RELA, DT_RELASZ
from elfpatch.elf.file import ElfFile
from elfpatch.elf.loadorder import LdCache, resolve
from elfpatch.errors import ElfPatchError, ParseError, UnsupportedError
from elfpatch.inits.order import initializers, list_initializers
from inits.helpers import run_trace, slot_map, variant_dir


def dynamic_entry_offset(data: bytes, tag: int) -> int:
    """File offset of the d_val of the first dynamic entry with ``tag`` (64-bit little-endian file)."""
    elf = ElfFile(data)
    seg = next(s for s in elf.segments if s.p_type == 2)
    for pos in range(seg.p_offset, seg.p_offset + seg.p_filesz, 16):
        if struct.unpack_from("<q", data, pos)[0] == tag:
            return pos + 8
    raise AssertionError(f"no tag {tag}")


def listing_or_error(data: bytes) -> object:
    """The listing of ``data``, or None when it was refused with a one-line ParseError or UnsupportedError."""
    try:
        return initializers(ElfFile(data, "mutant"))
    except ElfPatchError as exc:
        assert isinstance(exc, (ParseError, UnsupportedError)), repr(exc)
        assert_own_error(exc)
        return None


def test_truncations(init_build: Path) -> None:
    """A cut file is refused, or (cut only past everything the loader maps) listed with the whole file's entries
    (a cut that loses .symtab loses names only): a truncation never invents, drops or moves an entry."""
    data = (init_build / "gnu" / "libchain_base.so").read_bytes()
    full = listing_or_error(data)
    assert full is not None
    elf = ElfFile(data)
    mapped_end = max(s.p_offset + s.p_filesz for s in elf.segments if s.p_type == 1)  # PT_LOAD
    refused = 0
    for size in list(range(0, 200, 7)) + list(range(200, len(data), 97)):
        listing = listing_or_error(data[:size])
        if size < mapped_end:
            assert listing is None, f"a file cut at {size} of {mapped_end} mapped bytes was listed"
            refused += 1
        else:  # the loader's view is whole: listed (names may be lost with .symtab), or refused
            assert listing is None or skeleton(listing) == skeleton(full), size
    assert refused > 10


def skeleton(listing: dict) -> list[tuple]:
    """What a listing says about the loader's work, names aside: kind, slot and address of each entry."""
    return [(side, e["kind"], e["index"], e["address"]) for side in ("init", "fini") for e in listing[side]]


def test_truncated_on_the_command_line(init_build: Path, tmp_path: Path) -> None:
    path = tmp_path / "cut.so"
    path.write_bytes((init_build / "gnu" / "libchain_base.so").read_bytes()[:5000])
    proc = run_main("inits", str(path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"elfpatch: error: {path}: ")


def test_huge_array_size(init_build: Path) -> None:
    data = bytearray((init_build / "gnu" / "libchain_base.so").read_bytes())
    struct.pack_into("<Q", data, dynamic_entry_offset(data, DT_INIT_ARRAYSZ), 1 << 40)
    with pytest.raises(ParseError, match="not in any loaded segment"):
        initializers(ElfFile(bytes(data), "x"))


def test_relocation_symbol_out_of_range(init_build: Path) -> None:
    """The R_X86_64_64 relocation on chain_base_ctor's slot pointing at a symbol that does not exist."""
    data = bytearray((init_build / "gnu" / "libchain_base.so").read_bytes())
    elf = ElfFile(bytes(data))
    rela = elf.vaddr_to_offset(elf.dynamic_value(DT_RELA))
    for pos in range(rela, rela + elf.dynamic_value(DT_RELASZ), 24):
        if struct.unpack_from("<Q", data, pos + 8)[0] & 0xFFFFFFFF == 1:  # R_X86_64_64
            struct.pack_into("<Q", data, pos + 8, (0xFFFFFF << 32) | 1)
            break
    else:
        raise AssertionError("no R_X86_64_64 relocation in the fixture")
    with pytest.raises(ParseError, match="symbol index"):
        initializers(ElfFile(bytes(data), "x"))


@pytest.mark.slow  # a hypothesis campaign
@settings(max_examples=int(os.environ.get("ELFPATCH_FUZZ_EXAMPLES", "200")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 0x3FFF), st.integers(0, 255)), min_size=1, max_size=8))
@pytest.mark.parametrize("fixture", ["gnu/libchain_base.so", "relr/libchain_base.so",
                                     case("lld/liblegacy.so", needs=["ld.lld"])])
def test_fuzz_byte_pokes(init_build: Path, fixture: str, pokes: list[tuple[int, int]]) -> None:
    """Random bytes written over headers, dynamic section, relocations (RELA, RELR), symbol tables, arrays
    and legacy .ctors."""
    variant, name = fixture.split("/")
    data = bytearray((variant_dir(init_build, variant) / name).read_bytes())
    for offset, value in pokes:
        if offset < len(data):
            data[offset] = value
    listing_or_error(bytes(data))


def test_no_section_headers(init_build: Path, tmp_path: Path) -> None:
    """sstrip-style files: everything comes from PT_DYNAMIC; glibc still runs them, and the slots agree."""
    for name in ("chain_main", "libchain_mid.so", "libchain_base.so"):
        shutil.copy(init_build / "gnu" / name, tmp_path)
        drop_section_headers(tmp_path / name)
    for name in ("chain_main", "libchain_mid.so"):
        full = list_initializers(str(init_build / "gnu" / name))
        bare = list_initializers(str(tmp_path / name))
        assert [(e["kind"], e["index"], e["address"]) for e in bare["init"] + bare["fini"]] == \
               [(e["kind"], e["index"], e["address"]) for e in full["init"] + full["fini"]]
    mid = list_initializers(str(tmp_path / "libchain_mid.so"))
    assert "chain_mid_ctor" in {e["symbol"] for e in mid["init"]}  # from .dynsym, found through PT_DYNAMIC
    trace = run_trace(tmp_path / "chain_main")
    assert trace.slots["main"] == slot_map(list_initializers(str(tmp_path / "chain_main")))
    assert trace.slots["libchain_mid.so"] == slot_map(list_initializers(str(tmp_path / "libchain_mid.so")))


def test_broken_dependency(init_build: Path, tmp_path: Path) -> None:
    shutil.copy(init_build / "gnu" / "chain_main", tmp_path)
    (tmp_path / "libchain_mid.so").write_bytes((init_build / "gnu" / "libchain_mid.so").read_bytes()[:3000])
    proc = run_main("inits", "--deps", str(tmp_path / "chain_main"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "libchain_mid.so" in proc.stderr


@pytest.mark.parametrize("content", [b"", b"glibc-ld.so.cache1.1", b"glibc-ld.so.cache1.1" + b"\xff" * 60,
                                     b"ld.so-1.7.0\0\xff\xff\xff\xff"])
def test_broken_ld_so_cache(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "ld.so.cache"
    path.write_bytes(content)
    assert LdCache(str(path)).lookup("libc.so.6") == []


def test_fifo_on_the_search_path_does_not_hang(init_build: Path, tmp_path: Path) -> None:
    """A FIFO named like a dependency in LD_LIBRARY_PATH is skipped (ld.so skips non-ELF candidates too)."""
    os.mkfifo(tmp_path / "libchain_mid.so")
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path))
    load = resolve(str(init_build / "gnu" / "chain_main"), env=env)
    assert Path(load.objects[1].info.path).parent == (init_build / "gnu").resolve()
