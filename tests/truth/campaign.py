"""The truth machine: random C++ programs and libraries whose globals read each other, built across a matrix,
run, and the static-initialization analysis checked against what they observed.

Run a campaign from a checkout (it tests *that* checkout's elfpatch, whatever is installed):

    .venv/bin/python tests/truth/campaign.py --seeds 25 --out /path/to/dir [--first 1] [--variants 6]
                                             [--compilers gcc,clang] [--jobs 2]

Each seed is one program (generator.py), built in ``--variants`` variants picked deterministically per seed
from the matrix (build.py: g++/clang++, -O0..-O3, PIE / non-PIE / shared, -flto, -fcf-protection, stripped or
not, three link orders). Each build is run (with native_tests/siof/shim.c preloaded) and each of its files
analysed with `elfpatch inits --deps --dtors --siof --json` (the program, whose load judges one module's
reads of another's objects, and each library); check.py says what is checked. The summary goes to
stdout; every false clean, false finding and unlisted registration to ``DIR/report.json``, with its seed,
variant, reader context and object (``routes`` says how the source reaches the object), so that
``--first SEED --seeds 1 --keep`` rebuilds the case (its sources stay in ``DIR/SEED/src``, its builds with
``--keep`` in ``DIR/SEED/VARIANT``: the program is ``prog``, stripped copies under ``stripped/``). Reader and
object numbers are the ones the sources print: ``OBS <reader> <object> <value>`` (0: before construction).
Exit status: 0 when there is no false clean, 1 otherwise (2: a build failed).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the tests directory holds the `truth` package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from truth.build import TARGETS, Variant, build, installed, run, shim, variants_for, write_sources
from truth.check import Outcome, check
from truth.generator import generate


def one_seed(seed: int, variants: list[Variant], out: Path, shim_so: Path, keep: bool = False) -> list[Outcome]:
    """Build, run and check one program in each variant (``keep``: leave the builds in ``out``/SEED)."""
    prog = generate(seed)
    directory = out / str(seed)
    src = write_sources(prog, directory)
    outcomes = []
    for v in variants:
        built = build(prog, v, directory, src)
        stdout, logs = run(built, shim_so)
        outcomes.append(check(prog, built, stdout, logs))
        if not keep:  # the sources stay: a build is cheap to redo
            shutil.rmtree(built.directory, ignore_errors=True)
    return outcomes


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def figures(builds: list[dict]) -> dict:
    """The campaign's measures over some builds (each a check.Outcome's ``builds`` entry)."""
    t = {k: sum(b[k] for b in builds) for k in ("early", "found", "false_cleans", "entry_complete_misses",
                                                  "findings", "false_findings", "dtors_logged", "dtors_listed",
                                                  "dtors_matched", "entries", "complete_entries")}
    return {
        "builds": len(builds), "observed_early_reads": t["early"], "found": t["found"],
        "false_cleans": t["false_cleans"], "entry_complete_misses": t["entry_complete_misses"],
        "findings": t["findings"], "false_findings": t["false_findings"],
        "recall": _ratio(t["found"], t["early"]),
        "precision": _ratio(t["findings"] - t["false_findings"], t["findings"]),
        "dtors_logged": t["dtors_logged"], "dtors_listed": t["dtors_listed"],
        "dtors_recall": _ratio(t["dtors_matched"], t["dtors_logged"]),
        "dtors_precision": _ratio(t["dtors_matched"], t["dtors_listed"]),
        "entries": t["entries"], "entries_complete": _ratio(t["complete_entries"], t["entries"]),
    }


def missed_by_cause(misses: list[dict]) -> dict:
    """The reads missed in entries that say incomplete, counted by why: ``alone`` counts a miss whose entry has
    that one cause (resolving it would find the read, or make the entry complete), ``with_others`` one of
    several; most frequent first."""
    alone: Counter[str] = Counter()
    shared: Counter[str] = Counter()
    for m in misses:
        for c in m["causes"] or ["(no note names it)"]:
            (alone if len(m["causes"]) <= 1 else shared)[c] += 1
    return {c: {"alone": alone[c], "with_others": shared[c]}
            for c in sorted(alone.keys() | shared.keys(), key=lambda c: (-alone[c] - shared[c], c))}


def summary(programs: int, outcomes: list[Outcome]) -> dict:
    builds = [b for o in outcomes for b in o.builds]
    misses = [m for o in outcomes for m in o.incomplete_misses]
    return {
        "programs": programs, **figures(builds),
        "unstripped": figures([b for b in builds if "-strip-" not in b["variant"]]),
        "stripped": figures([b for b in builds if "-strip-" in b["variant"]]),
        "missed_by_cause": {"unstripped": missed_by_cause([m for m in misses if "-strip-" not in m["variant"]]),
                            "stripped": missed_by_cause([m for m in misses if "-strip-" in m["variant"]])},
        "details": {"incomplete_misses": misses, "false_cleans": [m for o in outcomes for m in o.false_cleans],
                    "false_findings": [m for o in outcomes for m in o.false_findings],
                    "dtors_missed": [m for o in outcomes for m in o.dtors_missed], "builds": builds},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=25, help="how many programs")
    ap.add_argument("--first", type=int, default=1, help="the first seed")
    ap.add_argument("--variants", type=int, default=6, help="builds per program (a per-seed subset)")
    ap.add_argument("--compilers", default="gcc,clang")
    ap.add_argument("--arch", default="x86_64", choices=sorted(TARGETS),
                    help="the machine built for (another runs under qemu-user)")
    ap.add_argument("--jobs", type=int, default=1, help="seeds in parallel")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--keep", action="store_true", help="keep every build (DIR/SEED/VARIANT) to look into")
    args = ap.parse_args(argv)
    args.out = args.out.resolve()  # the builds run in their own directories
    args.out.mkdir(parents=True, exist_ok=True)
    compilers = tuple(c for c in args.compilers.split(",") if installed(c, args.arch))
    if not compilers:
        print(f"campaign: none of {args.compilers} is installed", file=sys.stderr)
        return 2
    shim_so = shim(args.out, args.arch)
    seeds = range(args.first, args.first + args.seeds)
    try:
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            results = list(pool.map(
                lambda s: one_seed(s, variants_for(s, args.variants, compilers, args.arch), args.out, shim_so,
                                   args.keep),
                seeds))
    except RuntimeError as e:  # a build or run that failed: the generator's bug, not the analysis's
        print(f"campaign: {e}", file=sys.stderr)
        return 2
    report = summary(len(seeds), [o for r in results for o in r])
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    for key, value in report.items():
        if key == "missed_by_cause":
            for part, table in value.items():
                print(f"missed in incomplete entries ({part}), by cause: alone / with others")
                for cause, n in table.items():
                    print(f"  {n['alone']:5} {n['with_others']:5}  {cause}")
            continue
        if isinstance(value, dict) and key != "details":
            value = ", ".join(f"{k} {v}" for k, v in value.items() if k not in ("dtors_logged", "dtors_listed"))
        if key != "details":
            print(f"{key:22} {value}")
    print(f"details: {args.out / 'report.json'}")
    return 1 if report["false_cleans"] else 0


if __name__ == "__main__":
    sys.exit(main())
