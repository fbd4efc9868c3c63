"""Pipeline inputs: directory trees, ar archives (GNU, BSD and thin) and wheels, judged by nm, the linker,
`wheel unpack`, pip and the loader."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import NATIVE, run_cli

from unique.helpers import run_driver

HOLDER = NATIVE / "unique" / "holder.cpp"


def nm_unique(path: Path) -> int:
    out = subprocess.run(["nm", "-A", str(path)], capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if " u " in line)


def compile_obj(out: Path, version: int = 1) -> Path:
    subprocess.run(["g++", "-fPIC", "-O1", "-c", f"-DHOLDER_VERSION={version}", "-o", str(out), str(HOLDER)],
                   check=True)
    return out


# -- trees ---------------------------------------------------------------------------------------------

@pytest.fixture
def tree(unique_build: Path, tmp_path: Path) -> Path:
    root = tmp_path / "stage"
    (root / "lib" / "plugins").mkdir(parents=True)
    (root / "bin").mkdir()
    shutil.copy(unique_build / "libholder_v1.so", root / "lib" / "libholder_v1.so")
    shutil.copy(unique_build / "libholder_v2.so", root / "lib" / "plugins" / "libholder_v2.so")
    os.link(root / "lib" / "plugins" / "libholder_v2.so", root / "bin" / "hardlink.so")
    (root / "lib" / "libfake.so").write_text("INPUT(-lc)\n")  # a linker script named .so
    (root / "bin" / "run.sh").write_text("#!/bin/sh\n")
    compile_obj(root / "lib" / "holder.o")
    (root / "lib" / "link_in.so").symlink_to("libholder_v1.so")
    outside = tmp_path / "outside.so"
    shutil.copy(unique_build / "libholder_v1.so", outside)
    (root / "lib" / "link_out.so").symlink_to(outside)
    return root


def test_tree_check_then_patch(tree: Path, unique_build: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.so"
    before_outside = outside.read_bytes()
    check = run_cli("unique", "--check", "--json", str(tree))
    assert check.returncode == 1
    doc = json.loads(check.stdout)
    paths = [f["path"] for f in doc["files"]]
    assert paths == sorted(paths)
    # The hard-linked pair is one file, reported under its first name in sorted order.
    assert {Path(p).name for p in paths} == {"libholder_v1.so", "hardlink.so", "holder.o"}
    # Skipped: libfake.so, run.sh and the two symlinks; the hard link is the same file, processed once.
    assert doc["summary"]["skipped"] == 4 and doc["summary"]["files"] == 3

    proc = run_cli("unique", "--json", str(tree), check=True)
    assert json.loads(proc.stdout)["summary"]["patched"] == 10
    assert "hard links" not in proc.stderr, "links inside the tree are re-pointed, not warned about"
    assert run_cli("unique", "--check", str(tree)).returncode == 0
    hard, orig = tree / "bin" / "hardlink.so", tree / "lib" / "plugins" / "libholder_v2.so"
    assert os.stat(hard).st_ino == os.stat(orig).st_ino and os.stat(orig).st_nlink == 2
    assert (tree / "lib" / "link_in.so").is_symlink() and (tree / "lib" / "link_out.so").is_symlink()
    assert outside.read_bytes() == before_outside, "a link out of the tree is not followed"
    r = run_driver(unique_build / "unique_driver", tree / "lib" / "libholder_v1.so", orig)
    assert (r["shared"], r["a.resident"], r["b.resident"]) == ("no", "no", "no")


def test_large_tree_uses_the_pool_and_keeps_order(unique_build: Path, tmp_path: Path) -> None:
    root = tmp_path / "many"
    for i in range(40):
        d = root / f"d{i % 5}"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(unique_build / "libholder_v1.so", d / f"lib{i:02}.so")
    doc = json.loads(run_cli("unique", "--json", str(root), check=True).stdout)
    paths = [f["path"] for f in doc["files"]]
    assert len(paths) == 40 and paths == sorted(paths)
    assert doc["summary"]["patched"] == 160
    assert run_cli("unique", "--check", str(root)).returncode == 0


# -- archives ------------------------------------------------------------------------------------------

@pytest.fixture
def archive(tmp_path: Path) -> Path:
    long_name = tmp_path / "holder_member_with_a_name_longer_than_sixteen_bytes.o"
    compile_obj(long_name)
    plain = tmp_path / "plain.c"
    plain.write_text("int plain_answer(void) { return 42; }\n")
    subprocess.run(["gcc", "-fPIC", "-c", "-o", str(tmp_path / "plain.o"), str(plain)], check=True)
    lib = tmp_path / "libholder.a"
    subprocess.run(["ar", "rcs", str(lib), str(long_name), str(tmp_path / "plain.o")], check=True)
    return lib


def test_archive_patched_in_place_and_links_without_unique(archive: Path, tmp_path: Path) -> None:
    before = archive.read_bytes()
    members = subprocess.run(["ar", "t", str(archive)], capture_output=True, text=True).stdout
    index = subprocess.run(["nm", "-s", str(archive)], capture_output=True, text=True).stdout.split("\n\n")[0]
    assert nm_unique(archive) == 2
    doc = json.loads(run_cli("unique", "--json", str(archive), check=True).stdout)
    rows = {f["member"]: f for f in doc["files"]}
    assert rows["holder_member_with_a_name_longer_than_sixteen_bytes.o"]["status"] == "patched"
    assert rows["plain.o"]["status"] == "unchanged"
    after = archive.read_bytes()
    assert len(after) == len(before) and sum(a != b for a, b in zip(before, after)) == 2
    assert subprocess.run(["ar", "t", str(archive)], capture_output=True, text=True).stdout == members
    assert subprocess.run(["nm", "-s", str(archive)], capture_output=True, text=True).stdout.startswith(index)
    assert nm_unique(archive) == 0
    main = tmp_path / "main.cpp"
    main.write_text('extern "C" int holder_value(void);\nint main() { return holder_value() == 1 ? 0 : 1; }\n')
    so = tmp_path / "libfromarchive.so"
    subprocess.run(["g++", "-shared", "-o", str(so), "-Wl,--whole-archive", str(archive), "-Wl,--no-whole-archive"],
                   check=True)
    assert "UNIQUE" not in subprocess.run(["readelf", "-sW", str(so)], capture_output=True, text=True).stdout
    exe = tmp_path / "main"
    subprocess.run(["g++", "-o", str(exe), str(main), str(archive)], check=True)
    assert subprocess.run([str(exe)]).returncode == 0


def test_bsd_archive(tmp_path: Path) -> None:
    """BSD naming: `#1/N` with the name stored in front of the member data."""
    obj = compile_obj(tmp_path / "holder.o").read_bytes()
    name = b"holder_with_a_long_bsd_name.o"
    padded = name + b"\0" * (-len(name) % 4)
    body = padded + obj
    header = f"#1/{len(padded):<13}{0:<12}{0:<6}{0:<6}{644:<8}{len(body):<10}`\n".encode()
    lib = tmp_path / "libbsd.a"
    lib.write_bytes(b"!<arch>\n" + header + body + (b"\n" if len(body) % 2 else b""))
    doc = json.loads(run_cli("unique", "--json", str(lib), check=True).stdout)
    assert doc["files"][0]["member"] == name.decode() and doc["summary"]["patched"] == 2
    assert nm_unique(lib) == 0


def test_thin_archive_patches_the_member_files(tmp_path: Path) -> None:
    obj = compile_obj(tmp_path / "holder.o")
    lib = tmp_path / "libthin.a"
    subprocess.run(["ar", "rcsT", str(lib), str(obj)], check=True)
    before = lib.read_bytes()
    doc = json.loads(run_cli("unique", "--json", str(lib), check=True).stdout)
    assert doc["files"][0]["member"].endswith("holder.o") and doc["summary"]["patched"] == 2
    assert lib.read_bytes() == before and nm_unique(obj) == 0


def test_broken_archive_is_left_alone(archive: Path) -> None:
    data = bytearray(archive.read_bytes())
    data[8 + 48 : 8 + 58] = b"9999999999"  # the first member claims more bytes than the file has
    archive.write_bytes(bytes(data))
    proc = run_cli("unique", str(archive))
    assert proc.returncode == 2 and proc.stderr.startswith(f"elfpatch: error: {archive}: ")
    assert archive.read_bytes() == bytes(data)


# -- wheels --------------------------------------------------------------------------------------------

def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(directory: Path, lib: Path, signed: bool = False) -> Path:
    files = {
        "holderpkg/__init__.py": b"",
        "holderpkg/libholder_v1.so": lib.read_bytes(),
        "holderpkg/data.txt": b"unchanged data\n" * 100,
        "holderpkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: holderpkg\nVersion: 1.0\n",
        "holderpkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                                         b"Tag: py3-none-any\n",
    }
    if signed:
        files["holderpkg-1.0.dist-info/RECORD.jws"] = b"{}"
    record = "".join(f"{n},{record_hash(b)},{len(b)}\n" for n, b in files.items())
    record += "holderpkg-1.0.dist-info/RECORD,,\n"
    whl = directory / "holderpkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in [*files.items(), ("holderpkg-1.0.dist-info/RECORD", record.encode())]:
            info = zipfile.ZipInfo(name, (2021, 2, 3, 4, 5, 6))
            info.external_attr = (0o100755 if name.endswith(".so") else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return whl


def test_wheel_patch_record_and_unchanged_members(unique_build: Path, tmp_path: Path) -> None:
    whl = build_wheel(tmp_path, unique_build / "libholder_v1.so", signed=True)
    before = zipfile.ZipFile(whl)
    raw_before = {i.filename: (i.compress_size, i.CRC, i.date_time, i.external_attr) for i in before.infolist()}
    assert run_cli("unique", "--check", str(whl)).returncode == 1
    proc = run_cli("unique", "--json", str(whl), check=True)
    assert "removed holderpkg-1.0.dist-info/RECORD.jws" in proc.stderr
    doc = json.loads(proc.stdout)
    (entry,) = [f for f in doc["files"] if f["status"] == "patched"]
    assert entry["member"] == "holderpkg/libholder_v1.so" and doc["summary"]["patched"] == 4
    after = zipfile.ZipFile(whl)
    names = [i.filename for i in after.infolist()]
    assert names[-1] == "holderpkg-1.0.dist-info/RECORD" and "holderpkg-1.0.dist-info/RECORD.jws" not in names
    for info in after.infolist():
        if info.filename in ("holderpkg/__init__.py", "holderpkg/data.txt", "holderpkg-1.0.dist-info/METADATA"):
            assert raw_before[info.filename] == (info.compress_size, info.CRC, info.date_time, info.external_attr)
    so = after.getinfo("holderpkg/libholder_v1.so")
    assert so.external_attr == raw_before["holderpkg/libholder_v1.so"][3]
    assert so.date_time == raw_before["holderpkg/libholder_v1.so"][2]
    record = after.read("holderpkg-1.0.dist-info/RECORD").decode().splitlines()
    assert record[-1] == "holderpkg-1.0.dist-info/RECORD,,"
    data = after.read("holderpkg/libholder_v1.so")
    assert f"holderpkg/libholder_v1.so,{record_hash(data)},{len(data)}" in record
    assert run_cli("unique", "--check", str(whl)).returncode == 0
    unpacked = tmp_path / "unpacked"
    subprocess.run([sys.executable, "-m", "wheel", "unpack", "-d", str(unpacked), str(whl)], check=True,
                   capture_output=True)


def test_wheel_installs_and_its_library_unloads(unique_build: Path, tmp_path: Path) -> None:
    whl = build_wheel(tmp_path, unique_build / "libholder_v1.so")
    other = tmp_path / "libholder_v2.so"
    shutil.copy(unique_build / "libholder_v2.so", other)
    run_cli("unique", str(whl), str(other), check=True)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
                    str(target), str(whl)], check=True)
    lib = target / "holderpkg" / "libholder_v1.so"
    assert os.access(lib, os.X_OK)
    r = run_driver(unique_build / "unique_driver", lib, other)
    assert (r["shared"], r["a.resident"], r["b.resident"]) == ("no", "no", "no")


def test_wheel_output_and_dry_run(unique_build: Path, tmp_path: Path) -> None:
    whl = build_wheel(tmp_path, unique_build / "libholder_v1.so", signed=True)
    before = whl.read_bytes()
    assert run_cli("unique", "-n", str(whl)).returncode == 0 and whl.read_bytes() == before
    out = tmp_path / "out" / whl.name
    out.parent.mkdir()
    run_cli("unique", "-o", str(out), str(whl), check=True)
    assert whl.read_bytes() == before and run_cli("unique", "--check", str(out)).returncode == 0
    assert run_cli("unique", "--inplace", str(whl)).returncode == 2 and whl.read_bytes() == before


def test_wheel_member_that_lies_about_its_size(unique_build: Path, tmp_path: Path) -> None:
    whl = build_wheel(tmp_path, unique_build / "libholder_v1.so")
    data = bytearray(whl.read_bytes())
    # Shrink the .so's uncompressed size in its central directory entry: inflating must stop, not trust it.
    name = b"holderpkg/libholder_v1.so"
    pos = data.find(b"PK\x01\x02")  # the central directory entry of the .so
    while data[pos + 46 : pos + 46 + len(name)] != name:
        pos = data.find(b"PK\x01\x02", pos + 1)
        assert pos > 0
    data[pos + 24 : pos + 28] = (100).to_bytes(4, "little")
    whl.write_bytes(bytes(data))
    proc = run_cli("unique", str(whl))
    assert proc.returncode == 2 and "inflates to more than its header says" in proc.stderr
    assert whl.read_bytes() == bytes(data)
