"""`elfpatch dlcheck`: load PATHs into one child process, close them, probe, and explain what stayed.

The PATHs are opened in order with RTLD_NOW|RTLD_LOCAL, closed in reverse order, then probed with
RTLD_NOLOAD. The loader's own LD_DEBUG output says which objects it marked NODELETE and why, and which
references it bound across objects; the files say the rest (DF_1_NODELETE, DT_NEEDED, unique symbols).
Why something stayed is ``blockers``' business; this module runs the steps and judges the bindings.
"""
from __future__ import annotations

import fnmatch
import os
from typing import Sequence

from elfpatch.errors import EXIT_ERROR, EXIT_FOUND, EXIT_OK
from elfpatch.harness.blockers import Explainer, Names, Report
from elfpatch.harness.elffacts import object_facts
from elfpatch.harness.lddebug import LdDebug
from elfpatch.harness.session import (
    DEFAULT_TIMEOUT,
    RTLD_GLOBAL,
    RTLD_LOCAL,
    RTLD_NOW,
    ChildCrashed,
    DlError,
    HarnessTimeout,
    ImportFailed,
    Session,
)
from elfpatch.report import envelope


def dlcheck(paths: Sequence[str] | str, *, timeout: float = DEFAULT_TIMEOUT, imports: Sequence[str] = (),
            preloads: Sequence[str] = (), allow_resident: Sequence[str] = ()) -> Report:
    """Check that each of ``paths`` unloads, in one child process; returns the ``dlcheck --json`` document.
    ``imports`` (Python modules) are imported and ``preloads`` opened with RTLD_NOW|RTLD_GLOBAL first, as the
    process the PATHs will live in would have done; they are never closed and never judged.
    ``allow_resident``: globs on the file name or soname of dependencies that may stay loaded for unique
    symbols without failing the check. Raises HarnessError only when the child cannot be started at all."""
    allow, imports, preloads = _items(allow_resident), _items(imports), _items(preloads)
    given = _items(paths)
    absolute = [os.path.abspath(p) for p in given]
    entries: list[Report] = [{"path": p, "loaded": False, "error": None, "unloads": None, "blockers": []}
                             for p in given]
    setup = {"imports": [{"module": m, "error": None} for m in imports],
             "preloads": [{"path": os.fspath(p), "error": None} for p in preloads]}
    with Session(timeout=timeout) as s:
        start = s.preloaded
        steps = _Steps(s, entries)
        try:
            steps.set_up(setup)
            before = steps.loaded()
            handles = steps.load(absolute)
            after_load = steps.loaded()
            steps.close(handles)
            after_close = steps.loaded()
            steps.probe(absolute)
        except (ChildCrashed, HarnessTimeout) as exc:
            _record_crash(entries, setup, steps.step, exc.message)
            return _document({"files": entries, "cross_bindings": [], "out_of_scope_bindings": [],
                              "dependencies": [], **setup, "warnings": []})
        log = s.debug()
    report = _report(entries, given, absolute, log, set(start), before, after_load, after_close, allow=allow)
    return _document({**report, **setup, "warnings": log.notes()})


def _document(report: Report) -> Report:
    """``report`` in the envelope every command's JSON shares: each file's ``status`` ("unloaded",
    "stayed", "error"; "unchecked" for a check that neither finished nor failed, which no step leaves) and
    ``warnings`` (none: the run's own, about the loader's log, are the document's), a ``summary``, the
    ``schema``."""
    for f in report["files"]:
        f["status"] = ("error" if f["error"] is not None else "unchecked" if f["unloads"] is None
                       else "unloaded" if f["unloads"] else "stayed")
        f["warnings"] = []
    files = report["files"]
    setup_errors = sum(e["error"] is not None for e in [*report["imports"], *report["preloads"]])
    summary = {"files": len(files), "errors": sum(f["status"] == "error" for f in files),
               "setup_errors": setup_errors, "unloaded": sum(f["status"] == "unloaded" for f in files),
               "stayed": sum(f["status"] == "stayed" for f in files),
               "cross_bindings": len(report["cross_bindings"]),
               "failing_dependencies": len(failing_dependencies(report))}
    rest = {k: v for k, v in report.items() if k != "files"}
    return envelope("dlcheck", files, summary, **rest)


def _items(value: Sequence[str] | str | os.PathLike[str]) -> list[str]:
    """A list of paths, modules or globs; one string (or path) is one item, never its characters."""
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    return [os.fspath(v) for v in value]


class _Steps:
    """The requests dlcheck makes of the child, in order. Each notes what the child is about to do (and for
    which PATH, by index; -1 for none) before asking, so that when the child dies the report can say when."""

    def __init__(self, session: Session, entries: list[Report]) -> None:
        self.s = session
        self.entries = entries
        self.step = (-1, "starting")

    def set_up(self, setup: Report) -> None:
        for entry in setup["imports"]:
            self.step = (-1, f"importing {entry['module']}")
            try:
                self.s.import_module(entry["module"])
            except ImportFailed as exc:
                entry["error"] = exc.message
        for entry in setup["preloads"]:
            self.step = (-1, f"preloading {entry['path']}")
            try:
                self.s.open(entry["path"], RTLD_NOW | RTLD_GLOBAL)
            except DlError as exc:
                entry["error"] = exc.message

    def loaded(self) -> list[str]:
        self.step = (-1, "listing loaded objects")
        return self.s.loaded()

    def load(self, absolute: list[str]) -> list[int | None]:
        handles: list[int | None] = [None] * len(absolute)
        for i, path in enumerate(absolute):
            self.step = (i, "loading")
            try:
                handles[i] = self.s.open(path, RTLD_NOW | RTLD_LOCAL)
                self.entries[i]["loaded"] = True
            except DlError as exc:
                self.entries[i]["error"] = exc.message
        return handles

    def close(self, handles: list[int | None]) -> None:
        for i in reversed(range(len(handles))):  # in reverse order, as a program would unwind
            handle = handles[i]
            if handle is not None:
                self.step = (i, "closing")
                try:
                    self.s.close(handle)
                except DlError as exc:
                    self.entries[i]["error"] = f"dlclose failed: {exc.message}"

    def probe(self, absolute: list[str]) -> None:
        for i, path in enumerate(absolute):
            if self.entries[i]["loaded"]:
                self.step = (i, "probing")
                self.entries[i]["unloads"] = not self.s.resident(path)


def _report(entries: list[Report], given: list[str], absolute: list[str], log: LdDebug, start: set[str],
            before: list[str], after_load: list[str], after_close: list[str], *,
            allow: Sequence[str] = ()) -> Report:
    """Blockers for what stayed, dependencies, cross bindings: from the link-map snapshots and the log."""
    names = Names(given, absolute, after_load)
    loaded_paths = {names.of_path[i] for i, e in enumerate(entries) if e["loaded"] and i in names.of_path}
    preloaded = set(before)
    new = [n for n in after_load if n and n not in preloaded]
    explain = Explainer(log, preloaded, [n for n in after_close if n], names)
    for i, entry in enumerate(entries):
        if entry["loaded"] and entry["unloads"] is False:
            entry["blockers"] = explain.blockers(names.of_path.get(i, absolute[i]), absolute[i])
    deps = [_dependency(n, n in after_close, explain, allow) for n in new if n not in loaded_paths]
    ours = set(new) | loaded_paths  # what the PATHs brought in; setup objects count as far as ours bind to them
    objects = ours | {n for n in before if n and n not in start}
    unique = log.cross_bindings(objects)
    unique_keys = {(b.file, b.bound_to, b.symbol) for b in unique}
    other = [b for b in log.out_of_scope(objects) if (b.file, b.bound_to, b.symbol) not in unique_keys]
    return {"files": entries, "cross_bindings": _rows(unique, ours, names),
            "out_of_scope_bindings": _rows(other, ours, names), "dependencies": deps}


def _dependency(name: str, stays: bool, explain: Explainer, allow: Sequence[str]) -> Report:
    """A dependency's entry: ``fixable`` when it stays for a reason ``elfpatch unique`` can remove (which fails
    the check, as a PATH that stays does), ``allowed`` the --allow-resident glob that waives that."""
    blockers = explain.blockers(name, name) if stays else []
    fixable = stays and explain.unique_would_free(name, blockers)
    return {"path": name, "unloads": not stays, "blockers": blockers, "fixable": fixable,
            "allowed": _allowed_by(name, allow) if fixable else None}


def _allowed_by(name: str, allow: Sequence[str]) -> str | None:
    """The first glob that names ``name``: matched against its file name, its real file's name and its
    soname (and, for a glob with a slash, its path)."""
    facts = object_facts(name)
    names = {os.path.basename(name), os.path.basename(os.path.realpath(name))}
    if facts is not None and facts.soname:
        names.add(facts.soname)
    for glob in allow:
        targets = (name, os.path.realpath(name)) if "/" in glob else names
        if any(fnmatch.fnmatchcase(t, glob) for t in targets):
            return glob
    return None


def _rows(bindings: list, ours: set[str], names: Names) -> list[Report]:
    rows, seen = [], set()
    for b in bindings:
        if b.file not in ours and b.bound_to not in ours:
            continue
        row = (b.symbol, names.display(b.file), names.display(b.bound_to))
        if row not in seen:
            seen.add(row)
            rows.append({"symbol": row[0], "file": row[1], "bound_to": row[2]})
    return rows


def exit_status(report: Report) -> int:
    """The dlcheck contract: 2 on any error (a PATH, an --import or a --preload), 1 when a PATH stayed
    loaded, a dependency stayed for a reason ``elfpatch unique`` can remove (and no --allow-resident glob
    names it), or a cross binding was seen, else 0. Out-of-scope bindings that are not unique symbols, and
    what the imports and preloads loaded, do not count."""
    files = report["files"]
    setup = [*report.get("imports", []), *report.get("preloads", [])]
    if any(f["error"] is not None or not f["loaded"] for f in files) or any(e["error"] for e in setup):
        return EXIT_ERROR
    if report["cross_bindings"] or any(f["unloads"] is False for f in files) or failing_dependencies(report):
        return EXIT_FOUND
    return EXIT_OK


def failing_dependencies(report: Report) -> list[Report]:
    """The dependencies that fail the check: stayed for a reason ``elfpatch unique`` can fix, not waived."""
    return [d for d in report.get("dependencies", []) if d.get("fixable") and not d.get("allowed")]


def _record_crash(entries: list[Report], setup: Report, step: tuple[int, str], message: str) -> None:
    """The child died or hung: the file (or set-up step) it was working on gets the message, every other
    file whose check was not finished says why."""
    index, doing = step
    culprit = f" {entries[index]['path']}" if index >= 0 else ""
    for entry in [*setup["imports"], *setup["preloads"]]:
        name = entry.get("module") or entry.get("path")
        if doing in (f"importing {name}", f"preloading {name}") and entry["error"] is None:
            entry["error"] = message
    for i, entry in enumerate(entries):
        if i == index:
            entry["error"] = message  # names the step: "... killed by SIGSEGV during dlclose PATH"
        elif entry["error"] is None and entry["unloads"] is None:
            entry["error"] = f"not checked: the harness child died or hung while {doing}{culprit}"
        entry["unloads"] = None if entry["error"] else entry["unloads"]
