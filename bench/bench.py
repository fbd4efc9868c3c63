"""`make bench`: elfpatch against its baselines, side by side in one run, every variant in a child process.

What is measured (warm page cache; every patching variant gets a fresh copy of its input, made and written back
to disk before the clock starts; repetitions are interleaved and rotated so that disk noise hits every variant):

1. A large real library, torch/lib/libtorch_cpu.so from the torch CPU wheel on this machine:
   the plain pyelftools recipe (baseline), `elfpatch unique --inplace` (CLI wall time including interpreter
   start-up, and peak RSS), `elfpatch.api.patch(inplace=True)` in-process, LIEF parse + set binding + write.
2. The default atomic mode against `cp` of the same file (and, for context, `cp` + `mv` over the original,
   the floor of any replace-by-rename, and `elfpatch unique -o NEW`, which writes a new file as cp does).
3. `elfpatch unique --check --json` over ~1,500 system ELF files against a shell loop of `readelf -sW`.
4. The torch wheel: `elfpatch unique -o OUT X.whl` against `wheel unpack` + `elfpatch unique DIR` + `wheel pack`.
5. `elfpatch audit --json` against `elfpatch unique --check --json` on the same site-packages tree (the torch
   wheel installed, unzipped, into bench/out/site-packages): audit must be no slower than the check it builds on.
6. `elfpatch inits --dtors --siof --json` on the big library against a plain `elfpatch inits --json` listing of
   it (target <= 5 s, < 500 MB).
0. First, bench/vs_old.py: `elfpatch unique --check` today beside commit a2c2a08 (the large C++ libraries
   there are, and /usr/lib/x86_64-linux-gnu as a tree), whole processes, as ratios (target <= 1.0x).
   `--vs-old-only` runs that group alone (a few minutes), `--no-vs-old` leaves it out.

Prints a table (median wall seconds, peak RSS, ratio against the baseline), one PASS/MISS line per target, and
writes the same to bench/out/results.json. `--quick` runs fewer repetitions.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
VENV_PY = ROOT / ".venv" / "bin" / "python"
PY = str(VENV_PY) if VENV_PY.exists() else sys.executable
WHEEL_CLI = str(Path(PY).parent / "wheel")
ELFPATCH = [PY, "-m", "elfpatch"]
TORCH_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
BIG_MEMBER = "torch/lib/libtorch_cpu.so"
SYSTEM_ROOTS = ("/usr/lib/x86_64-linux-gnu", "/usr/bin", "/usr/lib")
N_SYSTEM_FILES = 1500

# The plain recipe: pyelftools parses, iterates .dynsym with iter_symbols(), and the byte is patched in place.
# pyelftools names binding 10 STB_LOOS (STB_GNU_UNIQUE in case a later version learns the name).
PYELFTOOLS_RECIPE = r"""
import sys
from elftools.elf.elffile import ELFFile
with open(sys.argv[1], "r+b") as f:
    elf = ELFFile(f)
    dynsym = elf.get_section_by_name(".dynsym")
    base, ent = dynsym["sh_offset"], dynsym["sh_entsize"]
    hits = [i for i, s in enumerate(dynsym.iter_symbols()) if s["st_info"]["bind"] in ("STB_LOOS", "STB_GNU_UNIQUE")]
    for i in hits:
        off = base + i * ent + 4
        f.seek(off)
        b = f.read(1)[0]
        f.seek(off)
        f.write(bytes([(1 << 4) | (b & 0xF)]))
print(len(hits))
"""

# LIEF 1.0: parse, set the binding of every unique symbol of both tables to GLOBAL, write a new file.
LIEF_RECIPE = r"""
import sys
import lief
b = lief.ELF.parse(sys.argv[1])
if b is None:
    sys.exit("lief.ELF.parse returned None")
n = 0
for s in list(b.dynamic_symbols) + list(b.symtab_symbols):
    if s.binding == lief.ELF.Symbol.BINDING.GNU_UNIQUE:
        s.binding = lief.ELF.Symbol.BINDING.GLOBAL
        n += 1
b.write(sys.argv[2])
print(n)
"""

# The in-process API time: the call alone, after the imports.
API_RECIPE = r"""
import json, sys, time
t0 = time.perf_counter()
import elfpatch.api
t1 = time.perf_counter()
reports = elfpatch.api.patch(sys.argv[1], inplace=True)
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "patch": t2 - t1, "patched": sum(r.patched for r in reports)}))
"""

READELF_LOOP = 'for f in "$@"; do readelf -sW "$f" >/dev/null 2>&1; done'


# -- running and timing -------------------------------------------------------------------------------

class Run:
    """One finished child: wall seconds (fork to reap), its own peak RSS in KB (from wait4), exit status."""

    def __init__(self, wall: float, rss_kb: int, rc: int, out: str, err: str) -> None:
        self.wall, self.rss_kb, self.rc, self.out, self.err = wall, rss_kb, rc, out, err
        self.extra: dict = {}  # what a check learnt from the output


# ru_maxrss caveat: at exec the kernel keeps the peak RSS of the process image being replaced, so a child
# spawned straight from this (large) process would report at least this process's own peak. Every command is
# therefore started through a small intermediary that forks it and reads its wait4 rusage: GNU time (about
# 1 MB) when installed, else a tiny Python launcher (about 10 MB, also the floor of what it reports).
GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
LAUNCHER = r"""
import os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{usage.ru_maxrss} {time.perf_counter() - t0}\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_timed(cmd: list[str]) -> Run:
    """Run ``cmd``; wall seconds from spawn to reap, peak RSS of the command (and its reaped descendants)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        if GNU_TIME:
            argv = [GNU_TIME, "-f", "%M", "-o", rss.name, *cmd]
        else:
            argv = [sys.executable, "-S", "-c", LAUNCHER, rss.name, *cmd]
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        wall = time.perf_counter() - t0
        # GNU time may put "Command exited with non-zero status N" before the figure: take the last line.
        fields = (rss.read().strip().splitlines() or ["0"])[-1].split()
        rss_kb = int(fields[0]) if fields[0].isdigit() else 0
        if len(fields) > 1:
            wall = float(fields[1])  # the launcher's own clock, without its start-up
        out.seek(0)
        err.seek(0)
        return Run(wall, rss_kb, proc.returncode, out.read().decode(errors="replace"),
                   err.read().decode(errors="replace"))


def _disk_stat_path(path: Path) -> Path | None:
    st = os.stat(path)
    p = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat")
    return p if p.exists() else None


DISK_STAT = None


def settle() -> None:
    """Write back dirty pages and wait until the disk is idle (no I/O in flight, no sectors written for a
    few polls; discards of freed blocks included), so that one variant's writeback is not billed to the next."""
    os.sync()
    if DISK_STAT is None:
        time.sleep(0.3)
        return
    deadline = time.monotonic() + 10
    last, quiet = None, 0
    while time.monotonic() < deadline and quiet < 3:
        fields = DISK_STAT.read_text().split()
        now = (fields[6], fields[8], fields[11] if len(fields) > 11 else "")  # sectors written, in flight, discards
        quiet = quiet + 1 if now == last and fields[8] == "0" else 0
        last = now
        time.sleep(0.1)


def fresh_copy(src: Path, dst: Path) -> None:
    """A new inode with src's bytes (the old one unlinked first, so no truncation lands in a timing)."""
    if dst.exists():
        dst.unlink()
    shutil.copyfile(src, dst)


class Variant:
    """A named command; ``prepare`` makes its input (untimed) and returns the argv; ``check`` validates."""

    def __init__(self, name: str, prepare: Callable[[], list[str]],
                 check: Callable[[Run], str | None] | None = None, ok_rc: tuple[int, ...] = (0,)) -> None:
        self.name = name
        self.prepare = prepare
        self.check = check
        self.ok_rc = ok_rc
        self.runs: list[Run] = []
        self.failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and bool(self.runs)

    @property
    def median(self) -> float:
        return statistics.median(r.wall for r in self.runs)

    @property
    def rss_kb(self) -> int:
        return max(r.rss_kb for r in self.runs)

    def once(self) -> None:
        if self.failure:
            return
        cmd = self.prepare()
        settle()
        r = run_timed(cmd)
        if r.rc not in self.ok_rc:
            self.failure = f"exit {r.rc}: {r.err.strip().splitlines()[-1] if r.err.strip() else '(no message)'}"
            return
        problem = self.check(r) if self.check else None
        if problem:
            self.failure = problem
            return
        self.runs.append(r)

    def to_json(self) -> dict:
        doc: dict = {"name": self.name, "samples_s": [round(r.wall, 4) for r in self.runs]}
        if self.runs:
            doc.update(median_s=round(self.median, 4), min_s=round(min(r.wall for r in self.runs), 4),
                       peak_rss_mb=round(self.rss_kb / 1024, 1))
        if self.failure:
            doc["failure"] = self.failure
        return doc


def interleave(variants: list[Variant], reps: int, label: str) -> None:
    """reps rounds; each round runs every variant once, in an order rotated by one each round."""
    for rep in range(reps):
        k = rep % len(variants)
        for v in variants[k:] + variants[:k]:
            print(f"  [{label} {rep + 1}/{reps}] {v.name}", file=sys.stderr, flush=True)
            v.once()


# -- the inputs ---------------------------------------------------------------------------------------

def big_library() -> Path:
    """libtorch_cpu.so extracted once into bench/out (checked against the wheel's CRC on every run)."""
    OUT.mkdir(parents=True, exist_ok=True)
    lib = OUT / "libtorch_cpu.so"
    with zipfile.ZipFile(TORCH_WHEEL) as z:
        info = z.getinfo(BIG_MEMBER)
        if lib.exists() and lib.stat().st_size == info.file_size:
            crc = 0
            with open(lib, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 22), b""):
                    crc = zlib.crc32(chunk, crc)
            if crc == info.CRC:
                return lib
        print(f"bench: extracting {BIG_MEMBER} from {TORCH_WHEEL.name}", file=sys.stderr)
        part = lib.with_suffix(".part")
        with z.open(info) as src, open(part, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 22)
        part.rename(lib)
    return lib


def readelf_counts(path: Path) -> dict:
    """Symbol and unique counts per table, as readelf -sW prints them (an oracle independent of elfpatch).
    Streamed line by line: this process stays small (see the ru_maxrss caveat above)."""
    tables: dict = {}
    current = None
    head = re.compile(r"^Symbol table '([^']+)' contains (\d+) entr")
    with subprocess.Popen(["readelf", "-sW", str(path)], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = head.match(line)
            if m:
                current = tables[m.group(1)] = {"symbols": int(m.group(2)), "unique": 0}
            elif current is not None and (" UNIQUE " in line or "<OS specific>: 10" in line):
                current["unique"] += 1
    if proc.returncode:
        raise SystemExit(f"bench: readelf -sW {path} exited {proc.returncode}")
    return tables


def reader_counts(path: Path) -> dict:
    """Unique counts per table with elfpatch's own reader (fast; validates what each variant wrote)."""
    sys.path.insert(0, str(ROOT))
    import mmap

    from elfpatch.elf.file import ElfFile
    from elfpatch.elf.symbols import unique_indexes

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        elf = ElfFile(m, str(path))
        counts = {t.name: len(unique_indexes(t.info_bytes())) for t in elf.symbol_tables()}
        del elf
    return counts


def system_elves(limit: int) -> list[str]:
    """Regular ELF files under SYSTEM_ROOTS (in that order, each walked in sorted order), one per inode."""
    seen: set[tuple[int, int]] = set()
    out: list[str] = []
    for root in SYSTEM_ROOTS:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if len(out) >= limit:
                    return out
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                    if not (st.st_mode & 0o170000 == 0o100000) or (st.st_dev, st.st_ino) in seen:
                        continue
                    with open(path, "rb") as f:
                        if f.read(4) != b"\x7fELF":
                            continue
                except OSError:
                    continue
                seen.add((st.st_dev, st.st_ino))
                out.append(path)
    return out


# -- the benchmarks -----------------------------------------------------------------------------------

def _fresh_input(lib: Path, work: Path, *argv: str) -> Callable[[], list[str]]:
    """A prepare step: a fresh copy of ``lib`` at ``work``, which "{}" in ``argv`` names."""
    def prepare() -> list[str]:
        fresh_copy(lib, work)
        return [a.replace("{}", str(work)) for a in argv]
    return prepare


def _new_output(new: Path, *argv: str) -> Callable[[], list[str]]:
    """A prepare step for a command that writes ``new`` (named by "{}" in ``argv``): no file there yet."""
    def prepare() -> list[str]:
        if new.exists():
            new.unlink()
        return [a.replace("{}", str(new)) for a in argv]
    return prepare


def _no_unique_left(path: Path, tables: tuple[str, ...] = (".dynsym", ".symtab")) -> Callable[[Run], str | None]:
    def check(_: Run) -> str | None:
        left = reader_counts(path)
        bad = {t: left.get(t) for t in tables if left.get(t)}
        return f"unique symbols left after the run: {bad}" if bad else None
    return check


def _median_extra(runs: list[Run], key: str) -> float | None:
    return round(statistics.median(r.extra[key] for r in runs), 4) if runs else None


def bench_library(lib: Path, expect: dict, reps: int, tmp: Path, results: dict) -> dict[str, Variant]:
    work = tmp / "lib.so"
    new = tmp / "new.so"
    recipe = tmp / "pyelftools_recipe.py"
    recipe.write_text(PYELFTOOLS_RECIPE)
    api = tmp / "api_recipe.py"
    api.write_text(API_RECIPE)
    dyn_unique = expect[".dynsym"]["unique"]

    def recipe_check(r: Run) -> str | None:
        if r.out.strip() != str(dyn_unique):
            return f"the recipe patched {r.out.strip()!r} symbols, expected {dyn_unique}"
        return _no_unique_left(work, (".dynsym",))(r)

    def api_check(r: Run) -> str | None:
        r.extra = json.loads(r.out)
        return _no_unique_left(work)(r)

    v = {
        "pyelftools": Variant("pyelftools recipe (.dynsym only)", _fresh_input(lib, work, PY, str(recipe), "{}"),
                              recipe_check),
        "inplace": Variant("elfpatch unique --inplace (CLI)",
                           _fresh_input(lib, work, *ELFPATCH, "unique", "--inplace", "{}"), _no_unique_left(work)),
        "api": Variant("python: import elfpatch.api; patch(inplace=True)", _fresh_input(lib, work, PY, str(api), "{}"),
                       api_check),
        "cp": Variant("cp LIB NEW", _new_output(new, "cp", str(lib), "{}")),
        "cpmv": Variant("cp LIB LIB.new && mv LIB.new LIB",
                        _fresh_input(lib, work, "sh", "-c", 'cp "$1" "$1.new" && mv "$1.new" "$1"', "-", "{}")),
        "atomic": Variant("elfpatch unique LIB (atomic replace)", _fresh_input(lib, work, *ELFPATCH, "unique", "{}"),
                          _no_unique_left(work)),
        "output": Variant("elfpatch unique -o NEW LIB", _new_output(new, *ELFPATCH, "unique", "-o", "{}", str(lib)),
                          _no_unique_left(new)),
    }
    interleave(list(v.values()), reps, "library")
    results["api_patch_s"] = _median_extra(v["api"].runs, "patch")
    results["api_import_s"] = _median_extra(v["api"].runs, "import")
    if reader_counts(lib) != {t: c["unique"] for t, c in expect.items()}:
        raise SystemExit("bench: the cached library changed during the run (a variant wrote to it)")
    return v


def bench_inits(lib: Path, reps: int, results: dict) -> tuple[Variant, Variant]:
    """`inits --dtors --siof` (disassembles 375 initializers' call trees) against a plain `inits` listing."""
    def counts(r: Run) -> str | None:
        f = json.loads(r.out)["files"][0]
        results["initializers"] = sum(1 for e in f["init"] if not e["toolchain"])
        results["exit_time_destructors"] = len(f["exit_time_destructors"])
        results["findings"] = len(f["findings"])
        return None if f["exit_time_destructors"] else "no exit-time destructors found"

    plain = Variant("elfpatch inits --json LIB (listing)", lambda: [*ELFPATCH, "inits", "--json", str(lib)])
    deep = Variant("elfpatch inits --dtors --siof --json LIB (depth 3)",
                   lambda: [*ELFPATCH, "inits", "--dtors", "--siof", "--json", str(lib)], counts)
    interleave([plain, deep], reps, "inits")
    return plain, deep


def bench_lief(lib: Path, tmp: Path) -> Variant:
    recipe = tmp / "lief_recipe.py"
    recipe.write_text(LIEF_RECIPE)
    dst = tmp / "lief.so"

    def prepare() -> list[str]:
        if dst.exists():
            dst.unlink()
        return [PY, str(recipe), str(lib), str(dst)]

    def check(r: Run) -> str | None:
        left = reader_counts(dst)
        r.extra["size"] = dst.stat().st_size
        return f"unique symbols left after LIEF: {left}" if any(left.values()) else None

    v = Variant("LIEF parse + set binding + write", prepare, check)
    print("  [lief 1/1] LIEF", file=sys.stderr, flush=True)
    v.once()
    return v


def bench_check(files: list[str], reps: int, readelf_reps: int, results: dict) -> tuple[Variant, Variant]:
    # One untimed pass warms the page cache for both sides and gives the counts.
    doc = json.loads(subprocess.run([*ELFPATCH, "unique", "--check", "--json", *files],
                                    capture_output=True, text=True).stdout)
    with_unique = sorted({f["path"] for f in doc["files"] if f["symbols"]})
    results.update(files=len(files), with_unique=len(with_unique), unique_symbols=doc["summary"]["unique"],
                   errors=doc["summary"]["errors"], skipped=doc["summary"]["skipped"],
                   files_with_unique=with_unique, bytes=sum(os.path.getsize(f) for f in files))
    subprocess.run(["bash", "-c", READELF_LOOP, "bash", *files])

    def same_answer(r: Run) -> str | None:
        got = json.loads(r.out)["summary"]
        return None if got == doc["summary"] else f"--check answered {got}, the warm-up pass {doc['summary']}"

    elfpatch = Variant(f"elfpatch unique --check --json ({len(files)} files)",
                       lambda: [*ELFPATCH, "unique", "--check", "--json", *files], same_answer, ok_rc=(0, 1))
    readelf = Variant(f"readelf -sW shell loop ({len(files)} files)", lambda: ["bash", "-c", READELF_LOOP, "bash",
                                                                                *files])
    interleave([readelf, elfpatch], readelf_reps, "check")
    for rep in range(reps - readelf_reps):
        print(f"  [check {readelf_reps + rep + 1}/{reps}] elfpatch", file=sys.stderr, flush=True)
        elfpatch.once()
    return readelf, elfpatch


def site_packages() -> Path:
    """The torch wheel unzipped as pip installs it (package files and torch-*.dist-info/RECORD), made once."""
    site = OUT / "site-packages"
    stamp = OUT / "site-packages.from"  # beside the tree, not in it
    want = f"{TORCH_WHEEL.name} {TORCH_WHEEL.stat().st_size}"
    if stamp.exists() and stamp.read_text() == want:
        return site
    shutil.rmtree(site, ignore_errors=True)
    with zipfile.ZipFile(TORCH_WHEEL) as z:
        z.extractall(site)
    stamp.write_text(want)
    return site


def bench_audit(reps: int, results: dict) -> tuple[Variant, Variant]:
    site = site_packages()
    tree = os.listdir(site)
    check_cmd = [*ELFPATCH, "unique", "--check", "--json", str(site)]
    audit_cmd = [*ELFPATCH, "audit", "--json", str(site)]
    doc = json.loads(subprocess.run(audit_cmd, capture_output=True, text=True).stdout)  # untimed warm-up
    results.update(tree=sorted(tree), summary=doc["summary"])

    def audit_same(r: Run) -> str | None:
        got = json.loads(r.out)["summary"]
        return None if got == doc["summary"] else f"audit answered {got}, the warm-up pass {doc['summary']}"

    check = Variant("elfpatch unique --check --json SITE", lambda: check_cmd, ok_rc=(0, 1))
    audit = Variant("elfpatch audit --json SITE", lambda: audit_cmd, audit_same, ok_rc=(0, 1))
    interleave([check, audit], reps, "audit")
    return check, audit


NOT_SUPPORTED = re.compile(r"not supported|unsupported|unknown (kind|file)|not an ELF", re.I)


def _wheel_variants(out: Path, unpacked: Path, dist: Path) -> tuple[Variant, list[Variant]]:
    """elfpatch writing a new wheel, and the baseline's stages: unpack, patch the tree, pack."""
    def new_out() -> list[str]:
        if out.exists():
            out.unlink()
        return [*ELFPATCH, "unique", "-o", str(out), str(TORCH_WHEEL)]

    def unpack() -> list[str]:
        shutil.rmtree(unpacked, ignore_errors=True)
        shutil.rmtree(dist, ignore_errors=True)
        return [WHEEL_CLI, "unpack", "-d", str(unpacked), str(TORCH_WHEEL)]

    def patch_tree() -> list[str]:
        return [*ELFPATCH, "unique", str(unpacked)]

    def pack() -> list[str]:
        dist.mkdir(exist_ok=True)
        (tree,) = unpacked.iterdir()
        return [WHEEL_CLI, "pack", "-d", str(dist), str(tree)]

    elfpatch = Variant("elfpatch unique -o OUT torch.whl", new_out)
    stages = [Variant("  wheel unpack", unpack), Variant("  elfpatch unique DIR (tree)", patch_tree),
              Variant("  wheel pack", pack)]
    return elfpatch, stages


def _run_stages(stages: list[Variant]) -> None:
    for s in stages:
        s.once()
        if s.failure:
            break


def _wheel_failed(failure: str, results: dict) -> None:
    """elfpatch failed on its first run: say whether wheels are not supported yet or it broke."""
    if NOT_SUPPORTED.search(failure):
        print(f"wheel: not supported yet ({failure})")
        results.update(supported=False, failure=failure)
        return
    print(f"wheel: elfpatch failed on the wheel: {failure}")
    results.update(supported=True, failure=failure)


def _check_wheel(out: Path, elfpatch: Variant, results: dict) -> None:
    """Validate once, untimed: the new wheel has no unique symbols left and differs from the input only there."""
    check = subprocess.run([*ELFPATCH, "unique", "--check", "--json", str(out)], capture_output=True, text=True)
    try:
        summary = json.loads(check.stdout)["summary"]
    except ValueError:
        summary = {"error": check.stderr.strip()}
    results.update(supported=True, output_check=summary, output_mb=round(out.stat().st_size / 1e6, 1),
                   input_mb=round(TORCH_WHEEL.stat().st_size / 1e6, 1))
    if summary.get("unique") or summary.get("errors") or "error" in summary:
        elfpatch.failure = f"the wheel elfpatch wrote still fails --check: {summary}"


def bench_wheel(reps: int, tmp: Path, results: dict) -> tuple[list[Variant], Variant] | None:
    out = tmp / TORCH_WHEEL.name
    unpacked = tmp / "unpacked"
    dist = tmp / "dist"
    elfpatch, stages = _wheel_variants(out, unpacked, dist)
    for rep in range(reps):
        order = [elfpatch, stages] if rep % 2 == 0 else [stages, elfpatch]
        for item in order:
            print(f"  [wheel {rep + 1}/{reps}] {'elfpatch' if item is elfpatch else 'unpack+patch+pack'}",
                  file=sys.stderr, flush=True)
            if item is not elfpatch:
                _run_stages(stages)
                continue
            elfpatch.once()
            if rep == 0 and elfpatch.failure:
                _wheel_failed(elfpatch.failure, results)
                return None
        shutil.rmtree(unpacked, ignore_errors=True)
    _check_wheel(out, elfpatch, results)
    shutil.rmtree(dist, ignore_errors=True)
    return stages, elfpatch


# -- reporting ----------------------------------------------------------------------------------------

class Table:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, group: str, v: Variant, ratio: str = "", seconds: float | None = None,
            rss_kb: int | None = None) -> None:
        if not v.ok:
            self.rows.append({"group": group, "what": v.name, "seconds": None, "rss_mb": None,
                              "ratio": f"FAILED: {v.failure or 'not run'}"})
            return
        self.rows.append({"group": group, "what": v.name, "seconds": seconds if seconds is not None else v.median,
                          "min_s": min(r.wall for r in v.runs), "n": len(v.runs),
                          "rss_mb": (rss_kb if rss_kb is not None else v.rss_kb) / 1024, "ratio": ratio})

    def add_value(self, group: str, what: str, seconds: float, ratio: str = "") -> None:
        self.rows.append({"group": group, "what": what, "seconds": seconds, "rss_mb": None, "ratio": ratio})

    def print(self) -> None:
        print(f"\n{'what':52} {'median s':>9} {'min s':>8} {'n':>2} {'peak RSS MB':>12}  ratio")
        group = None
        for r in self.rows:
            if r["group"] != group:
                group = r["group"]
                print(f"-- {group}")
            sec = f"{r['seconds']:9.3f}" if r["seconds"] is not None else f"{'-':>9}"
            mn = f"{r['min_s']:8.3f}" if r.get("min_s") is not None else f"{'':>8}"
            n = f"{r['n']:>2}" if r.get("n") else "  "
            rss = f"{r['rss_mb']:.0f}" if r["rss_mb"] is not None else "-"
            print(f"{r['what']:52} {sec} {mn} {n} {rss:>12}  {r['ratio']}")


def faster(base: Variant, v: Variant) -> float:
    return base.median / v.median


def verdict_faster(what: str, speedup: float | None, target: float) -> str:
    if speedup is None:
        return f"MISS: {what}: not measured (failed)"
    if speedup >= target:
        return f"PASS: {what} {speedup:.1f}x faster (target >= {target:g}x)"
    return f"MISS: {what} only {speedup:.1f}x faster (target >= {target:g}x; {target / speedup:.1f}x short)"


def main() -> int:
    args = _arguments()
    reps = args.reps or (2 if args.quick else 5)
    global DISK_STAT
    OUT.mkdir(parents=True, exist_ok=True)
    DISK_STAT = _disk_stat_path(OUT)
    started = time.monotonic()

    results: dict = {
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release(),
                    "cpu": _cpu_model(), "page_cache": "warm; inputs written back (sync) before each timing"},
        "quick": args.quick, "reps": reps, "load_average_at_start": os.getloadavg(),
    }
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start (other jobs on the "
          "machine show up as noise: compare medians with minimums)")
    table = Table()
    verdicts: list[str] = []
    if not args.no_vs_old:  # today against the pinned older version: what the hardening costs, as ratios
        import vs_old

        results["vs_old"] = vs_old.compare(15 if not args.quick else 5, 7 if not args.quick else 3)
        verdicts.extend(vs_old.print_rows(results["vs_old"]))
    if args.vs_old_only or not TORCH_WHEEL.exists():
        if not TORCH_WHEEL.exists():
            print(f"bench: {TORCH_WHEEL} not found; the big-library and wheel benchmarks need it", file=sys.stderr)
        for line in verdicts:
            print(line)
        (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        return 0 if args.vs_old_only and verdicts else 2
    lib, expect = _library_input(results)
    _warm_up()

    with tempfile.TemporaryDirectory(dir=OUT, prefix="run-") as tmp_name:
        tmp = Path(tmp_name)
        _group_library(lib, expect, reps, tmp, args, table, verdicts, results)
        _group_inits(lib, reps, table, verdicts, results)
        _group_check(reps, args, table, verdicts, results)
        _group_audit(reps, table, verdicts, results)
        if not args.no_wheel:
            _group_wheel(tmp, args, table, verdicts, results)

    table.print()
    print()
    for line in verdicts:
        print(line)
    results["table"] = [{k: (round(x, 4) if isinstance(x, float) else x) for k, x in r.items()} for r in table.rows]
    results["verdicts"] = verdicts
    results["total_s"] = round(time.monotonic() - started, 1)
    results["load_average_at_end"] = os.getloadavg()
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\n{results['total_s']:.0f} s in all; results in {(OUT / 'results.json').relative_to(ROOT)}")
    return 0


def _arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (about 3 minutes instead of 8)")
    ap.add_argument("--reps", type=int, help="repetitions of the library benchmarks (default 5, --quick 2)")
    ap.add_argument("--no-lief", action="store_true", help="skip LIEF (slow and 1.7 GB of RSS on the big library)")
    ap.add_argument("--no-wheel", action="store_true", help="skip the wheel benchmark")
    ap.add_argument("--no-vs-old", action="store_true", help="skip `unique --check` against commit a2c2a08")
    ap.add_argument("--vs-old-only", action="store_true", help="only `unique --check` against commit a2c2a08")
    return ap.parse_args()


def _library_input(results: dict) -> tuple[Path, dict]:
    """The big library and its tables as readelf counts them (the oracle every variant is checked against)."""
    lib = big_library()
    counts = readelf_counts(lib)
    expect = {t: counts[t] for t in (".dynsym", ".symtab") if t in counts}
    results["library"] = {"path": BIG_MEMBER, "from": TORCH_WHEEL.name, "size_mb": round(lib.stat().st_size / 1e6, 1),
                          "tables (readelf -sW)": expect}
    desc = ", ".join(f"{t} {c['symbols']:,} symbols / {c['unique']} unique" for t, c in expect.items())
    print(f"library: {BIG_MEMBER} ({lib.stat().st_size / 1e6:.1f} MB): {desc}")
    if ".symtab" not in expect or not all(c["unique"] for c in expect.values()):
        print("library: note: it lacks a .symtab or unique symbols; the figures below understate the work")
    return lib, expect


def _warm_up() -> None:
    # The bytecode `make venv` precompiles, refreshed for sources edited since (PYTHONDONTWRITEBYTECODE may be
    # set, and then every run would compile them again); then every Python variant's imports warmed, untimed.
    subprocess.run([PY, "-m", "compileall", "-q", str(ROOT / "elfpatch")], capture_output=True)
    subprocess.run([*ELFPATCH, "--version"], capture_output=True)
    subprocess.run([PY, "-c", "import elftools.elf.elffile, elfpatch.api"], capture_output=True)


def _group_library(lib: Path, expect: dict, reps: int, tmp: Path, args: argparse.Namespace, table: Table,
                   verdicts: list[str], results: dict) -> None:
    lib_results: dict = {}
    v = bench_library(lib, expect, reps, tmp, lib_results)
    lief = bench_lief(lib, tmp) if not args.no_lief else None
    _library_rows(table, v, lib_results, lief)
    verdicts.extend(_library_verdicts(v))
    results["library"].update(lib_results)
    results["library"]["variants"] = [x.to_json() for x in v.values()] + ([lief.to_json()] if lief else [])


def _library_rows(table: Table, v: dict[str, Variant], lib_results: dict, lief: Variant | None) -> None:
    base = v["pyelftools"]
    g1 = "big library: --inplace vs the pyelftools recipe"
    table.add(g1, base, "1.00 (baseline)")
    for key in ("inplace", "api"):
        table.add(g1, v[key], f"{faster(base, v[key]):.1f}x faster" if v[key].ok and base.ok else "")
    if lib_results.get("api_patch_s") is not None:
        table.add_value(g1, "  of which the patch() call alone (in-process)", lib_results["api_patch_s"],
                        f"{base.median / lib_results['api_patch_s']:.0f}x faster" if base.ok else "")
    if lief is not None:
        ratio = ""
        if lief.ok and v["inplace"].ok:
            ratio = (f"{lief.median / base.median:.1f}x the recipe, {lief.median / v['inplace'].median:.0f}x "
                     f"--inplace; output {lief.runs[0].extra['size'] / 1e6:.1f} MB")
        table.add(g1, lief, ratio)
    g2 = "big library: atomic mode vs cp"
    cp = v["cp"]
    table.add(g2, cp, "1.00 (baseline)")
    for key in ("output", "cpmv", "atomic"):
        table.add(g2, v[key], f"{v[key].median / cp.median:.2f}x cp" if v[key].ok and cp.ok else "")
    if v["atomic"].ok and v["cpmv"].ok:
        table.rows[-1]["ratio"] += f", {v['atomic'].median / v['cpmv'].median:.2f}x cp+mv"


def _library_verdicts(v: dict[str, Variant]) -> list[str]:
    base, cp = v["pyelftools"], v["cp"]
    verdicts: list[str] = []
    sp = faster(base, v["inplace"]) if base.ok and v["inplace"].ok else None
    verdicts.append(verdict_faster("--inplace vs the pyelftools recipe (CLI wall time, start-up included):", sp,
                                   20))
    if v["inplace"].ok:
        rss = v["inplace"].rss_kb / 1024
        verdicts.append(f"{'PASS' if rss <= 80 else 'MISS'}: --inplace peak RSS {rss:.0f} MB (target <= 80 MB"
                        f"{'' if rss <= 80 else f'; {rss - 80:.0f} MB over'})")
    else:
        verdicts.append("MISS: --inplace peak RSS: not measured (failed)")
    if v["atomic"].ok and cp.ok:
        q = v["atomic"].median / cp.median
        extra = (f"; cp+mv over the original alone is {v['cpmv'].median / cp.median:.2f}x cp, -o NEW "
                 f"{v['output'].median / cp.median:.2f}x cp") if v["cpmv"].ok and v["output"].ok else ""
        verdicts.append(f"{'PASS' if q <= 1.5 else 'MISS'}: atomic mode {q:.2f}x a cp of the same file (target "
                        f"<= 1.5x{'' if q <= 1.5 else f'; {q / 1.5:.2f}x over'}){extra}")
    else:
        verdicts.append("MISS: atomic mode: not measured (failed)")
    return verdicts


def _group_inits(lib: Path, reps: int, table: Table, verdicts: list[str], results: dict) -> None:
    inits_results: dict = {}
    plain, deep = bench_inits(lib, reps, inits_results)
    g5 = "big library: inits --dtors --siof vs a plain inits listing"
    table.add(g5, plain, "1.00 (baseline)")
    table.add(g5, deep, f"{deep.median / plain.median:.1f}x the listing; {inits_results.get('initializers')} "
              f"initializers, {inits_results.get('exit_time_destructors')} exit-time destructors"
              if deep.ok and plain.ok else "")
    if deep.ok:
        rss = deep.rss_kb / 1024
        ok = deep.median <= 5 and rss < 500
        verdicts.append(f"{'PASS' if ok else 'MISS'}: inits --dtors --siof {deep.median:.2f} s, {rss:.0f} MB "
                        "(target <= 5 s, < 500 MB)")
    else:
        verdicts.append(f"MISS: inits --dtors --siof: {deep.failure or 'not run'}")
    inits_results["variants"] = [plain.to_json(), deep.to_json()]
    results["inits"] = inits_results


def _group_check(reps: int, args: argparse.Namespace, table: Table, verdicts: list[str], results: dict) -> None:
    files = system_elves(N_SYSTEM_FILES)
    check_results: dict = {}
    readelf, check = bench_check(files, reps=max(3, reps), readelf_reps=1 if args.quick else 3,
                                 results=check_results)
    g3 = f"--check over {len(files)} system ELF files ({check_results['bytes'] / 1e9:.2f} GB)"
    table.add(g3, readelf, "1.00 (baseline)")
    table.add(g3, check, f"{faster(readelf, check):.1f}x faster" if readelf.ok and check.ok else "")
    verdicts.append(verdict_faster(f"--check over {len(files)} files vs a readelf loop:",
                                   faster(readelf, check) if readelf.ok and check.ok else None, 5))
    check_results["variants"] = [readelf.to_json(), check.to_json()]
    results["check"] = check_results
    print(f"check: {len(files)} files from {', '.join(SYSTEM_ROOTS)}; {check_results['with_unique']} have "
          f"unique symbols ({check_results['unique_symbols']} symbols), {check_results['errors']} errors, "
          f"{check_results['skipped']} skipped: "
          + ", ".join(os.path.basename(p) for p in check_results["files_with_unique"]))


def _group_audit(reps: int, table: Table, verdicts: list[str], results: dict) -> None:
    audit_results: dict = {}
    base_check, audit = bench_audit(max(3, reps), audit_results)
    s_ = audit_results["summary"]
    g5 = (f"audit vs --check on a site-packages ({s_['files']} ELF files, {s_['other']} other files)")
    table.add(g5, base_check, "1.00 (baseline)")
    ratio = audit.median / base_check.median if audit.ok and base_check.ok else None
    table.add(g5, audit, f"{ratio:.2f}x the check" if ratio is not None else "")
    verdicts.append("MISS: audit: not measured (failed)" if ratio is None else
                    f"{'PASS' if ratio <= 1.0 else 'MISS'}: audit {ratio:.2f}x `unique --check` on the same tree "
                    "(target <= 1.0x)")
    audit_results["variants"] = [base_check.to_json(), audit.to_json()]
    results["audit"] = audit_results


def _group_wheel(tmp: Path, args: argparse.Namespace, table: Table, verdicts: list[str], results: dict) -> None:
    wheel_results: dict = {}
    got = bench_wheel(1 if args.quick else 3, tmp, wheel_results)
    g4 = f"torch wheel ({TORCH_WHEEL.stat().st_size / 1e6:.0f} MB)"
    if got is None:
        verdicts.append("MISS: wheel: " + ("not supported yet" if not wheel_results.get("supported")
                                           else f"failed: {wheel_results.get('failure')}"))
    else:
        stages, ep = got
        if all(s.ok for s in stages):
            t_base = sum(s.median for s in stages)
            rss_base = max(s.rss_kb for s in stages)
            table.add_value(g4, "wheel unpack + elfpatch DIR + wheel pack", t_base, "1.00 (baseline)")
            table.rows[-1]["rss_mb"] = rss_base / 1024
            for s in stages:
                table.add(g4, s, f"{s.median / t_base:.0%} of the baseline")
            table.add(g4, ep, f"{t_base / ep.median:.1f}x faster" if ep.ok else "")
            verdicts.append(verdict_faster("wheel vs unpack + patch + pack:",
                                           t_base / ep.median if ep.ok else None, 3))
            if ep.ok:
                verdicts.append(f"INFO: wheel peak RSS {ep.rss_kb / 1024:.0f} MB (elfpatch), "
                                f"{rss_base / 1024:.0f} MB (largest baseline stage)")
            wheel_results["baseline_s"] = round(t_base, 4)
        else:
            for s in stages:
                table.add(g4, s)
            table.add(g4, ep)
            verdicts.append("MISS: wheel: the baseline failed: "
                            + "; ".join(s.failure or "" for s in stages if not s.ok))
        wheel_results["variants"] = [s.to_json() for s in stages] + [ep.to_json()]
    results["wheel"] = wheel_results


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
