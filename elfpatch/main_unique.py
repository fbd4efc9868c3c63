"""`elfpatch unique`: find and rewrite STB_GNU_UNIQUE symbols."""
from __future__ import annotations

import argparse
import io
import sys

from elfpatch.errors import EXIT_ERROR, error_line
from elfpatch.report import ERROR, FileReport, write_json, write_text
from elfpatch.symbols import TARGET_BINDINGS, NameFilter
from elfpatch.targets import CHECK, DRY_RUN, PATCH, Job
from elfpatch.targets.dispatch import process

HELP = """\
Rewrite the binding of every STB_GNU_UNIQUE symbol (in .dynsym and .symtab) to GLOBAL, so that glibc
unloads the library on dlclose and stops sharing its statics with other libraries under RTLD_LOCAL.
Exit status: 0 success, 1 --check found unique symbols, 2 an error (one line per failing file)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("unique", help="find and rewrite STB_GNU_UNIQUE symbols", description=HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
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
    p.add_argument("-o", "--output", metavar="OUT", help="write the result to OUT, leave PATH untouched")
    p.add_argument("--fsync", action="store_true",
                   help="fsync the new file and its directory before returning (durable against power loss)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("paths", metavar="PATH", nargs="+")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    mode = CHECK if args.check else DRY_RUN if args.dry_run else PATCH
    try:
        job = Job(mode=mode, to=TARGET_BINDINGS[args.to], names=NameFilter(args.symbol), inplace=args.inplace,
                  output=args.output, fsync=args.fsync, progress=sys.stderr.isatty())
        job.check_paths(args.paths)
    except ValueError as exc:  # a usage error: nothing was opened
        print(error_line(None, str(exc)), file=sys.stderr)
        return EXIT_ERROR
    reports: list[FileReport] = []
    skipped = 0
    for path in args.paths:
        outcome = process(path, job)
        for r in outcome.reports:
            if r.status == ERROR:
                label = f"{r.path}[{r.member}]" if r.member is not None else r.path
                print(error_line(label, r.error or "failed"), file=sys.stderr)
        reports.extend(outcome.reports)
        skipped += outcome.skipped
    # One write, not one per line: with PYTHONUNBUFFERED set, thousands of symbol lines cost a syscall each.
    text = io.StringIO()
    (write_json if args.json else write_text)(reports, text, skipped)
    sys.stdout.write(text.getvalue())
    sys.stdout.flush()
    if any(r.status == ERROR for r in reports):
        return EXIT_ERROR
    if mode == CHECK and any(r.symbols for r in reports):
        return 1
    return 0
