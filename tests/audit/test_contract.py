"""The `elfpatch audit` contract: JSON fields, exit statuses, the text report's order, what counts as one
definition (identical copies, hard links), --exclude, wheels and archives, bad input."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

from helpers import run_main
from jsonschema_check import cli_json

from audit.helpers import INSTANCES, NAME, SLOTS, audit_json, by_symbol, install


def test_json_document(site: Path) -> None:
    status, doc = audit_json(str(site))
    assert status == 1
    assert set(doc) == {"schema", "files", "collisions", "pinned", "errors", "warnings", "run_warnings", "summary"}
    c = by_symbol(doc)[SLOTS]
    assert set(c) == {"symbol", "demangled", "definitions", "referenced_by", "differs", "cross_package"}
    assert c["demangled"] == "Registry<int>::slots"
    for d in c["definitions"]:
        assert set(d) == {"path", "member", "package", "st_size"} and d["member"] is None
    packages = {os.path.relpath(d["path"], site): d["package"] for d in c["definitions"]}
    assert packages == {"pkga/_a.so": {"name": "pkga", "version": "1.0"},
                        "pkgb/_b.so": {"name": "pkgb", "version": "2.0"},
                        "pkgc/libcore.so": {"name": "pkgc", "version": "1.0"}}
    assert [os.path.relpath(p["path"], site) for p in doc["pinned"]] == ["pkga/_a.so", "pkgb/_b.so",
                                                                        "pkgc/libcore.so"]
    assert all(p["unique"] == 3 for p in doc["pinned"])
    s = doc["summary"]
    assert (s["files"], s["with_unique"], s["collisions"], s["cross_package_collisions"]) == (4, 3, 3, 3)
    assert s["package_pairs"] == [{"packages": ["pkga", "pkgb"], "names": sorted([SLOTS, NAME, INSTANCES])},
                                  {"packages": ["pkga", "pkgc"], "names": sorted([SLOTS, NAME, INSTANCES])},
                                  {"packages": ["pkgb", "pkgc"], "names": sorted([SLOTS, NAME, INSTANCES])}]
    assert s["errors"] == 0 and doc["errors"] == []
    assert s["other"] == 9  # three each of __init__.py, METADATA and RECORD: counted apart, not skipped
    assert s["skipped"] == 0


def test_one_package_alone_is_no_cross_package_collision(site: Path, audit_build: Path, tmp_path: Path) -> None:
    """Two files of one package that define the same name are a collision, but not the gate's business."""
    shutil.copy(audit_build / "_b.so", site / "pkga" / "_b_too.so")
    status, doc = audit_json(str(site / "pkga"))
    (c,) = [c for c in doc["collisions"] if c["symbol"] == SLOTS]
    assert not c["cross_package"] and c["differs"]
    assert status == 0 and doc["summary"]["cross_package_collisions"] == 0
    # The text lists names within one package only with -v; names of files no package owns always.
    text = run_main("audit", str(site / "pkga")).stdout
    assert "Registry<int>::slots" not in text and "3 names that only files of one package define" in text
    assert "Registry<int>::slots  [sizes differ]" in run_main("audit", "-v", str(site / "pkga")).stdout
    loose = run_main("audit", str(audit_build / "_a.so"), str(audit_build / "_b.so"))
    assert loose.returncode == 0 and "Registry<int>::slots  [sizes differ]" in loose.stdout


def test_identical_copies_and_hard_links_count_once(audit_build: Path, tmp_path: Path) -> None:
    root = tmp_path / "site"
    install(root, "one", "1", {"one/_a.so": audit_build / "_a.so"})
    install(root, "two", "1", {"two/_a.so": audit_build / "_a.so"})  # the same bytes, another package
    os.link(root / "one" / "_a.so", root / "one" / "_a_link.so")
    status, doc = audit_json(str(root), str(root / "one" / "_a.so"))  # and one file named twice
    assert status == 0 and doc["collisions"] == []
    # One changed byte outside the symbol tables makes them two files.
    data = bytearray((root / "two" / "_a.so").read_bytes())
    data[-1] ^= 1
    (root / "two" / "_a.so").write_bytes(bytes(data))
    status, doc = audit_json(str(root))
    assert status == 1 and len(doc["collisions"]) == 3


def test_exclude(site: Path) -> None:
    status, doc = audit_json("--exclude", "pkgb/*", "--exclude", "libcore.so", str(site))
    assert status == 0
    assert {os.path.relpath(p["path"], site) for p in doc["pinned"]} == {"pkga/_a.so"}
    assert doc["collisions"] == []  # _c.so refers, but defines nothing
    assert doc["summary"]["skipped"] == 3  # pkgb/_b.so, pkgb/__init__.py, pkgc/libcore.so
    status, doc = audit_json("--exclude", "pkgc/*", str(site))
    assert status == 1 and doc["summary"]["package_pairs"][0]["packages"] == ["pkga", "pkgb"]


def test_an_exclude_glob_that_matches_nothing_is_warned(site: Path) -> None:
    """Guarantee: an --exclude glob that passed over nothing is said, as `unique` says it (the same line on
    stderr, and in the JSON: `run_warnings`, since `warnings` lists the files' own): globs match paths
    relative to the named root, so '*/pkgb/*' on the site excludes nothing; 'pkgb/*' is not warned about."""
    proc = run_main("audit", "--json", "--exclude", "*/pkgb/*", "--exclude", "pkgc/*", str(site))
    doc = cli_json(proc.stdout)
    warning = "--exclude: '*/pkgb/*' matched nothing"
    assert f"elfpatch: warning: {warning}" in proc.stderr and "'pkgb/*'" in proc.stderr, proc.stderr
    assert [w for w in doc["run_warnings"] if w.startswith(warning)] == doc["run_warnings"] != [], doc
    assert "pkgc" not in proc.stderr, "a glob that excluded something is not warned about"
    assert doc["summary"]["package_pairs"][0]["packages"] == ["pkga", "pkgb"], "nothing of pkgb excluded"
    text = run_main("audit", "--exclude", "*/pkgb/*", str(site))
    assert f"elfpatch: warning: {warning}" in text.stderr
    proc = run_main("audit", "--json", "--exclude", "pkgb/*", str(site))
    assert "warning" not in proc.stderr and cli_json(proc.stdout)["run_warnings"] == [], proc.stderr


def test_wheels_and_archives(audit_build: Path, tmp_path: Path) -> None:
    """Wheels named on the command line: each member belongs to the wheel's distribution."""
    wheels = []
    for name, lib in (("alpha", "_a.so"), ("beta", "_b.so")):
        whl = tmp_path / f"{name}-3.1-cp311-cp311-linux_x86_64.whl"
        with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(f"{name}/{lib}", (audit_build / lib).read_bytes())
            z.writestr(f"{name}-3.1.dist-info/RECORD", f"{name}/{lib},,\n")
        wheels.append(str(whl))
    archive = tmp_path / "libcore.a"
    shutil.copy(audit_build / "libcore.so", tmp_path / "core.so")
    subprocess.run(["ar", "rc", str(archive), "core.so"], check=True, cwd=tmp_path)
    status, doc = audit_json(*wheels, str(archive))
    assert status == 1
    c = by_symbol(doc)[SLOTS]
    assert [(d["member"], d["package"]) for d in c["definitions"]] == [
        ("alpha/_a.so", {"name": "alpha", "version": "3.1"}), ("beta/_b.so", {"name": "beta", "version": "3.1"}),
        ("core.so", None)]
    assert doc["summary"]["package_pairs"] == [{"packages": ["alpha", "beta"], "names": sorted(by_symbol(doc))}]
    status, doc = audit_json("--exclude", "beta/*", *wheels)
    assert status == 0 and doc["collisions"] == []


def test_conda_environment(audit_build: Path, tmp_path: Path) -> None:
    env = tmp_path / "env"
    (env / "conda-meta").mkdir(parents=True)
    (env / "lib").mkdir()
    for name, lib in (("libfoo", "_a.so"), ("libbar", "_b.so")):
        shutil.copy(audit_build / lib, env / "lib" / f"{name}.so")
        (env / "conda-meta" / f"{name}-1.2-h0.json").write_text(
            json.dumps({"name": name, "version": "1.2", "files": [f"lib/{name}.so"]}))
    (env / "conda-meta" / "broken-1-h0.json").write_text("{not json")
    status, doc = audit_json(str(env / "lib"))
    assert status == 1
    assert {d["package"]["name"] for d in by_symbol(doc)[SLOTS]["definitions"]} == {"libfoo", "libbar"}


def test_text_report_order(site: Path) -> None:
    proc = run_main("audit", str(site))
    assert proc.returncode == 1 and proc.stderr == ""
    out = proc.stdout
    pairs, names, fix = (out.index(s) for s in ("pkga and pkgb: 3 names", "Registry<int>::slots",
                                                "`elfpatch unique` on the 3 files"))
    assert pairs < names < fix
    assert "sizes differ" in out and "used by " in out and "pkgc/_c.so  (pkgc 1.0)" in out
    assert out.rstrip().splitlines()[-1].startswith("4 files, 3 with unique symbols, 3 collisions, 3 across")


def test_bad_input_is_one_line_and_exit_2(site: Path, tmp_path: Path) -> None:
    bad = site / "pkga" / "_bad.so"
    bad.write_bytes(b"\x7fELF" + b"\x07" * 60)
    before = bad.read_bytes()
    proc = run_main("audit", "--json", str(site))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"elfpatch: error: {bad}: ")
    doc = cli_json(proc.stdout)
    assert [e["path"] for e in doc["errors"]] == [str(bad)] and doc["summary"]["errors"] == 1
    assert len(doc["collisions"]) == 3, "the rest of the tree is still audited"
    assert bad.read_bytes() == before
    missing = run_main("audit", str(tmp_path / "nope.so"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_audit_writes_nothing(site: Path) -> None:
    def state() -> dict[str, tuple[bytes, int]]:
        return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in site.rglob("*") if p.is_file()}

    before = state()
    run_main("audit", str(site))
    assert state() == before


def test_api(site: Path, tmp_path: Path) -> None:
    import elfpatch
    from elfpatch.errors import ElfPatchError

    result = elfpatch.audit(site)
    assert result.exit_status() == 1 and len(result.cross_package) == 3
    assert result.to_json() == audit_json(str(site))[1]
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF")
    try:
        elfpatch.audit([site, bad])
    except ElfPatchError as exc:
        assert exc.path == str(bad)
    else:
        raise AssertionError("a broken file raises ElfPatchError")
    assert elfpatch.audit([bad], raise_errors=False).exit_status() == 2


def test_unreadable_reference_name_is_no_error_where_check_has_none(site: Path) -> None:
    """A reference whose st_name points past the string table: `unique --check` never reads it, so neither
    may audit fail on it (the loader would refuse the file; the report still covers the rest)."""
    import struct

    from elfpatch.elf.file import ElfFile

    user = site / "pkgc" / "_c.so"
    data = bytearray(user.read_bytes())
    (table,) = [t for t in ElfFile(bytes(data)).symbol_tables() if t.name == ".dynsym"]
    index = next(s.symndx for s in table if s.name == SLOTS)
    struct.pack_into("<I", data, table.offset + index * table.entsize, 0xFFFFFF)
    user.write_bytes(bytes(data))
    assert run_main("unique", "--check", str(user)).returncode == 0
    status, doc = audit_json(str(site))
    assert status == 1 and doc["errors"] == []
    assert [os.path.relpath(r["path"], site) for r in by_symbol(doc)[NAME]["referenced_by"]] == ["pkgc/_c.so"]
    assert by_symbol(doc)[SLOTS]["referenced_by"] == []
