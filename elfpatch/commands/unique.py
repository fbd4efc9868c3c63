"""`elfpatch unique`: find and rewrite STB_GNU_UNIQUE symbols."""
from __future__ import annotations

import argparse
import io
import os
import sys

from elfpatch.commands.helpformat import formatter
from elfpatch.commands.options import Seconds, add_verbose
from elfpatch.commands.progress import progress_bar
from elfpatch.elf.symbols import TARGET_BINDINGS, NameFilter
from elfpatch.errors import EXIT_ERROR, EXIT_FOUND, EXIT_OK, error_line
from elfpatch.report import ERROR, UNCHANGED, FileReport, write_json, write_text
from elfpatch.targets import CHECK, DRY_RUN, PATCH, Exclude, Job, Outcome
from elfpatch.targets.dispatch import process

TYPE_CHECKING = False  # typing is not imported on the read path
if TYPE_CHECKING:
    from elfpatch.warnlog import WarningLog

HELP = """\
Rewrite the binding of every STB_GNU_UNIQUE symbol (in .dynsym and .symtab) to GLOBAL, so that glibc
unloads the library on dlclose and stops sharing its statics with other libraries under RTLD_LOCAL.
Exit status: 0 success, 1 --check found unique symbols, 2 an error (one line per failing file)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("unique", help="find and rewrite STB_GNU_UNIQUE symbols", description=HELP,
                       formatter_class=formatter(argparse.RawDescriptionHelpFormatter))
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="change nothing; exit 1 if any selected unique symbol exists")
    mode.add_argument("-n", "--dry-run", action="store_true", help="change nothing; report what would change")
    mode.add_argument("--inplace", action="store_true",
                      help="write only the changed bytes into the existing file (keeps the inode and hard "
                           "links; not atomic)")
    p.add_argument("--to", choices=sorted(TARGET_BINDINGS), default="global",
                   help="the new binding (default: global)")
    p.add_argument("--symbol", metavar="GLOB", action="append", default=[],
                   help="only symbols whose mangled or demangled name matches GLOB (repeatable); "
                        "the others stay unique")
    p.add_argument("--keep", metavar="GLOB", action="append", default=[],
                   help="keep symbols whose mangled or demangled name matches GLOB unique (repeatable; the "
                        "complement of --symbol, for code that relies on one shared singleton)")
    p.add_argument("--exclude", metavar="GLOB", action="append", default=[],
                   help="pass over files whose path relative to a tree's root, or archive/wheel member name, "
                        "matches GLOB (repeatable; a GLOB without / also matches the file name alone)")
    p.add_argument("-o", "--output", metavar="OUT", help="write the result to OUT, leave PATH untouched")
    p.add_argument("-w", "--output-dir", metavar="DIR",
                   help="write each result (file, archive or wheel) into DIR under its own name, leave every "
                        "PATH untouched")
    p.add_argument("--fsync", action="store_true",
                   help="fsync the new file and its directory before returning (durable against power loss)")
    p.add_argument("--lock-timeout", metavar="SECONDS", type=Seconds(), default=None,
                   help="how long to wait for another process's lock on a file before giving up on it "
                        "(default: 60)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout (always every file)")
    verbosity = p.add_mutually_exclusive_group()
    add_verbose(verbosity, "every file of a tree, also those without unique symbols")
    verbosity.add_argument("-q", "--quiet", action="store_true", help="print the summary line only")
    p.add_argument("paths", metavar="PATH", nargs="+")
    p.set_defaults(func=run)


def _usage_error(message: str) -> int:
    print(error_line(None, message), file=sys.stderr)
    return EXIT_ERROR


def run(args: argparse.Namespace) -> int:
    mode = CHECK if args.check else DRY_RUN if args.dry_run else PATCH
    try:
        job = Job(mode=mode, to=TARGET_BINDINGS[args.to], names=NameFilter(args.symbol, args.keep),
                  inplace=args.inplace, output=args.output, output_dir=args.output_dir, fsync=args.fsync,
                  progress=progress_bar(), exclude=Exclude(args.exclude), lock_timeout=args.lock_timeout)
        job.check_paths(args.paths)
    except ValueError as exc:  # a usage error: nothing was opened
        return _usage_error(str(exc))
    log = None
    if args.json:  # only the JSON needs them collected (and only then is logging imported for it)
        from elfpatch.warnlog import WarningLog

        log = WarningLog().__enter__()
    try:
        outcome, in_trees = _process(args.paths, job)
        job.exclude.warn_unused(outcome.reports)
    finally:
        if log is not None:
            log.__exit__()
    _write(args, outcome, in_trees, log)
    if any(r.status == ERROR for r in outcome.reports):
        return EXIT_ERROR
    if mode == CHECK and any(r.symbols for r in outcome.reports):
        return EXIT_FOUND
    return EXIT_OK


def _process(paths: list[str], job: Job) -> tuple[Outcome, set[int]]:
    """Every PATH's reports in order (each failure's line goes to stderr as it comes), and the ids of those
    that come from a tree walk (listed only with findings, unless -v)."""
    total = Outcome()
    in_trees: set[int] = set()
    for path in paths:
        outcome = process(path, job)
        for r in outcome.reports:
            if r.status == ERROR:
                print(error_line(r.label, r.error or "failed"), file=sys.stderr)
        if os.path.isdir(path):
            in_trees.update(id(r) for r in outcome.reports)
        total.reports.extend(outcome.reports)
        total.skipped += outcome.skipped
        total.other += outcome.other
    return total, in_trees


def _write(args: argparse.Namespace, outcome: Outcome, in_trees: set[int], log: WarningLog | None) -> None:
    reports, skipped, other = outcome.reports, outcome.skipped, outcome.other
    # One write, not one per line: with PYTHONUNBUFFERED set, thousands of symbol lines cost a syscall each.
    text = io.StringIO()
    if log is not None:  # --json
        from elfpatch.auditing.packages import annotate
        from elfpatch.warnlog import attach_warnings

        annotate(reports)
        write_json(reports, text, skipped, other, attach_warnings(reports, log))
    else:

        def show(r: FileReport) -> bool:
            return args.verbose or id(r) not in in_trees or _has_findings(r)

        write_text(reports, text, skipped, other, show=show, quiet=args.quiet, kept_by=_kept_by(args))
    sys.stdout.write(text.getvalue())
    sys.stdout.flush()


def _has_findings(r: FileReport) -> bool:
    """Whether a tree's file is worth a line: unique symbols (kept ones too), a reason it was skipped, or
    warnings."""
    return r.status != UNCHANGED or bool(r.symbols or r.kept or getattr(r, "warnings", None))


def _kept_by(args: argparse.Namespace) -> str:
    return "/".join(opt for opt, used in (("--symbol", args.symbol), ("--keep", args.keep)) if used)
