"""`make bench`: elfpatch against its baselines, side by side in one run, each in a child process.

Prints a table of median wall times, peak RSS and ratios, a PASS/MISS line per target, and writes
bench/out/results.json. `--quick` runs fewer repetitions and files.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
PY = sys.executable
TORCH_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
BIG_MEMBER = "torch/lib/libtorch_cpu.so"

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
        f.seek(off); b = f.read(1)[0]; f.seek(off); f.write(bytes([(1 << 4) | (b & 0xF)]))
print(len(hits))
"""

LIEF_RECIPE = r"""
import sys, lief
b = lief.ELF.parse(sys.argv[1])
n = 0
for s in list(b.dynamic_symbols) + list(b.symtab_symbols):
    if s.binding == lief.ELF.Symbol.BINDING.GNU_UNIQUE:
        s.binding = lief.ELF.Symbol.BINDING.GLOBAL
        n += 1
b.write(sys.argv[2])
print(n)
"""


def timed(cmd: list[str]) -> tuple[float, int, subprocess.CompletedProcess]:
    """Run under /usr/bin/time-like accounting: fork, exec, wait4 for this child's own rusage."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss, subprocess.CompletedProcess(cmd, rc)


def settle() -> None:
    """Write back dirty pages so one variant's writeback is not billed to the next."""
    os.sync()
    time.sleep(0.2)


def median_of(reps: int, prepare, cmd_for) -> tuple[float, int]:
    walls, rsss = [], []
    for _ in range(reps):
        arg = prepare()
        settle()
        wall, rss, proc = timed(cmd_for(arg))
        if proc.returncode not in (0, 1):
            raise SystemExit(f"bench: {' '.join(cmd_for(arg))} exited {proc.returncode}")
        walls.append(wall)
        rsss.append(rss)
    return statistics.median(walls), max(rsss)


def big_library() -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    lib = OUT / "libtorch_cpu.so"
    if not lib.exists():
        with zipfile.ZipFile(TORCH_WHEEL) as z, z.open(BIG_MEMBER) as src, open(lib.with_suffix(".part"), "wb") as d:
            shutil.copyfileobj(src, d, 1 << 20)
        lib.with_suffix(".part").rename(lib)
    return lib


def describe(lib: Path) -> dict:
    sys.path.insert(0, str(ROOT))
    from elfpatch.elffile import ElfFile
    from elfpatch.symbols import unique_indexes

    with open(lib, "rb") as f:
        import mmap

        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        elf = ElfFile(m, str(lib))
        info = {"size_mb": round(lib.stat().st_size / 1e6, 1)}
        for t in elf.symbol_tables():
            info[t.name] = {"symbols": t.count, "unique": len(unique_indexes(t.info_bytes()))}
        del elf
        m.close()
    return info


def system_elves(limit: int) -> list[str]:
    seen, out = set(), []
    for pattern in ("/usr/lib/x86_64-linux-gnu/**/*", "/usr/bin/*", "/usr/sbin/*", "/usr/lib/**/*"):
        for path in sorted(glob.glob(pattern, recursive=True)):
            if len(out) >= limit:
                return out
            try:
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                st = os.stat(path)
                if (st.st_dev, st.st_ino) in seen:
                    continue
                with open(path, "rb") as f:
                    if f.read(4) != b"\x7fELF":
                        continue
            except OSError:
                continue
            seen.add((st.st_dev, st.st_ino))
            out.append(path)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and files")
    args = ap.parse_args()
    reps = 3 if args.quick else 5
    elfpatch = [PY, "-m", "elfpatch"]
    results: dict = {"machine": {"cores": os.cpu_count(), "python": sys.version.split()[0]}}
    rows: list[tuple[str, float, int | None, str]] = []
    verdicts: list[str] = []

    if not TORCH_WHEEL.exists():
        print(f"bench: {TORCH_WHEEL} not found; the big-library and wheel benchmarks need it", file=sys.stderr)
        return 2
    lib = big_library()
    results["library"] = {"path": BIG_MEMBER, **describe(lib)}
    print(f"library: {BIG_MEMBER} {json.dumps(results['library'])}")

    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        work = Path(tmp) / "lib.so"

        def fresh() -> str:
            shutil.copyfile(lib, work)
            return str(work)

        # 1. --inplace against the plain pyelftools recipe.
        recipe = Path(tmp) / "recipe.py"
        recipe.write_text(PYELFTOOLS_RECIPE)
        t_py, rss_py = median_of(reps, fresh, lambda p: [PY, str(recipe), p])
        t_in, rss_in = median_of(reps, fresh, lambda p: [*elfpatch, "unique", "--inplace", p])
        rows += [("pyelftools recipe (.dynsym only)", t_py, rss_py, "1.00"),
                 ("elfpatch unique --inplace", t_in, rss_in, f"{t_py / t_in:.1f}x faster")]
        verdicts.append(f"{'PASS' if t_py / t_in >= 20 else 'MISS'}: --inplace {t_py / t_in:.1f}x faster than "
                        "the pyelftools recipe (target >= 20x)")
        verdicts.append(f"{'PASS' if rss_in <= 80 * 1024 else 'MISS'}: --inplace peak RSS {rss_in / 1024:.0f} MB "
                        "(target <= 80 MB)")

        # 2. The default atomic mode against cp of the same file.
        dst = Path(tmp) / "copy.so"

        def no_copy() -> str:
            if dst.exists():
                dst.unlink()
            return str(dst)

        t_cp, rss_cp = median_of(reps, no_copy, lambda p: ["cp", str(lib), p])
        t_at, rss_at = median_of(reps, fresh, lambda p: [*elfpatch, "unique", p])
        # The floor of any replace-by-rename: copy beside, rename over the original (which frees the old
        # inode's pages, and on ext4 starts writeback of the new file: auto_da_alloc).
        t_mv, rss_mv = median_of(reps, fresh, lambda p: ["sh", "-c", 'cp "$1" "$1.new" && mv "$1.new" "$1"', "-", p])
        t_fs, rss_fs = median_of(reps, fresh, lambda p: [*elfpatch, "unique", "--fsync", p])
        rows += [("cp", t_cp, rss_cp, "1.00"),
                 ("cp FILE FILE.new && mv FILE.new FILE", t_mv, rss_mv, f"{t_mv / t_cp:.2f}x cp"),
                 ("elfpatch unique (atomic)", t_at, rss_at, f"{t_at / t_cp:.2f}x cp, {t_at / t_mv:.2f}x cp+mv"),
                 ("elfpatch unique --fsync", t_fs, rss_fs, f"{t_fs / t_cp:.2f}x cp")]
        verdicts.append(f"{'PASS' if t_at / t_cp <= 1.5 else 'MISS'}: atomic mode {t_at / t_cp:.2f}x a cp "
                        "(target <= 1.5x)")

        # 3. LIEF: parse, set binding, write (once: it is slow on a file this size).
        lief_recipe = Path(tmp) / "lief_recipe.py"
        lief_recipe.write_text(LIEF_RECIPE)
        settle()
        t_lief, rss_lief, proc = timed([PY, str(lief_recipe), str(lib), str(Path(tmp) / "lief.so")])
        rows.append(("LIEF parse+set binding+write", t_lief, rss_lief,
                     f"{t_lief / t_in:.0f}x --inplace" if proc.returncode == 0 else f"failed ({proc.returncode})"))

    # 4. --check over many system ELF files against a readelf loop.
    files = system_elves(300 if args.quick else 1500)
    settle()
    t_chk, rss_chk, proc = timed([*elfpatch, "unique", "--check", "--json", *files])
    doc = json.loads(subprocess.run([*elfpatch, "unique", "--check", "--json", *files], capture_output=True,
                                    text=True).stdout)
    with_unique = sum(1 for f in doc["files"] if f["symbols"])
    t0 = time.perf_counter()
    for f in files:
        subprocess.run(["readelf", "-sW", f], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t_re = time.perf_counter() - t0
    rows += [(f"readelf -sW loop ({len(files)} files)", t_re, None, "1.00"),
             (f"elfpatch unique --check ({len(files)} files)", t_chk, rss_chk, f"{t_re / t_chk:.1f}x faster")]
    verdicts.append(f"{'PASS' if t_re / t_chk >= 5 else 'MISS'}: --check over {len(files)} files "
                    f"{t_re / t_chk:.1f}x faster than a readelf loop (target >= 5x); {with_unique} have unique "
                    f"symbols, {doc['summary']['errors']} errors")
    results["check"] = {"files": len(files), "with_unique": with_unique, "errors": doc["summary"]["errors"]}

    # 5. The torch wheel: elfpatch against wheel unpack + patch + wheel pack.
    results["wheel"] = bench_wheel(elfpatch, rows, verdicts, reps=1 if args.quick else 3)

    print(f"\n{'what':48} {'median s':>9} {'peak RSS MB':>12}  ratio")
    for name, t, rss, ratio in rows:
        print(f"{name:48} {t:9.3f} {(f'{rss / 1024:.0f}' if rss else '-'):>12}  {ratio}")
    print()
    for v in verdicts:
        print(v)
    results["rows"] = [{"what": n, "seconds": round(t, 4), "rss_kb": r, "ratio": q} for n, t, r, q in rows]
    results["verdicts"] = verdicts
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


def bench_wheel(elfpatch: list[str], rows: list, verdicts: list, reps: int) -> dict:
    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        out = Path(tmp) / TORCH_WHEEL.name
        probe = subprocess.run([*elfpatch, "unique", "-n", str(TORCH_WHEEL)], capture_output=True, text=True)
        if probe.returncode == 2:
            print(f"wheel: not supported yet ({probe.stderr.strip()[:120]})")
            return {"supported": False}

        def no_out() -> str:
            if out.exists():
                out.unlink()
            return str(out)

        t_ep, rss_ep = median_of(reps, no_out, lambda p: [*elfpatch, "unique", "-o", p, str(TORCH_WHEEL)])
        wheel_cli = [str(Path(PY).parent / "wheel")]
        script = Path(tmp) / "baseline.sh"
        script.write_text(
            "set -e\nd=$(mktemp -d -p \"$1\")\n"
            f"{wheel_cli[0]} unpack -d \"$d\" \"$2\" >/dev/null\n"
            f"{' '.join(elfpatch)} unique \"$d\" >/dev/null\n"
            f"mkdir -p \"$d/dist\"\n{wheel_cli[0]} pack -d \"$d/dist\" \"$d\"/torch-* >/dev/null\nrm -rf \"$d\"\n")
        t_base, rss_base = median_of(reps, lambda: str(TORCH_WHEEL),
                                     lambda p: ["bash", str(script), tmp, p])
        rows += [("wheel unpack + elfpatch tree + wheel pack", t_base, rss_base, "1.00"),
                 ("elfpatch unique -o OUT torch.whl", t_ep, rss_ep, f"{t_base / t_ep:.1f}x faster")]
        verdicts.append(f"{'PASS' if t_base / t_ep >= 3 else 'MISS'}: wheel {t_base / t_ep:.1f}x faster than "
                        "unpack+patch+pack (target >= 3x)")
        return {"supported": True, "seconds": t_ep, "baseline_seconds": t_base}


if __name__ == "__main__":
    sys.exit(main())
