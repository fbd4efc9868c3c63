"""`elfpatch dlcheck`: does a shared object really unload, and does it keep to itself?"""
from __future__ import annotations

import argparse
import sys

from elfpatch.commands.options import Seconds
from elfpatch.errors import error_line, one_line
from elfpatch.report import write_document

HELP = """\
Load the PATHs in order with RTLD_NOW|RTLD_LOCAL into one child process, close them in reverse order, then
probe each with RTLD_NOLOAD. Reports every object that stayed loaded with the reason (a unique symbol,
-z nodelete, another object that still needs it, followed to the root) and every binding from one object
to another's STB_GNU_UNIQUE definition outside its lookup scope (shared statics). --import and --preload
set the process up first, as the program that will load the PATHs would (e.g. --import torch before a
torchvision extension). Nothing is loaded into the elfpatch process itself.
A dependency the PATHs brought in from outside the system's library directories that stays loaded for
unique symbols `elfpatch unique` can rewrite fails the check as a PATH would (--allow-resident waives it).
Exit status: 0 all PATHs unloaded and no cross binding, 1 a PATH stayed loaded, such a dependency stayed or
a cross binding was seen, 2 an error (a PATH, --import or --preload that fails, or a crash while loading or
unloading). On SIGTERM, SIGINT or SIGHUP the child's process group is killed and its files removed; then
SIGTERM and SIGHUP kill dlcheck with that signal, and SIGINT exits 130 as in every command."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dlcheck", help="check that shared objects unload and do not share statics",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    from elfpatch.harness.session import MAX_TIMEOUT

    p.add_argument("--timeout", default="60", metavar="SECONDS", type=Seconds(above_zero=True, most=MAX_TIMEOUT),
                   help="give up on a step after this long (above 0, at most a day; default: 60)")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import this Python module in the child first (repeatable; not judged)")
    p.add_argument("--preload", dest="preloads", action="append", default=[], metavar="LIB",
                   help="dlopen this library with RTLD_NOW|RTLD_GLOBAL first (repeatable; not judged)")
    p.add_argument("--allow-resident", dest="allow_resident", action="append", default=[], metavar="GLOB",
                   help="a dependency whose file name or soname matches may stay loaded for its unique "
                        "symbols without failing the check (repeatable)")
    p.add_argument("paths", metavar="PATH", nargs="+")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from elfpatch.harness.dlcheck import dlcheck, exit_status
    from elfpatch.harness.explain import short_error, write_text
    from elfpatch.harness.stopping import stop_on_signals

    with stop_on_signals():  # SIGTERM, SIGINT, SIGHUP: the child's group killed and its files removed first
        report = dlcheck(args.paths, timeout=args.timeout, imports=args.imports, preloads=args.preloads,
                         allow_resident=args.allow_resident)
    for entry in report["imports"]:
        if entry["error"] is not None:
            print(error_line(f"--import {entry['module']}", entry["error"]), file=sys.stderr)
    for entry in report["preloads"]:
        if entry["error"] is not None:
            print(error_line(entry["path"], short_error(entry["path"], entry["error"])), file=sys.stderr)
    for f in report["files"]:
        if f["error"] is not None:
            print(error_line(f["path"], short_error(f["path"], f["error"])), file=sys.stderr)
    for note in report["warnings"]:
        print(one_line(f"elfpatch: warning: {note}"), file=sys.stderr)
    if args.json:
        write_document(report, sys.stdout)
    else:
        write_text(report, sys.stdout)
    sys.stdout.flush()
    return exit_status(report)
