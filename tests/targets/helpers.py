"""Helpers for the pipeline-target tests: build objects, archives and wheels from native_tests/unique, and
read them back with the toolchain (nm, readelf, ar) rather than with elfpatch itself."""
from __future__ import annotations

import base64
import hashlib
import os
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

from conftest import NATIVE

HOLDER = NATIVE / "unique" / "holder.cpp"
HOLDER_SYMBOLS = ("_ZN6HolderIiE5valueE", "_ZZ7countervE1c")


def compile_holder(out: Path, version: int = 1, extra: tuple[str, ...] = ()) -> Path:
    subprocess.run(["g++", "-fPIC", "-O1", "-c", f"-DHOLDER_VERSION={version}", *extra, "-o", str(out),
                    str(HOLDER)], check=True)
    return out


def compile_c(out: Path, source: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["gcc", "-fPIC", "-c", "-o", str(out), str(src)], check=True)
    return out


def nm_unique(path: Path) -> list[str]:
    """Symbols nm shows as unique ('u'), with nm's own per-member prefix for archives."""
    out = subprocess.run(["nm", "-A", str(path)], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if " u " in line]


def readelf_unique(path: Path) -> int:
    out = subprocess.run(["readelf", "-sW", str(path)], capture_output=True, text=True, check=True).stdout
    return sum(" UNIQUE " in line for line in out.splitlines())


def ar_members(path: Path) -> list[str]:
    return subprocess.run(["ar", "t", str(path)], capture_output=True, text=True, check=True).stdout.splitlines()


def ar_index(path: Path) -> str:
    """The archive's symbol index as `nm -s` prints it (everything before the first member)."""
    out = subprocess.run(["nm", "-s", str(path)], capture_output=True, text=True).stdout
    return out.split("\n\n")[0]


def link_shared(out: Path, archive: Path) -> Path:
    """A shared library linked from every member of ``archive``."""
    subprocess.run(["g++", "-shared", "-o", str(out), "-Wl,--whole-archive", str(archive),
                    "-Wl,--no-whole-archive"], check=True)
    return out


def bsd_archive(path: Path, members: list[tuple[str, bytes]]) -> Path:
    """An archive with BSD `#1/<len>` names (the name stored in front of the data), as BSD ar writes them."""
    out = bytearray(b"!<arch>\n")
    for name, data in members:
        raw = name.encode()
        padded = raw + b"\0" * (-len(raw) % 4)
        body = padded + data
        out += f"#1/{len(padded):<13}{0:<12}{0:<6}{0:<6}{644:<8}{len(body):<10}`\n".encode()
        out += body + (b"\n" if len(body) % 2 else b"")
    path.write_bytes(bytes(out))
    return path


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB chunks (the kill tests hash 100 MB files dozens of times)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry below ``root``: (kind, content hash or link target, inode)."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                state[str(p)] = ("link", os.readlink(p), st.st_ino)
            elif p.is_file():
                state[str(p)] = ("file", file_digest(p), st.st_ino)
    return state


# -- wheels --------------------------------------------------------------------------------------------

def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


DIST = "holderpkg-1.0.dist-info"
WHEEL_NAME = "holderpkg-1.0-py3-none-linux_x86_64.whl"


def wheel_files(lib: Path, extra: dict[str, bytes] | None = None) -> dict[str, bytes]:
    files = {
        "holderpkg/__init__.py": b"import os\nLIB = os.path.join(os.path.dirname(__file__), 'libholder.so')\n",
        "holderpkg/libholder.so": lib.read_bytes(),
        "holderpkg/data.txt": b"unchanged data\n" * 100,
        "holderpkg/fake.so": b"INPUT(-lc)\n",  # a linker script named .so: not ELF, never touched
        f"{DIST}/METADATA": b"Metadata-Version: 2.1\nName: holderpkg\nVersion: 1.0\n",
        f"{DIST}/WHEEL": b"Wheel-Version: 1.0\nGenerator: elfpatch-tests\nRoot-Is-Purelib: false\n"
                         b"Tag: py3-none-linux_x86_64\n",
    }
    files.update(extra or {})
    return files


def build_wheel(directory: Path, files: dict[str, bytes], signed: bool = False, stored: tuple[str, ...] = (),
                record: bool = True, streamed: bool = False) -> Path:
    """A wheel as pip would accept it: RECORD lists every file with its hash, RECORD itself last.
    ``stored``: members written without compression; ``streamed``: written to a non-seekable stream, so that
    every member has a data descriptor after its data."""
    files = dict(files)
    if signed:
        files[f"{DIST}/RECORD.jws"] = b'{"signatures": []}'
    whl = directory / WHEEL_NAME
    rows = "".join(f"{n},{record_hash(b)},{len(b)}\n" for n, b in files.items()) + f"{DIST}/RECORD,,\n"
    members = list(files.items()) + ([(f"{DIST}/RECORD", rows.encode())] if record else [])

    class Unseekable:
        def __init__(self, f):
            self.f = f

        def write(self, b):
            return self.f.write(b)

        def flush(self):
            self.f.flush()

    with open(whl, "wb") as raw:
        target = Unseekable(raw) if streamed else raw
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
            for i, (name, data) in enumerate(members):
                info = zipfile.ZipInfo(name, (2021, 2, 3, 4, 5, 6 + 2 * (i % 20)))
                info.external_attr = (0o100755 if name.endswith(".so") else 0o100644) << 16
                info.compress_type = zipfile.ZIP_STORED if name in stored else zipfile.ZIP_DEFLATED
                z.writestr(info, data)
    return whl


def raw_members(whl: Path) -> dict[str, bytes]:
    """Each member's local header, compressed data and data descriptor, exactly as stored."""
    data = whl.read_bytes()
    eocd = data.rfind(b"PK\x05\x06")
    cd_offset = struct.unpack_from("<I", data, eocd + 16)[0]
    with zipfile.ZipFile(whl) as z:
        infos = sorted(z.infolist(), key=lambda i: i.header_offset)
    ends = [i.header_offset for i in infos[1:]] + [cd_offset]
    return {info.filename: data[info.header_offset : end] for info, end in zip(infos, ends)}


def member_header(whl: Path, name: str) -> tuple[int, int, int]:
    """(method, flags, local header's extra length) of one member."""
    with zipfile.ZipFile(whl) as z:
        info = z.getinfo(name)
    data = whl.read_bytes()
    _, _, flags, method = struct.unpack_from("<4sHHH", data, info.header_offset)
    return method, flags, struct.unpack_from("<H", data, info.header_offset + 28)[0]


def copy_so(src: Path, dst: Path) -> Path:
    shutil.copy(src, dst)
    return dst
