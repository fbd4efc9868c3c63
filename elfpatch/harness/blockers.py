"""Why an object is still loaded: its own blockers, and the chains of objects that hold it, to their roots.

Read from three things only: the loader's LD_DEBUG log (NODELETE marks, relocation dependencies, bindings),
the link map after dlclose, and the files' dynamic sections. Imports neither the session nor dlcheck, so
both can use it.
"""
from __future__ import annotations

import os
from collections import defaultdict, deque
from functools import lru_cache
from typing import Any, Protocol, Sequence

from elfpatch.harness.elffacts import ObjectFacts, needs, object_facts
from elfpatch.harness.lddebug import LdDebug

# Blocker kinds, as the JSON document spells them.
UNIQUE_SYMBOL = "unique-symbol"  # glibc marked it NODELETE when its STB_GNU_UNIQUE symbol entered the table
NODELETE_FLAG = "nodelete-flag"  # linked with -z nodelete (DF_1_NODELETE)
NODELETE_REFERENCE = "nodelete-reference"  # glibc marked it NODELETE: an unloadable object binds to it
STILL_REFERENCED = "still-referenced"  # another object that stays loaded needs it
PRELOADED = "preloaded"  # it was loaded in the checking process before dlcheck opened it
OPEN_HANDLE = "open-handle"  # the session still holds a handle from its own dlopen (harness sessions only)
THREAD_LOCAL = "thread-local-destructor"  # a thread_local destructor is pending (a likely reason, not proof)
UNKNOWN = "unknown"

# Why one object holds another (a link of a chain).
DT_NEEDED = "DT_NEEDED"
RELOCATION = "relocation dependency"
REFERENCE = "NODELETE reference"

SYSTEM_DIRS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/local/lib/")
MAX_LINK_SYMBOLS = 8  # symbols named per link; ``symbol_count`` has them all

Report = dict[str, Any]


class SessionView(Protocol):
    """What ``explain_resident`` needs of a harness session."""

    preloaded: list[str]

    def loaded(self) -> list[str]: ...

    def open_handles(self, path: str) -> int: ...

    def debug(self) -> LdDebug: ...


PACKAGE_DIRS = ("/site-packages/", "/dist-packages/")  # Python packages under /usr are pip's (or patchable)


@lru_cache(maxsize=1024)
def is_system(path: str) -> bool:
    """A library of the system's own directories: the distribution's, shared by every process (Python
    packages installed there excepted)."""
    real = os.path.realpath(path)
    if any(d in p for d in PACKAGE_DIRS for p in (path, real)):
        return False
    return real.startswith(SYSTEM_DIRS) or path.startswith(SYSTEM_DIRS)


class Names:
    """Maps between the PATHs as given and the names the loader uses (the same file, by device and inode)."""

    def __init__(self, given: list[str], absolute: list[str], link_map: list[str]) -> None:
        self.of_path: dict[int, str] = {}
        ids: dict[tuple[int, int], str] = {}
        for linked in link_map:
            fid = _file_id(linked) if linked else None
            if fid is not None:
                ids.setdefault(fid, linked)
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


class Explainer:
    """Why an object is still loaded, from the loader's marks and the files' dynamic sections."""

    def __init__(self, log: LdDebug, before: set[str], resident: list[str], names: Names) -> None:
        self.log = log
        self.before = before
        self.resident = resident
        self.names = names
        self._own: dict[str, list[Report]] = {}
        self._holders: dict[str, list[tuple[str, Report]]] = {}
        self._pairs: dict[tuple[str, str], list[str]] | None = None  # (referrer, definer) -> symbols
        self._reldeps: dict[str, set[str]] | None = None  # object -> objects with a relocation dependency on it

    def facts(self, name: str) -> ObjectFacts | None:
        return object_facts(name)

    # -- one object's own reasons ----------------------------------------------------------------------

    def own_blockers(self, name: str, path: str | None = None) -> list[Report]:
        """The reasons ``name`` stays that are its own (not another object holding it)."""
        if name in self._own:
            return self._own[name]
        out: list[Report] = []

        def add(kind: str, detail: str, symbols: Sequence[str] = ()) -> None:
            out.append({"kind": kind, "detail": detail, "symbols": list(symbols), "objects": []})

        facts = self.facts(path or name)
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
            if m.reference_from is None and m.reason != "unique symbol":
                add(UNKNOWN, f"glibc marked it NODELETE due to {m.reason}")
        self._own[name] = out
        return out

    def never_unloads(self, name: str) -> str | None:
        """Why ``name`` can never unload in this process whatever elfpatch does to the PATHs (None when it
        could): loaded before, -z nodelete, or a system library the loader marked NODELETE (elfpatch does not
        patch the distribution's libraries)."""
        if name in self.before:
            return "it was loaded before dlcheck opened anything"
        facts = self.facts(name)
        if facts is not None and facts.nodelete_flag:
            return "it was linked with -z nodelete"
        if is_system(name) and self.log.nodelete(name):  # the loader's word, not a guess from the file
            count = f"{len(facts.unique)} " if facts is not None and facts.unique else ""
            why = (f"for {count}STB_GNU_UNIQUE symbols of its own" if self.log.nodelete(name, "unique")
                   else "because an object that can never unload binds to it")
            return f"a system library that glibc marked NODELETE {why}"
        return None

    # -- who holds it ----------------------------------------------------------------------------------

    def holders(self, name: str) -> list[tuple[str, Report]]:
        """The resident objects that hold ``name`` (loaded after the process started), each with its link:
        ``{"object", "holds", "reasons", "symbols", "symbol_count"}``."""
        if name in self._holders:
            return self._holders[name]
        facts = self.facts(name)
        relocation = self._relocation_holders(name)
        referrers = {m.reference_from for m in self.log.nodelete(name) if m.reference_from}
        links = []
        for other in self.resident:
            if other == name or other in self.before:  # the process's own objects: "preloaded" covers them
                continue
            reasons = []
            other_facts = self.facts(other)
            if other_facts is not None and needs(other_facts, name, facts):
                reasons.append(DT_NEEDED)
            if other in relocation:
                reasons.append(RELOCATION)
            if other in referrers:
                reasons.append(REFERENCE)
            if reasons:
                links.append((other, self._link(other, name, reasons)))
        self._holders[name] = links
        return links

    def _relocation_holders(self, name: str) -> set[str]:
        """The objects the loader recorded ``name`` as a relocation dependency of (one pass over the log)."""
        if self._reldeps is None:
            self._reldeps = defaultdict(set)
            for d in self.log.dependencies:
                if d.relocation:
                    self._reldeps[d.path].add(d.needed_by)
        return self._reldeps.get(name, set())

    def _link(self, holder: str, held: str, reasons: list[str]) -> Report:
        symbols: list[str] = []
        if RELOCATION in reasons or REFERENCE in reasons:
            if self._pairs is None:  # one pass over the log, however many links there are
                pairs: dict[tuple[str, str], dict[str, None]] = defaultdict(dict)
                for b in self.log.bindings:
                    pairs[(b.file, b.bound_to)][b.symbol] = None
                self._pairs = {key: list(syms) for key, syms in pairs.items()}
            symbols = self._pairs.get((holder, held), [])
        facts = self.facts(holder) if symbols else None
        # The holder binds to copies of symbols it defines itself: the held object exports another library's
        # symbols (a statically linked libstdc++ with default visibility), and preempts them.
        own = facts is not None and all(sym in facts.defined for sym in symbols)
        return {"object": self.names.display(holder), "holds": self.names.display(held), "reasons": reasons,
                "symbols": symbols[:MAX_LINK_SYMBOLS], "symbol_count": len(symbols), "own_symbols": own}

    def roots(self, name: str) -> list[Report]:
        """Follow the holders of ``name`` outwards (breadth first, so each chain is a shortest one) to the
        objects that stay for a reason of their own: ``{"path", "chain", "kinds", "never_unloads",
        "system"}``, ``chain`` being the links from ``name``'s holder out to that root."""
        seen = {name}
        queue: deque[tuple[str, list[Report]]] = deque([(name, [])])
        out = []
        while queue:
            current, chain = queue.popleft()
            for other, link in self.holders(current):
                if other in seen:
                    continue
                seen.add(other)
                path = [*chain, link]
                never = self.never_unloads(other)
                own = self.own_blockers(other)
                if own or never:
                    out.append({"path": self.names.display(other), "chain": path,
                                "kinds": [b["kind"] for b in own], "never_unloads": never,
                                "system": is_system(other)})
                if never is None:  # a root that could go may itself be held further out
                    queue.append((other, path))
        return out

    def unique_would_free(self, name: str, blockers: Sequence[Report]) -> bool:
        """Whether ``elfpatch unique`` on ``name`` is what keeps it from unloading: it is outside the system's
        library directories, stays for its own unique symbols, and nothing that can never unload holds it
        (the cases where dlcheck's advice for it is ``elfpatch unique``)."""
        kinds = {b["kind"] for b in blockers}
        if is_system(name) or self.never_unloads(name) is not None or UNIQUE_SYMBOL not in kinds:
            return False
        return not any(root.get("never_unloads") for b in blockers for root in b.get("roots", []))

    # -- the report ------------------------------------------------------------------------------------

    def blockers(self, name: str, path: str) -> list[Report]:
        out = [dict(b) for b in self.own_blockers(name, path)]
        holders = self.holders(name)
        roots = self.roots(name) if holders else []
        for m in self.log.nodelete(name):
            if m.reference_from is not None:
                source = self.names.display(m.reference_from) if m.reference_from else "the main program"
                links = [link for other, link in holders if other == m.reference_from]
                out.append({"kind": NODELETE_REFERENCE, "objects": [source],
                            "symbols": links[0]["symbols"] if links else [], "links": links, "roots": roots,
                            "detail": f"glibc marked it NODELETE because {source}, which can never be "
                                      "unloaded, binds to its symbols"})
        links = [link for _, link in holders if set(link["reasons"]) & {DT_NEEDED, RELOCATION}]
        if links:
            out.append({"kind": STILL_REFERENCED, "objects": [link["object"] for link in links], "symbols": [],
                        "links": links, "roots": roots,
                        "detail": "still needed by " + ", ".join(
                            f"{link['object']} ({', '.join(link['reasons'])})" for link in links)
                        + ", which stayed loaded"})
        facts = self.facts(path)
        if not out and facts is not None and facts.thread_local_dtors:
            out.append({"kind": THREAD_LOCAL, "symbols": [], "objects": [],
                        "detail": "it registers thread_local destructors (it calls __cxa_thread_atexit), and "
                                  "glibc keeps an object loaded until every thread that touched one of them "
                                  "has exited"})
        if not out:
            out.append({"kind": UNKNOWN, "detail": "it stayed loaded for no reason dlcheck could find",
                        "symbols": [], "objects": []})
        return out


def explain_resident(session: SessionView, path: str) -> list[Report]:
    """Why ``path`` is still loaded in a harness session, as dlcheck's blockers ([] when it is not)."""
    target = os.path.abspath(os.fspath(path))
    now = session.loaded()
    names = Names([os.fspath(path)], [target], now)
    name = names.of_path.get(0)
    if name is None:
        return []
    out = []
    handles = session.open_handles(target)
    if handles:
        out.append({"kind": OPEN_HANDLE, "detail": f"the session still holds {handles} handle(s) from dlopen",
                    "symbols": [], "objects": []})
    explain = Explainer(session.debug(), set(session.preloaded), [n for n in now if n], names)
    found = explain.blockers(name, target)
    return out + [b for b in found if not (out and b["kind"] == UNKNOWN)]
