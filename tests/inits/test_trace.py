"""`elfpatch inits` against what really runs: each fixture prints the initializers and finalizers it runs, in
order, and dumps its relocated array slots; the listing must say the same, for GNU ld (RELA), DT_RELR, lld
(zeroed slots) and stripped builds, and for the distribution's own libraries the fixtures load."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from elfpatch.elf.loadorder import resolve
from elfpatch.inits.order import list_initializers
from inits.helpers import (
    FINI_KINDS,
    INIT_KINDS,
    LLD,
    nm_addresses,
    run_trace,
    slot_map,
    token,
    user_entries,
    variant_dir,
)

SINGLE = ("siof_ab", "siof_ba", "cofu_ab", "cofu_ba", "prio", "prio_nopie")


@pytest.mark.parametrize("variant", ["gnu", "relr", LLD])
@pytest.mark.parametrize("program", SINGLE)
def test_order_matches_trace(init_build: Path, variant: str, program: str) -> None:
    path = variant_dir(init_build, variant) / program
    listing = list_initializers(str(path))
    trace = run_trace(path)
    assert [token(e) for e in user_entries(listing["init"], INIT_KINDS)] == trace.of("preinit", "init")
    assert [token(e) for e in user_entries(listing["fini"], FINI_KINDS)] == trace.of("fini")


@pytest.mark.parametrize("variant", ["gnu", "relr", LLD, "stripped"])
@pytest.mark.parametrize("program", SINGLE + ("patterns", "chain_main"))
def test_addresses_match_relocated_slots(init_build: Path, variant: str, program: str) -> None:
    """Every array slot of every object in the process, as the loader relocated it, minus the load bias."""
    path = variant_dir(init_build, variant) / program
    trace = run_trace(path)
    objects = {Path(o.info.path).name: o.info.path for o in resolve(str(path)).objects[1:]}
    assert trace.slots["main"] == slot_map(list_initializers(str(path)))
    checked = 0
    for name, slots in trace.slots.items():
        if name == "main" or name not in objects:
            continue
        assert slots == slot_map(list_initializers(objects[name])), name
        checked += 1
    assert checked >= 3  # libstdc++, libm, libgcc_s (and the chain's libraries)


def test_static_executable(init_build: Path) -> None:
    """No PT_DYNAMIC: the arrays come from the section headers. A static link also pulls in libstdc++'s own
    initializers (the *.cc ones): the kind of new global constructor --max exists to catch."""
    path = init_build / "gnu" / "prio_static"
    listing = list_initializers(str(path))
    trace = run_trace(path)
    entries = user_entries(listing["init"], INIT_KINDS)
    ours = [token(e) for e in entries if not (e["source"] or "").endswith(".cc")]
    assert ours == trace.of("preinit", "init")
    assert len(ours) < len(entries)
    assert trace.slots["main"] == slot_map(listing)
    table = nm_addresses(path)
    assert all(e["address"] in table[e["symbol"]] for e in listing["init"] + listing["fini"])


def test_siof_depends_on_link_order(init_build: Path) -> None:
    ab, ba = (run_trace(init_build / "gnu" / p) for p in ("siof_ab", "siof_ba"))
    assert ("value", "user-saw-port=8080") in ab.events
    assert ("value", "user-saw-port=0") in ba.events  # read before construction: zero-initialized storage
    first = [token(user_entries(list_initializers(str(init_build / "gnu" / p))["init"], INIT_KINDS)[0])
             for p in ("siof_ab", "siof_ba")]
    assert first == ["siof_config.cpp", "siof_user.cpp"]


@pytest.mark.parametrize("program", ["cofu_ab", "cofu_ba"])
def test_construct_on_first_use_is_order_independent(init_build: Path, program: str) -> None:
    trace = run_trace(init_build / "gnu" / program)
    assert ("value", "user-saw-port=8080") in trace.events
    # The config is built inside the user's initializer; its file has no initializer of its own.
    assert trace.events.index(("mark", "config-constructed")) < trace.events.index(("init", "cofu_user.cpp"))
    listing = list_initializers(str(init_build / "gnu" / program))
    assert [token(e) for e in user_entries(listing["init"], INIT_KINDS)] == ["cofu_user.cpp"]


@pytest.mark.parametrize("variant", ["gnu", LLD])
def test_no_initializer_and_no_destruction(init_build: Path, variant: str) -> None:
    """constinit needs no initializer; NoDestructor and a leaked new are built by the file's one initializer
    and never destroyed; only the plain global's destructor runs at exit."""
    path = variant_dir(init_build, variant) / "patterns"
    listing = list_initializers(str(path))
    assert [token(e) for e in user_entries(listing["init"], INIT_KINDS)] == ["patterns.cpp"]
    trace = run_trace(path)
    assert trace.of("init") == ["patterns.cpp", "patterns.cpp:kept", "patterns.cpp:leaked"]
    assert trace.of("dtor") == ["patterns.cpp"]
    assert "kPort" in nm_addresses(path)


def test_priorities(init_build: Path) -> None:
    listing = list_initializers(str(init_build / "gnu" / "prio"))
    rows = [(e["kind"], e["source"], e["priority"]) for e in listing["init"] if e["source"]]
    # The static preinit function's source comes from STT_FILE; the exported constructor(N) functions are
    # global symbols, which no STT_FILE symbol owns.
    assert rows == [("preinit_array", "prio.cpp", None), ("init_array", "prio.cpp", 101),
                    ("init_array", "prio.cpp", 2000), ("init_array", "prio.cpp", None)]
    assert listing["init"][0]["kind"] == "preinit_array"
    assert listing["init"][0]["demangled"] == "prio_preinit(int, char**, char**)"


def test_non_pic_names_the_first_global_not_the_file(init_build: Path) -> None:
    """GCC keys a non-PIC file's initializer to its first global symbol: the name gives the priority, the
    STT_FILE symbol before the function's local symbol in .symtab gives the source."""
    listing = list_initializers(str(init_build / "gnu" / "prio_nopie"))
    named = [e for e in listing["init"] if (e["symbol"] or "").startswith("_GLOBAL__sub_I")]
    assert [(e["symbol"], e["source"], e["priority"]) for e in named] == [
        ("_GLOBAL__sub_I.00101_prio_default", "prio.cpp", 101),
        ("_GLOBAL__sub_I.02000_prio_default", "prio.cpp", 2000), ("_GLOBAL__sub_I_prio_default", "prio.cpp", None)]
    assert all(e["address"] >= 0x400000 for e in listing["init"])  # absolute, not relocated


@pytest.mark.cross  # needs ld.lld
def test_lld_leaves_slots_zero(init_build: Path) -> None:
    """The point of reading RELA addends: in an lld build the .init_array bytes are all zero."""
    from elftools.elf.elffile import ELFFile

    path = variant_dir(init_build, "lld") / "prio"
    with open(path, "rb") as f:
        data = ELFFile(f).get_section_by_name(".init_array").data()
    assert data and data == bytes(len(data))
    assert all(e["address"] for e in list_initializers(str(path))["init"])


@pytest.mark.parametrize("program", SINGLE + ("libchain_mid.so",))
def test_stripped_keeps_every_entry(init_build: Path, program: str) -> None:
    full = list_initializers(str(init_build / "gnu" / program))
    bare = list_initializers(str(init_build / "stripped" / program))
    for side in ("init", "fini"):
        assert [(e["kind"], e["index"], e["address"]) for e in bare[side]] == \
               [(e["kind"], e["index"], e["address"]) for e in full[side]]
        for e in bare[side]:
            if e["kind"] in ("init", "fini"):
                assert e["toolchain"], e  # .init/.fini section starts still name _init/_fini
    # Exported constructor functions keep their .dynsym names.
    names = {e["symbol"] for e in bare["init"]}
    assert ("chain_mid_ctor" in names) == (program == "libchain_mid.so")


def test_stripped_runs_the_same(init_build: Path) -> None:
    assert run_trace(init_build / "stripped" / "prio").events == run_trace(init_build / "gnu" / "prio").events


@pytest.mark.cross  # needs ld.lld (GNU ld turns .ctors into .init_array)
def test_legacy_ctors_and_dtors(init_build: Path) -> None:
    """lld keeps .ctors/.dtors; the library's own crtstuff-style code runs .ctors last-first from _init
    and .dtors first-last from _fini."""
    lib = variant_dir(init_build, "lld") / "liblegacy.so"
    listing = list_initializers(str(lib))
    trace = run_trace(variant_dir(init_build, "lld") / "legacy_main")
    assert [e["kind"] for e in listing["init"]] == ["init", "ctors", "ctors", "init_array", "init_array"]
    assert [token(e) for e in user_entries(listing["init"], INIT_KINDS)] == trace.of("init")
    assert [token(e) for e in user_entries(listing["fini"], FINI_KINDS)] == trace.of("fini")
    assert trace.slots["liblegacy.so"] == slot_map(listing)


@pytest.mark.parametrize("variant", ["gnu", "relr", LLD])
@pytest.mark.parametrize("program", ["prio", "prio_nopie", "siof_ab", "libchain_base.so", "chain_main"])
def test_addresses_agree_with_nm(init_build: Path, variant: str, program: str) -> None:
    path = variant_dir(init_build, variant) / program
    listing = list_initializers(str(path))
    table = nm_addresses(path)
    entries = listing["init"] + listing["fini"]
    assert all(e["symbol"] for e in entries)
    for e in entries:
        assert e["address"] in table[e["symbol"]], e


def test_fixture_relocation_formats(init_build: Path) -> None:
    """Guard the fixtures: GNU ld relocates the slots with RELA, the relr build with DT_RELR."""
    def dynamic(variant: str) -> str:
        return subprocess.run(["readelf", "-dr", str(init_build / variant / "prio")], capture_output=True,
                              text=True, check=True).stdout

    assert "(RELR)" not in dynamic("gnu") and "R_X86_64_RELATIVE" in dynamic("gnu")
    assert "(RELR)" in dynamic("relr") and "R_X86_64_RELATIVE" not in dynamic("relr")
