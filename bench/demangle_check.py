"""Every symbol name of real C++ libraries, demangled by elfpatch and by `c++filt -i`, compared.

Names are read with elfpatch's own reader: .dynsym and .symtab, every binding, defined and undefined, each
distinct name once per library. The C++ names (``_Z``) go to one `c++filt -i` process per library over stdin;
each is then counted as
  agree          elfpatch's demangled form is c++filt's
  reported       elfpatch leaves it undemangled (``demangled: null``) and a --symbol/--keep glob that could
                 have matched its demangled form warns (NameFilter.blind_spot): never silently blind
  silent         left undemangled without that warning (must be 0)
  differ         demangled, but spelled otherwise than by c++filt (must be 0)
and every name demangled is checked against the length bound elfpatch.elf.mangled finds before demangling (a
bound below the real length must never be).
Names c++filt leaves as they are (not an Itanium name) agree when elfpatch leaves them too.

Default libraries: those of SYSTEM installed here (libLLVM-15 and -14, Qt5Core, protobuf, libstdc++, boost
1.74, z3, gRPC, OpenCV, ICU) and every shared library of the torch wheel (libtorch_cpu.so, libtorch_python.so,
..., extracted into a temporary directory). Bounded: each c++filt batch has a
timeout, the whole run a deadline (--deadline seconds); a library missing here is listed as skipped.
Exit status 1 when any name differs or is silent, 0 otherwise.

    .venv/bin/python bench/demangle_check.py [--json OUT] [--examples N] [LIB...]
"""
from __future__ import annotations

import argparse
import glob
import json
import mmap
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from elfpatch.elf import mangled, symbols  # noqa: E402
from elfpatch.elf.file import ElfFile  # noqa: E402
from elfpatch.errors import ElfPatchError  # noqa: E402

TORCH_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
TORCH_LIBS = ("torch/lib/", "torch/_C.")
LIBDIR = "/usr/lib/x86_64-linux-gnu"
SYSTEM = ("libLLVM-15.so.1", "libLLVM-14.so.1", "libQt5Core.so.5", "libprotobuf.so.32", "libprotoc.so.32",
          "libstdc++.so.6", "libboost_*.so.1.74.0", "libz3.so.4", "libgrpc++.so.1.51", "libopencv_*.so.406",
          "libicuuc.so.72", "libicui18n.so.72", "libQt5Gui.so.5", "libQt5Widgets.so.5", "libQt5Network.so.5",
          "libvtk*-9.1.so.1", "libgdal.so.32", "libpoppler.so.126")
BATCH_TIMEOUT = 900  # seconds for one library's c++filt batch (libtorch_cpu: ~0.5 M names, ~1 min)
CXXFILT_MEMORY = 4 << 30  # bytes of address space for c++filt
PROBE = symbols.NameFilter(["no glob matches this*"])  # a --symbol glob that could match any demangled form


def system_libraries() -> list[Path]:
    found: list[Path] = []
    for pattern in SYSTEM:
        found += sorted(Path(p) for p in glob.glob(f"{LIBDIR}/{pattern}"))
    return found


def torch_libraries(tmp: Path) -> list[Path]:
    """Every shared library of the torch wheel (libtorch_cpu.so, libtorch_python.so, libc10.so, ...)."""
    if not TORCH_WHEEL.exists():
        return []
    out = []
    with zipfile.ZipFile(TORCH_WHEEL) as z:
        for info in z.infolist():
            if info.filename.startswith(TORCH_LIBS) and ".so" in info.filename.rsplit("/", 1)[-1]:
                out.append(tmp / info.filename.rsplit("/", 1)[-1])
                with z.open(info) as src, open(out[-1], "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
    return sorted(out, key=lambda p: p.stat().st_size, reverse=True)


def symbol_names(path: Path) -> list[str]:
    """Every distinct symbol name of the file's symbol tables, as elfpatch reads them."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        elf = ElfFile(data, str(path))
        names: set[str] = set()
        for table in elf.symbol_tables():
            names.update(table.string(e[0]) for e in table.entries() if e[0])
        return sorted(names)


def cxxfilt(names: list[str]) -> list[str]:
    """c++filt -i's spelling of each name, one process for the batch."""
    proc = subprocess.run(["c++filt", "-i"], input="\n".join(names) + "\n", capture_output=True, text=True,
                          errors="surrogateescape", timeout=BATCH_TIMEOUT, check=True, preexec_fn=_bounded)
    out = proc.stdout.splitlines()
    if len(out) != len(names):
        raise SystemExit(f"c++filt returned {len(out)} lines for {len(names)} names")
    return out


def _bounded() -> None:
    """c++filt's address space capped (it builds each demangled name whole, as __cxa_demangle does)."""
    resource.setrlimit(resource.RLIMIT_AS, (CXXFILT_MEMORY, CXXFILT_MEMORY))


def compare(names: list[str]) -> dict[str, list]:
    """Each name sorted into agree / reported / silent / differ (see the module's docstring)."""
    # A name holding a line break or a blank would be split by c++filt's stdin reader: checked alone.
    plain = [n for n in names if n.isprintable() and " " not in n]
    result: dict[str, list] = {"agree": [], "reported": [], "silent": [], "differ": [], "unchecked": [],
                               "unsound": []}
    result["unchecked"] = sorted(set(names) - set(plain))
    for name, theirs in zip(plain, cxxfilt(plain)):
        ours = symbols.demangle(name)
        if ours == theirs or (ours is None and theirs == name):
            result["agree"].append(name)
        elif ours is None:
            kind = "silent" if PROBE.blind_spot(name, None) is None else "reported"
            result[kind].append((name, theirs, symbols.why_not_demangled(name).split(" (")[0]))
        else:
            result["differ"].append((name, ours, theirs))
        if ours is not None and mangled.demangled_bound(name) < len(ours):
            result["unsound"].append(name)  # the length bound below the real length: must never be
    return result


def check(path: Path, examples: int) -> dict:
    start = time.monotonic()
    names = symbol_names(path)
    cxx = sum(1 for n in names if n.startswith("_Z"))
    result = compare(names)
    why = Counter(item[2] for item in result["reported"])
    return {"library": path.name, "names": len(names), "cxx_names": cxx,
            **{k: len(v) for k, v in result.items()}, "seconds": round(time.monotonic() - start, 1),
            "reported_why": dict(why), "examples": {k: v[:examples] for k, v in result.items() if k != "agree" and v}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("libs", nargs="*", type=Path, help="libraries (default: the large C++ libraries here)")
    ap.add_argument("--examples", type=int, default=5, help="examples shown per class (default 5)")
    ap.add_argument("--json", type=Path, help="write the per-library rows here")
    ap.add_argument("--deadline", type=float, default=3600, help="stop starting libraries after this many s")
    args = ap.parse_args()
    if symbols._cxa_demangle() is None or shutil.which("c++filt") is None:
        print("demangle_check: needs libstdc++'s __cxa_demangle and c++filt", file=sys.stderr)
        return 2
    filt = subprocess.run(["c++filt", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(f"demangle_check: against `c++filt -i` ({filt})")
    begin = time.monotonic()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="demangle-check-") as tmp:
        libs = args.libs
        if not libs:
            libs = system_libraries()
            torch = torch_libraries(Path(tmp))
            libs += torch
            if not torch:
                print(f"  skipped: {TORCH_WHEEL} (not here)")
        for lib in libs:
            if time.monotonic() - begin > args.deadline:
                print(f"  skipped: {lib} (past the {args.deadline:.0f} s deadline)")
                continue
            try:
                rows.append(check(lib, args.examples))
            except (OSError, ElfPatchError, ValueError) as exc:
                print(f"  skipped: {lib} ({exc})")
                continue
            print_row(rows[-1])
    print_total(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if any(r["differ"] or r["silent"] or r["unsound"] for r in rows) else 0


def print_row(r: dict) -> None:
    print(f"  {r['library']}: {r['names']:,} names, {r['cxx_names']:,} C++; agree {r['agree']:,}, "
          f"reported {r['reported']:,}, silent {r['silent']:,}, differ {r['differ']:,}, "
          f"unchecked {r['unchecked']:,}, bound below {r['unsound']:,} ({r['seconds']} s)", flush=True)
    for kind, items in r["examples"].items():
        for item in items:
            print(f"    {kind}: " + " | ".join(item if isinstance(item, tuple) else (item,)))


def print_total(rows: list[dict]) -> None:
    keys = ("names", "cxx_names", "agree", "reported", "silent", "differ", "unchecked", "unsound")
    total = {k: sum(r[k] for r in rows) for k in keys}
    print(f"total ({len(rows)} libraries; names counted per library): {total['names']:,} names, "
          f"{total['cxx_names']:,} C++; agree {total['agree']:,}, reported as not demangled {total['reported']:,}, "
          f"silent {total['silent']:,}, differ {total['differ']:,}, unchecked {total['unchecked']:,}; "
          f"length bound below the real length: {total['unsound']:,}")
    why: Counter[str] = Counter()
    for r in rows:
        why.update(r["reported_why"])
    for reason, n in why.most_common():
        print(f"  reported as not demangled, {n:,}: {reason}")


if __name__ == "__main__":
    sys.exit(main())
