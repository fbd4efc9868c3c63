"""`elfpatch dlcheck`: load PATHs into one child process, close them, probe, and explain what stayed.

The PATHs are opened in order with RTLD_NOW|RTLD_LOCAL, closed in reverse order, then probed with
RTLD_NOLOAD. The loader's own LD_DEBUG output says which objects it marked NODELETE and why, and which
references it bound across objects; the files say the rest (DF_1_NODELETE, DT_NEEDED, unique symbols).
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from elfpatch.harness.elffacts import ObjectFacts, needs, object_facts
from elfpatch.harness.lddebug import LdDebug
from elfpatch.harness.session import (
    DEFAULT_TIMEOUT,
    RTLD_LOCAL,
    RTLD_NOW,
    ChildCrashed,
    DlError,
    HarnessTimeout,
    Session,
)

# Blocker kinds, as the JSON document spells them.
UNIQUE_SYMBOL = "unique-symbol"  # glibc marked it NODELETE when its STB_GNU_UNIQUE symbol entered the table
NODELETE_FLAG = "nodelete-flag"  # linked with -z nodelete (DF_1_NODELETE)
NODELETE_REFERENCE = "nodelete-reference"  # glibc marked it NODELETE: an unloadable object binds to it
STILL_REFERENCED = "still-referenced"  # another object that stays loaded needs it
PRELOADED = "preloaded"  # it was loaded in the checking process before dlcheck opened it
OPEN_HANDLE = "open-handle"  # the session still holds a handle from its own dlopen (harness sessions only)
THREAD_LOCAL = "thread-local-destructor"  # a thread_local destructor is pending (a likely reason, not proof)
UNKNOWN = "unknown"

Report = dict[str, Any]


def dlcheck(paths: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT) -> Report:
    """Check that each of ``paths`` unloads, in one child process; returns the ``dlcheck --json`` document.
    Raises HarnessError only when the child cannot be started at all."""
    given = [os.fspath(p) for p in paths]
    absolute = [os.path.abspath(p) for p in given]
    entries: list[Report] = [{"path": p, "loaded": False, "error": None, "unloads": None, "blockers": []}
                             for p in given]
    with Session(timeout=timeout) as s:
        before = s.loaded()
        step = (-1, "starting")  # what the child is doing, for the report when it dies
        try:
            handles: list[int | None] = [None] * len(given)
            for i, path in enumerate(absolute):
                step = (i, "loading")
                try:
                    handles[i] = s.open(path, RTLD_NOW | RTLD_LOCAL)
                    entries[i]["loaded"] = True
                except DlError as exc:
                    entries[i]["error"] = exc.message
            step = (-1, "listing loaded objects")
            after_load = s.loaded()
            for i in reversed(range(len(given))):
                if handles[i] is not None:
                    step = (i, "closing")
                    try:
                        s.close(handles[i])
                    except DlError as exc:
                        entries[i]["error"] = f"dlclose failed: {exc.message}"
            step = (-1, "listing loaded objects")
            after_close = s.loaded()
            for i, path in enumerate(absolute):
                if entries[i]["loaded"]:
                    step = (i, "probing")
                    entries[i]["unloads"] = not s.resident(path)
        except (ChildCrashed, HarnessTimeout) as exc:
            _record_crash(entries, step, exc.message)
            return {"files": entries, "cross_bindings": [], "dependencies": []}
        log = s.debug()
    return _report(entries, given, absolute, log, before, after_load, after_close)


def _report(entries: list[Report], given: list[str], absolute: list[str], log: LdDebug, before: list[str],
            after_load: list[str], after_close: list[str]) -> Report:
    """Blockers for what stayed, dependencies, cross bindings: from three link-map snapshots and the log."""
    names = _Names(given, absolute, after_load)
    loaded_paths = {names.of_path[i] for i, e in enumerate(entries) if e["loaded"] and i in names.of_path}
    preloaded = set(before)
    new = [n for n in after_load if n and n not in preloaded]
    explain = _Explainer(log, preloaded, [n for n in after_close if n], names)
    for i, entry in enumerate(entries):
        if entry["loaded"] and entry["unloads"] is False:
            entry["blockers"] = explain.blockers(names.of_path.get(i, absolute[i]), absolute[i])
    deps = []
    for n in new:
        if n not in loaded_paths:
            stays = n in after_close
            blockers = explain.blockers(n, n) if stays else []
            deps.append({"path": n, "unloads": not stays, "blockers": blockers})
    cross, seen = [], set()
    for b in log.cross_bindings(set(new) | loaded_paths):
        row = (b.symbol, names.display(b.file), names.display(b.bound_to))
        if row not in seen:
            seen.add(row)
            cross.append({"symbol": row[0], "file": row[1], "bound_to": row[2]})
    return {"files": entries, "cross_bindings": cross, "dependencies": deps}


def explain_resident(session: Session, path: str) -> list[Report]:
    """Why ``path`` is still loaded in a harness session, as dlcheck's blockers ([] when it is not)."""
    target = os.path.abspath(os.fspath(path))
    now = session.loaded()
    names = _Names([os.fspath(path)], [target], now)
    name = names.of_path.get(0)
    if name is None:
        return []
    out = []
    handles = session.open_handles(target)
    if handles:
        out.append({"kind": OPEN_HANDLE, "detail": f"the session still holds {handles} handle(s) from dlopen",
                    "symbols": [], "objects": []})
    explain = _Explainer(session.debug(), set(session.preloaded), [n for n in now if n], names)
    found = explain.blockers(name, target)
    return out + [b for b in found if not (out and b["kind"] == UNKNOWN)]


def exit_status(report: Report) -> int:
    """The dlcheck contract: 2 on any error, 1 when a PATH stayed loaded or a cross binding was seen,
    else 0."""
    files = report["files"]
    if any(f["error"] is not None or not f["loaded"] for f in files):
        return 2
    if report["cross_bindings"] or any(f["unloads"] is False for f in files):
        return 1
    return 0


def _record_crash(entries: list[Report], step: tuple[int, str], message: str) -> None:
    """The child died or hung: the file it was working on gets the message, every other file whose check
    was not finished says why."""
    index, doing = step
    for i, entry in enumerate(entries):
        if i == index:
            entry["error"] = message  # names the step: "... killed by SIGSEGV during dlclose PATH"
        elif entry["error"] is None and entry["unloads"] is None:
            culprit = f" {entries[index]['path']}" if index >= 0 else ""
            entry["error"] = f"not checked: the harness child died or hung while {doing}{culprit}"
        entry["unloads"] = None if entry["error"] else entry["unloads"]


class _Names:
    """Maps between the PATHs as given and the names the loader uses (the same file, by device and inode)."""

    def __init__(self, given: list[str], absolute: list[str], link_map: list[str]) -> None:
        self.of_path: dict[int, str] = {}
        ids = {}
        for name in link_map:
            fid = _file_id(name) if name else None
            if fid is not None:
                ids.setdefault(fid, name)
        for i, path in enumerate(absolute):
            fid = _file_id(path)
            name = ids.get(fid) if fid is not None else None
            if name is None and path in link_map:
                name = path
            if name is not None:
                self.of_path[i] = name
        self._display: dict[str, str] = {}
        for i, name in self.of_path.items():
            self._display.setdefault(name, given[i])

    def display(self, name: str) -> str:
        """A PATH as the user gave it, anything else as the loader names it."""
        return self._display.get(name, name)


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class _Explainer:
    """Why an object is still loaded, from the loader's marks and the files' dynamic sections."""

    def __init__(self, log: LdDebug, before: set[str], resident: list[str], names: _Names) -> None:
        self.log = log
        self.before = before
        self.resident = resident
        self.names = names
        self._facts: dict[str, ObjectFacts | None] = {}

    def facts(self, name: str) -> ObjectFacts | None:
        if name not in self._facts:
            self._facts[name] = object_facts(name)
        return self._facts[name]

    def blockers(self, name: str, path: str) -> list[Report]:
        out: list[Report] = []

        def add(kind: str, detail: str, symbols: Sequence[str] = (), objects: Sequence[str] = ()) -> None:
            out.append({"kind": kind, "detail": detail, "symbols": list(symbols), "objects": list(objects)})

        facts = self.facts(path)
        if name in self.before:
            add(PRELOADED, "it was already loaded in the checking process before dlcheck opened it")
        marks = self.log.nodelete(name)
        unique = facts.unique if facts else []
        if any(m.reason == "unique symbol" for m in marks):
            add(UNIQUE_SYMBOL, "glibc marked it NODELETE when its STB_GNU_UNIQUE symbols entered the "
                "namespace's unique-symbol table (LD_DEBUG: marking ... as NODELETE due to unique symbol)",
                unique)
        elif unique and self.log.lines == 0:
            add(UNIQUE_SYMBOL, "it defines STB_GNU_UNIQUE symbols (the loader printed no LD_DEBUG output "
                "to confirm the NODELETE mark)", unique)
        if facts and facts.nodelete_flag:
            add(NODELETE_FLAG, "it was linked with -z nodelete (DT_FLAGS_1 has DF_1_NODELETE)")
        for m in marks:
            if m.reference_from is not None:
                source = self.names.display(m.reference_from) if m.reference_from else "the main program"
                add(NODELETE_REFERENCE, f"glibc marked it NODELETE because {source}, which can never be "
                    "unloaded, binds to its symbols", objects=[source])
            elif m.reason != "unique symbol":
                add(UNKNOWN, f"glibc marked it NODELETE due to {m.reason}")
        users = self._referrers(name, facts)
        if users:
            add(STILL_REFERENCED, "still needed by " + ", ".join(users) + ", which stayed loaded",
                objects=users)
        if not out and facts is not None and facts.thread_local_dtors:
            add(THREAD_LOCAL, "it registers thread_local destructors (it calls __cxa_thread_atexit), and "
                "glibc keeps an object loaded until every thread that touched one of them has exited")
        if not out:
            add(UNKNOWN, "it stayed loaded for no reason dlcheck could find")
        return out

    def _referrers(self, name: str, facts: ObjectFacts | None) -> list[str]:
        """The objects still loaded (and loaded after the process started) that need ``name``."""
        relocation = {d.needed_by for d in self.log.dependencies if d.path == name and d.relocation}
        users = []
        for other in self.resident:
            if other == name or other in self.before:  # the process's own objects: "preloaded" covers them
                continue
            other_facts = self.facts(other)
            if other in relocation or (other_facts is not None and needs(other_facts, name, facts)):
                users.append(self.names.display(other))
        return users
