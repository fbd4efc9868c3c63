"""Where the CLI and the API meet: option combinations refused before anything is opened, the exception a
caller gets keeps its kind, and a member's error keeps its kind through an archive."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import native_build, run_main

import elfpatch


def snapshot(*paths: Path) -> dict[Path, bytes | None]:
    return {p: p.read_bytes() if p.exists() else None for p in paths}


def unchanged_since(before: dict[Path, bytes | None]) -> None:
    for path, data in before.items():
        assert (path.read_bytes() if path.exists() else None) == data, f"{path} changed"


@pytest.mark.parametrize("call", [
    pytest.param(lambda a, b, out: elfpatch.patch(a, inplace=True, output=out), id="inplace+output"),
    pytest.param(lambda a, b, out: elfpatch.patch([a, b], output=out), id="two-paths+output"),
    pytest.param(lambda a, b, out: elfpatch.patch(a, output=""), id="empty-output"),
    pytest.param(lambda a, b, out: elfpatch.patch([]), id="no-path"),
    pytest.param(lambda a, b, out: elfpatch.patch(a, output=out, output_dir=out.parent / "house"),
                 id="output_dir+output"),
    pytest.param(lambda a, b, out: elfpatch.patch(a, inplace=True, output_dir=out.parent / "house"),
                 id="output_dir+inplace"),
    pytest.param(lambda a, b, out: elfpatch.patch(a, output_dir=""), id="empty-output_dir"),
    pytest.param(lambda a, b, out: elfpatch.patch(a, output_dir=a.parent), id="output_dir-holds-the-input"),
    pytest.param(lambda a, b, out: elfpatch.patch([a, b.parent / "sub" / a.name], output_dir=out.parent / "house"),
                 id="output_dir-two-inputs-one-name"),
])
def test_api_refuses_harmful_combinations_before_opening(lib: Path, tmp_path: Path, call) -> None:
    other = tmp_path / "other.so"
    shutil.copyfile(lib, other)
    (tmp_path / "sub").mkdir()
    shutil.copyfile(lib, tmp_path / "sub" / lib.name)
    out = tmp_path / "out.so"
    before = snapshot(lib, other, out, tmp_path / "sub" / lib.name)
    listing = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ValueError):
        call(lib, other, out)
    unchanged_since(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no output, no -w directory


@pytest.mark.parametrize("args", [
    ["-o", ""],
    ["--inplace", "-o", "OUT"],
    ["--check", "-o", "OUT"],
    ["-n", "-o", "OUT"],
    ["-w", ""],
    ["-w", "OUT", "-o", "OUT"],
    ["-w", "OUT", "--inplace"],
])
def test_cli_usage_errors_write_nothing(lib: Path, tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "OUT"
    before = snapshot(lib, out)
    proc = run_main("unique", *[str(out) if a == "OUT" else a for a in args], str(lib))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("elfpatch: error: "), proc.stderr
    unchanged_since(before)


def test_cli_two_paths_with_output(lib: Path, tmp_path: Path) -> None:
    other, out = tmp_path / "other.so", tmp_path / "out.so"
    shutil.copyfile(lib, other)
    before = snapshot(lib, other, out)
    proc = run_main("unique", "-o", str(out), str(lib), str(other))
    assert proc.returncode == 2 and "exactly one PATH" in proc.stderr
    unchanged_since(before)


def test_api_output_dir_writes_each_input_under_its_own_name(lib: Path, tmp_path: Path) -> None:
    """``output_dir`` is -w: DIR is created, each result lands there under its PATH's name, the PATHs stay
    as they were; a directory PATH is an error of its own, as on the command line."""
    before = snapshot(lib)
    house = tmp_path / "house"
    reports = elfpatch.patch([lib], output_dir=house)
    unchanged_since(before)
    assert [r.status for r in reports] == ["patched"] and reports[0].symbols
    assert elfpatch.scan(lib)[0].symbols and not elfpatch.scan(house / lib.name)[0].symbols
    with pytest.raises(elfpatch.ElfPatchError, match="not a directory"):
        elfpatch.patch([tmp_path / "house"], output_dir=tmp_path / "elsewhere")


def test_parse_error_reaches_the_caller_as_parse_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF" + b"\x09" * 60)  # EI_CLASS 9: no such class
    with pytest.raises(elfpatch.ParseError) as info:
        elfpatch.patch(bad)
    assert info.value.path == str(bad)
    assert bad.read_bytes() == b"\x7fELF" + b"\x09" * 60


def test_member_error_keeps_its_kind(lib: Path, tmp_path: Path) -> None:
    """A malformed ELF member of an archive is a ParseError about the archive, naming the member."""
    member = bytearray(lib.read_bytes())
    member[4] = 9  # EI_CLASS
    body = bytes(member)
    archive = tmp_path / "libx.a"
    header = f"{'bad.o/':<16}{0:<12}{0:<6}{0:<6}{'644':<8}{len(body):<10}`\n".encode()
    archive.write_bytes(b"!<arch>\n" + header + body + b"\n" * (len(body) & 1))
    before = archive.read_bytes()
    with pytest.raises(elfpatch.ParseError, match="member bad.o"):
        elfpatch.patch(archive)
    assert archive.read_bytes() == before


def test_gnu_long_name_offset_with_a_non_utf8_byte(tmp_path: Path) -> None:
    """A "/N" name field holding a byte that is not UTF-8 is a bad offset (ParseError), not an escaped
    UnicodeEncodeError."""
    table = b"a_long_member_name_of_an_object_file.o/\n"  # even: no padding after it
    archive = tmp_path / "liby.a"
    names = f"{'//':<16}{'':<12}{'':<6}{'':<6}{'':<8}{len(table):<10}`\n".encode() + table
    member = b"/1\xff" + b" " * 13 + f"{0:<12}{0:<6}{0:<6}{'644':<8}{4:<10}`\n".encode() + b"text"
    archive.write_bytes(b"!<arch>\n" + names + member)
    before = archive.read_bytes()
    with pytest.raises(elfpatch.ParseError, match="long name offset"):
        elfpatch.patch(archive)
    proc = run_main("unique", str(archive))
    assert proc.returncode == 2 and "internal error" not in proc.stderr and "long name offset" in proc.stderr
    assert archive.read_bytes() == before


def test_api_lock_timeout_bounds_the_wait(lib: Path) -> None:
    """A lock another process holds makes the API give up after lock_timeout with a one-line error, the file
    untouched; a negative or infinite timeout is refused before anything is opened."""
    before = lib.read_bytes()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'rb'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
                               str(lib)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(elfpatch.ElfPatchError, match="lock") as info:
            elfpatch.patch(lib, lock_timeout=0.1)
        assert "\n" not in str(info.value)
    finally:
        holder.communicate("")
    assert lib.read_bytes() == before
    for bad in (-1.0, float("inf"), float("nan"), "soon"):
        with pytest.raises(ValueError):
            elfpatch.patch(lib, lock_timeout=bad)
    assert lib.read_bytes() == before


def test_api_one_glob_as_a_string_is_one_glob(lib: Path, tmp_path: Path) -> None:
    """Guarantee: a list parameter given one string means that one glob, never its characters one by one (a
    "*" among them selects everything): patch(symbols=...) rewrites only what the glob names, audit(exclude=...)
    passes over only what it names. A non-string item is refused before anything is opened."""
    holder = "Holder<*"
    assert [len(r.symbols) for r in elfpatch.scan(lib, symbols=holder)] == [2]
    assert [len(r.symbols) for r in elfpatch.scan(lib)] == [4]
    assert elfpatch.check(lib, symbols="nothing*") is False
    out = tmp_path / "out.so"
    (report,) = elfpatch.patch(lib, symbols=holder, output=str(out))
    assert sorted({s.name for s in report.symbols}) == ["_ZN6HolderIiE5valueE"]
    assert [len(r.symbols) for r in elfpatch.scan(out)] == [2], "only Holder<int>::value was rewritten"
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    shutil.copyfile(lib, tree / "pkg" / "a.so")
    shutil.copyfile(lib, tree / "pkg" / "b.so")
    assert len(elfpatch.audit(tree, exclude="*/tests/*").reports) == 2
    assert len(elfpatch.audit(tree, exclude="b.so").reports) == 1
    before = lib.read_bytes()
    for bad in ([b"Holder*"], [3]):
        with pytest.raises(ValueError, match="symbols"):
            elfpatch.patch(lib, symbols=bad)
        with pytest.raises(ValueError, match="exclude"):
            elfpatch.audit(lib, exclude=bad)
    assert lib.read_bytes() == before


def test_symbol_row_index_is_symndx_and_the_old_name_says_so(lib: Path) -> None:
    """Guarantee: a SymbolRow's symbol table index is ``symndx`` (a field named ``index`` hid tuple.index), the
    JSON key is still "index", and code using the old attribute fails with a message naming the new one
    instead of silently getting tuple's method."""
    (report,) = elfpatch.scan(lib)
    for row in report.symbols:
        assert isinstance(row.symndx, int) and row.symndx > 0
        assert row.to_json()["index"] == row.symndx
        with pytest.raises(AttributeError, match="symndx"):
            _ = row.index


def test_api_keep_and_exclude_mean_what_the_cli_flags_mean(lib: Path, tmp_path: Path) -> None:
    """Guarantee: scan/check/patch take ``keep`` (--keep) and ``exclude`` (--exclude) with the CLI's meaning:
    the same symbols kept, the same files passed over, one string one glob."""
    holder = "Holder<*"
    (report,) = elfpatch.scan(lib, keep=holder)
    assert sorted({s.demangled for s in report.symbols}) == ["counter()::c"] and report.kept == 2
    cli = run_main("unique", "--dry-run", "--json", "--keep", holder, str(lib)).stdout
    assert '"kept": 2' in cli and cli.count('"counter()::c"') == len(report.symbols)
    assert elfpatch.check(lib, keep=["Holder<*", "counter*"]) is False
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    shutil.copyfile(lib, tree / "a.so")
    shutil.copyfile(lib, tree / "tests" / "b.so")
    assert [r.path for r in elfpatch.scan(tree, exclude="tests/*")] == [str(tree / "a.so")]
    assert elfpatch.check(tree / "tests", exclude="b.so") is False
    before = (tree / "tests" / "b.so").read_bytes()
    reports = elfpatch.patch(tree, exclude=["tests/*"], keep="counter*")
    assert [(r.path, len(r.symbols)) for r in reports] == [(str(tree / "a.so"), 2)]
    assert (tree / "tests" / "b.so").read_bytes() == before
    assert [len(r.symbols) for r in elfpatch.scan(tree / "a.so")] == [2], "the kept ones are still unique"
    for bad in ([b"x"], [3]):
        with pytest.raises(ValueError, match="keep"):
            elfpatch.scan(lib, keep=bad)
        with pytest.raises(ValueError, match="exclude"):
            elfpatch.patch(lib, exclude=bad)
    assert elfpatch.patch(lib, lock_timeout=5, keep="*")[0].status == "unchanged"


def test_list_initializers_takes_paths_trees_and_raise_errors(init_tree: Path, tmp_path: Path) -> None:
    """Guarantee: list_initializers takes a list of paths (a directory: its tree's ELF executables and shared
    objects, less ``exclude``), each entry as `inits --json` has it; a failure raises the project's error, or
    is an "error" entry with raise_errors=False. One path, as before, returns the old listing."""
    prio = init_tree / "prio"
    old = elfpatch.list_initializers(str(prio))
    assert set(old) == {"path", "init", "fini", "warnings"} and old["path"] == str(prio)
    (entry,) = elfpatch.list_initializers([prio])
    assert entry == {"path": str(prio), "status": "listed", "error": None, **old}
    missing = tmp_path / "missing"
    with pytest.raises(elfpatch.ElfPatchError) as info:
        elfpatch.list_initializers([prio, missing])
    assert info.value.path == str(missing)
    listed = elfpatch.list_initializers([init_tree, missing], exclude="lib*", raise_errors=False)
    assert [e["path"] for e in listed] == [str(prio), str(missing)]
    assert listed[1]["status"] == "error" and "init" not in listed[1] and listed[1]["error"]
    with pytest.raises(elfpatch.ElfPatchError, match=r"pass \[path\]"):
        elfpatch.list_initializers(str(init_tree))


@pytest.fixture
def init_tree(tmp_path: Path) -> Path:
    """A tree of one executable, one shared object and an object file, from the inits fixtures."""
    from inits.conftest import BUILD, INIT_ORDER

    native_build(INIT_ORDER.name)
    tree = tmp_path / "inits_tree"
    tree.mkdir()
    for name in ("prio", "libchain_base.so", "prio.o"):
        shutil.copyfile(BUILD / "gnu" / name, tree / name)
    return tree
