"""Hostile inputs of README's "Bounded time and memory" figures: each is built in a temp dir and run through
`elfpatch unique` in a child; prints the wall time, the child's peak RSS and the size of its output.

    .venv/bin/python bench/hostile_inputs.py [NAME ...]     # default: all of them

Needs gcc and native_tests built (`make fixtures`).
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from elfpatch.formats import zipfmt  # noqa: E402

PY = str(ROOT / ".venv" / "bin" / "python")
# The child's own peak RSS (VmHWM), printed last on stderr: ru_maxrss of children would count the pages a
# child shares with this process between fork and exec.
PEAK = ("import re, sys\nfrom elfpatch.cli import main\nrc = main(sys.argv[1:])\n"
        "print(int(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)) * 1024, "
        "file=sys.stderr)\nsys.exit(rc)\n")
LIB = ROOT / "native_tests" / "unique" / "build" / "libholder_v1.so"
OBJ = ROOT / "native_tests" / "unique" / "build" / "holder_v1.o"


def raw(data: bytes) -> bytes:
    return zlib.compress(data, 9)[2:-4]


def zip_file(path: Path, members: list[tuple[str, bytes, bytes]], again: int = 0) -> Path:
    """(name, raw deflate data, inflated bytes) members; ``again`` more central entries naming the first."""
    body, central, offsets = bytearray(), bytearray(), []
    rows = [(name, i) for i, (name, _, _) in enumerate(members)] + [(f"pkg/again{i}.so", 0) for i in range(again)]
    for name, data, plain in members:
        offsets.append(len(body))
        body += zipfmt.LFH.pack(b"PK\x03\x04", 20, 0, 8, 0, 0x21, zlib.crc32(plain), len(data), len(plain),
                                len(name), 0) + name.encode() + data
    for name, i in rows:
        _, data, plain = members[i]
        central += zipfmt.CDH.pack(b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21, zlib.crc32(plain), len(data), len(plain),
                                   len(name), 0, 0, 0, 0, 0, offsets[i]) + name.encode()
    n = len(rows)
    tail = zipfmt.EOCD.pack(b"PK\x05\x06", 0, 0, min(n, 0xFFFF), min(n, 0xFFFF), len(central), len(body), 0)
    if n >= 0xFFFF:
        end = len(body) + len(central)
        tail = (zipfmt.EOCD64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, len(central), len(body))
                + zipfmt.EOCD64_LOCATOR.pack(b"PK\x06\x07", 0, end, 1) + tail)
    path.write_bytes(bytes(body) + bytes(central) + tail)
    return path


def doubling_name(levels: int) -> str:
    name, last = "_Z1f1XI1AS0_E", 2
    for _ in range(levels):
        ref = "S%s_" % ("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[last - 1] if last else "")  # below 37 levels
        name += "S_I" + ref + ref + "E"
        last += 1
    return name


def mangled_bomb(d: Path) -> list[str]:
    name = doubling_name(24)
    (d / "bomb.s").write_text(f'.globl {name}\n.type {name}, @gnu_unique_object\n.size {name}, 4\n'
                              f'.section .bss\n{name}:\n.zero 4\n.section .note.GNU-stack,"",@progbits\n')
    subprocess.run(["gcc", "-shared", "-o", str(d / "libbomb.so"), str(d / "bomb.s")], check=True)
    return ["--check", "--json", str(d / "libbomb.so")]


def empty_blocks(d: Path) -> list[str]:
    lib = LIB.read_bytes()
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = c.compress(lib) + c.flush(zlib.Z_SYNC_FLUSH) + bytes.fromhex("0208208000") * 1_000_000 + b"\x03\x00"
    zip_file(d / "e-1.0-py3-none-any.whl", [("pkg/lib.so", data, lib), ("pkg-1.0.dist-info/RECORD", raw(b""), b"")])
    return ["-o", str(d / "out.whl"), str(d / "e-1.0-py3-none-any.whl")]


def overlapping(d: Path) -> list[str]:
    lib = LIB.read_bytes() + bytes(256 << 20)
    zip_file(d / "o-1.0-py3-none-any.whl", [("pkg/a.so", raw(lib), lib)], again=63)
    return ["--check", str(d / "o-1.0-py3-none-any.whl")]


def many_members(d: Path) -> list[str]:
    lib, empty = LIB.read_bytes(), raw(b"")
    members = [("pkg/lib.so", raw(lib), lib)] + [(f"pkg/m{i:07d}", empty, b"") for i in range(1_000_000)]
    zip_file(d / "m-1.0-py3-none-any.whl", members)
    return ["-o", str(d / "out.whl"), str(d / "m-1.0-py3-none-any.whl")]


def big_archive_member(d: Path) -> list[str]:
    obj = OBJ.read_bytes()
    size = len(obj) + (1 << 30)
    size += size & 1
    header = f"{'holder.o/':<16}{'0':<12}{'0':<6}{'0':<6}{'644':<8}{size:<10}`\n".encode()
    with open(d / "libbig.a", "wb") as f:
        f.write(b"!<arch>\n" + header + obj)
        f.truncate(8 + 60 + size)  # zeros as a hole
    return ["--check", str(d / "libbig.a")]


CASES = {"mangled-bomb": mangled_bomb, "empty-blocks": empty_blocks, "overlapping": overlapping,
         "many-members": many_members, "big-archive-member": big_archive_member}


def main() -> None:
    for name in sys.argv[1:] or list(CASES):
        with tempfile.TemporaryDirectory(prefix="elfpatch-hostile-") as d:
            args = CASES[name](Path(d))
            t = time.monotonic()
            proc = subprocess.run([PY, "-c", PEAK, "unique", *args], capture_output=True)
            wall = time.monotonic() - t
            lines = proc.stderr.decode(errors="replace").strip().splitlines()
            print(f"{name}: exit {proc.returncode}, {wall:.2f} s, peak RSS {int(lines[-1]) >> 20} MB, "
                  f"{len(proc.stdout)} bytes of output {(lines[:-1] or [''])[0][:90]}")


if __name__ == "__main__":
    main()
