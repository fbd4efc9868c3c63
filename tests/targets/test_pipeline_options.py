"""`elfpatch unique` pipeline options: -w/--output-dir, --exclude, --keep, -v/-q for trees, the `other` count,
-o of a wheel with nothing to patch, and `package` in the JSON entries."""
from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from helpers import run_main
from jsonschema_check import cli_json

from elfpatch.harness.dlcheck import dlcheck
from targets.helpers import WHEEL_NAME, build_wheel, readelf_unique, tree_state, wheel_files


@pytest.fixture
def inputs(unique_build: Path, objs: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """One of each kind, in a directory of their own: a library, an archive, a wheel, and a library without
    unique symbols."""
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(unique_build / "libholder_v1.so", d / "libholder_v1.so")
    shutil.copy(unique_build / "libuser.so", d / "libuser.so")
    shutil.copy(objs["v1"], d / "holder.o")
    subprocess.run(["ar", "rcs", "libholder.a", "holder.o"], check=True, cwd=d)
    (d / "holder.o").unlink()
    whl = build_wheel(d, wheel_files(unique_build / "libholder_v1.so"))
    return {"lib": d / "libholder_v1.so", "plain": d / "libuser.so", "archive": d / "libholder.a", "wheel": whl}


def test_output_dir_writes_each_input_under_its_own_name(inputs: dict[str, Path], tmp_path: Path) -> None:
    before = tree_state(inputs["lib"].parent)
    out = tmp_path / "wheelhouse"  # created, as auditwheel's -w does
    proc = run_main("unique", "--json", "-w", str(out), *(str(p) for p in inputs.values()))
    assert proc.returncode == 0, proc.stderr
    assert tree_state(inputs["lib"].parent) == before, "inputs untouched"
    assert sorted(os.listdir(out)) == sorted(p.name for p in inputs.values())
    for kind in ("lib", "archive"):
        assert readelf_unique(inputs[kind]) > 0 and readelf_unique(out / inputs[kind].name) == 0
    with zipfile.ZipFile(out / WHEEL_NAME) as z:
        patched = z.read("holderpkg/libholder.so")
    (tmp_path / "member.so").write_bytes(patched)
    assert readelf_unique(tmp_path / "member.so") == 0
    assert (out / "libuser.so").read_bytes() == inputs["plain"].read_bytes(), "nothing to patch: a copy"
    doc = cli_json(proc.stdout)
    assert doc["summary"]["patched"] == 10  # 4 in the library, 2 in the archive's object, 4 in the wheel
    assert {f["path"] for f in doc["files"]} == {str(p) for p in inputs.values()}


def test_output_dir_refusals(inputs: dict[str, Path], tmp_path: Path) -> None:
    before = tree_state(inputs["lib"].parent)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(inputs["lib"], other / inputs["lib"].name)
    out = tmp_path / "out"
    cases = [
        ("-w", str(out), str(inputs["lib"]), str(other / inputs["lib"].name)),  # two inputs, one output name
        ("-w", str(inputs["lib"].parent), str(inputs["lib"])),  # the output would be the input
        ("-w", str(out), "--check", str(inputs["lib"])),
        ("-w", str(out), "-o", str(tmp_path / "x.so"), str(inputs["lib"])),
    ]
    for args in cases:
        proc = run_main("unique", *args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert proc.stderr.startswith("elfpatch: error: ")
    assert not out.exists(), "a refused run leaves no -w directory behind"
    proc = run_main("unique", "-w", str(out), str(inputs["lib"].parent))
    assert proc.returncode == 2 and "not a directory" in proc.stderr and proc.stderr.count("\n") == 1
    assert tree_state(inputs["lib"].parent) == before


def test_output_of_a_wheel_with_nothing_to_patch_is_a_byte_identical_copy(unique_build: Path,
                                                                          tmp_path: Path) -> None:
    """RECORD first, a signature, a library without unique symbols: -o copies the wheel as it is (it used to
    move RECORD to the end, and so change the wheel's hash)."""
    files = wheel_files(unique_build / "libuser.so")
    files = {"holderpkg-1.0.dist-info/RECORD": b"holderpkg/libholder.so,,\n", **files,
             "holderpkg-1.0.dist-info/RECORD.jws": b"{}"}
    whl = build_wheel(tmp_path, files, record=False)
    for args in (["-o", str(tmp_path / "out.whl")], ["-w", str(tmp_path / "house")]):
        proc = run_main("unique", *args, str(whl))
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.whl").read_bytes() == whl.read_bytes()
    assert (tmp_path / "house" / whl.name).read_bytes() == whl.read_bytes()


def test_exclude_in_trees_wheels_and_archives(inputs: dict[str, Path], unique_build: Path) -> None:
    root = inputs["lib"].parent
    (root / "tests").mkdir()
    shutil.copy(unique_build / "libholder_v2.so", root / "tests" / "test_holder.so")
    before = tree_state(root)
    proc = run_main("unique", "--json", "--exclude", "tests/*", "--exclude", "libholder.a", str(root))
    assert proc.returncode == 0, proc.stderr
    doc = cli_json(proc.stdout)
    assert sorted(os.path.relpath(f["path"], root) for f in doc["files"]) == [WHEEL_NAME, "libholder_v1.so",
                                                                              "libuser.so"]
    assert doc["summary"]["skipped"] == 2
    after = tree_state(root)
    for name in ("tests/test_holder.so", "libholder.a"):
        assert after[str(root / name)] == before[str(root / name)], name
    # A glob without / matches a file's own name anywhere; member names are matched too.
    doc = cli_json(run_main("unique", "--json", "--check", "--exclude", "test_*.so", "--exclude", "*.o",
                             "--exclude", "holderpkg/lib*", str(root)).stdout)
    names = sorted(f"{os.path.relpath(f['path'], root)}[{f.get('member')}]" for f in doc["files"])
    assert names == [f"{WHEEL_NAME}[None]", "libholder.a[None]", "libholder_v1.so[None]", "libuser.so[None]"]
    # A PATH named on the command line is matched as given.
    doc = cli_json(run_main("unique", "--json", "--check", "--exclude", "*.so", str(inputs["lib"]),
                             str(inputs["archive"])).stdout)
    assert [f["path"] for f in doc["files"]] == [str(inputs["archive"])] and doc["summary"]["skipped"] == 1


def test_keep_is_the_complement_of_symbol(inputs: dict[str, Path]) -> None:
    lib = str(inputs["lib"])

    def rows(*args: str) -> tuple[set[tuple[str, int]], int]:
        (entry,) = cli_json(run_main("unique", "-n", "--json", *args, lib).stdout)["files"]
        return {(s["table"], s["index"]) for s in entry["symbols"]}, entry["kept"]

    everything, _ = rows()
    selected, kept_s = rows("--symbol", "counter*")
    rest, kept_k = rows("--keep", "counter*")
    assert selected and rest and selected.isdisjoint(rest) and selected | rest == everything
    assert kept_k == len(selected) and kept_s == len(rest)
    text = run_main("unique", "-n", "--keep", "counter*", lib).stdout
    assert f"({len(selected)} kept unique by --keep)" in text


def test_keep_leaves_the_loader_sharing_only_the_kept_singleton(unique_build: Path, tmp_path: Path) -> None:
    libs = []
    for v in (1, 2):
        p = tmp_path / f"libholder_v{v}.so"
        shutil.copy(unique_build / f"libholder_v{v}.so", p)
        libs.append(str(p))
    shared = {b["symbol"] for b in dlcheck(libs)["cross_bindings"]}
    assert shared == {"_ZN6HolderIiE5valueE", "_ZZ7countervE1c"}
    run_main("unique", "--keep", "counter()::*", *libs, check=True)
    assert {b["symbol"] for b in dlcheck(libs)["cross_bindings"]} == {"_ZZ7countervE1c"}


def test_tree_text_lists_findings_only_unless_verbose(inputs: dict[str, Path]) -> None:
    root = inputs["lib"].parent
    (root / "notes.txt").write_text("not ELF\n")
    default = run_main("unique", "--check", str(root)).stdout
    assert "libuser.so" not in default and "libholder_v1.so: found 4 unique symbols" in default
    verbose = run_main("unique", "--check", "-v", str(root)).stdout
    assert f"{inputs['plain']}: no unique symbols" in verbose
    quiet = run_main("unique", "--check", "-q", str(root))
    assert quiet.returncode == 1 and quiet.stdout.splitlines() == [default.splitlines()[-1]]
    assert quiet.stdout.endswith(", 1 other\n")
    # A file named on the command line is always listed; JSON always lists everything.
    assert "no unique symbols" in run_main("unique", "--check", str(inputs["plain"])).stdout
    doc = cli_json(run_main("unique", "--check", "--json", "-q", str(root)).stdout)
    assert str(inputs["plain"]) in {f["path"] for f in doc["files"]}
    assert doc["summary"]["other"] == 1


def test_json_entries_carry_their_package(inputs: dict[str, Path], unique_build: Path, tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    (site / "holderpkg").mkdir(parents=True)
    shutil.copy(unique_build / "libholder_v1.so", site / "holderpkg" / "libholder.so")
    info = site / "holder_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: holder-pkg\nVersion: 1.0\n")
    (info / "RECORD").write_text("holderpkg/libholder.so,,\nholder_pkg-1.0.dist-info/RECORD,,\n")
    shutil.copy(unique_build / "libholder_v2.so", site / "stray.so")  # no package owns it
    doc = cli_json(run_main("unique", "-n", "--json", str(site), str(inputs["wheel"])).stdout)
    packages = {(os.path.basename(f["path"]), f.get("member")): f["package"] for f in doc["files"]}
    assert packages == {("libholder.so", None): {"name": "holder-pkg", "version": "1.0"},
                        ("stray.so", None): None,
                        (WHEEL_NAME, "holderpkg/libholder.so"): {"name": "holderpkg", "version": "1.0"}}
