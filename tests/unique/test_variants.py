"""File shapes the reader must handle: no section headers (DT_HASH and DT_GNU_HASH), the OSABI rule, and
foreign architectures (32-bit, big-endian) patched here and run under qemu-user."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import CROSS_ARCHES, NATIVE, require_tool
from helpers import native_build, run_main
from jsonschema_check import cli_json

from unique.helpers import drop_section_headers, run_driver


def copy_pair(src: Path, dst: Path) -> tuple[Path, Path]:
    a, b = dst / "libholder_v1.so", dst / "libholder_v2.so"
    shutil.copy(src / "libholder_v1.so", a)
    shutil.copy(src / "libholder_v2.so", b)
    return a, b


def build_pair(tmp_path: Path, *flags: str) -> tuple[Path, Path]:
    src = NATIVE / "unique" / "holder.cpp"
    out = []
    for v in (1, 2):
        lib = tmp_path / f"libholder_v{v}.so"
        subprocess.run(["g++", "-fPIC", "-O1", "-shared", f"-DHOLDER_VERSION={v}", *flags, "-o", str(lib), str(src)],
                       check=True)
        out.append(lib)
    return out[0], out[1]


@pytest.mark.parametrize("hash_style", ["gnu", "sysv", "both"])
def test_no_section_headers(unique_build: Path, tmp_path: Path, hash_style: str) -> None:
    """Without section headers the dynamic symbols are found through PT_DYNAMIC and the hash table."""
    a, b = build_pair(tmp_path, f"-Wl,--hash-style={hash_style}")
    for lib in (a, b):
        drop_section_headers(lib)
        assert "There are no sections" in subprocess.run(["readelf", "-S", str(lib)], capture_output=True,
                                                        text=True).stdout
    driver = unique_build / "unique_driver"
    assert run_driver(driver, a, b)["shared"] == "yes", "glibc loads files without section headers"
    doc = cli_json(run_main("unique", "--json", str(a), str(b), check=True).stdout)
    for entry in doc["files"]:
        assert {(s["table"], s["name"]) for s in entry["symbols"]} == {
            (".dynsym", "_ZN6HolderIiE5valueE"), (".dynsym", "_ZZ7countervE1c")}
    r = run_driver(driver, a, b)
    assert (r["shared"], r["a.resident"], r["b.resident"]) == ("no", "no", "no")


def set_osabi(path: Path, osabi: int) -> None:
    data = bytearray(path.read_bytes())
    data[7] = osabi
    path.write_bytes(bytes(data))


def test_sysv_osabi_is_still_unique_to_glibc(unique_build: Path, tmp_path: Path) -> None:
    a, b = copy_pair(unique_build, tmp_path)
    set_osabi(a, 0)
    set_osabi(b, 0)
    driver = unique_build / "unique_driver"
    assert run_driver(driver, a, b)["a.resident"] == "yes", "glibc marks a SYSV file NODELETE too"
    doc = cli_json(run_main("unique", "--json", str(a), str(b), check=True).stdout)
    assert doc["summary"]["patched"] == 8
    assert run_driver(driver, a, b)["a.resident"] == "no"


@pytest.mark.parametrize("osabi", [9, 12, 97])  # FreeBSD, OpenBSD, ARM
def test_other_osabi_is_left_alone(unique_build: Path, tmp_path: Path, osabi: int) -> None:
    lib = tmp_path / "lib.so"
    shutil.copy(unique_build / "libholder_v1.so", lib)
    set_osabi(lib, osabi)
    before = lib.read_bytes()
    proc = run_main("unique", "--json", str(lib))
    assert proc.returncode == 0
    (entry,) = cli_json(proc.stdout)["files"]
    assert entry["status"] == "skipped" and f"EI_OSABI {osabi}" in entry["reason"]
    assert cli_json(proc.stdout)["summary"]["skipped"] == 1
    assert lib.read_bytes() == before
    assert "skipped: EI_OSABI" in run_main("unique", str(lib)).stdout
    assert run_main("unique", "--check", str(lib)).returncode == 0


def test_debian_libcc1_is_a_sysv_file_with_a_unique_symbol() -> None:
    lib = Path("/usr/lib/x86_64-linux-gnu/libcc1.so.0")
    if not lib.exists():
        pytest.skip("libcc1.so.0 is not installed")
    doc = cli_json(run_main("unique", "--dry-run", "--json", str(lib)).stdout)
    assert lib.read_bytes()[7] == 0
    readelf = subprocess.run(["readelf", "-sW", str(lib)], capture_output=True, text=True).stdout
    assert doc["summary"]["unique"] == readelf.count("<OS specific>: 10") > 0


QEMU_SYSROOT = {arch: f"/usr/{triple}" for arch, (triple, _) in CROSS_ARCHES.items()}


@pytest.mark.cross  # needs the cross toolchains and qemu-user
@pytest.mark.parametrize("arch", sorted(CROSS_ARCHES))
@pytest.mark.parametrize("no_shdr", [False, True], ids=["sections", "no-sections"])
def test_cross_architecture(arch: str, no_shdr: bool, tmp_path: Path) -> None:
    triple, qemu = CROSS_ARCHES[arch]
    require_tool(f"{triple}-g++", qemu)
    native_build("unique", "cross")
    build = NATIVE / "unique" / "build" / arch
    a, b = copy_pair(build, tmp_path)
    if no_shdr:
        drop_section_headers(a)
        drop_section_headers(b)
    prefix = (qemu, "-L", QEMU_SYSROOT[arch])
    before = run_driver(build / "unique_driver", a, b, prefix)
    assert (before["b.value"], before["shared"], before["a.resident"]) == ("1", "yes", "yes")
    doc = cli_json(run_main("unique", "--json", str(a), str(b), check=True).stdout)
    assert doc["summary"]["patched"] == (4 if no_shdr else 8)
    after = run_driver(build / "unique_driver", a, b, prefix)
    assert (after["b.value"], after["shared"], after["a.resident"], after["b.resident"]) == ("2", "no", "no", "no")
