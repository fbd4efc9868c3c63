"""Crafted large inputs of README figures, each built in a temporary directory and measured:

  record    `elfpatch audit --json` of one 16 KB library whose package RECORD is 53 MB (package attribution
            streams the RECORD and keeps only the rows of the files reported)
  deps      `elfpatch inits --deps --json` of a library with 2,000 DT_NEEDED entries and a DT_RPATH of 5,000
            directories, the libraries all in the last one (the search lists each directory once instead of
            trying 10 M names)
  fdes      the FDE starts of libtorch_cpu.so (from the torch wheel) read from .eh_frame_hdr's search table,
            in process (initscan.extents.eh_frame_extents; best of 5)

The commands run as child processes, timed from spawn to reap with their own peak RSS (bench.run_timed), each
three times: the median wall time and the largest peak RSS are printed.

    .venv/bin/python bench/crafted.py [record|deps|fdes ...]     # default: all three

Needs `make fixtures` (the audit fixture library), GNU ld, and for `fdes` the torch wheel of bench/bench.py.
"""
from __future__ import annotations

import mmap
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import ELFPATCH, TORCH_WHEEL, Run, run_timed  # noqa: E402  (bench/bench.py: the same clock and RSS)

LIB = ROOT / "native_tests" / "audit" / "build" / "_a.so"
RECORD_BYTES = 53_000_000
NEEDED, DIRS = 2_000, 5_000
TIMEOUT = 600  # seconds any one build step may take
REPS = 3  # runs of each command: the median wall time and the largest peak RSS are printed


def measured(cmd: list[str]) -> Run:
    """``cmd`` run REPS times: the median wall time, the largest peak RSS, the last run's output."""
    runs = [run_timed(cmd) for _ in range(REPS)]
    last = runs[-1]
    return Run(statistics.median(r.wall for r in runs), max(r.rss_kb for r in runs), last.rc, last.out, last.err)


def record(tmp: Path) -> str:
    """A site-packages with one package whose RECORD lists its library, then ~53 MB of other rows."""
    site = tmp / "site-packages"
    lib = site / "big" / "_a.so"
    lib.parent.mkdir(parents=True)
    shutil.copy(LIB, lib)
    info = site / "big-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: big\nVersion: 1.0\n")
    with open(info / "RECORD", "w") as f:
        f.write(f"big/_a.so,,{lib.stat().st_size}\n")
        i = 0
        while f.tell() < RECORD_BYTES:
            f.write("".join(f"big/data/file_{j:07d}.py,sha256={'x' * 43},{j}\n" for j in range(i, i + 10_000)))
            i += 10_000
        f.write(f"{info.name}/RECORD,,\n")
    size = (info / "RECORD").stat().st_size
    run = measured([*ELFPATCH, "audit", "--json", str(lib)])
    owned = '"package": {"name": "big", "version": "1.0"}' in run.out
    return (f"audit of one {lib.stat().st_size // 1024} KB library, a {size / 1e6:.0f} MB RECORD ({i:,} rows): "
            f"{run.wall:.2f} s (median of {REPS}), {run.rss_kb >> 10} MB peak RSS, exit {run.rc}, attributed: {owned}")


def deps(tmp: Path) -> str:
    """2,000 needed libraries (one built, copied under other sonames of the same length) in the last of
    5,000 DT_RPATH directories, and the library that needs them all."""
    empty = tmp / "empty.o"
    subprocess.run(["cc", "-c", "-x", "c", "/dev/null", "-o", str(empty)], check=True, timeout=TIMEOUT)
    dirs = [tmp / f"d{i:04d}" for i in range(DIRS)]  # the DT_RPATH's length depends on tmp's
    for d in dirs:
        d.mkdir()
    names = [f"libn{i:04d}.so" for i in range(NEEDED)]
    first = dirs[-1] / names[0]
    subprocess.run(["ld", "-shared", "-soname", names[0], "-o", str(first), str(empty)], check=True,
                   timeout=TIMEOUT)
    image = first.read_bytes()
    assert image.count(names[0].encode()) == 1
    for name in names[1:]:
        (dirs[-1] / name).write_bytes(image.replace(names[0].encode(), name.encode()))
    root = tmp / "root.so"
    args = tmp / "ld.args"  # a response file: the command line would pass ARG_MAX
    args.write_text("\n".join(["--no-as-needed", "--disable-new-dtags", "-rpath", ":".join(map(str, dirs)),
                               *(str(dirs[-1] / n) for n in names)]) + "\n")
    subprocess.run(["ld", "-shared", "-o", str(root), str(empty), f"@{args}"], check=True, timeout=TIMEOUT)
    head = (f"inits --deps of a {root.stat().st_size // 1024} KB library, {NEEDED:,} DT_NEEDED x {DIRS:,} "
            "DT_RPATH directories")
    found = measured([*ELFPATCH, "inits", "--deps", "--json", str(root)])
    for name in names:  # then none of them found: every directory searched for every name
        (dirs[-1] / name).unlink()
    missing = measured([*ELFPATCH, "inits", "--deps", "--json", str(root)])
    return (f"{head} (medians of {REPS}): all found (in the last directory, each then loaded and listed) "
            f"{found.wall:.2f} s, {found.rss_kb >> 10} MB peak RSS, exit {found.rc}; none found {missing.wall:.2f} s, "
            f"{missing.rss_kb >> 10} MB, exit {missing.rc}, {missing.out.count('libn')} names in the report")


def fdes(tmp: Path) -> str:
    """libtorch_cpu.so's FDE starts, from its .eh_frame_hdr table."""
    from elfpatch.elf.file import ElfFile
    from elfpatch.inits.extents import eh_frame_extents

    if not TORCH_WHEEL.exists():
        return f"skipped: {TORCH_WHEEL} is not here"
    lib = tmp / "libtorch_cpu.so"
    with zipfile.ZipFile(TORCH_WHEEL) as z, z.open("torch/lib/libtorch_cpu.so") as src, open(lib, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 22)
    best, count = float("inf"), 0
    with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for _ in range(5):
            t = time.perf_counter()
            extents = eh_frame_extents(ElfFile(data, str(lib)))
            best = min(best, time.perf_counter() - t)
            count = len(extents.starts)
            del extents
    return f"libtorch_cpu.so ({lib.stat().st_size >> 20} MB): {count:,} FDE starts in {best * 1000:.1f} ms (best of 5)"


CASES = {"record": record, "deps": deps, "fdes": fdes}


def main() -> int:
    for name in sys.argv[1:] or list(CASES):
        if name not in CASES:
            print(f"crafted: no case {name!r} (cases: {', '.join(CASES)})", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(prefix=f"elfpatch-crafted-{name}-") as tmp:
            print(f"{name}: {CASES[name](Path(tmp))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
