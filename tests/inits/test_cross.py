"""Other word sizes, byte orders and relocation formats, run under qemu-user: i686 (ELF32, REL), i686 with
DT_RELR (32-bit RELR), aarch64, powerpc64 (big-endian, ELFv1: slots hold function descriptors in .opd),
powerpc64 with DT_RELR (64-bit big-endian RELR), s390x (big-endian); and a 32-bit big-endian PowerPC library
that nothing here can run, checked against pyelftools."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main
from jsonschema_check import cli_json

from elfpatch.inits.order import list_initializers
from inits.helpers import (
    CROSS_VARIANTS,
    FINI_KINDS,
    INIT_KINDS,
    cross_variant,
    nm_addresses,
    run_trace,
    slot_map,
    token,
    user_entries,
)

pytestmark = pytest.mark.cross  # every test here runs a cross toolchain's files or qemu-user

CHAIN = ("chain_main", "libchain_mid.so", "libchain_base.so")


@pytest.mark.parametrize("variant", sorted(CROSS_VARIANTS))
@pytest.mark.parametrize("program", ["prio", "prio_nopie", "siof_ba"])
def test_order_and_slots(init_cross_build: Path, variant: str, program: str) -> None:
    build, prefix = cross_variant(init_cross_build, variant)
    path = build / program
    listing = list_initializers(str(path))
    trace = run_trace(path, prefix)
    assert [token(e) for e in user_entries(listing["init"], INIT_KINDS)] == trace.of("preinit", "init")
    assert [token(e) for e in user_entries(listing["fini"], FINI_KINDS)] == trace.of("fini")
    assert trace.slots["main"] == slot_map(listing)


@pytest.mark.parametrize("variant", sorted(CROSS_VARIANTS))
def test_chain_deps(init_cross_build: Path, variant: str) -> None:
    """--deps on a foreign file: the fixture's own libraries via $ORIGIN (the sysroot's libc & co. may not be
    found on this machine; their order does not matter here), against the trace under qemu."""
    build, prefix = cross_variant(init_cross_build, variant)
    program = build / "chain_main"
    trace = run_trace(program, prefix)
    load = cli_json(run_main("inits", "--deps", "--json", str(program), check=True).stdout)["loads"][0]
    ours = [e for e in load["init"] if Path(e["object"]).name in CHAIN]
    assert [token(e) for e in user_entries(ours, INIT_KINDS)] == trace.of("preinit", "init")
    ours_fini = [e for e in load["fini"] if Path(e["object"]).name in CHAIN]
    assert [token(e) for e in user_entries(ours_fini, FINI_KINDS)] == trace.of("fini")
    for lib in CHAIN[1:]:
        assert trace.slots[lib] == slot_map(list_initializers(str(build / lib)))


@pytest.mark.parametrize("variant", sorted(CROSS_VARIANTS))
def test_dlopen(init_cross_build: Path, variant: str) -> None:
    build, prefix = cross_variant(init_cross_build, variant)
    trace = run_trace(build / "chain_dlopen", prefix)
    load = cli_json(run_main("inits", "--deps", "--json", str(build / "libchain_mid.so"), check=True).stdout)
    ours = [e for e in load["loads"][0]["init"] if Path(e["object"]).name in CHAIN]
    assert [token(e) for e in user_entries(ours, INIT_KINDS)] == \
        trace.of("init", events=trace.between("dlopen-begin", "dlopen-end"))


@pytest.mark.parametrize("variant", sorted(CROSS_VARIANTS))
@pytest.mark.parametrize("program", ["prio", "libchain_base.so"])
def test_addresses_agree_with_nm(init_cross_build: Path, variant: str, program: str) -> None:
    build, _prefix = cross_variant(init_cross_build, variant)
    listing = list_initializers(str(build / program))
    table = nm_addresses(build / program)
    for e in listing["init"] + listing["fini"]:
        assert e["symbol"] and e["address"] in table[e["symbol"]], e


def pyelftools_slots(path: Path) -> dict[tuple[str, int], int]:
    """Slot values the independent way: pyelftools' relocation sections (RELA addends, symbol values)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection

    out: dict[tuple[str, int], int] = {}
    with open(path, "rb") as f:
        elf = ELFFile(f)
        relocs = {}
        for sec in elf.iter_sections():
            if isinstance(sec, RelocationSection):
                symtab = elf.get_section(sec["sh_link"])
                for r in sec.iter_relocations():
                    value = symtab.get_symbol(r["r_info_sym"])["st_value"] if r["r_info_sym"] else 0
                    relocs[r["r_offset"]] = value + (r["r_addend"] if r.is_RELA() else 0)
        ws = elf.elfclass // 8
        for kind in ("init_array", "fini_array"):
            sec = elf.get_section_by_name(f".{kind}")
            for i in range(sec["sh_size"] // ws):
                addr = sec["sh_addr"] + i * ws
                order = "little" if elf.little_endian else "big"
                raw = int.from_bytes(sec.data()[i * ws:(i + 1) * ws], order)
                out[(kind, i)] = relocs.get(addr, raw)
    return out


def test_ppc32_big_endian_against_pyelftools(init_cross_build: Path) -> None:
    require_tool("powerpc64-linux-gnu-gcc")
    path = init_cross_build / "ppc32" / "libbare.so"
    listing = list_initializers(str(path))
    assert slot_map(listing) == pyelftools_slots(path)
    assert [e["symbol"] for e in listing["init"]] == ["bare_ctor_101", "bare_ctor"]
    assert [e["symbol"] for e in listing["fini"]] == ["bare_fini"]
    table = nm_addresses(path)
    assert all(e["address"] in table[e["symbol"]] for e in listing["init"] + listing["fini"])


def test_relr_variants_really_use_relr(init_cross_build: Path) -> None:
    """Guard the fixtures: the -relr builds carry DT_RELR, the others do not."""
    for variant in ("i686-relr", "powerpc64-relr", "i686"):
        build, _prefix = cross_variant(init_cross_build, variant)
        dyn = subprocess.run(["readelf", "-d", str(build / "libchain_base.so")], capture_output=True,
                             text=True, check=True).stdout
        assert ("(RELR)" in dyn) == variant.endswith("-relr"), variant
