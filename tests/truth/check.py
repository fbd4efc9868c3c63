"""The analysis (`elfpatch inits --deps --dtors --siof --json`) of one built program against what it observed.

(a) every (context, object) read the run saw before construction is a finding of that reader and object, or
    the reader's entry says ``complete: false``, or the file says ``analysis_complete: false``; else it is a
    *false clean*. A miss in an entry that says complete (whatever the file says) is an *entry-complete miss*.
(b) every finding is observed, or implied by the source: the reader's code reads the object and either the
    verdict is ``order-dependent`` or the object's constructor ran after the reader began (a lazy route the
    run happened to take from elsewhere); else it is a *false finding*.
(c) every registration the `__cxa_atexit` shim logged for a file is listed in its ``exit_time_destructors``
    (each listed entry matches at most one registration: listed once).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from truth.build import ROOT, Built
from truth.generator import Context, Program


def analyse(paths: list[Path], *flags: str, libpath: str | None = None) -> list[dict]:
    """This checkout's elfpatch (its package first on the path, whatever is installed) on some files, in one
    run: each file's JSON document, in the order given (``libpath``: LD_LIBRARY_PATH, where ``--deps`` finds
    another machine's libraries)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **({"LD_LIBRARY_PATH": libpath} if libpath else {}))
    proc = subprocess.run([sys.executable, "-m", "elfpatch", "inits", *flags, "--json", *map(str, paths)],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode not in (0, 1) or "Traceback" in proc.stderr:
        raise RuntimeError(f"elfpatch failed on {paths}: {proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout)
    files = {f["path"]: f for f in doc["files"]}
    by_real = {os.path.realpath(p): files[str(p)] for p in paths}
    for load in doc.get("loads", []):  # --deps: a finding of the whole load belongs to its reader's file
        for f in load.get("findings", []):
            reader = by_real.get(os.path.realpath(f["reader"]["file"]))
            if reader is not None and f not in reader.setdefault("load_findings", []):
                reader["load_findings"].append(f)
    return [files[str(p)] for p in paths]


def _findings(doc: dict) -> list[dict]:
    """A file's findings: its own, and (--deps) those of a load it is part of whose reader is in it."""
    return doc.get("findings", []) + doc.get("load_findings", [])


@dataclass
class Events:
    """The program's stdout: ENTER ctx, CTOR obj ctx, OBS ctx obj value, in run order."""
    early: set[tuple[int, int]] = field(default_factory=set)
    entered: dict[int, int] = field(default_factory=dict)  # ctx -> line of its first ENTER
    built: dict[int, int] = field(default_factory=dict)  # obj -> line of its CTOR

    @classmethod
    def parse(cls, text: str) -> Events:
        ev = cls()
        for i, line in enumerate(text.splitlines()):
            word, *nums = line.split()
            if word == "ENTER":
                ev.entered.setdefault(int(nums[0]), i)
            elif word == "CTOR":
                ev.built.setdefault(int(nums[0]), i)
            elif word == "OBS" and nums[2] == "0":
                ev.early.add((int(nums[0]), int(nums[1])))
        return ev

    def built_after(self, ctx: int, oid: int) -> bool:
        return self.built.get(oid, 1 << 30) > self.entered.get(ctx, -1)


@dataclass
class Outcome:
    """One build's counts; the lists name each miss (for the report) as dicts."""
    early: int = 0
    found: int = 0
    false_cleans: list[dict] = field(default_factory=list)
    entry_complete_misses: list[dict] = field(default_factory=list)
    findings: int = 0
    false_findings: list[dict] = field(default_factory=list)
    dtors_logged: int = 0
    dtors_listed: int = 0
    dtors_matched: int = 0
    entries: int = 0  # initializers analysed (not the toolchain's), and how many of them say complete
    complete_entries: int = 0
    dtors_missed: list[dict] = field(default_factory=list)
    incomplete_misses: list[dict] = field(default_factory=list)  # missed reads in entries that say incomplete
    builds: list[dict] = field(default_factory=list)  # per build: its name and counts


def _entries_of(prog: Program, ctx: Context, listing: dict) -> set[int]:
    """The init_array addresses that run ``ctx``: its constructor function, its unit's initializer; when no
    entry carries the function's or the unit's name (LTO merges units, GCC's -flto -O0 its constructor
    functions too, into one initializer that calls them), every user entry that names no unit."""
    def function(e: dict) -> set[str]:  # clang mangles a static function even inside extern "C"
        return {e["symbol"], (e["demangled"] or "").split("(")[0]}

    init = [e for e in listing["init"] if not e["toolchain"]]
    if ctx.function:
        own = {e["address"] for e in init if ctx.function in function(e)}
        if own:
            return own
    functions = {c.function for c in prog.contexts}
    init = [e for e in init if not functions & function(e)]  # a constructor function names its file too
    named = {e["address"] for e in init if e["source"] == f"{ctx.unit}.cpp"} if not ctx.function else set()
    if named:
        return named
    units = {f"{u}.cpp" for u in prog.modules[ctx.module]}
    return {e["address"] for e in init if e["source"] not in units}


def _symbols(path: Path) -> dict[int, str]:
    """address -> symbol of the unstripped file (a stripped file's findings name objects by address)."""
    out = subprocess.run(["nm", "--defined-only", str(path)], capture_output=True, text=True).stdout
    table: dict[int, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and not parts[2].startswith("$"):  # AArch64's mapping symbols ($x code, $d data)
            table.setdefault(int(parts[0], 16), parts[2])
    return table


def _object_id(prog: Program, obj: dict | None, symbols: dict[int, str]) -> int | None:
    if not obj:
        return None
    names = {o.symbol: o.oid for o in prog.objects}
    name = obj.get("symbol") or symbols.get(obj.get("address") or -1) or ""
    return names.get(name.split(".")[0])  # LTO renames what it internalizes: g3 -> g3.0


@dataclass
class Module:
    doc: dict  # the analysis of the file as analysed (stripped or not)
    symbols: dict[int, str]
    entries: dict[int, list[dict]]  # context -> its init entries in ``doc``
    # every module's symbols by the real path of the file analysed: a load's finding names an object of another
    # module, which a stripped file knows by address alone, by that module's ``file``
    by_file: dict[str, dict[int, str]] = field(default_factory=dict)

    def object_id(self, prog: Program, obj: dict | None) -> int | None:
        where = obj.get("file") if obj else None
        symbols = self.by_file.get(os.path.realpath(where), self.symbols) if where else self.symbols
        return _object_id(prog, obj, symbols)


def _module(prog: Program, built: Built, module: str, doc: dict, listing: dict) -> Module:
    by_address = {e["address"]: e for e in doc["init"] if e["kind"] == "init_array"}
    entries = {c.cid: [by_address[a] for a in _entries_of(prog, c, listing) if a in by_address]
               for c in prog.contexts if c.module == module}
    by_file = {os.path.realpath(built.analysed[m]): _symbols(built.modules[m]) for m in built.modules}
    return Module(doc, _symbols(built.modules[module]), entries, by_file)


def routes(prog: Program, cid: int, oid: int) -> list[str]:
    """How the source reaches ``oid`` from context ``cid``: the routes of its read sites (a lazy site anywhere
    when the context's own code has none), and what kind of read it is."""
    ctx = next(c for c in prog.contexts if c.cid == cid)
    target = next(o for o in prog.objects if o.oid == oid)
    own = [o for o in prog.objects if o.unit == ctx.unit or o.oid in prog.includes[ctx.unit]]
    sites = list(ctx.reads) if ctx.function else [r for o in own for r in o.reads]
    found = {r.route for r in sites if r.target.oid == oid}
    if not found:
        lazy = [r for o in prog.objects for r in o.reads] + [r for c in prog.contexts for r in c.reads]
        found = {r.route for r in lazy if r.target.oid == oid and r.route in ("local", "tls")}
    tags = sorted(found or {"unknown"})
    homes = {prog.module_of_unit(r.home_unit) for r in sites if r.target.oid == oid}
    if homes - {ctx.module}:  # the reading code lives in another module: the reader calls into it
        tags.append("code-in-other-module")
    if target.module != ctx.module:
        tags.append(f"cross-module:{ctx.module}->{target.module}")
    if target.kind != "plain":
        tags.append(target.kind)
    if ctx.function:
        tags.append("constructor-fn")
    if target.unit == ctx.unit:
        tags.append("self-read" if any(r.target.oid == oid for r in target.reads) else "same-unit")
    return tags


def _judge_read(prog: Program, mod: Module, cid: int, oid: int, where: dict, out: Outcome) -> None:
    out.early += 1
    entries = mod.entries[cid]
    indices = {e["index"] for e in entries}
    if any(f["reader"]["index"] in indices and mod.object_id(prog, f["object"]) == oid
           for f in _findings(mod.doc)):
        out.found += 1
        return
    # no entry at all for the reader (the listing lost it) claims nothing incomplete either
    entry_complete = all(e["analysis"] and e["analysis"]["complete"] for e in entries)
    miss = dict(where, reader=cid, object=oid, entries=sorted(indices), routes=routes(prog, cid, oid),
                file_complete=mod.doc.get("analysis_complete"))
    if entry_complete:
        out.entry_complete_misses.append(miss)
        if mod.doc.get("analysis_complete"):
            out.false_cleans.append(miss)
    else:
        out.incomplete_misses.append(dict(miss, causes=causes(mod.doc, indices)))


# What keeps an entry from being complete, from the file's notes: (a phrase of the note, the cause's name).
# The first that matches names a note; an entry's causes are those of the notes that name it, and the
# file-wide ones (a stripped file, an LTO-merged initializer, the budget).
_CAUSES = (  # the more specific phrases first: later notes name "another module's function" too
    ("left a callback with another module", "a callback an earlier initializer left with another module"),
    ("which an object loaded before it may interpose", "own exported name another object may interpose"),
    ("store through a pointer not known or run code not followed", "a store not seen may build it"),
    ("hands to another module's function", "handed to another module's function"),
    ("another module's", "unproven: another module's object"),
    ("pointer of unproven provenance", "unproven: pointer of unknown provenance"),
    ("through its own arguments", "access through the initializer's arguments"),
    ("indirect call(s) not followed", "indirect call"),
    ("no function starts at", "call to no function start"),
    ("past depth", "call past --depth"),
    ("destructor was not resolved", "registration's destructor unresolved"),
    ("guarded initialization no initializer", "guarded variable initialized by no initializer here"),
    ("its address is not in this file", "entry not in the file"),
    ("load-time value of writable pointer", "pointer global that may have changed"),
    ("before it first stores into", "object loaded before its initializer stores into it"),
    ("that a later initializer stores into too", "plain stores by it and by a later initializer"),
    ("no check of their guard", "function-local static used past its guard"),
)
_FILE_CAUSES = (
    ("no .symtab (stripped)", "stripped file"),
    ("LTO-merged initializer", "LTO-merged initializer"),
    ("not seen whole", "work budget"),
    ("ifunc resolver", "ifunc resolver"),
    ("loops were cut short", "loop cut short"),
    ("DT_INIT function", "DT_INIT function not analysed"),
)


def causes(doc: dict, indices: set[int]) -> list[str]:
    """Why the entries at ``indices`` say incomplete (their notes in ``analysis_notes``, sorted)."""
    found: set[str] = set()
    for note in doc.get("analysis_notes", []):
        head = note.split(" ", 2)
        named = head[0] == "initializer" and len(head) > 1 and head[1].isdigit()
        if named and int(head[1]) in indices:
            found.update(next(([name] for phrase, name in _CAUSES if phrase in note), ["other: " + note[:60]]))
        elif not named:
            found.update(name for phrase, name in _FILE_CAUSES if phrase in note)
    return sorted(found)


def _judge_findings(prog: Program, mod: Module, ev: Events, where: dict, out: Outcome) -> None:
    readers: dict[int, list[int]] = {}
    for cid, entries in mod.entries.items():
        for e in entries:
            readers.setdefault(e["index"], []).append(cid)
    for f in _findings(mod.doc):
        out.findings += 1
        oid = mod.object_id(prog, f["object"])
        cids = readers.get(f["reader"]["index"], [])
        observed = any((c, oid) in ev.early for c in cids)
        implied = oid is not None and any(
            oid in prog.static_reads(c) and (f["verdict"] == "order-dependent" or ev.built_after(c, oid))
            for c in cids)
        if not (observed or implied):
            out.false_findings.append(dict(where, verdict=f["verdict"], reader=f["reader"], object=f["object"]))


def _key(text: str, symbols: dict[int, str]) -> str:
    """A pointer as the shim prints it (hex address, ext:SYMBOL, 0, tls), named by symbol where the unstripped
    file has one: an inline destructor that another object's copy interposes is still the same registration
    (the shim sees the interposing definition, ext:...). Complete and base destructors are one function."""
    if text.startswith("0x"):
        text = symbols.get(int(text, 16), text)
    return text.removeprefix("ext:").replace("D1Ev", "D2Ev")


def _listed_key(obj: dict | None, symbols: dict[int, str]) -> str:
    if obj is None:
        return "0"
    if obj["address"] is not None:
        return _key(hex(obj["address"]), symbols)
    return _key(str(obj["symbol"]), symbols)


def _judge_dtors(mod: Module, logged: list[tuple[str, ...]], where: dict, out: Outcome) -> None:
    listed: Counter[tuple[str, str, str]] = Counter()
    for d in mod.doc.get("exit_time_destructors", []):
        kind = "atexit" if d["kind"] == "atexit_c" else d["kind"]
        obj = "tls" if kind == "thread_atexit" else _listed_key(d["object"], mod.symbols)
        listed[(kind, _listed_key(d["dtor"], mod.symbols), obj)] += 1
    out.dtors_logged += len(logged)
    out.dtors_listed += sum(listed.values())
    for kind, dtor, obj in logged:
        reg = (kind, _key(dtor, mod.symbols), _key(obj, mod.symbols))
        if listed[reg] > 0:
            listed[reg] -= 1
            out.dtors_matched += 1
        else:
            out.dtors_missed.append(dict(where, registration=" ".join(reg)))


def check(prog: Program, built: Built, stdout: str, logs: dict[str, list[tuple[str, ...]]],
          analyser: Callable[..., list[dict]] = analyse) -> Outcome:
    """Properties (a), (b) and (c) on one build (``analyser(paths, *flags)``: the files' JSON documents)."""
    ev = Events.parse(stdout)
    out = Outcome()
    names = list(built.modules)
    # --deps: what a user runs on the program, so that its load judges one module's reads of another's objects
    # (the program as built, the driver of a main module built as a library, is the root of that load)
    root = [] if built.analysed["main"].name == "prog" else [built.analysed["main"].with_name("prog")]
    sysroot = built.variant.target.sysroot  # another machine's: its libraries are the load's
    extra = {"libpath": f"{sysroot}/lib"} if sysroot else {}
    docs = analyser([built.analysed[m] for m in names] + root, "--deps", "--dtors", "--siof", **extra)[: len(names)]
    # a stripped file's entries and objects are named from the file as linked (same addresses)
    listings = analyse([built.modules[m] for m in names]) if built.variant.strip else docs
    mods = {m: _module(prog, built, m, doc, listing) for m, doc, listing in zip(names, docs, listings)}
    for module, mod in mods.items():
        where = {"seed": prog.seed, "variant": built.variant.name, "file": built.analysed[module].name}
        for cid, oid in sorted(ev.early):
            if next(c for c in prog.contexts if c.cid == cid).module == module:
                _judge_read(prog, mod, cid, oid, where, out)
        _judge_findings(prog, mod, ev, where, out)
        _judge_dtors(mod, logs[module], where, out)
        analysed = [e for e in mod.doc["init"] if e.get("analysis")]
        out.entries += len(analysed)
        out.complete_entries += sum(bool(e["analysis"]["complete"]) for e in analysed)
    out.builds.append({"seed": prog.seed, "variant": built.variant.name, "early": out.early, "found": out.found,
                       "false_cleans": len(out.false_cleans),
                       "entry_complete_misses": len(out.entry_complete_misses), "findings": out.findings,
                       "false_findings": len(out.false_findings),
                       "dtors_logged": out.dtors_logged, "dtors_listed": out.dtors_listed,
                       "dtors_matched": out.dtors_matched, "entries": out.entries,
                       "complete_entries": out.complete_entries})
    return out
