"""`elfpatch inits`: what runs at load and unload, in the loader's order, with names and source files."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Iterator, TextIO, TypeVar

from elfpatch.commands.options import Count
from elfpatch.errors import EXIT_ERROR, EXIT_FOUND, EXIT_OK, ElfPatchError, error_line, one_line
from elfpatch.inits.budget import DEFAULT_DEPTH
from elfpatch.report import envelope, write_document

if TYPE_CHECKING:
    from elfpatch.elf.loadorder import Load
    from elfpatch.warnlog import WarningLog

T = TypeVar("T")

HELP = """\
List the initializers and finalizers of ELF files in the order glibc runs them. At load: DT_PREINIT_ARRAY
(executables only), DT_INIT, legacy .ctors, DT_INIT_ARRAY by index; at exit or dlclose: DT_FINI_ARRAY in
reverse, DT_FINI, legacy .dtors. Addresses are link-time addresses, as nm shows them.
--dtors and --siof disassemble each initializer (x86-64 and AArch64) and follow its calls up to --depth:
--dtors lists the exit-time destructors it registers (__cxa_atexit, atexit, __cxa_thread_atexit), --siof what
it constructs and reads, with a verdict for every read of a global that another initializer constructs.
Exit status: 0 success, 1 a file has more than --max static initializers, more than --max-dtors exit-time
destructors, or a --fail-on finding; 2 an error (one line per file)."""
FAIL_ON = {"before-construction": ("before-construction",),
           "order-dependent": ("before-construction", "order-dependent")}


MAX_DEPTH = 64  # the walk recurses once per call level


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inits", help="list static initializers and finalizers in execution order",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--max", metavar="N", type=Count(), default=None,
                   help="exit 1 when a file has more than N static initializers (preinit_array, init_array "
                        "and .ctors entries that are not the toolchain's own)")
    p.add_argument("--deps", action="store_true",
                   help="follow DT_NEEDED as the loader would and print the order of the whole load: "
                        "initializers dependencies first, finalizers at exit")
    p.add_argument("--dtors", action="store_true",
                   help="list the exit-time destructors each initializer registers, in registration order")
    p.add_argument("--siof", action="store_true",
                   help="what each initializer constructs and reads; static-initialization-order verdicts")
    p.add_argument("--depth", metavar="N", type=Count(MAX_DEPTH), default=DEFAULT_DEPTH,
                   help=f"follow calls this deep from each initializer (default {DEFAULT_DEPTH}, at most {MAX_DEPTH})")
    p.add_argument("--fail-on", metavar="VERDICT", choices=sorted(FAIL_ON), default=None,
                   help="exit 1 on a --siof finding of this verdict (order-dependent includes "
                        "before-construction)")
    p.add_argument("--max-dtors", metavar="N", type=Count(), default=None,
                   help="exit 1 when a file registers more than N exit-time destructors")
    p.add_argument("--exclude", metavar="GLOB", action="append", default=[],
                   help="pass over files whose path relative to a tree's root, or a PATH as given, matches "
                        "GLOB (repeatable; a GLOB without / also matches the file name alone)")
    p.add_argument("paths", metavar="PATH", nargs="+",
                   help="an ELF file, or a directory: every ELF file of its tree (symlinks not followed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from elfpatch.inits.order import static_initializer_count

    files, loads, errors, unused = _list_all(args)
    listed = [f for f in files if "init" in f]  # a file that failed has no listing
    counts = {f["path"]: static_initializer_count(f) for f in listed}
    over = [p for p, n in counts.items() if args.max is not None and n > args.max]
    summary = {"files": len(files), "errors": errors, "static_initializers": counts, "max": args.max,
               "over_max": over}
    gate = _analysis_gates(listed, loads, args, summary)
    if args.json:
        write_document(envelope("inits", files, summary, **({"loads": loads} if args.deps else {}), warnings=unused),
                       sys.stdout)
    else:
        _write_text(sys.stdout, listed, loads, counts, args)
    sys.stdout.flush()
    if errors:
        return EXIT_ERROR
    return EXIT_FOUND if over or gate else EXIT_OK


def _list_all(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int, list[str]]:
    """(entries, loads, errors, warnings about no one file) over ``args.paths``: one entry per file (a
    directory's ELF files), status "listed" or "error" (a file that fails has no listing; one whose load
    (--deps) fails keeps its listing; a tree that cannot be walked is its PATH's); each error is on stderr
    too. A warning logged while a tree is walked (or a PATH looked at) goes into its file's entry; one about no
    listed file, and an --exclude glob that matched nothing, into the warnings returned."""
    from functools import partial

    from elfpatch.inits.entry import file_entry, mark_failed
    from elfpatch.targets import Exclude
    from elfpatch.targets.elftree import elf_paths
    from elfpatch.warnlog import WarningLog

    files: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    exclude = Exclude(args.exclude)
    walk_log = WarningLog()
    for path, walk_error in _logged(elf_paths(args.paths, exclude), walk_log):
        load_of = _LoadOnce(path)
        entry, exc = file_entry(path, walk_error, partial(_listing, args=args, load_of=load_of))
        if exc is not None:
            _say(path, exc)
        files.append(entry)
        if args.deps and exc is None:
            try:
                loads.append(_load(path, entry, load_of(), args))
            except ElfPatchError as load_error:
                _say(path, load_error)
                mark_failed(entry, path, load_error)
    rest = _attach(files, walk_log)
    return files, loads, sum(f["status"] == "error" for f in files), [*rest, *exclude.warn_unused()]


def _logged(items: Iterator[T], log: WarningLog) -> Iterator[T]:
    """``items``, each one produced with ``log`` attached: it collects what a tree's walk (or a look at a
    PATH) logs, which comes before any file's listing; each file's entry collects what its listing logs."""
    while True:
        with log:
            try:
                item = next(items)
            except StopIteration:
                return
        yield item


def _attach(files: list[dict[str, Any]], log: WarningLog) -> list[str]:
    """Each warning ``log`` collected put first in the ``warnings`` of the entry of the file it is about (once);
    returns those about no listed file, for the document's ``warnings``."""
    entries: dict[str, dict[str, Any]] = {}
    for f in files:
        entries.setdefault(one_line(f["path"]), f)
    about: dict[str, list[str]] = {}
    rest: list[str] = []
    for path, message in log.about(entries):
        (rest if path is None else about.setdefault(path, [])).append(message)
    for path, messages in about.items():
        entries[path]["warnings"] = list(dict.fromkeys([*messages, *entries[path]["warnings"]]))
    return list(dict.fromkeys(rest))


def _say(path: str, exc: ElfPatchError) -> None:
    print(error_line(exc.path or path, exc.message), file=sys.stderr)


class _LoadOnce:
    """The load of one file (--deps), resolved at most once: the analysis's order of reads and the whole load's
    listing share it; a failure is kept and raised again."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._load: Load | None = None
        self._error: ElfPatchError | None = None

    def __call__(self) -> Load:
        if self._error is not None:
            raise self._error
        if self._load is None:
            from elfpatch.elf.loadorder import resolve

            try:
                self._load = resolve(self.path)
            except ElfPatchError as exc:
                self._error = exc
                raise
        return self._load


def _listing(path: str, args: argparse.Namespace, load_of: _LoadOnce) -> dict[str, Any]:
    """One file's initializers, with the disassembly's findings when a flag asks for them."""
    from elfpatch.inits.order import list_initializers

    listing = list_initializers(path)
    if args.dtors or args.siof or args.max_dtors is not None or args.fail_on:
        from elfpatch.inits.analysis import analyze_path  # imports capstone: only for these flags

        before = loaded = imported = None
        if args.deps:  # reads of what earlier objects of the load define are ordered by it
            from elfpatch.inits.deporder import load_names

            try:
                before, loaded, imported = load_names(load_of())
            except ElfPatchError:
                before = loaded = imported = None  # an unresolved load orders nothing; its listing says why
        analyze_path(path, listing, args.depth, dtors=args.dtors or args.max_dtors is not None,
                     siof=args.siof or bool(args.fail_on), before=before, loaded=loaded, imported=imported)
    return listing


def _analysis_gates(files: list[dict[str, Any]], loads: list[dict[str, Any]], args: argparse.Namespace,
                    summary: dict[str, Any]) -> bool:
    """Whether --max-dtors or --fail-on fails the run; their figures go into ``summary`` (only when the
    disassembly ran). A load's finding (--deps: a read across its modules) fails the PATH whose load it is."""
    gate = False
    if any("analysis_complete" in f for f in files):
        summary["analysis_complete"] = all(f["analysis_complete"] for f in files)
        if args.max_dtors is not None:
            over_dtors = [f["path"] for f in files if len(f["exit_time_destructors"]) > args.max_dtors]
            summary["max_dtors"], summary["over_max_dtors"] = args.max_dtors, over_dtors
            gate = gate or bool(over_dtors)
        if args.fail_on:
            failing = [f["path"] for f in [*files, *loads]
                       if any(x["verdict"] in FAIL_ON[args.fail_on] for x in f.get("findings", ()))]
            failing = list(dict.fromkeys(failing))  # a file and its load: one PATH
            summary["fail_on"], summary["failing"] = args.fail_on, failing
            gate = gate or bool(failing)
    return gate


def _load(path: str, listing: dict[str, Any], load: Load, args: argparse.Namespace) -> dict[str, Any]:
    """The whole load of ``path``: its objects, and every initializer and finalizer in execution order (with
    --siof, the findings of reads across its modules)."""
    from elfpatch.inits.order import list_initializers

    listings = [listing] + [list_initializers(o.info.path) for o in load.objects[1:]]
    init: list[dict[str, Any]] = []
    order = list(load.init_order)
    if load.initfirst is not None:  # glibc runs the DF_1_INITFIRST object even before the preinit array
        i = order.pop(0)
        init += _tagged(listings[i]["init"], load.objects, i, drop_preinit=True)
    if load.main_program:
        init += [e for e in _tagged(listing["init"], load.objects, 0) if e["kind"] == "preinit_array"]
    for i in order:
        init += _tagged(listings[i]["init"], load.objects, i, drop_preinit=True)
    fini: list[dict[str, Any]] = []
    for i in load.fini_order:
        fini += _tagged(listings[i]["fini"], load.objects, i)
    cross = _cross_module(listing, load, args) if "findings" in listing else {}
    return {
        "path": path,
        "main_program": load.main_program,
        "initfirst": None if load.initfirst is None else load.objects[load.initfirst].info.path,
        "objects": [{"path": o.info.path, "needed_name": o.name, "needed_by": o.needed_by}
                    for o in load.objects],
        "missing": [{"name": m.name, "needed_by": m.needed_by} for m in load.missing],
        "init_order": [load.objects[i].info.path for i in load.init_order],
        "fini_order": [load.objects[i].info.path for i in load.fini_order],
        "init": init,
        "fini": fini,
        **cross,
    }


def _cross_module(listing: dict[str, Any], load: Load, args: argparse.Namespace) -> dict[str, Any]:
    """``findings`` and ``analysis_notes`` of the reads one module of the load makes of another's objects that
    the load initializes later (elfpatch.inits.crossload): only the objects involved are analysed."""
    from elfpatch.inits.analysis import analyze_path, walk_functions
    from elfpatch.inits.crossload import cross_reads, judge
    from elfpatch.inits.order import list_initializers

    symbols, wanted = cross_reads(load)
    analysed: dict[int, dict[str, Any] | None] = {0: listing}

    def listing_of(i: int) -> dict[str, Any] | None:
        if i not in analysed:
            try:
                other = list_initializers(load.objects[i].info.path)
                analyze_path(load.objects[i].info.path, other, args.depth, dtors=False, siof=True)
                analysed[i] = other
            except ElfPatchError:
                analysed[i] = None  # not analysed: its reads and objects stay unjudged (a note says so)
        return analysed[i]

    def walk(i: int, addresses: list[int]) -> dict[int, tuple[set[int], int | None, bool, set[int] | None,
                                                             set[str]]] | None:
        try:
            return walk_functions(load.objects[i].info.path, addresses, max(args.depth - 1, 0))
        except ElfPatchError:
            return None  # not walked: a note says the call is not judged whole

    findings, notes = judge(load, symbols, wanted, listing_of, walk)
    return {"findings": findings, "analysis_notes": notes}


def _tagged(entries: list[dict[str, Any]], objects: list[Any], index: int,
            drop_preinit: bool = False) -> list[dict[str, Any]]:
    obj = objects[index].info.path
    return [{"object": obj, **e} for e in entries if not (drop_preinit and e["kind"] == "preinit_array")]


# -- text ------------------------------------------------------------------------------------------------

_HEADER = ("KIND", "INDEX", "ADDRESS", "PRIO", "SOURCE", "SYMBOL")


def _row(e: dict[str, Any]) -> tuple[str, ...]:
    name = one_line(e["demangled"] or e["symbol"] or "?")  # names come from the file: any byte but NUL
    if e["toolchain"]:
        name += "  [toolchain]"
    return (e["kind"], "-" if e["index"] is None else str(e["index"]),
            "?" if e["address"] is None else f"{e['address']:#x}",
            "-" if e["priority"] is None else str(e["priority"]), one_line(e["source"] or "-"), name)


def _table(out: TextIO, rows: list[tuple[str, ...]], indent: str) -> None:
    if not rows:
        out.write(f"{indent}(nothing)\n")
        return
    widths = [max(len(r[i]) for r in [_HEADER, *rows]) for i in range(len(_HEADER) - 1)]
    for r in [_HEADER, *rows]:
        cells = [c.ljust(w) for c, w in zip(r, widths)] + [r[-1]]
        out.write(indent + "  ".join(cells).rstrip() + "\n")


def _write_text(out: TextIO, files: list[dict[str, Any]], loads: list[dict[str, Any]], counts: dict[str, int],
                args: argparse.Namespace) -> None:
    loads_by_path = {ld["path"]: ld for ld in loads}
    for n, f in enumerate(files):
        if n:
            out.write("\n")
        count = counts[f["path"]]
        budget = "" if args.max is None else f" (max {args.max}{', over' if count > args.max else ''})"
        out.write(f"{one_line(f['path'])}: {count} static initializer{'s' if count != 1 else ''}{budget}\n")
        unnamed = sum(1 for e in f["init"] + f["fini"]
                      if e["symbol"] is None and e["kind"] not in ("init", "fini"))
        if unnamed:
            out.write(f"  note: {unnamed} entries have no symbol (stripped?): the count may include the "
                      "toolchain's frame_dummy\n")
        out.write("  at load, in order:\n")
        _table(out, [_row(e) for e in f["init"]], "    ")
        out.write("  at exit or dlclose, in order:\n")
        _table(out, [_row(e) for e in f["fini"]], "    ")
        if "analysis_complete" in f:
            from elfpatch.inits.report import write_analysis

            write_analysis(out, f)
        load = loads_by_path.get(f["path"])
        if load is not None:
            _write_load(out, load)


def _write_load(out: TextIO, load: dict[str, Any]) -> None:
    out.write(f"  whole load ({len(load['objects'])} objects), initializers, dependencies first:\n")
    _grouped(out, load["init"], load["init_order"], load["main_program"], load["initfirst"])
    out.write("  whole load, finalizers at exit:\n")
    _grouped(out, load["fini"], load["fini_order"], False, None)
    for m in load["missing"]:
        out.write(f"  not found: {m['name']} (needed by {m['needed_by']})\n")
    if "findings" in load:
        from elfpatch.inits.report import write_cross_module

        write_cross_module(out, load)


def _grouped(out: TextIO, entries: list[dict[str, Any]], order: list[str], preinit: bool,
             initfirst: str | None) -> None:
    """One block per object in ``order``; the main program's preinit entries get a block of their own, first
    (after a DF_1_INITFIRST object)."""
    blocks: list[tuple[str, list[dict[str, Any]]]] = []
    for obj in order:
        blocks.append((obj, [e for e in entries if e["object"] == obj and e["kind"] != "preinit_array"]))
    pre = [e for e in entries if e["kind"] == "preinit_array"] if preinit else []
    if pre:
        blocks.insert(1 if initfirst else 0, (f"{pre[0]['object']} (preinit, before every library)", pre))
    for title, rows in blocks:
        out.write(f"    {title}\n")
        _table(out, [_row(e) for e in rows], "      ")
