"""`make bench`, first group: today's `elfpatch unique --check` beside the pinned older version a2c2a08 (before the
loader-view and adversarial hardening), as whole processes, so that what the hardening costs stays measured.

The old version is taken from git (`git archive a2c2a08 elfpatch`) into a temp dir and run with that dir as
its import path; both run with the same interpreter, from the same neutral working directory (`-m` would
otherwise import whatever `elfpatch` the current directory holds), each run's import path checked first.
Inputs: the largest C++ libraries on the machine (libtorch_cpu.so when bench/out holds it or the torch wheel
is there, the largest libLLVM, libstdc++), the demo's small library (start-up alone) and the system library
directory as a tree.

Both trees are compiled to bytecode first (``compileall``), so that no run pays for compiling.
Repetitions are interleaved (old, new, new, old, ...) so that load on the machine hits both alike; the table
gives median and minimum wall time, median CPU (user + system, pool workers included), peak RSS and the ratio
new/old of the medians. `python bench/vs_old.py --reps 21` runs this group alone.
"""
from __future__ import annotations

import argparse
import glob
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OLD = "a2c2a08"
VENV_PY = ROOT / ".venv" / "bin" / "python"
PY = str(VENV_PY) if VENV_PY.exists() else sys.executable
LIBDIR = "/usr/lib/x86_64-linux-gnu"


class Sample:
    def __init__(self, wall: float, cpu: float, rss_kb: int, rc: int, last_line: str) -> None:
        self.wall, self.cpu, self.rss_kb, self.rc, self.last_line = wall, cpu, rss_kb, rc, last_line


def run(argv: list[str], env: dict[str, str], cwd: str) -> Sample:
    """One whole process: wall time from spawn to reap, CPU and peak RSS from its wait4 rusage (its reaped
    children, the tree's pool workers, included)."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.DEVNULL, env=env,
                                cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        lines = out.read().decode(errors="replace").strip().splitlines()
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, proc.returncode,
                  lines[-1] if lines else "")


def old_tree(dest: Path) -> Path | None:
    """The elfpatch package of commit OLD, extracted under ``dest`` (None without git or the commit)."""
    try:
        blob = subprocess.run(["git", "-C", str(ROOT), "archive", OLD, "elfpatch"], capture_output=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(dest)
    return dest


def inputs() -> list[tuple[str, str]]:
    """(label, path) of what is checked: the big C++ libraries there are, then the library directory."""
    found: list[tuple[str, str]] = []
    torch = ROOT / "bench" / "out" / "libtorch_cpu.so"
    if not torch.exists():
        try:
            sys.path.insert(0, str(ROOT / "bench"))
            from bench import TORCH_WHEEL, big_library

            torch = big_library() if TORCH_WHEEL.exists() else torch
        except Exception as exc:  # noqa: BLE001 - the group runs without it
            print(f"vs_old: no libtorch_cpu.so ({exc})", file=sys.stderr)
    if torch.exists():
        found.append(("libtorch_cpu.so", str(torch)))
    llvm = sorted(glob.glob(f"{LIBDIR}/libLLVM*.so*"), key=lambda p: -os.path.getsize(p))
    if llvm:
        found.append((os.path.basename(llvm[0]), llvm[0]))
    if os.path.exists(f"{LIBDIR}/libstdc++.so.6"):
        found.append(("libstdc++.so.6", f"{LIBDIR}/libstdc++.so.6"))
    demo = ROOT / "native_tests" / "unique" / "build" / "libholder_v1.so"  # a small one: start-up alone
    if demo.exists():
        found.append(("libholder_v1.so (the demo's)", str(demo)))
    found.append((f"{LIBDIR} (tree)", LIBDIR))
    return found


def _check_import_path(env: dict[str, str], cwd: str, expect: Path) -> None:
    got = subprocess.run([PY, "-c", "import elfpatch; print(elfpatch.__file__)"], env=env, cwd=cwd,
                         capture_output=True, text=True).stdout.strip()
    if not got.startswith(str(expect)):
        raise SystemExit(f"vs_old: elfpatch imported from {got!r}, not from {expect}")


def compare(reps: int, tree_reps: int) -> list[dict]:
    """The rows of the table (also returned for results.json)."""
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="elfpatch-old-") as tmp:
        old = old_tree(Path(tmp) / "old")
        if old is None:
            print(f"vs_old: commit {OLD} not available (a shallow clone?): group skipped", file=sys.stderr)
            return rows
        cwd = str(Path(tmp))
        base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        envs = {"a2c2a08": {**base, "PYTHONPATH": str(old)}, "today": {**base, "PYTHONPATH": str(ROOT)}}
        _check_import_path(envs["a2c2a08"], cwd, old)
        _check_import_path(envs["today"], cwd, ROOT)
        # Bytecode for both, so that neither run compiles (with PYTHONDONTWRITEBYTECODE set, the old tree,
        # fresh from git, and any edited module of today's would be compiled again by every run and worker).
        subprocess.run([PY, "-m", "compileall", "-q", str(old), str(ROOT / "elfpatch")], check=True,
                       stdout=subprocess.DEVNULL)
        for label, path in inputs():
            n = tree_reps if os.path.isdir(path) else reps
            argv = [PY, "-m", "elfpatch", "unique", "--check", path]
            samples: dict[str, list[Sample]] = {k: [] for k in envs}
            for k in envs:  # warm the page cache and the bytecode, untimed
                run(argv, envs[k], cwd)
            for i in range(n):
                for k in (list(envs) if i % 2 == 0 else list(envs)[::-1]):
                    samples[k].append(run(argv, envs[k], cwd))
            rows.append(_row(label, samples))
    return rows


def _row(label: str, samples: dict[str, list[Sample]]) -> dict:
    row: dict = {"input": label, "reps": len(samples["today"])}
    for k, ss in samples.items():
        row[k] = {"median_s": statistics.median(s.wall for s in ss), "min_s": min(s.wall for s in ss),
                  "cpu_s": statistics.median(s.cpu for s in ss), "rss_mb": max(s.rss_kb for s in ss) / 1024,
                  "exit": sorted({s.rc for s in ss}), "summary": ss[-1].last_line}
    row["ratio"] = row["today"]["median_s"] / row["a2c2a08"]["median_s"]
    row["cpu_ratio"] = row["today"]["cpu_s"] / row["a2c2a08"]["cpu_s"]
    return row


def print_rows(rows: list[dict]) -> list[str]:
    """The table, then one PASS/MISS verdict per input (target: today no slower than a2c2a08, in median wall
    time and in CPU)."""
    print(f"\n`unique --check`, today against {OLD} (whole processes; median, min wall; median CPU; peak RSS)")
    print(f"  {'input':44} {'version':8} {'median':>8} {'min':>8} {'CPU':>8} {'RSS':>7}")
    verdicts = []
    for r in rows:
        for k in ("a2c2a08", "today"):
            v = r[k]
            print(f"  {r['input'][:44]:44} {k:8} {v['median_s'] * 1e3:6.0f}ms {v['min_s'] * 1e3:6.0f}ms "
                  f"{v['cpu_s'] * 1e3:6.0f}ms {v['rss_mb']:5.0f}MB")
        print(f"  {'':44} {'ratio':8} {r['ratio']:7.2f}x wall, {r['cpu_ratio']:.2f}x CPU   "
              f"(today: {r['today']['summary']})")
        ok = r["ratio"] <= 1.0 and r["cpu_ratio"] <= 1.0  # the target: no slower on both
        verdicts.append(f"{'PASS' if ok else 'MISS'}: unique --check {r['input']}: {r['ratio']:.2f}x {OLD}'s "
                        f"median wall time, {r['cpu_ratio']:.2f}x its CPU (target <= 1.00x)")
    return verdicts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=15, help="runs of each version per library (default 15)")
    ap.add_argument("--tree-reps", type=int, default=7, help="runs of each version over the tree (default 7)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    rows = compare(args.reps, args.tree_reps)
    for line in print_rows(rows):
        print(line)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
