"""An honest deflate bomb: a wheel whose ELF member inflates from ~1 MB to SIZE MiB (zeros after an ELF
header). Builds it in a temp dir, runs `elfpatch unique -n` on it in a child, and prints the wall time and the
child's peak RSS: memory stays bounded (the member spills to an unlinked temp file), disk does not.

    .venv/bin/python bench/deflate_bomb.py [SIZE_MIB]      # default 1024
"""
from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

PY = str(Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python")


def build(path: Path, mib: int) -> None:
    info = zipfile.ZipInfo("pkg/libbomb.so")
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w") as z:
        with z.open(info, "w", force_zip64=True) as f:
            f.write(b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x03\x00\x3e\x00")  # ELF64 LSB ET_DYN x86-64
            chunk = bytes(1 << 20)
            for _ in range(mib):
                f.write(chunk)
        z.writestr("pkg-1.0.dist-info/RECORD", "")


def main() -> None:
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    with tempfile.TemporaryDirectory(prefix="elfpatch-bomb-") as d:
        whl = Path(d) / "pkg-1.0-py3-none-any.whl"
        build(whl, mib)
        t = time.monotonic()
        proc = subprocess.run([PY, "-m", "elfpatch", "unique", "-n", str(whl)], capture_output=True, text=True)
        wall = time.monotonic() - t
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"{whl.stat().st_size / 1e6:.1f} MB wheel, member {mib} MiB inflated: exit {proc.returncode}, "
              f"{wall:.2f} s, peak RSS {rss:.0f} MB")
        print(proc.stdout.strip() or proc.stderr.strip())


if __name__ == "__main__":
    main()
