"""`elfpatch inits` on a directory, as `unique` and `audit` take one: every ELF file of the tree."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from helpers import run_main
from jsonschema_check import cli_json


def _tree(init_build: Path, root: Path) -> None:
    (root / "sub").mkdir(parents=True)
    shutil.copy(init_build / "gnu" / "prio", root / "prio")
    shutil.copy(init_build / "gnu" / "libchain_base.so", root / "sub" / "libchain_base.so")
    shutil.copy(init_build / "gnu" / "prio", root / "sub" / "test_prio")
    os.link(root / "prio", root / "sub" / "prio_again")  # one inode: listed once, by its first name
    os.symlink("prio", root / "link")  # not followed, as in every tree walk
    (root / "README").write_text("not ELF\n")
    shutil.copy(init_build / "gnu" / "prio.o", root / "sub" / "prio.o")  # ET_REL: the loader never runs it


def test_a_directory_lists_its_elf_files(init_build: Path, tmp_path: Path) -> None:
    """Guarantee: a directory PATH is walked for ELF files (it was refused, exit 2), --exclude passes over
    tree paths, and the JSON keeps the envelope (one entry per file, counted in summary.files)."""
    root = tmp_path / "tree"
    _tree(init_build, root)
    proc = run_main("inits", "--json", "--exclude", "test_*", str(root))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    doc = cli_json(proc.stdout)
    listed = [f["path"] for f in doc["files"]]
    assert listed == [str(root / "prio"), str(root / "sub" / "libchain_base.so")]
    assert all(f["status"] == "listed" for f in doc["files"])
    assert doc["summary"]["files"] == 2 and doc["summary"]["errors"] == 0
    assert doc["summary"]["static_initializers"][str(root / "prio")] == 6
    text = run_main("inits", str(root), check=True).stdout
    assert f"{root / 'sub' / 'test_prio'}: 6 static initializers" in text


def test_an_exclude_glob_that_matches_nothing_is_warned(init_build: Path, tmp_path: Path) -> None:
    """Guarantee: an --exclude glob that passed over nothing is said, as `unique` says it (the same line on
    stderr and in the JSON's document-level `warnings`): '*/sub/*' on the tree's root excludes nothing
    (globs match paths relative to it), 'sub/*' excludes and is not warned about."""
    root = tmp_path / "tree"
    _tree(init_build, root)
    proc = run_main("inits", "--json", "--exclude", "*/sub/*", str(root))
    doc = cli_json(proc.stdout)
    assert len(doc["files"]) == 3, "nothing excluded"
    warning = "--exclude: '*/sub/*' matched nothing"
    assert f"elfpatch: warning: {warning}" in proc.stderr and "'sub/*'" in proc.stderr, proc.stderr
    assert [w for w in doc["warnings"] if w.startswith(warning)] == doc["warnings"] != [], doc
    assert f"elfpatch: warning: {warning}" in run_main("inits", "--exclude", "*/sub/*", str(root)).stderr
    proc = run_main("inits", "--json", "--exclude", "sub/*", str(root))
    assert proc.stderr == "" and cli_json(proc.stdout)["warnings"] == [], proc.stderr


def test_a_file_path_and_a_tree_mix(init_build: Path, tmp_path: Path) -> None:
    """A file PATH is listed as before, whatever --exclude says of tree paths; a missing PATH is one error entry."""
    root = tmp_path / "tree"
    _tree(init_build, root)
    prio = str(init_build / "gnu" / "prio")
    proc = run_main("inits", "--json", "--exclude", "sub/*", prio, str(root), str(tmp_path / "nope"))
    assert proc.returncode == 2
    doc = cli_json(proc.stdout)
    assert [f["path"] for f in doc["files"]] == [prio, str(root / "prio"), str(tmp_path / "nope")]
    assert [f["status"] for f in doc["files"]] == ["listed", "listed", "error"]
