"""`inits --dtors --siof` on stripped Debian C++ libraries (no .symtab), against run-time truth: what the
LD_PRELOAD shim (native_tests/siof/shim.c) logs while each library is dlopen'ed.

    .venv/bin/python bench/stripped.py [--cap-mb N] [LIBRARY ...]

Per library: wall seconds and peak RSS of the analysis (run under a memory cap, `ulimit -v`), the registrations
listed and those the shim saw, precision (listed ones the run made) and recall (the run's ones listed), and
whether the file says it is complete. Targets: <= 60 s, <= 1 GB, precision >= 0.95, recall >= 0.95 unless the
file says it is incomplete. Libraries not installed are skipped with the apt-get line that installs them.
Needs `make fixtures` (the shim and the dlopen driver)."""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench import ELFPATCH, OUT, run_timed  # noqa: E402

FIXTURES = ROOT / "native_tests" / "siof" / "build" / "gcc-O2"
LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
# file name -> the Debian 12 package that ships it
LIBRARIES = {
    "libLLVM-15.so.1": "libllvm15",
    "libz3.so.4": "libz3-4",
    "libprotobuf.so.32": "libprotobuf32",
    "libprotoc.so.32": "libprotoc32",
    "libgrpc.so.29": "libgrpc29",
    "libgrpc++.so.1.51": "libgrpc++1.51",
    "libboost_locale.so.1.74.0": "libboost-locale1.74.0",
    "libopencv_core.so.406": "libopencv-core406",
    "libapt-pkg.so.6.0": "libapt-pkg6.0",
    "libstdc++.so.6": "libstdc++6",
}
LIMIT_S, LIMIT_MB, PRECISION, RECALL = 60, 1024, 0.95, 0.95


def shim_truth(lib: Path) -> list[tuple[str, str, str]]:
    """(kind, dtor, object) of every registration the library makes while dlopen'ed, as the shim logs them."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log"
        env = dict(os.environ, LD_PRELOAD=str(FIXTURES / "shim.so"), SHIM_LOG=str(log), SHIM_TARGET=lib.name)
        subprocess.run([str(FIXTURES / "dlopen_driver"), str(lib)], env=env, check=True, timeout=300,
                       capture_output=True)
        lines = log.read_text().splitlines() if log.exists() else []
    return [tuple("ext" if x.startswith("ext") else x for x in line.split()) for line in lines]  # type: ignore


def listed(doc: dict) -> list[tuple[str, str, str]]:
    """The --dtors entries in the shim's terms."""
    def show(o: dict | None) -> str:
        return "0" if o is None else ("ext" if o["address"] is None else hex(o["address"]))

    return [("atexit" if d["kind"] == "atexit_c" else d["kind"], show(d["dtor"]),
             "tls" if d["kind"] == "thread_atexit" else show(d["object"]))
            for d in doc["exit_time_destructors"]]


def measure(lib: Path, cap_mb: int) -> dict:
    """One library: the analysis under ``ulimit -v``, timed, and its registrations against the shim's."""
    cmd = ["sh", "-c", f'ulimit -v {cap_mb * 1024}; exec "$@"', "sh",
           *ELFPATCH, "inits", "--dtors", "--siof", "--json", str(lib)]
    run = run_timed(cmd)
    row = {"library": lib.name, "size_mb": round(lib.stat().st_size / 1e6, 1), "seconds": round(run.wall, 2),
           "rss_mb": round(run.rss_kb / 1024), "rc": run.rc}
    if run.rc not in (0, 1):
        row["error"] = (run.err.strip().splitlines() or ["?"])[-1]
        return row
    doc = json.loads(run.out)["files"][0]
    try:
        truth = shim_truth(lib)
    except (subprocess.SubprocessError, OSError) as exc:  # the library does not load here: no truth to compare
        row["error"] = f"dlopen under the shim failed: {exc}"
        return row
    ours = listed(doc)
    common = sum((collections.Counter(ours) & collections.Counter(truth)).values())
    row.update(run_time=len(truth), listed=len(ours), common=common,
               precision=round(common / len(ours), 3) if ours else 1.0,
               recall=round(common / len(truth), 3) if truth else 1.0,
               complete=doc["analysis_complete"], findings=len(doc.get("findings", [])))
    return row


def verdict(row: dict) -> str:
    if "error" in row:
        return "MISS (failed: " + row["error"] + ")"
    ok = (row["seconds"] <= LIMIT_S and row["rss_mb"] <= LIMIT_MB and row["precision"] >= PRECISION
          and (row["recall"] >= RECALL or not row["complete"]))
    return "PASS" if ok else "MISS"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cap-mb", type=int, default=4096, help="address-space cap of each analysis (ulimit -v)")
    ap.add_argument("libraries", nargs="*", help="file names under /usr/lib/x86_64-linux-gnu (default: all)")
    args = ap.parse_args()
    if not (FIXTURES / "shim.so").exists():
        print("stripped: the shim is not built: run `make fixtures`", file=sys.stderr)
        return 2
    names = args.libraries or list(LIBRARIES)
    missing = [n for n in names if not (LIBDIR / n).exists()]
    if missing:
        print("stripped: skipped (not installed): " + ", ".join(missing))
        print("  apt-get install -y " + " ".join(sorted({LIBRARIES.get(n, n) for n in missing})))
    rows = [measure(LIBDIR / n, args.cap_mb) for n in names if n not in missing]
    print("| library | MB | s | peak RSS MB | run-time registrations | listed | of them at run time | precision "
          "| recall | complete | verdict |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['library']} | {r['size_mb']} | {r['seconds']} | {r['rss_mb']} | {r.get('run_time', '-')} "
              f"| {r.get('listed', '-')} | {r.get('common', '-')} | {r.get('precision', '-')} "
              f"| {r.get('recall', '-')} | {r.get('complete', '-')} | {verdict(r)} |")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "stripped.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
