"""Inputs at the edges of what `unique` reads: ar archives in the MS/COFF lib layout (NUL-terminated long names),
and `-o OUT` on a file reported `skipped` (OUT must still hold the result)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from helpers import run_main
from jsonschema_check import cli_json

COFF_OBJ = b"\x64\x86\x01\x00" + bytes(60)  # an IMAGE_FILE_MACHINE_AMD64 COFF header: not ELF


def ar_member(name: bytes, body: bytes) -> bytes:
    header = name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"644".ljust(8)
    header += str(len(body)).encode().ljust(10) + b"`\n"
    assert len(header) == 60
    return header + body + (b"\n" if len(body) % 2 else b"")


def ms_lib(members: dict[bytes, bytes]) -> bytes:
    """An archive as lib.exe writes it: two "/" linker members, then "//" with NUL-terminated names."""
    names, refs = b"", {}
    for name in members:
        refs[name] = b"/%d" % len(names)
        names += name + b"\0"
    out = b"!<arch>\n" + ar_member(b"/", bytes(8)) + ar_member(b"/", bytes(8)) + ar_member(b"//", names)
    for name, body in members.items():
        out += ar_member(refs[name], body)
    return out


def test_ms_lib_without_elf_members_is_unchanged(tmp_path: Path) -> None:
    lib = tmp_path / "windows_library_with_long_names.lib"
    lib.write_bytes(ms_lib({b"first_object_with_a_long_name.obj": COFF_OBJ,
                            b"second_object_with_a_long_name.obj": COFF_OBJ}))
    listed = subprocess.run(["ar", "t", str(lib)], capture_output=True, text=True, check=True).stdout.split()
    assert listed == ["first_object_with_a_long_name.obj", "second_object_with_a_long_name.obj"], "GNU ar reads it"
    before = lib.read_bytes()
    for mode in (["--check"], [], ["-n"]):
        proc = run_main("unique", "--json", *mode, str(lib))
        assert proc.returncode == 0, proc.stderr
        assert [f["status"] for f in cli_json(proc.stdout)["files"]] == ["unchanged"]
    assert lib.read_bytes() == before
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(lib, tree / "x.a")
    assert run_main("unique", str(tree)).returncode == 0, "a tree that holds one does not fail"


def test_ms_lib_long_names_name_elf_members(unique_build: Path, tmp_path: Path) -> None:
    """The same layout with an ELF member: its NUL-terminated name is read, and it is patched in place."""
    lib = tmp_path / "mixed.a"
    lib.write_bytes(ms_lib({b"coff_object_with_a_long_name.obj": COFF_OBJ,
                            b"holder_member_with_a_long_name.o": (unique_build / "holder_v1.o").read_bytes()}))
    proc = run_main("unique", "--json", str(lib), check=True)
    files = cli_json(proc.stdout)["files"]
    assert [(f["member"], f["status"]) for f in files] == [("holder_member_with_a_long_name.o", "patched")]
    assert " UNIQUE " not in subprocess.run(["readelf", "-sW", str(lib)], capture_output=True, text=True).stdout


def test_output_of_a_skipped_file_holds_the_input(unique_build: Path, tmp_path: Path) -> None:
    """EI_OSABI FreeBSD: binding 10 means something else, the file is skipped; -o OUT still gets the result
    (an unchanged copy), replacing a stale OUT."""
    src = tmp_path / "freebsd.so"
    data = bytearray((unique_build / "libholder_v1.so").read_bytes())
    data[7] = 9  # ELFOSABI_FREEBSD
    src.write_bytes(bytes(data))
    out = tmp_path / "out.so"
    out.write_bytes(b"stale output of an earlier run")
    proc = run_main("unique", "--json", "-o", str(out), str(src))
    assert proc.returncode == 0, proc.stderr
    assert [f["status"] for f in cli_json(proc.stdout)["files"]] == ["skipped"]
    assert out.read_bytes() == bytes(data) == src.read_bytes()
    assert out.stat().st_mode == src.stat().st_mode


def test_wheel_member_with_lying_headers(unique_build: Path, tmp_path: Path) -> None:
    """A wheel's ELF member is read like a file: its loader view is patched, and its entry carries the warning."""
    from targets.helpers import build_wheel, wheel_files

    from unique.lies import shdrs_past_eof

    lib = tmp_path / "libholder.so"
    lib.write_bytes(shdrs_past_eof((unique_build / "libholder_v1.so").read_bytes()))
    whl = build_wheel(tmp_path, wheel_files(lib))
    proc = run_main("unique", "--json", str(whl), check=True)
    (entry,) = cli_json(proc.stdout)["files"]
    assert entry["member"] == "holderpkg/libholder.so" and entry["status"] == "patched"
    assert {s["table"] for s in entry["symbols"]} == {".dynsym"} and entry["warnings"]
    assert run_main("unique", "--check", str(whl)).returncode == 0


def static_executable(e_type: int = 2, filesz: int | None = None) -> bytes:
    """A minimal x86-64 ELF executable as the kernel runs it: one PT_LOAD holding `exit(7)`, no PT_DYNAMIC,
    and section headers that cannot be read (e_shnum 0, so their count is in section header 0, which lies
    past the end of the file)."""
    import struct

    base, code = 0x400000, bytes.fromhex("b83c000000bf07000000 0f05".replace(" ", ""))
    size = 64 + 56 + len(code)
    header = (b"\x7fELF\x02\x01\x01" + bytes(9)
              + struct.pack("<HHIQQQIHHHHHH", e_type, 62, 1, base + 120, 64, size + 4096, 0, 64, 56, 1, 64, 0, 0))
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, base, base, size if filesz is None else filesz, size, 0x1000)
    return header + load + code


def test_static_executable_with_unusable_section_headers(tmp_path: Path) -> None:
    """Guarantee: a file the kernel runs is not called broken for headers no loader reads. A static
    executable (no PT_DYNAMIC) whose section headers are unusable has 0 unique symbols and a warning saying
    why, exit 0; the same headers in a shared object, or a PT_LOAD past the end of the file, stay an error."""
    import os
    import platform

    exe = tmp_path / "static"
    exe.write_bytes(static_executable())
    exe.chmod(0o755)
    if platform.machine() == "x86_64" and os.uname().sysname == "Linux":
        assert subprocess.run([str(exe)]).returncode == 7, "the kernel runs it"
    before = exe.read_bytes()
    for args in (["--check"], ["--check", "--json"], []):
        proc = run_main("unique", *args, str(exe))
        assert proc.returncode == 0, proc.stderr
    doc = cli_json(run_main("unique", "--check", "--json", str(exe)).stdout)
    (entry,) = doc["files"]
    assert entry["status"] == "unchanged" and entry["symbols"] == []
    assert any("section headers unusable" in w and "no PT_DYNAMIC" in w for w in entry["warnings"])
    assert exe.read_bytes() == before
    for name, data in (("shared.so", static_executable(e_type=3)), ("cut", static_executable(filesz=4096))):
        broken = tmp_path / name
        broken.write_bytes(data)
        proc = run_main("unique", "--check", str(broken))
        assert proc.returncode == 2 and f"{broken}: " in proc.stderr, (name, proc.stderr)
