"""What a new user hits following the README: an --exclude that matches a PATH named with -o/-w, a glob that
matches nothing, -o into a directory that does not exist, and warnings a JSON reader must see. Nothing silent."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from helpers import run_main
from jsonschema_check import cli_json

from targets.helpers import build_wheel, readelf_unique, tree_state, wheel_files


def _lib(unique_build: Path, where: Path, name: str = "libholder.so") -> Path:
    where.mkdir(parents=True, exist_ok=True)
    shutil.copy(unique_build / "libholder_v1.so", where / name)
    return where / name


def test_an_excluded_path_named_with_output_is_refused_not_passed_over(unique_build: Path, tmp_path: Path) -> None:
    """Guarantee: -o OUT / -w DIR never reports success while leaving OUT unwritten (or a stale DIR/name from
    an earlier run): a PATH that --exclude matches is refused, exit 2, one line naming it and the glob."""
    lib = _lib(unique_build, tmp_path / "in")
    out_dir = tmp_path / "wheelhouse"
    out_dir.mkdir()
    stale = out_dir / lib.name
    stale.write_bytes(lib.read_bytes())  # an earlier run's (unpatched) result
    before = tree_state(tmp_path)
    for args in (("-w", str(out_dir)), ("-o", str(tmp_path / "out.so"))):
        proc = run_main("unique", "--exclude", "lib*", *args, str(lib))
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"elfpatch: error: {lib}: ")
        assert "'lib*'" in proc.stderr, proc.stderr
    assert tree_state(tmp_path) == before, "nothing written, the input untouched"
    # Without the glob the same run writes the result.
    run_main("unique", "-w", str(out_dir), str(lib), check=True)
    assert readelf_unique(stale) == 0


def test_an_exclude_glob_that_matches_nothing_is_warned(unique_build: Path, tmp_path: Path) -> None:
    """Guarantee: a glob that passes over nothing is said (stderr and the JSON's document-level warnings):
    the README's `--exclude '*/test/*'` on "$SITE/torch" misses torch/test/..., whose path relative to the
    named root is test/...; 'test/*' matches it, and then nothing is warned."""
    site = tmp_path / "site-packages"
    torch = site / "torch"
    _lib(unique_build, torch / "test", "test_holder.so")
    _lib(unique_build, torch / "lib", "libholder.so")
    proc = run_main("unique", "--check", "--json", "--exclude", "*/test/*", str(torch))
    doc = cli_json(proc.stdout)
    assert len(doc["files"]) == 2, "excluded nothing"
    warning = "--exclude: '*/test/*' matched nothing"
    assert f"elfpatch: warning: {warning}" in proc.stderr
    assert [w for w in doc["warnings"] if w.startswith(warning)], doc["warnings"]
    assert "'test/*'" in proc.stderr, "the glob that would match is suggested"
    for glob, root in (("test/*", torch), ("*/test/*", site)):  # the recipe's globs, each on its root
        proc = run_main("unique", "--check", "--json", "--exclude", glob, str(root))
        doc = cli_json(proc.stdout)
        assert [os.path.basename(f["path"]) for f in doc["files"]] == ["libholder.so"], glob
        assert "warning" not in proc.stderr and doc["warnings"] == [], proc.stderr


def test_an_exclude_glob_used_only_on_members_is_not_warned(unique_build: Path, tmp_path: Path) -> None:
    """A glob that matches only a wheel member (in a tree: possibly in a worker process) was used: no warning."""
    d = tmp_path / "dist"
    d.mkdir()
    build_wheel(d, wheel_files(unique_build / "libholder_v1.so"))
    proc = run_main("unique", "--check", "--exclude", "holderpkg/*", str(d))
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


def test_output_into_a_missing_directory_names_the_output(unique_build: Path, tmp_path: Path) -> None:
    """Guarantee: -o repaired/x.so when repaired/ does not exist is one error line naming OUT and its
    directory (it used to name the input: "cannot open its directory"); nothing is created, the input is
    untouched."""
    lib = _lib(unique_build, tmp_path / "in")
    before = tree_state(tmp_path)
    out = tmp_path / "repaired" / "x.so"
    proc = run_main("unique", "-o", str(out), str(lib))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert str(out) in proc.stderr and "does not exist" in proc.stderr, proc.stderr
    assert tree_state(tmp_path) == before
    (tmp_path / "repaired").write_text("a file, not a directory")
    proc = run_main("unique", "-o", str(out), str(lib))
    assert proc.returncode == 2 and "is not a directory" in proc.stderr and str(out) in proc.stderr


def test_every_warning_is_in_the_json(unique_build: Path, tmp_path: Path) -> None:
    """Guarantee: a warning printed about a file is in that file's JSON `warnings` too (once), so a CI job
    reading the JSON sees it: here the hard-link warning, for a file and for a tree's file."""
    lib = _lib(unique_build, tmp_path / "in")
    os.link(lib, tmp_path / "other-name.so")
    proc = run_main("unique", "--json", str(lib))
    assert proc.returncode == 0, proc.stderr
    (entry,) = cli_json(proc.stdout)["files"]
    assert entry["status"] == "patched"
    assert len(entry["warnings"]) == 1 and "hard link" in entry["warnings"][0], entry
    assert f"elfpatch: warning: {lib}: {entry['warnings'][0]}" in proc.stderr.splitlines()
    tree = tmp_path / "tree"
    inner = _lib(unique_build, tree)
    os.link(inner, tmp_path / "outside.so")
    doc = cli_json(run_main("unique", "--json", str(tree)).stdout)
    (entry,) = doc["files"]
    assert [w for w in entry["warnings"] if "hard link" in w], entry
