"""Static archives: GNU (`//` long names, built by ar), BSD (`#1/` names), thin; judged by ar, nm, the linker
and the loader."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import run_main
from jsonschema_check import cli_json
from unique.helpers import run_driver

from targets.helpers import (
    HOLDER_SYMBOLS,
    ar_index,
    ar_members,
    bsd_archive,
    compile_holder,
    link_shared,
    nm_unique,
    readelf_unique,
)

LONG = "holder_member_with_a_name_longer_than_sixteen_bytes.o"


def gnu_archive(tmp_path: Path, objs: dict[str, Path], version: str = "v1", name: str = "libholder.a",
                text: bool = False) -> Path:
    """`ar rcs` of a holder object under a long name (so in the `//` table), a short-named plain object, and
    (``text``) a text member, which the linker would refuse but elfpatch passes over."""
    d = tmp_path / f"members_{version}_{name}"
    d.mkdir()
    shutil.copy(objs[version], d / LONG)
    shutil.copy(objs["plain"], d / "plain.o")
    (d / "notes.txt").write_text("not an object\n")
    lib = tmp_path / name
    names = [LONG, "plain.o"] + (["notes.txt"] if text else [])
    subprocess.run(["ar", "rcs", str(lib), *names], check=True, cwd=d)
    return lib


def link_exe(tmp_path: Path, archive: Path, *flags: str) -> Path:
    """An executable that calls holder_value() from ``archive``; it exits 0 when that returns 1."""
    main = tmp_path / "main.cpp"
    main.write_text('extern "C" int holder_value(void);\nint main() { return holder_value() == 1 ? 0 : 1; }\n')
    exe = tmp_path / f"main_{archive.stem}"
    subprocess.run(["g++", *flags, "-o", str(exe), str(main), str(archive)], check=True)
    return exe


def test_gnu_archive_is_patched_within_its_bytes(tmp_path: Path, objs: dict[str, Path]) -> None:
    lib = gnu_archive(tmp_path, objs, text=True)
    before = lib.read_bytes()
    members, index = ar_members(lib), ar_index(lib)
    assert members == [LONG, "plain.o", "notes.txt"]
    assert b"//              " in before and len(nm_unique(lib)) == 2, "a long-name table and 2 unique symbols"
    assert run_main("unique", "--check", str(lib)).returncode == 1

    doc = cli_json(run_main("unique", "--json", str(lib), check=True).stdout)
    rows = {f["member"]: f for f in doc["files"]}
    assert set(rows) == {LONG, "plain.o"}, "the text member and the index are not ELF members"
    assert all(f["path"] == str(lib) for f in doc["files"])
    assert rows[LONG]["status"] == "patched" and rows["plain.o"]["status"] == "unchanged"
    assert {s["name"] for s in rows[LONG]["symbols"]} == set(HOLDER_SYMBOLS)
    assert doc["summary"]["patched"] == 2

    after = lib.read_bytes()
    assert len(after) == len(before)
    assert sum(a != b for a, b in zip(before, after)) == 2, "one st_info byte per unique symbol, nothing else"
    assert ar_members(lib) == members and ar_index(lib) == index
    assert nm_unique(lib) == []
    assert run_main("unique", "--check", str(lib)).returncode == 0
    assert cli_json(run_main("unique", "--json", str(lib), check=True).stdout)["summary"]["patched"] == 0


def test_library_linked_from_patched_archives_unloads(tmp_path: Path, objs: dict[str, Path],
                                                      unique_build: Path) -> None:
    """The loader's verdict: two libraries linked from (patched) archives of two header versions."""
    v1, v2 = gnu_archive(tmp_path, objs, "v1", "libv1.a"), gnu_archive(tmp_path, objs, "v2", "libv2.a")
    driver = unique_build / "unique_driver"
    before1, before2 = link_shared(tmp_path / "before1.so", v1), link_shared(tmp_path / "before2.so", v2)
    assert readelf_unique(before1) > 0
    r = run_driver(driver, before1, before2)
    assert (r["shared"], r["a.resident"]) == ("yes", "yes"), "control: unpatched archives give unique symbols"

    run_main("unique", str(v1), str(v2), check=True)
    lib1, lib2 = link_shared(tmp_path / "after1.so", v1), link_shared(tmp_path / "after2.so", v2)
    assert readelf_unique(lib1) == 0 and readelf_unique(lib2) == 0
    r = run_driver(driver, lib1, lib2)
    assert (r["a.value"], r["b.value"], r["shared"], r["a.resident"], r["b.resident"]) == ("1", "2", "no", "no", "no")

    exe = link_exe(tmp_path, v1)
    assert subprocess.run([str(exe)]).returncode == 0 and readelf_unique(exe) == 0


def test_archive_output_inplace_and_dry_run(tmp_path: Path, objs: dict[str, Path]) -> None:
    lib = gnu_archive(tmp_path, objs)
    before = lib.read_bytes()
    assert run_main("unique", "-n", str(lib)).returncode == 0 and lib.read_bytes() == before
    out = tmp_path / "out.a"
    run_main("unique", "-o", str(out), str(lib), check=True)
    assert lib.read_bytes() == before and nm_unique(out) == [] and len(out.read_bytes()) == len(before)
    ino = lib.stat().st_ino
    run_main("unique", "--inplace", str(lib), check=True)
    assert lib.stat().st_ino == ino and lib.read_bytes() == out.read_bytes()


@pytest.mark.cross  # needs llvm-ar
def test_llvm_bsd_archive(tmp_path: Path, objs: dict[str, Path], llvm_ar: str) -> None:
    """llvm-ar --format=bsd: `#1/` names and a `__.SYMDEF` index, which nm still reads after the patch."""
    member = tmp_path / "holder_with_a_long_bsd_member_name.o"
    shutil.copy(objs["v1"], member)
    shutil.copy(objs["plain"], tmp_path / "p.o")
    lib = tmp_path / "libbsd.a"
    subprocess.run([llvm_ar, "--format=bsd", "rcs", str(lib), str(member), str(tmp_path / "p.o")], check=True)
    assert lib.read_bytes()[8:11] == b"#1/"
    index = subprocess.run([llvm_ar, "t", str(lib)], capture_output=True, text=True, check=True).stdout
    doc = cli_json(run_main("unique", "--json", str(lib), check=True).stdout)
    assert [f["member"] for f in doc["files"]] == [member.name, "p.o"]
    assert doc["summary"]["patched"] == 2 and nm_unique(lib) == []
    assert subprocess.run([llvm_ar, "t", str(lib)], capture_output=True, text=True).stdout == index
    if shutil.which("ld.lld"):  # GNU ld reads no BSD index; lld does
        exe = link_exe(tmp_path, lib, "-fuse-ld=lld")
        assert subprocess.run([str(exe)]).returncode == 0 and readelf_unique(exe) == 0


def test_hand_built_bsd_archive(tmp_path: Path, objs: dict[str, Path]) -> None:
    """BSD naming without llvm-ar: the name (NUL-padded) counted in the member size."""
    lib = bsd_archive(tmp_path / "libbsd.a", [("a_rather_long_bsd_name.o", objs["v1"].read_bytes()),
                                              ("short.o", objs["plain"].read_bytes())])
    before = lib.read_bytes()
    doc = cli_json(run_main("unique", "--json", str(lib), check=True).stdout)
    assert [f["member"] for f in doc["files"]] == ["a_rather_long_bsd_name.o", "short.o"]
    assert doc["summary"]["patched"] == 2 and nm_unique(lib) == []
    after = lib.read_bytes()
    assert len(after) == len(before) and sum(a != b for a, b in zip(before, after)) == 2


def test_thin_archive_patches_the_files_it_names(tmp_path: Path, objs: dict[str, Path]) -> None:
    """Named as a PATH, a thin archive's member files are patched where they lie; the archive is unchanged."""
    sub = tmp_path / "objs"
    sub.mkdir()
    obj = shutil.copy(objs["v1"], sub / LONG)
    plain = shutil.copy(objs["plain"], sub / "plain.o")
    (sub / "notes.txt").write_text("text\n")
    lib = tmp_path / "libthin.a"
    subprocess.run(["ar", "rcsT", lib.name, f"objs/{LONG}", "objs/plain.o", "objs/notes.txt"], check=True,
                   cwd=tmp_path)
    assert lib.read_bytes().startswith(b"!<thin>\n") and len(ar_members(lib)) == 3
    before = lib.read_bytes()
    assert run_main("unique", "--check", str(lib)).returncode == 1
    doc = cli_json(run_main("unique", "--json", str(lib), check=True).stdout)
    assert [(f["member"], f["status"]) for f in doc["files"]] == [(f"objs/{LONG}", "patched"),
                                                                  ("objs/plain.o", "unchanged")]
    assert lib.read_bytes() == before and nm_unique(Path(obj)) == [] and Path(plain).read_bytes() == \
        objs["plain"].read_bytes()
    assert run_main("unique", "--check", str(lib)).returncode == 0
    exe = link_exe(tmp_path, lib)
    assert subprocess.run([str(exe)]).returncode == 0 and readelf_unique(exe) == 0
    assert run_main("unique", "-o", str(tmp_path / "x.a"), str(lib)).returncode == 2


def test_thin_archive_with_a_missing_member_changes_nothing(tmp_path: Path, objs: dict[str, Path]) -> None:
    a = shutil.copy(objs["v1"], tmp_path / "a.o")
    b = shutil.copy(objs["v2"], tmp_path / "b.o")
    lib = tmp_path / "libthin.a"
    subprocess.run(["ar", "rcsT", lib.name, "a.o", "b.o"], check=True, cwd=tmp_path)
    os.unlink(b)
    before = Path(a).read_bytes()
    proc = run_main("unique", str(lib))
    assert proc.returncode == 2 and "thin member b.o" in proc.stderr
    assert Path(a).read_bytes() == before, "every member is read before any is written"


@pytest.mark.parametrize("poke", ["size", "longname", "magic", "member"])
def test_broken_archive_is_left_alone(tmp_path: Path, objs: dict[str, Path], poke: str) -> None:
    lib = gnu_archive(tmp_path, objs)
    data = bytearray(lib.read_bytes())
    first = 8 + 60 + int(data[8 + 48 : 8 + 58]) + (int(data[8 + 48 : 8 + 58]) & 1)  # the `//` table's header
    if poke == "size":
        data[first + 48 : first + 58] = b"9999999999"
    elif poke == "longname":
        member = data.index(b"/0 ", first + 60)  # the long-named member: "/0" points into `//`
        data[member : member + 6] = b"/9999 "
    elif poke == "magic":
        data[first + 58 : first + 60] = b"xx"
    else:  # the ELF member's section header offset points far past its end
        elf = data.index(b"\x7fELF")
        data[elf + 0x28 : elf + 0x30] = (1 << 40).to_bytes(8, "little")
    lib.write_bytes(bytes(data))
    proc = run_main("unique", str(lib))
    assert proc.returncode == 2 and proc.stderr.startswith(f"elfpatch: error: {lib}: ")
    assert proc.stderr.count("\n") == 1
    assert lib.read_bytes() == bytes(data)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_archive_of_an_object_with_symbol_filter(tmp_path: Path) -> None:
    """--symbol keeps the others unique inside the archive too."""
    obj = compile_holder(tmp_path / "holder.o", 1)
    lib = tmp_path / "libf.a"
    subprocess.run(["ar", "rcs", str(lib), str(obj)], check=True)
    doc = cli_json(run_main("unique", "--json", "--symbol", "Holder<*>::*", str(lib), check=True).stdout)
    assert doc["files"][0]["kept"] == 1 and doc["summary"]["patched"] == 1
    assert [line.split()[-1] for line in nm_unique(lib)] == ["_ZZ7countervE1c"]
