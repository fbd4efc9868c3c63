"""`elfpatch audit`: unique symbols that several files or packages define, and so would share."""
from __future__ import annotations

import argparse
import io
import sys
from typing import Any, TextIO

from elfpatch.auditing.collisions import Audit, Collision, audit_job, run_audit
from elfpatch.commands.options import add_verbose
from elfpatch.commands.progress import progress_bar
from elfpatch.errors import error_line, one_line
from elfpatch.report import write_document

HELP = """\
Read files, trees (a site-packages, a conda environment), archives and wheels, and report every
STB_GNU_UNIQUE name that two or more distinct ELF files define in their dynamic symbol table: once both are
loaded into one process, glibc binds every use to the first definition loaded, even under RTLD_LOCAL, and
pins that library (NODELETE). Packages come from *.dist-info/RECORD and conda-meta/*.json.
Exit status: 0 no name shared across packages, 1 some (a CI gate), 2 an error (one line per failing file)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="find unique symbols that packages would share", description=HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--exclude", metavar="GLOB", action="append", default=[],
                   help="pass over files whose path relative to a tree's root, or member name, matches GLOB "
                        "(repeatable; a GLOB without / also matches the file name alone)")
    add_verbose(p, "the names that only files of one package define (the JSON always has them)")
    p.add_argument("paths", metavar="PATH", nargs="+")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = run_audit(args.paths, audit_job(args.exclude, progress=progress_bar()))
    for r in result.errors:
        print(error_line(r.label, r.error or "failed"), file=sys.stderr)
    text = io.StringIO()
    if args.json:
        write_document(result.to_json(), text)
    else:
        write_text(result, text, verbose=args.verbose)
    sys.stdout.write(text.getvalue())
    sys.stdout.flush()
    return result.exit_status()


def _owner(report: object) -> str:
    package = getattr(report, "package", None)
    return f"  ({package})" if package is not None else ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _collision(c: Collision, out: TextIO) -> None:
    flags = [f for f, on in (("across packages", c.cross_package), ("sizes differ", c.differs)) if on]
    out.write(f"  {one_line(c.demangled or c.symbol)}{'  [' + ', '.join(flags) + ']' if flags else ''}\n")
    if c.demangled:
        out.write(f"      {one_line(c.symbol)}\n")
    for d in c.definitions:
        out.write(f"      defined ({_plural(d.st_size, 'byte')}) in {one_line(d.report.label)}{_owner(d.report)}\n")
    for r in c.referenced_by:
        out.write(f"      used by {one_line(r.label)}{_owner(r)}\n")


def _shown(c: Collision, verbose: bool) -> bool:
    """Names across packages, and names that files no package owns define; within one package only with -v
    (a package built at once usually means to share its own statics)."""
    return verbose or c.cross_package or all(d.report.package is None for d in c.definitions)


def write_text(result: Audit, out: TextIO, verbose: bool = False) -> None:
    """Package pairs first, then the names (demangled), then what `elfpatch unique` would do."""
    if result.pairs:
        out.write("Packages that define the same unique symbols (loaded together, they share one copy):\n")
        for (a, b), names in result.pairs:
            out.write(f"  {one_line(a)} and {one_line(b)}: {_plural(len(names), 'name')}\n")
        out.write("\n")
    shown = [c for c in result.collisions if _shown(c, verbose)]
    if shown:
        out.write(f"Unique symbols defined by two or more files ({len(result.cross_package)} across packages):\n")
        for c in sorted(shown, key=lambda c: (not c.cross_package, not c.differs, c.symbol)):
            _collision(c, out)
    hidden = len(result.collisions) - len(shown)
    if hidden:
        out.write(f"  ... and {_plural(hidden, 'name')} that only files of one package define (-v lists them)\n")
    if shown:
        _write_remedy(result, shown, out)
    if shown or hidden:
        out.write("\n")
    out.write(_summary_line(result.summary()) + "\n")


def _write_remedy(result: Audit, shown: list[Collision], out: TextIO) -> None:
    """What `elfpatch unique` would rewrite to end the collisions shown."""
    involved = result.involved({c.symbol for c in shown})
    total = sum(len(r.symbols) for r in involved)
    out.write(f"\n`elfpatch unique` on the {_plural(len(involved), 'file')} that define them would rewrite "
              f"{_plural(total, 'unique symbol')} to GLOBAL: each file then keeps its own statics, and can "
              "be unloaded.\n")
    for r in involved:
        out.write(f"  {one_line(r.label)}: {_plural(len(r.symbols), 'unique symbol')}\n")


def _summary_line(doc: dict[str, Any]) -> str:
    line = (f"{_plural(doc['files'], 'file')}, {doc['with_unique']} with unique symbols, "
            f"{_plural(doc['collisions'], 'collision')}, {doc['cross_package_collisions']} across packages, "
            f"{_plural(doc['errors'], 'error')}")
    if doc["skipped"]:
        line += f", {doc['skipped']} skipped"
    if doc["other"]:
        line += f", {doc['other']} other"
    return line
