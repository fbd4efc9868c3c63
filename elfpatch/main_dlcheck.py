"""`elfpatch dlcheck`: does a shared object really unload, and does it keep to itself?"""
from __future__ import annotations

import argparse
import json
import sys

from elfpatch.errors import error_line

HELP = """\
Load the PATHs in order with RTLD_NOW|RTLD_LOCAL into one child process, close them in reverse order, then
probe each with RTLD_NOLOAD. Reports every object that stayed loaded with the reason (a unique symbol,
-z nodelete, another object that still needs it) and every binding from one PATH into another (shared
statics). Nothing is loaded into the elfpatch process itself.
Exit status: 0 all unloaded and no cross binding, 1 something stayed loaded or a cross binding was seen,
2 an error (a PATH that fails to load, or a crash while loading or unloading)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dlcheck", help="check that shared objects unload and do not share statics",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="give up on a step after this long (default: 60)")
    p.add_argument("paths", metavar="PATH", nargs="+")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from elfpatch.harness.dlcheck import dlcheck, exit_status
    from elfpatch.harness.explain import short_error, write_text

    report = dlcheck(args.paths, timeout=args.timeout)
    for f in report["files"]:
        if f["error"] is not None:
            print(error_line(f["path"], short_error(f["path"], f["error"])), file=sys.stderr)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        write_text(report, sys.stdout)
    sys.stdout.flush()
    return exit_status(report)
