"""The truth machine: random C++ programs and libraries whose globals read each other, built across a matrix,
run, and the static-initialization analysis checked against what they observed.

Run a campaign from a checkout (it tests *that* checkout's elfpatch, whatever is installed):

    .venv/bin/python tests/truth/campaign.py --seeds 25 --out /path/to/dir [--first 1] [--variants 6]
                                             [--compilers gcc,clang] [--jobs 2]

Each seed is one program (generator.py), built in ``--variants`` variants picked deterministically per seed
from the matrix (build.py: g++/clang++, -O0..-O3, PIE / non-PIE / shared, -flto, -fcf-protection, stripped or
not, three link orders). Each build is run (with native_tests/siof/shim.c preloaded) and each of its files
analysed with `elfpatch inits --dtors --siof --json`; check.py says what is checked. The summary goes to
stdout; every false clean, false finding and unlisted registration to ``DIR/report.json``, with its seed,
variant, reader context and object (``routes`` says how the source reaches the object), so that
``--first SEED --seeds 1`` rebuilds the case (its sources stay in ``DIR/SEED/src``).
Exit status: 0 when there is no false clean, 1 otherwise (2: a build failed).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the tests directory holds the `truth` package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from truth.build import Variant, build, run, shim, variants_for, write_sources
from truth.check import Outcome, check
from truth.generator import generate


def one_seed(seed: int, variants: list[Variant], out: Path, shim_so: Path) -> list[Outcome]:
    """Build, run and check one program in each variant."""
    prog = generate(seed)
    directory = out / str(seed)
    src = write_sources(prog, directory)
    outcomes = []
    for v in variants:
        built = build(prog, v, directory, src)
        stdout, logs = run(built, shim_so)
        outcomes.append(check(prog, built, stdout, logs))
        shutil.rmtree(built.directory, ignore_errors=True)  # the sources stay: a build is cheap to redo
    return outcomes


def summary(programs: int, outcomes: list[Outcome]) -> dict:
    total = Outcome()
    for o in outcomes:
        for name, value in asdict(o).items():
            setattr(total, name, getattr(total, name) + value)
    true_findings = total.findings - len(total.false_findings)
    return {
        "programs": programs, "builds": len(outcomes), "observed_early_reads": total.early,
        "found": total.found, "false_cleans": len(total.false_cleans),
        "entry_complete_misses": len(total.entry_complete_misses), "findings": total.findings,
        "false_findings": len(total.false_findings),
        "recall": round(total.found / total.early, 3) if total.early else None,
        "precision": round(true_findings / total.findings, 3) if total.findings else None,
        "dtors_logged": total.dtors_logged, "dtors_listed": total.dtors_listed,
        "dtors_recall": round(total.dtors_matched / total.dtors_logged, 3) if total.dtors_logged else None,
        "dtors_precision": round(total.dtors_matched / total.dtors_listed, 3) if total.dtors_listed else None,
        "details": {"false_cleans": total.false_cleans, "false_findings": total.false_findings,
                    "dtors_missed": total.dtors_missed, "builds": total.builds},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=25, help="how many programs")
    ap.add_argument("--first", type=int, default=1, help="the first seed")
    ap.add_argument("--variants", type=int, default=6, help="builds per program (a per-seed subset)")
    ap.add_argument("--compilers", default="gcc,clang")
    ap.add_argument("--jobs", type=int, default=1, help="seeds in parallel")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    compilers = tuple(args.compilers.split(","))
    shim_so = shim(args.out)
    seeds = range(args.first, args.first + args.seeds)
    try:
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            results = list(pool.map(
                lambda s: one_seed(s, variants_for(s, args.variants, compilers), args.out, shim_so), seeds))
    except RuntimeError as e:  # a build or run that failed: the generator's bug, not the analysis's
        print(f"campaign: {e}", file=sys.stderr)
        return 2
    report = summary(len(seeds), [o for r in results for o in r])
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    for key, value in report.items():
        if key != "details":
            print(f"{key:24} {value}")
    print(f"details: {args.out / 'report.json'}")
    return 1 if report["false_cleans"] else 0


if __name__ == "__main__":
    sys.exit(main())
