"""Reproduces the README's libtorch_cpu.so figure for `inits --dtors`: what the LD_PRELOAD shim
(native_tests/siof/shim.c) sees registered while the library is dlopen'ed, against what `--dtors` lists.

    .venv/bin/python bench/dtors_truth.py [--depth N]

Needs the torch wheel (bench.py's TORCH_WHEEL) and `make fixtures` (the shim and the dlopen driver)."""
from __future__ import annotations

import argparse
import collections
import difflib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench import ELFPATCH, OUT, TORCH_WHEEL  # noqa: E402

FIXTURES = ROOT / "native_tests" / "siof" / "build" / "gcc-O2"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--depth", default="3")
    args = ap.parse_args()
    libdir = OUT / "torchlib" / "torch" / "lib"
    if not (libdir / "libtorch_cpu.so").exists():  # the whole lib/ directory: libtorch_cpu.so needs its siblings
        with zipfile.ZipFile(TORCH_WHEEL) as whl:
            whl.extractall(OUT / "torchlib", [n for n in whl.namelist() if n.startswith("torch/lib/")])
    lib = libdir / "libtorch_cpu.so"
    log = OUT / "dtors_truth.log"
    log.unlink(missing_ok=True)
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir), LD_PRELOAD=str(FIXTURES / "shim.so"), SHIM_LOG=str(log),
               SHIM_TARGET=lib.name)
    subprocess.run([str(FIXTURES / "dlopen_driver"), str(lib)], env=env, check=True)
    truth = [tuple("ext" if x.startswith("ext") else x for x in line.split()) for line in log.read_text().splitlines()]
    doc = json.loads(subprocess.run([*ELFPATCH, "inits", "--dtors", "--depth", args.depth, "--json", str(lib)],
                                    capture_output=True, text=True, check=True).stdout)

    def show(o: dict | None) -> str:
        return "0" if o is None else ("ext" if o["address"] is None else hex(o["address"]))

    ours = [("atexit" if d["kind"] == "atexit_c" else d["kind"], show(d["dtor"]),
             "tls" if d["kind"] == "thread_atexit" else show(d["object"]))
            for d in doc["files"][0]["exit_time_destructors"]]
    common = sum((collections.Counter(ours) & collections.Counter(truth)).values())
    in_order = sum(b.size for b in difflib.SequenceMatcher(None, ours, truth, autojunk=False).get_matching_blocks())
    print(f"run time (shim): {len(truth)} registrations; --dtors --depth {args.depth}: {len(ours)} listed, "
          f"{common} of them among the run time's ({in_order} in the same order)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
