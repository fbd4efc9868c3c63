"""Files whose headers lie: the loader reads PT_DYNAMIC at its p_vaddr, DT_SYMTAB and the hash tables, never the
section headers. For every lie in lies.py glibc loads the library and pins it (LD_DEBUG=bindings: NODELETE due
to unique symbol); `--check` must agree (exit 1), and after `elfpatch unique` glibc must unload both versions and
give each its own statics. readelf -D --syms and LIEF judge the reading across ELF32/ELF64 and both byte
orders."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import CROSS_ARCHES, require_tool
from helpers import run_main
from jsonschema_check import cli_json

from elfpatch.elf.const import ELFOSABI_GNU, STB_GNU_UNIQUE
from elfpatch.elf.file import ElfFile
from unique.helpers import changed_offsets, info_offsets
from unique.lies import EXTENDED, LOADER_LIES, P_OFFSET_READERS_FOOLED, SYMTAB_LOST

UNIQUE_NAMES = {"_ZN6HolderIiE5valueE", "_ZZ7countervE1c"}
_NODELETE = re.compile(r"marking (.*) \[\d+\] as NODELETE due to unique symbol")


def strip_all(path: Path) -> None:
    """Drop .symtab (strip --strip-all): then only the loader's table holds the unique symbols."""
    tool = shutil.which("llvm-strip") or "strip"
    subprocess.run([tool, "--strip-all", str(path)], check=True)


def lied_pair(build: Path, tmp_path: Path, lie: str, stripped: bool) -> tuple[Path, Path]:
    out = []
    for v in (1, 2):
        path = tmp_path / f"libholder_v{v}.so"
        shutil.copy(build / f"libholder_v{v}.so", path)
        if stripped:
            strip_all(path)
        path.write_bytes(LOADER_LIES[lie](path.read_bytes()))
        out.append(path)
    return out[0], out[1]


def run_loader(driver: Path, a: Path, b: Path, prefix: tuple[str, ...] = ()) -> tuple[dict[str, str], set[str]]:
    """The driver's key=value lines, and the objects glibc marked NODELETE for unique symbols."""
    proc = subprocess.run([*prefix, str(driver), str(a.resolve()), str(b.resolve())], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "LD_DEBUG": "bindings"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    values = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return values, set(_NODELETE.findall(proc.stderr))


def check_json(path: Path) -> tuple[int, dict]:
    proc = run_main("unique", "--check", "--json", str(path))
    return proc.returncode, cli_json(proc.stdout)["files"][0]


def judge(build: Path, a: Path, b: Path, prefix: tuple[str, ...] = ()) -> None:
    """Before: glibc pins a and shares its statics; --check agrees. After the patch: both unload, isolated."""
    driver = build / "unique_driver"
    values, pinned = run_loader(driver, a, b, prefix)
    assert str(a.resolve()) in pinned, "glibc marks the lying library NODELETE"
    assert (values["shared"], values["a.resident"]) == ("yes", "yes")
    code, entry = check_json(a)
    assert code == 1, entry
    assert {s["name"] for s in entry["symbols"] if s["table"] == ".dynsym"} == UNIQUE_NAMES
    assert entry["warnings"], "the views disagree: the report says how"
    originals = {p: p.read_bytes() for p in (a, b)}
    proc = run_main("unique", str(a), str(b), check=True)
    assert proc.stdout.count("  warning: ") >= 2, proc.stdout
    for p, before in originals.items():
        changed = changed_offsets(before, p.read_bytes())
        assert changed and set(changed) <= info_offsets(before)
        after = p.read_bytes()
        assert all(before[i] >> 4 == STB_GNU_UNIQUE and after[i] >> 4 == 1 for i in changed)
    values, pinned = run_loader(driver, a, b, prefix)
    assert not pinned, pinned
    assert (values["a.value"], values["b.value"], values["shared"]) == ("1", "2", "no")
    assert (values["a.resident"], values["b.resident"]) == ("no", "no")
    assert check_json(a)[0] == 0, "a second look finds nothing left"


@pytest.mark.slow  # the lies x views matrix
@pytest.mark.parametrize("stripped", [False, True], ids=["with-symtab", "stripped"])
@pytest.mark.parametrize("lie", sorted(LOADER_LIES))
def test_loader_judges_each_lie(unique_build: Path, tmp_path: Path, lie: str, stripped: bool) -> None:
    a, b = lied_pair(unique_build, tmp_path, lie, stripped)
    judge(unique_build, a, b)


def test_loader_judges_a_decoy_quickly(unique_build: Path, tmp_path: Path) -> None:
    """One lie of the matrix above for `make test-fast`: a stripped library whose .dynsym header points at zeros."""
    judge(unique_build, *lied_pair(unique_build, tmp_path, "decoy-dynsym", stripped=True))


@pytest.mark.parametrize("lie", sorted(LOADER_LIES))
def test_symtab_is_still_patched_where_the_headers_allow(unique_build: Path, tmp_path: Path, lie: str) -> None:
    a, _ = lied_pair(unique_build, tmp_path, lie, stripped=False)
    code, entry = check_json(a)
    symtab = {s["name"] for s in entry["symbols"] if s["table"] == ".symtab"}
    assert code == 1 and entry["warnings"]
    if lie in SYMTAB_LOST:
        assert symtab == set()
    else:
        assert symtab == UNIQUE_NAMES


def test_both_views_are_patched_where_they_part(unique_build: Path, tmp_path: Path) -> None:
    """.dynsym's section header points at a copy: the loader's table and the copy are both patched, each row
    saying which, and the warning says where each is."""
    a, _ = lied_pair(unique_build, tmp_path, "copied-dynsym", stripped=True)
    before = a.read_bytes()
    proc = run_main("unique", "--json", str(a), check=True)
    entry = cli_json(proc.stdout)["files"][0]
    tables = {s["table"] for s in entry["symbols"]}
    assert ".dynsym" in tables and len(tables) == 2, tables
    (section_label,) = tables - {".dynsym"}
    assert re.fullmatch(r"\.dynsym\(section \d+\)", section_label)
    assert len(entry["symbols"]) == 4 and any("SHT_DYNSYM" in w for w in entry["warnings"])
    assert len(changed_offsets(before, a.read_bytes())) == 4


def test_a_section_grown_over_the_strings_is_not_edited(unique_build: Path, tmp_path: Path) -> None:
    """.dynsym's sh_size runs on over .dynstr: those bytes are not symbols to the loader, so they are not read
    as any, and the report says why."""
    a, _ = lied_pair(unique_build, tmp_path, "grow-dynsym", stripped=True)
    code, entry = check_json(a)
    assert code == 1 and len(entry["symbols"]) == 2
    assert any("overlaps the dynamic string table" in w for w in entry["warnings"]), entry["warnings"]
    table = ElfFile(a.read_bytes()).loader_table()
    assert table.end <= table.str_offset


@pytest.mark.cross  # needs qemu-user
@pytest.mark.parametrize("arch", sorted(CROSS_ARCHES))
def test_loader_judges_lies_under_qemu(cross_build: Path, tmp_path: Path, arch: str) -> None:
    prefix, qemu = CROSS_ARCHES[arch]
    require_tool(f"{prefix}-g++", qemu)
    build = cross_build / arch
    for lie in ("decoy-dynsym", "dynamic-offset", "shdrs-past-eof", "shrink-dynsym"):
        work = tmp_path / lie
        work.mkdir()
        a, b = lied_pair(build, work, lie, stripped=True)
        shutil.copy(build / "unique_driver", work / "unique_driver")
        judge(work, a, b, (qemu, "-L", f"/usr/{prefix}"))


def test_honest_files_have_no_warnings(unique_build: Path) -> None:
    for name in ("libholder_v1.so", "holder_v1.o", "unique_exe"):
        code, entry = check_json(unique_build / name)
        assert code == 1 and entry["warnings"] == [], (name, entry)
    proc = run_main("unique", "--check", str(unique_build / "libholder_v1.so"))
    assert "warning" not in proc.stdout


# -- readelf and LIEF on the loader's view, every class and byte order ----------------------------------------

# clang + lld build the holder library for these without a sysroot (-nostdlib): ELF32/ELF64, LSB/MSB.
CLANG_TARGETS = ("i386-linux-gnu", "x86_64-linux-gnu", "powerpc-linux-gnu", "powerpc64-linux-gnu")
# readelf -D takes the symbol table's file offset and size from the section whose sh_addr is DT_SYMTAB, and the
# dynamic section at p_offset: these lies fool it (LIEF reads what the loader reads).
READELF_D_FOOLED = {"decoy-dynsym", "copied-dynsym", "shrink-dynsym", "grow-dynsym"} | P_OFFSET_READERS_FOOLED
# LIEF 1.0 finds no dynamic symbol in an i386 file with PN_XNUM (readelf reads it; so does elfpatch).
LIEF_FOOLED = {("i386-linux-gnu", "pn-xnum")}


def make_unique(image: bytes, names: set[str]) -> bytes:
    """Give ``names`` the binding STB_GNU_UNIQUE in every table and mark the file ELFOSABI_GNU, as GNU ld and GCC
    would (clang emits them weak)."""
    elf = ElfFile(image)
    data = bytearray(image)
    data[7] = ELFOSABI_GNU
    for table in elf.symbol_tables():
        for sym in table:
            if sym.name in names:
                data[sym.info_offset] = STB_GNU_UNIQUE << 4 | sym.type
    return bytes(data)


@pytest.fixture(scope="module")
def clang_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_tool("clang++", "ld.lld", packages="clang, lld")
    from conftest import NATIVE

    out = {}
    build = tmp_path_factory.mktemp("clang")
    for target in CLANG_TARGETS:
        lib = build / f"{target}.so"
        subprocess.run(["clang++", f"--target={target}", "-fPIC", "-O1", "-DHOLDER_VERSION=1", "-shared",
                        "-nostdlib", "-fuse-ld=lld", "-o", str(lib), str(NATIVE / "unique" / "holder.cpp")],
                       check=True)
        lib.write_bytes(make_unique(lib.read_bytes(), UNIQUE_NAMES))
        out[target] = lib
    return out


def ours_loader(path: Path) -> list[tuple[str, int]]:
    table = ElfFile(path.read_bytes(), str(path)).loader_table()
    return [(s.name, s.bind) for s in table]


def lief_dynamic(path: Path) -> list[tuple[str, int]]:
    lief = pytest.importorskip("lief")
    lief.logging.disable()  # it narrates every oddity of a lying header on stderr
    binary = lief.ELF.parse(str(path))
    assert binary is not None, path
    return [(s.name, int(s.binding.value if hasattr(s.binding, "value") else s.binding))
            for s in binary.dynamic_symbols]


def readelf_d_unique(path: Path) -> set[str]:
    out = subprocess.run(["readelf", "-D", "--syms", "-W", str(path)], capture_output=True, text=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if " UNIQUE " in line}


# Both take a grown .dynsym's sh_size for the table's size: only the loader judges that lie (above).
NO_ORACLE = {"grow-dynsym"}


@pytest.mark.slow  # the lies x targets matrix
@pytest.mark.cross  # needs clang++ and ld.lld, every target
@pytest.mark.parametrize("lie", sorted(set(LOADER_LIES) - NO_ORACLE) + sorted(EXTENDED))
@pytest.mark.parametrize("target", CLANG_TARGETS)
def test_loader_view_matches_lief_and_readelf(clang_libs: dict[str, Path], tmp_path: Path, target: str,
                                              lie: str) -> None:
    lies = {**LOADER_LIES, **EXTENDED}
    path = tmp_path / "lib.so"
    path.write_bytes(lies[lie](clang_libs[target].read_bytes()))
    honest = ours_loader(clang_libs[target])
    lief_judges, readelf_judges = (target, lie) not in LIEF_FOOLED, lie not in READELF_D_FOOLED
    assert lief_judges or readelf_judges, "at least one oracle for every case"
    assert ours_loader(path) == honest
    assert {n for n, b in honest if b == STB_GNU_UNIQUE} == UNIQUE_NAMES
    if lief_judges:
        assert lief_dynamic(path) == honest
    if readelf_judges:
        assert readelf_d_unique(path) == UNIQUE_NAMES
    code, _ = check_json(path)
    assert code == 1
    run_main("unique", str(path), check=True)
    if lief_judges:
        assert not [n for n, b in lief_dynamic(path) if b == STB_GNU_UNIQUE]
    if readelf_judges:
        assert readelf_d_unique(path) == set()


@pytest.mark.parametrize("lie", sorted(EXTENDED))
def test_extended_numbering_is_read(unique_build: Path, tmp_path: Path, lie: str) -> None:
    """PN_XNUM and e_shnum 0 / SHN_XINDEX: readelf reads the real counts from section header 0, and so does
    elfpatch (both tables found); glibc loads the e_shnum form and unloads it once patched."""
    a, b = tmp_path / "libholder_v1.so", tmp_path / "libholder_v2.so"
    for v, p in ((1, a), (2, b)):
        p.write_bytes(EXTENDED[lie]((unique_build / f"libholder_v{v}.so").read_bytes()))
    readelf = subprocess.run(["readelf", "-sW", str(a)], capture_output=True, text=True).stdout
    code, entry = check_json(a)
    assert code == 1 and entry["warnings"] == []
    rows = {(s["table"], s["name"]) for s in entry["symbols"]}
    assert rows == {(t, n) for t in (".dynsym", ".symtab") for n in UNIQUE_NAMES}
    assert readelf.count(" UNIQUE ") == len(rows)
    run_main("unique", str(a), str(b), check=True)
    assert " UNIQUE " not in subprocess.run(["readelf", "-sW", str(a)], capture_output=True, text=True).stdout
    if lie == "shnum-extended":
        values, pinned = run_loader(unique_build / "unique_driver", a, b)
        assert not pinned and (values["shared"], values["a.resident"]) == ("no", "no")


@pytest.mark.parametrize("lie", sorted(LOADER_LIES))
def test_dlcheck_facts_read_the_loaders_table(unique_build: Path, tmp_path: Path, lie: str) -> None:
    """dlcheck explains a NODELETE mark from the file: the unique symbols it names are the loader's."""
    from elfpatch.harness.elffacts import object_facts

    a, _ = lied_pair(unique_build, tmp_path, lie, stripped=True)
    facts = object_facts(str(a))
    assert facts is not None and set(facts.unique) == UNIQUE_NAMES
    assert facts.soname == "libholder_v1.so"


# -- the symbol tables name only their own sections: the same answer as from every section -------------------

def _names_edited(image: bytes, edit: str) -> bytes:
    """The section name table made non-ASCII (.dynsym's "d" made 0xE9) or unterminated (its last byte)."""
    elf = ElfFile(image)
    names = elf.sections[elf.e_shstrndx]
    data = bytearray(image)
    if edit == "non-ascii":
        table = bytes(image[names.sh_offset : names.sh_offset + names.sh_size])
        data[names.sh_offset + table.index(b"\0.dynsym\0") + 2] = 0xE9
    else:
        data[names.sh_offset + names.sh_size - 1] = ord("x")
    return bytes(data)


def _view(elf: ElfFile, sections_first: bool) -> tuple:
    """What a reader is told: the symbol tables, the sections (or why there are none) and the warnings."""
    def sections() -> object:
        try:
            return elf.sections
        except Exception as exc:  # noqa: BLE001 - the error is part of the answer
            return repr(exc)
    first = sections() if sections_first else None
    try:
        tables = [(t.name, t.offset, t.count, t.str_offset, t.str_size) for t in elf.symbol_tables()]
    except Exception as exc:  # noqa: BLE001
        tables = repr(exc)
    return tables, first if sections_first else sections(), sorted(elf.warnings)


@pytest.mark.parametrize("lie", ["honest", *sorted(LOADER_LIES), *sorted(EXTENDED), "non-ascii", "unterminated",
                                 "decoy-dynsym+non-ascii"])
def test_symbol_tables_read_alike_whatever_is_asked_first(unique_build: Path, lie: str) -> None:
    """``symbol_tables`` names only the symbol table sections (a tree's archive members have tens of others),
    and must tell what reading every section tells: the same tables, sections, errors and warnings (a
    non-ASCII or unterminated name table included), whether ``sections`` was asked first or not."""
    image = (unique_build / "libholder_v1.so").read_bytes()
    for part in lie.split("+"):
        if part in ("non-ascii", "unterminated"):
            image = _names_edited(image, part)
        elif part != "honest":
            image = {**LOADER_LIES, **EXTENDED}[part](image)
    lazy, eager = _view(ElfFile(image, "lib"), False), _view(ElfFile(image, "lib"), True)
    assert lazy == eager
    if lie == "decoy-dynsym+non-ascii":  # the decoy's warning names it as its header does
        assert any("(.\udce9ynsym) is a SHT_DYNSYM table" in w for w in lazy[2]), lazy[2]
    if lie == "unterminated":
        assert any(w.startswith("section headers unusable (unterminated section name") for w in lazy[2]), lazy[2]
