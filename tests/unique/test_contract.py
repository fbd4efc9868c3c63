"""The `elfpatch unique` command-line contract: modes, JSON document, exit statuses, what changes on disk."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import run_main
from jsonschema_check import cli_json

from elfpatch.elf.file import ElfFile
from unique.helpers import changed_offsets

MANGLED = {"_ZN6HolderIiE5valueE": "Holder<int>::value", "_ZZ7countervE1c": "counter()::c"}


def info_offsets(path: Path) -> set[int]:
    """Offsets of every st_info byte of every symbol table, from the reader under test's own layout data."""
    elf = ElfFile(path.read_bytes(), str(path))
    return {t.info_offset(i) for t in elf.symbol_tables() for i in range(t.count)}


def test_json_document(lib: Path) -> None:
    proc = run_main("unique", "--json", str(lib))
    assert proc.returncode == 0, proc.stderr
    doc = cli_json(proc.stdout)
    (entry,) = doc["files"]
    assert entry["path"] == str(lib) and entry["status"] == "patched"
    assert entry["error"] is None and entry["kept"] == 0
    rows = {(s["table"], s["name"]) for s in entry["symbols"]}
    assert rows == {(t, n) for t in (".dynsym", ".symtab") for n in MANGLED}
    for s in entry["symbols"]:
        assert s["demangled"] == MANGLED[s["name"]]
        assert (s["from"], s["to"]) == ("UNIQUE", "GLOBAL")
        assert isinstance(s["index"], int) and s["index"] > 0
    assert doc["summary"] == {"files": 1, "unique": 4, "patched": 4, "errors": 0, "skipped": 0, "other": 0}
    assert entry["package"] is None  # a file no dist-info RECORD or conda-meta record names


def test_only_st_info_bytes_change_and_second_run_is_a_no_op(lib: Path) -> None:
    before = lib.read_bytes()
    doc = cli_json(run_main("unique", "--json", "--to", "weak", str(lib)).stdout)
    after = lib.read_bytes()
    changed = changed_offsets(before, after)
    assert len(changed) == 4 and set(changed) <= info_offsets(lib)
    for off in changed:
        assert after[off] >> 4 == 2 and before[off] >> 4 == 10
        assert after[off] & 0xF == before[off] & 0xF, "the symbol type nibble is kept"
    assert {s["to"] for s in doc["files"][0]["symbols"]} == {"WEAK"}
    again = cli_json(run_main("unique", "--json", str(lib)).stdout)
    assert again["files"][0]["status"] == "unchanged" and again["summary"]["patched"] == 0
    assert lib.read_bytes() == after


def test_check_and_dry_run_change_nothing(lib: Path) -> None:
    before = lib.read_bytes()
    mtime = lib.stat().st_mtime_ns
    check = run_main("unique", "--check", "--json", str(lib))
    assert check.returncode == 1
    doc = cli_json(check.stdout)
    assert doc["files"][0]["status"] == "found" and doc["summary"] == {
        "files": 1, "unique": 4, "patched": 0, "errors": 0, "skipped": 0, "other": 0}
    dry = run_main("unique", "-n", "--json", str(lib))
    assert dry.returncode == 0
    assert cli_json(dry.stdout)["files"][0]["status"] == "would-patch"
    assert lib.read_bytes() == before and lib.stat().st_mtime_ns == mtime
    run_main("unique", str(lib), check=True)
    assert run_main("unique", "--check", str(lib)).returncode == 0


def test_check_with_symbol_filter_counts_only_selected(lib: Path) -> None:
    proc = run_main("unique", "--check", "--json", "--symbol", "Holder<*>::*", str(lib))
    doc = cli_json(proc.stdout)
    assert proc.returncode == 1
    assert {s["name"] for s in doc["files"][0]["symbols"]} == {"_ZN6HolderIiE5valueE"}
    assert doc["files"][0]["kept"] == 2 and doc["summary"]["unique"] == 2
    assert run_main("unique", "--check", "--symbol", "nothing*", str(lib)).returncode == 0


def test_output_leaves_input_untouched(lib: Path, tmp_path: Path) -> None:
    before = lib.read_bytes()
    out = tmp_path / "out" / "patched.so"
    out.parent.mkdir()
    run_main("unique", "-o", str(out), str(lib), check=True)
    assert lib.read_bytes() == before
    assert len(changed_offsets(before, out.read_bytes())) == 4
    assert run_main("unique", "--check", str(out)).returncode == 0
    assert run_main("unique", "-o", str(out), str(lib), str(lib)).returncode == 2


def test_atomic_mode_keeps_mode_and_xattrs_and_symlinks(lib: Path, tmp_path: Path) -> None:
    os.chmod(lib, 0o751)
    try:
        os.setxattr(lib, "user.elfpatch-test", b"kept")
    except OSError:
        pytest.skip("this file system has no user extended attributes")
    link = tmp_path / "link.so"
    link.symlink_to(lib.name)
    inode = lib.stat().st_ino
    run_main("unique", str(link), check=True)
    assert link.is_symlink() and os.readlink(link) == lib.name
    assert lib.stat().st_ino != inode, "the default mode renames a new file into place"
    assert lib.stat().st_mode & 0o7777 == 0o751
    assert os.getxattr(lib, "user.elfpatch-test") == b"kept"
    assert run_main("unique", "--check", str(lib)).returncode == 0
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_inplace_keeps_inode_and_hard_links(lib: Path, tmp_path: Path) -> None:
    other = tmp_path / "hardlink.so"
    os.link(lib, other)
    inode = lib.stat().st_ino
    run_main("unique", "--inplace", str(lib), check=True)
    assert lib.stat().st_ino == inode and other.stat().st_ino == inode
    assert run_main("unique", "--check", str(other)).returncode == 0


def test_atomic_mode_warns_about_hard_links(lib: Path, tmp_path: Path) -> None:
    os.link(lib, tmp_path / "hardlink.so")
    proc = run_main("unique", str(lib), check=True)
    assert "hard links" in proc.stderr and "--inplace" in proc.stderr


def test_errors_are_one_line_and_other_paths_still_run(lib: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"not an elf file at all")
    proc = run_main("unique", "--json", str(junk), str(tmp_path / "missing.so"), str(lib))
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert lines == [f"elfpatch: error: {junk}: not an ELF file",
                     f"elfpatch: error: {tmp_path / 'missing.so'}: cannot open: No such file or directory"]
    doc = cli_json(proc.stdout)
    assert [f["status"] for f in doc["files"]] == ["error", "error", "patched"]
    assert doc["files"][0]["error"] == "not an ELF file"
    assert doc["summary"]["errors"] == 2 and doc["summary"]["patched"] == 4
    assert junk.read_bytes() == b"not an elf file at all"


def test_check_exit_status_is_2_when_a_file_fails(lib: Path, tmp_path: Path) -> None:
    assert run_main("unique", "--check", str(lib), str(tmp_path / "missing")).returncode == 2


def test_usage_errors_exit_2() -> None:
    assert run_main("unique").returncode == 2
    assert run_main("unique", "--check", "--inplace", "x").returncode == 2
    assert run_main("unique", "--to", "local", "x").returncode == 2


def test_human_output(lib: Path) -> None:
    out = run_main("unique", "-n", str(lib), check=True).stdout.splitlines()
    assert out[0] == f"{lib}: would patch 4 unique symbols"
    assert any("Holder<int>::value  UNIQUE -> GLOBAL" in line for line in out)
    assert out[-1] == "1 file, 4 unique, 0 patched, 0 errors"


def test_names_with_line_breaks_print_as_one_line(lib: Path, tmp_path: Path) -> None:
    """A symbol name or a path may hold any byte but NUL and '/': the text report, warnings and errors escape
    control characters, so that each record stays one line; JSON keeps the name as it is."""
    data = lib.read_bytes()
    odd = tmp_path / "odd\nname.so"
    odd.write_bytes(data.replace(b"_ZN6HolderIiE5valueE", b"_ZN6Hol\nder\rIiE\x1blueE"))
    out = run_main("unique", "-n", str(odd), check=True).stdout.splitlines()
    assert out[0] == "{}: would patch 4 unique symbols".format(str(odd).replace("\n", "\\n"))
    assert sum("_ZN6Hol\\nder\\rIiE\\x1blueE  UNIQUE -> GLOBAL" in line for line in out) == 2
    assert len(out) == 1 + 4 + 1
    doc = cli_json(run_main("unique", "-n", "--json", str(odd), check=True).stdout)
    assert doc["files"][0]["path"] == str(odd)
    assert "_ZN6Hol\nder\rIiE\x1blueE" in {s["name"] for s in doc["files"][0]["symbols"]}
    odd.write_bytes(b"\x7fELF")
    proc = run_main("unique", str(odd))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("elfpatch: error: {}: ".format(str(odd).replace("\n", "\\n")))


def test_python_api(lib: Path) -> None:
    import elfpatch

    (report,) = elfpatch.scan(lib)
    assert report.status == "would-patch" and len(report.symbols) == 4
    assert elfpatch.check([lib]) is True
    (done,) = elfpatch.patch(lib, to="weak", symbols=["counter*"])
    assert done.status == "patched" and done.kept == 2
    assert {s.to for s in done.symbols} == {"WEAK"}
    assert elfpatch.check(lib, symbols=["counter*"]) is False
    with pytest.raises(elfpatch.ElfPatchError, match="not an ELF file"):
        elfpatch.patch(__file__)


def test_one_line_escapes_exactly_what_its_table_names() -> None:
    """``one_line`` passes printable text through untranslated (the common case, thousands of report lines):
    every code point, alone and inside printable text, comes out as the full escape table makes it."""
    from elfpatch.errors import _CONTROL, one_line

    for code in range(0x110000):
        ch = chr(code)
        assert one_line(ch) == ch.translate(_CONTROL), hex(code)
    for code in _CONTROL:
        assert one_line(f"_ZN1A{chr(code)}B") == f"_ZN1A{_CONTROL[code]}B"
