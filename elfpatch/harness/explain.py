"""The human rendering of a dlcheck report: one sentence per blocker, and what to do about it."""
from __future__ import annotations

import os
from typing import Any, TextIO

from elfpatch.harness.blockers import (
    NODELETE_FLAG,
    NODELETE_REFERENCE,
    OPEN_HANDLE,
    PRELOADED,
    STILL_REFERENCED,
    THREAD_LOCAL,
    UNIQUE_SYMBOL,
)
from elfpatch.symbols import demangle

MAX_SYMBOLS = 4
SYSTEM_DIRS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/local/lib/")


def symbol_label(name: str) -> str:
    pretty = demangle(name)
    return f"{pretty} ({name})" if pretty else name


def _symbol_list(symbols: list[str]) -> str:
    # Guard variables (_ZGV...) only accompany the statics they guard: name those first.
    ordered = sorted(symbols, key=lambda s: s.startswith("_ZGV"))
    shown = ", ".join(symbol_label(s) for s in ordered[:MAX_SYMBOLS])
    more = len(symbols) - MAX_SYMBOLS
    return shown + (f" and {more} more" if more > 0 else "")


def explain(blocker: dict[str, Any], path: str, dependency: bool = False) -> tuple[str, str]:
    """(why it stays, what to do) for one blocker of ``path``."""
    kind, objects = blocker["kind"], blocker.get("objects", [])
    system = dependency and path.startswith(SYSTEM_DIRS)
    if kind == UNIQUE_SYMBOL:
        symbols = blocker.get("symbols", [])
        why = ("glibc marked it NODELETE because it defines STB_GNU_UNIQUE symbols"
               + (f" ({_symbol_list(symbols)})" if symbols else "")
               + ": dlclose never unmaps it, its statics keep their values, and a rebuilt copy reloads as "
               "the old code.")
        if system:
            fix = ("it is a system library the process shares: leave it loaded (patching it is the "
                   "distribution's business).")
        else:
            fix = (f"run `elfpatch unique {path}` or rebuild it with -fno-gnu-unique; if other modules "
                   "rely on sharing one of these symbols, keep that one unique "
                   "(`elfpatch unique --symbol GLOB` rewrites only the symbols it selects).")
    elif kind == NODELETE_FLAG:
        why = "it was linked with -z nodelete (DF_1_NODELETE), so the loader keeps it by design."
        fix = ("it must stay: elfpatch leaves this flag alone; only a rebuild without -Wl,-z,nodelete lets "
               "it unload.")
    elif kind == NODELETE_REFERENCE:
        why = (f"glibc marked it NODELETE because {', '.join(objects) or 'an object'}, which can never be "
               "unloaded, binds to its symbols.")
        fix = "make that object unloadable, or keep it from binding to this one."
    elif kind == STILL_REFERENCED:
        why = f"it is still needed by {', '.join(objects)}, which stayed loaded."
        fix = "it goes when they go: fix their blockers first."
    elif kind == THREAD_LOCAL:
        why = ("it registers thread_local destructors, and glibc keeps it loaded until every thread that "
               "touched one of them has exited.")
        fix = "let those threads finish before dlclose, or give the thread_local a trivial destructor."
    elif kind == OPEN_HANDLE:
        why = "a handle from dlopen is still open."
        fix = "dlclose every handle."
    elif kind == PRELOADED:
        why = "it was already loaded in the checking process before dlcheck opened it."
        fix = "it must stay: dlclose only gave back dlcheck's own reference."
    else:
        why = blocker.get("detail") or "it stayed loaded for no reason dlcheck could find."
        if not why.endswith("."):
            why += "."
        fix = ("look for constructors that dlopen it again, a thread_local destructor still pending, or a "
               "handle it keeps to itself.")
    return why, fix


def short_error(path: str, error: str) -> str:
    """dlerror's text without the leading ``PATH: `` it usually starts with (the report names the path)."""
    for prefix in (path, os.path.abspath(path)):
        if error.startswith(prefix + ": "):
            return error[len(prefix) + 2:]
    return error


def write_text(report: dict[str, Any], out: TextIO) -> None:
    files = report["files"]
    for f in files:
        if f["error"] is not None:
            state = f"error: {short_error(f['path'], f['error'])}"
        elif f["unloads"]:
            state = "unloads"
        else:
            state = "stays loaded after dlclose"
        out.write(f"{f['path']}: {state}\n")
        _write_blockers(f["blockers"], f["path"], out)
    cross = report["cross_bindings"]
    if cross:
        out.write("cross bindings (objects loaded with RTLD_LOCAL that share one definition):\n")
        for b in cross:
            out.write(f"  {b['file']} uses {b['bound_to']}'s {symbol_label(b['symbol'])}\n")
        out.write("    fix: `elfpatch unique` on these files gives each its own copy (or rebuild them with "
                  "-fno-gnu-unique).\n")
    for d in report.get("dependencies", []):
        if not d["unloads"]:
            out.write(f"dependency {d['path']}: stays loaded (does not change the exit status)\n")
            _write_blockers(d["blockers"], d["path"], out, dependency=True)
    stay = sum(1 for f in files if f["unloads"] is False)
    ok = sum(1 for f in files if f["unloads"])
    errors = sum(1 for f in files if f["error"] is not None)
    out.write(f"{len(files)} file{'s' if len(files) != 1 else ''}: {ok} unload, {stay} stay loaded, "
              f"{errors} error{'s' if errors != 1 else ''}; {len(cross)} cross binding"
              f"{'s' if len(cross) != 1 else ''}\n")


def _write_blockers(blockers: list[dict[str, Any]], path: str, out: TextIO, dependency: bool = False) -> None:
    for b in blockers:
        why, fix = explain(b, path, dependency)
        out.write(f"  {b['kind']}: {why}\n    fix: {fix}\n")
