"""The reader against independent parsers: pyelftools and LIEF on the fixtures and on this machine's own
libraries, readelf's UNIQUE count on everything."""
from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path

import pytest
from conftest import CROSS_ARCHES

from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import unique_applies, unique_indexes


def system_elves(limit: int = 60) -> list[str]:
    seen, out = set(), []
    for path in sorted(glob.glob("/usr/lib/x86_64-linux-gnu/*.so*") + glob.glob("/usr/bin/*")):
        try:
            st = os.stat(path)
            with open(path, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        out.append(path)
    step = max(1, len(out) // limit)
    picked = out[::step][:limit]
    # Always include the libraries known to carry unique symbols.
    for name in ("libstdc++.so.6", "libcc1.so.0"):
        p = f"/usr/lib/x86_64-linux-gnu/{name}"
        if os.path.exists(p) and p not in picked:
            picked.append(p)
    return picked


def fixture_files(build: Path) -> list[str]:
    return sorted(str(p) for p in build.rglob("*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF")


def ours(path: str) -> dict[str, list[tuple[str, int, int, int]]]:
    elf = ElfFile(Path(path).read_bytes(), path)
    return {t.name: [(s.name, s.st_value, s.st_size, s.st_info) for s in t] for t in elf.symbol_tables()}


def pyelftools_tables(path: str) -> dict[str, list[tuple[str, int, int, int]]]:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with open(path, "rb") as f:
        elf = ELFFile(f)
        out = {}
        for sec in elf.iter_sections():
            if isinstance(sec, SymbolTableSection):
                name = ".dynsym" if sec["sh_type"] == "SHT_DYNSYM" else ".symtab"
                out[name] = [(s.name, s["st_value"], s["st_size"], _info(s)) for s in sec.iter_symbols()]
        return out


_BINDS = {"STB_LOCAL": 0, "STB_GLOBAL": 1, "STB_WEAK": 2, "STB_LOOS": 10, "STB_GNU_UNIQUE": 10}
_TYPES = {"STT_NOTYPE": 0, "STT_OBJECT": 1, "STT_FUNC": 2, "STT_SECTION": 3, "STT_FILE": 4, "STT_COMMON": 5,
          "STT_TLS": 6, "STT_LOOS": 10, "STT_GNU_IFUNC": 10, "STT_HIOS": 12, "STT_LOPROC": 13, "STT_HIPROC": 15}


def _info(sym) -> int:
    bind, typ = sym["st_info"]["bind"], sym["st_info"]["type"]
    bind = bind if isinstance(bind, int) else _BINDS[bind]
    typ = typ if isinstance(typ, int) else _TYPES[typ]
    return bind << 4 | typ


def readelf_unique_count(path: str) -> int:
    out = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True).stdout
    return out.count(" UNIQUE ") + out.count("<OS specific>: 10")


def test_fixtures_match_pyelftools(unique_build: Path) -> None:
    """The native fixtures (libraries, executables, objects); the cross ones are the next test's."""
    files = [f for f in fixture_files(unique_build) if Path(f).parent == unique_build]
    assert len(files) >= 10, files
    for path in files:
        assert ours(path) == pyelftools_tables(path), path


@pytest.mark.cross  # needs the cross fixtures
def test_cross_fixtures_match_pyelftools(cross_build: Path) -> None:
    """Both ELF classes and byte orders: i686, aarch64, ppc64 (big-endian) and s390x."""
    files = [f for f in fixture_files(cross_build) if Path(f).parent.name in CROSS_ARCHES]
    assert {Path(f).parent.name for f in files} == set(CROSS_ARCHES), files
    for path in files:
        assert ours(path) == pyelftools_tables(path), path


@pytest.mark.slow  # whole system directories
def test_system_libraries_match_pyelftools_and_readelf() -> None:
    files = system_elves()
    assert files
    total_unique = 0
    for path in files:
        tables = ours(path)
        assert tables == pyelftools_tables(path), path
        elf = ElfFile(Path(path).read_bytes(), path)
        n = sum(len(unique_indexes(t.info_bytes())) for t in elf.symbol_tables())
        assert unique_applies(elf.osabi)
        assert n == readelf_unique_count(path), path
        total_unique += n
    assert total_unique > 0, "libstdc++ and libcc1 carry unique symbols"


def test_fixtures_match_lief(unique_build: Path) -> None:
    lief = pytest.importorskip("lief")
    for path in fixture_files(unique_build):
        binary = lief.ELF.parse(path)
        elf = ElfFile(Path(path).read_bytes(), path)
        tables = {t.name: t for t in elf.symbol_tables()}
        if ".dynsym" in tables:
            dyn = [s.name for s in tables[".dynsym"]]
            assert dyn == [s.name for s in binary.dynamic_symbols], path
        if ".symtab" in tables:
            # LIEF 1.0 calls .symtab "symtab_symbols"; older releases "static_symbols".
            static = getattr(binary, "symtab_symbols", None) or binary.static_symbols
            assert [s.name for s in tables[".symtab"]] == [s.name for s in static], path
            want = [s.binding for s in static]
            got = [s.bind for s in tables[".symtab"]]
            assert got == [int(b) if not hasattr(b, "value") else b.value for b in want], path


@pytest.mark.slow  # whole system directories
def test_system_libraries_match_lief() -> None:
    lief = pytest.importorskip("lief")
    files = [p for p in system_elves(40) if os.path.getsize(p) < 8 << 20][:20]
    for path in files:
        binary = lief.ELF.parse(path)
        tables = {t.name: t for t in ElfFile(Path(path).read_bytes(), path).symbol_tables()}
        if ".dynsym" in tables:
            assert [s.name for s in tables[".dynsym"]] == [s.name for s in binary.dynamic_symbols], path
