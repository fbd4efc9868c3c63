"""The human rendering of a dlcheck report: one sentence per blocker, and what to do about it."""
from __future__ import annotations

import os
from typing import Any, Sequence, TextIO

from elfpatch.elf.symbols import demangle
from elfpatch.harness.blockers import (
    NODELETE_FLAG,
    NODELETE_REFERENCE,
    OPEN_HANDLE,
    PRELOADED,
    STILL_REFERENCED,
    THREAD_LOCAL,
    UNIQUE_SYMBOL,
    is_system,
)

MAX_SYMBOLS = 4


def symbol_label(name: str) -> str:
    pretty = demangle(name)
    return f"{pretty} ({name})" if pretty else name


def _symbol_list(symbols: list[str]) -> str:
    # Guard variables (_ZGV...) only accompany the statics they guard: name those first.
    ordered = sorted(symbols, key=lambda s: s.startswith("_ZGV"))
    shown = ", ".join(symbol_label(s) for s in ordered[:MAX_SYMBOLS])
    more = len(symbols) - MAX_SYMBOLS
    return shown + (f" and {more} more" if more > 0 else "")


# The blockers whose sentence does not depend on the report: (why it stays, what to do).
_FIXED: dict[str, tuple[str, str]] = {
    NODELETE_FLAG: (
        "it was linked with -z nodelete (DF_1_NODELETE), so the loader keeps it by design.",
        "it must stay: elfpatch leaves this flag alone; only a rebuild without -Wl,-z,nodelete lets it unload."),
    THREAD_LOCAL: (
        "it registers thread_local destructors, and glibc keeps it loaded until every thread that touched one "
        "of them has exited.",
        "let those threads finish before dlclose, or give the thread_local a trivial destructor."),
    OPEN_HANDLE: ("a handle from dlopen is still open.", "dlclose every handle."),
    PRELOADED: ("it was already loaded in the checking process before dlcheck opened it.",
                "it must stay: dlclose only gave back dlcheck's own reference."),
}


def explain(blocker: dict[str, Any], path: str, dependency: bool = False,
            siblings: Sequence[dict[str, Any]] = ()) -> tuple[str, str]:
    """(why it stays, what to do) for one blocker of ``path``; ``siblings`` are its other blockers (a fix
    that they would defeat is not offered)."""
    kind, objects = blocker["kind"], blocker.get("objects", [])
    system = dependency and is_system(path)
    if kind in _FIXED:
        return _FIXED[kind]
    if kind == UNIQUE_SYMBOL:
        return _unique_symbol(blocker, path, system, siblings)
    if kind == NODELETE_REFERENCE:
        why = (f"glibc marked it NODELETE because {', '.join(objects) or 'an object'}, which can never be "
               "unloaded, binds to its symbols.")
        return why, _holder_fix(blocker, "make that object unloadable, or keep it from binding to this one.")
    if kind == STILL_REFERENCED:
        return _still_referenced(blocker, objects, system, siblings)
    why = blocker.get("detail") or "it stayed loaded for no reason dlcheck could find."
    if not why.endswith("."):
        why += "."
    return why, ("look for constructors that dlopen it again, a thread_local destructor still pending, or a "
                 "handle it keeps to itself.")


def _unique_symbol(blocker: dict[str, Any], path: str, system: bool,
                   siblings: Sequence[dict[str, Any]]) -> tuple[str, str]:
    symbols = blocker.get("symbols", [])
    why = ("glibc marked it NODELETE because it defines STB_GNU_UNIQUE symbols"
           + (f" ({_symbol_list(symbols)})" if symbols else "")
           + ": dlclose never unmaps it, its statics keep their values, and a rebuilt copy reloads as "
           "the old code.")
    held = _never_roots(siblings)
    if system:
        return why, ("it is a system library the process shares: leave it loaded (patching it is the "
                     "distribution's business).")
    if held:
        return why, (f"`elfpatch unique` alone would not make it unload: {held[0]['path']} holds it and can "
                     "never unload (see below); fix that first.")
    return why, (f"run `elfpatch unique {path}` or rebuild it with -fno-gnu-unique; if other modules "
                 "rely on sharing one of these symbols, keep that one unique "
                 "(`elfpatch unique --symbol GLOB` rewrites only the symbols it selects).")


def _still_referenced(blocker: dict[str, Any], objects: list[str], system: bool,
                      siblings: Sequence[dict[str, Any]]) -> tuple[str, str]:
    links = blocker.get("links") or [{"object": o, "reasons": []} for o in objects]
    why = "it is still needed by " + ", ".join(
        link["object"] + (f" ({', '.join(link['reasons'])})" if link["reasons"] else "") for link in links
    ) + ", which stayed loaded."
    # A reason of its own that `elfpatch unique` will not remove (a flag, a preload, a system library's unique
    # symbols) is the fix to name; a patchable unique-symbol blocker is not: the holders' fix still applies.
    own = [b["kind"] for b in siblings if b["kind"] in (UNIQUE_SYMBOL, NODELETE_FLAG, PRELOADED)]
    if own and (system or own[0] != UNIQUE_SYMBOL):
        return why, f"it stays for a reason of its own as well ({own[0]}, above)."
    return why, _holder_fix(blocker, "it goes when they go: fix their blockers first.")


def _never_roots(blockers: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The roots holding an object that can never unload, from its still-referenced/nodelete-reference
    blockers."""
    seen, out = set(), []
    for b in blockers:
        for root in b.get("roots", []):
            if root.get("never_unloads") and root["path"] not in seen:
                seen.add(root["path"])
                out.append(root)
    return out


def _holder_fix(blocker: dict[str, Any], default: str) -> str:
    """What would let the object go, judged from the roots of the chains that hold it."""
    roots = blocker.get("roots", [])
    never = _never_roots([blocker])
    if never:
        root = never[0]
        last = root["chain"][-1]
        exported = last["holds"]
        if root["system"] and last.get("own_symbols") and last.get("symbol_count"):
            return (f"{root['path']} can never unload ({root['never_unloads']}), and it binds "
                    f"{last['symbol_count']} of its own symbols to the copies {exported} exports "
                    f"({_symbol_list(last['symbols'])}): stop exporting them (link {exported} with "
                    "-Wl,--exclude-libs,ALL or a version script that exports only its own API), or load "
                    f"{os.path.basename(root['path'])} before it so that it binds to itself (`elfpatch dlcheck "
                    f"--preload {os.path.basename(root['path'])}` shows the effect); `elfpatch unique` cannot "
                    "help.")
        return (f"{root['path']} can never unload ({root['never_unloads']}) and holds it; it goes only if "
                f"{root['path']} stops needing it; `elfpatch unique` cannot help.")
    fixable = [r for r in roots if r["kinds"] == [UNIQUE_SYMBOL] and not r["system"]]
    if roots and len(fixable) == len(roots):
        return (f"it goes when {', '.join(r['path'] for r in roots)} go"
                f"{'es' if len(roots) == 1 else ''}: run `elfpatch unique` on "
                f"{'it' if len(roots) == 1 else 'them'} (see its unique-symbol blocker).")
    if roots:
        return ("it goes when " + ", ".join(f"{r['path']} ({', '.join(r['kinds'])})" for r in roots)
                + " go: fix those blockers first.")
    return default


def chain_lines(blocker: dict[str, Any], path: str) -> list[str]:
    """One line per root: the chain of holders from ``path`` out to the root, each link with its reason."""
    out = []
    for root in blocker.get("roots", []):
        parts = [path]
        for link in root["chain"]:
            reason = ", ".join(link["reasons"])
            if link.get("symbol_count"):
                reason += f": {link['symbol_count']} symbol{'s' if link['symbol_count'] != 1 else ''}, e.g. " \
                          + _symbol_list(link["symbols"][:2])
            parts.append(f"{link['object']} ({reason})")
        why = root["never_unloads"] or ", ".join(root["kinds"])
        out.append(f"root {root['path']}: {why}; held by " + " <- ".join(parts))
    return out


def short_error(path: str, error: str) -> str:
    """dlerror's text without the leading ``PATH: `` it usually starts with (the report names the path)."""
    for prefix in (path, os.path.abspath(path)):
        if error.startswith(prefix + ": "):
            return error[len(prefix) + 2:]
    return error


def write_text(report: dict[str, Any], out: TextIO) -> None:
    _write_setup(report, out)
    files = report["files"]
    for f in files:
        out.write(f"{f['path']}: {_file_state(f)}\n")
        _write_blockers(f["blockers"], f["path"], out)
    cross = report["cross_bindings"]
    if cross:
        out.write("cross bindings (a reference bound to another object's STB_GNU_UNIQUE definition outside its "
                  "own lookup scope: the two share one copy):\n")
        _write_bindings(cross, out)
        out.write("    fix: `elfpatch unique` on these files gives each its own copy (or rebuild them with "
                  "-fno-gnu-unique).\n")
    other = report.get("out_of_scope_bindings", [])
    if other:
        out.write("out-of-scope bindings (not unique symbols: the global scope changed under them, e.g. an "
                  "RTLD_GLOBAL object or LD_PRELOAD; not counted in the exit status):\n")
        _write_bindings(other, out)
    for d in report.get("dependencies", []):
        if not d["unloads"]:
            out.write(f"dependency {d['path']}: stays loaded ({_dependency_verdict(d)})\n")
            _write_blockers(d["blockers"], d["path"], out, dependency=True)
    _write_summary(files, cross, out, report.get("dependencies", []))


def _dependency_verdict(d: dict[str, Any]) -> str:
    if not d.get("fixable"):
        return "does not change the exit status"
    if d.get("allowed"):
        return f"allowed by --allow-resident {d['allowed']}"
    return ("fails the check: `elfpatch unique` can make it unload; "
            f"--allow-resident {os.path.basename(d['path'])} waives it")


def _write_setup(report: dict[str, Any], out: TextIO) -> None:
    """The --import and --preload lines: set-up steps, reported but not judged."""
    for entry in report.get("imports", []):
        state = f"error: {entry['error']}" if entry["error"] else "imported first (not judged)"
        out.write(f"--import {entry['module']}: {state}\n")
    for entry in report.get("preloads", []):
        state = (f"error: {short_error(entry['path'], entry['error'])}" if entry["error"]
                 else "opened first with RTLD_GLOBAL (not judged)")
        out.write(f"--preload {entry['path']}: {state}\n")


def _file_state(f: dict[str, Any]) -> str:
    if f["error"] is not None:
        return f"error: {short_error(f['path'], f['error'])}"
    return "unloads" if f["unloads"] else "stays loaded after dlclose"


def _write_bindings(bindings: list[dict[str, Any]], out: TextIO) -> None:
    for b in bindings:
        out.write(f"  {b['file']} uses {b['bound_to']}'s {symbol_label(b['symbol'])}\n")


def _write_summary(files: list[dict[str, Any]], cross: list[dict[str, Any]], out: TextIO,
                   deps: list[dict[str, Any]]) -> None:
    stay = sum(1 for f in files if f["unloads"] is False)
    ok = sum(1 for f in files if f["unloads"])
    errors = sum(1 for f in files if f["error"] is not None)
    failing = sum(1 for d in deps if d.get("fixable") and not d.get("allowed"))
    pinned = f"; {failing} dependenc{'ies fail' if failing != 1 else 'y fails'} the check" if failing else ""
    out.write(f"{len(files)} file{'s' if len(files) != 1 else ''}: {ok} unload, {stay} stay loaded, "
              f"{errors} error{'s' if errors != 1 else ''}; {len(cross)} cross binding"
              f"{'s' if len(cross) != 1 else ''}{pinned}\n")


def _write_blockers(blockers: list[dict[str, Any]], path: str, out: TextIO, dependency: bool = False) -> None:
    for b in blockers:
        why, fix = explain(b, path, dependency, blockers)
        out.write(f"  {b['kind']}: {why}\n")
        for line in chain_lines(b, path):
            out.write(f"    {line}\n")
        out.write(f"    fix: {fix}\n")
