"""`inits --dtors/--siof` for one file: exit-time destructors in registration order, what each initializer
constructs and reads, and the order verdicts.

Each read is judged by the SIOF rule (elfpatch.inits.siof).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Callable

from elfpatch.collector import no_collections
from elfpatch.elf.const import SHN_UNDEF, STB_WEAK
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import demangle
from elfpatch.errors import ParseError
from elfpatch.inits.budget import DEFAULT_DEPTH, Budget
from elfpatch.inits.constptr import ConstantPointers, InitialPointers
from elfpatch.inits.crti import spliced
from elfpatch.inits.disasm import SUPPORTED_MACHINES, Disassembler, Value
from elfpatch.inits.exported import exported_unseen
from elfpatch.inits.filled import inlined_builds
from elfpatch.inits.image import Image
from elfpatch.inits.order import slot_addresses
from elfpatch.inits.resolvers import resolver_notes, resolver_stores
from elfpatch.inits.siof import VERDICTS, constructors, read_status
from elfpatch.inits.unnamed import unnamed_built
from elfpatch.inits.values import Ptr, address_of, held_by, returned_by
from elfpatch.inits.walk import UNKNOWN_STORE, Registration, Summary, Walker

# GCC's LTO merges every unit's initializer into one: _sub_I_65535_0.0 (no _GLOBAL_ prefix, no file, and the
# LTO partition's ".N"; ASan's own _sub_I_00099_1 has none).
_LTO_MERGED = re.compile(r"^_sub_I_\d{5}_\d+\.\d+|\.lto_priv")


def _obj(image: Image, value: Value | None) -> dict[str, Any] | None:
    """An address as JSON: its symbol where there is one, and always the section it lies in (what a stripped
    file's objects are known by)."""
    if value is None or value == 0:
        return None
    if isinstance(value, str):
        return {"address": None, "symbol": value, "demangled": demangle(value), "section": None}
    if not isinstance(value, int):
        return None  # a Ptr: its provenance is known, not an address to name
    name = image.symbol_at(value)
    return {"address": value, "symbol": name, "demangled": demangle(name) if name else None,
            "section": image.section_name(value)}


@no_collections
def analyze(elf: ElfFile, listing: dict[str, Any], depth: int = DEFAULT_DEPTH, dtors: bool = True,
            siof: bool = True, before: frozenset[str] | None = None, loaded: frozenset[str] | None = None,
            imported: frozenset[str] | None = None) -> None:
    """Adds ``exit_time_destructors`` (dtors), per-entry ``analysis`` and ``findings`` (siof) and
    ``analysis_notes`` to ``listing`` (one file's ``inits`` listing), in place. ``before`` (``--deps``): the
    symbols the objects initialized before this one define; reads of those are ordered by the load;
    ``loaded``: those any object of its load defines (a call of a function none defines is not seen);
    ``imported``: those the load's other objects import (None: any exported object may be read by them)."""
    entries = [e for e in listing["init"] if not e["toolchain"] and e["kind"] != "init"]
    # A DT_INIT function that is not crti's _init (``-Wl,-init,fn``) runs first and is not walked: not seen.
    notes: list[str] = [f"DT_INIT function {e['symbol'] or hex(e['address'] or 0)} is not analysed: what it reads "
                        "and builds is not seen" for e in listing["init"] if not e["toolchain"] and e["kind"] == "init"]
    supported = elf.e_machine in SUPPORTED_MACHINES
    if not supported:
        notes.append(f"machine {elf.e_machine} is not disassembled (x86-64 and AArch64 are): nothing seen")
    image = Image(elf) if supported else None
    if image is not None and image.stripped:
        notes.append("no .symtab (stripped): functions are known by their exported names and .eh_frame extents, "
                     "data objects without a symbol by address, where an initializer builds or stores into one")
    budget, walker, summaries, cut_from = _walked(elf, image, entries, depth)
    notes += _spliced_init(listing, walker)
    summaries = [_ordered(s, before) for s in summaries]
    # after the builds that stores by address, a stripped file's unnamed constructors, make known
    summaries = _constant_initialized(inlined_builds(image, walker, entries, unnamed_built(image, summaries)))
    # calls whose code is not seen: of a function no object of the load defines, or one that may read this
    # program's exported objects before they are built
    unbound = _unbound_calls(elf, entries, summaries, loaded) \
        + exported_unseen(elf, entries, summaries, walker, max(depth - 1, 0), _proven, imported)
    notes += [n for _e, n in unbound] + resolver_notes(elf, image, walker, summaries, depth, _proven)
    lto = [e for e in entries if e["symbol"] and _LTO_MERGED.search(e["symbol"])]
    if lto:
        notes.append("LTO-merged initializer(s): several translation units in one function, so order between "
                     "them is not seen: " + ", ".join(e["symbol"] for e in lto))
    # code another module runs for an entry, not followed: an indirect call of that entry
    called_back = _called_back(image, entries, summaries) if image is not None else []
    for pos, _n in called_back:
        s = summaries[pos]
        summaries[pos] = s._replace(indirect=s.indirect + 1) if s is not None else s
    notes += [n for _pos, n in called_back]
    summaries = _slots_interposed(elf, walker, entries, summaries)
    if dtors:
        listing["exit_time_destructors"] = _registrations(image, entries, summaries)
    changed = [names + _loaded_then_stored(image, s)
               for names, s in zip(_initial_changed(image, summaries, constructors(summaries)), summaries)]
    if siof:
        notes += _siof(image, walker, entries, summaries, listing, lto, changed)
        for e, _n in unbound:
            e["analysis"]["complete"] = False
    unsettled = _walks_done(image, walker, entries, notes)
    complete = supported and not notes and not (image and image.stripped) and not lto and not unsettled \
        and not budget.cut and all(s is not None and _proven(s) and s.unresolved == 0 and s.repeated == 0
                                  for s in summaries) \
        and not any(changed)
    notes += _limits(image, budget, entries[cut_from:])  # after: the image's facts alone leave nothing unproven
    for e, s, names in zip(entries, summaries, changed):
        notes += _unseen(e, s, depth, supported, image) + _changed_note(e, names)
    listing["analysis_complete"] = complete
    listing["analysis_notes"] = notes


def _constant_initialized(summaries: list[Summary | None]) -> list[Summary | None]:
    """The summaries less the objects whose only sign of a build anywhere is the registration of their destructor
    (constant-initialized, ``constexpr Reg() : n(5) {}`` with ``~Reg()``): read before that registration, they
    already hold their value. Only where the registering walk is proven (no store it could not place, no code it
    did not follow: a build there is possible); any store into one, constructor call, or its address handed
    on, anywhere, keeps it built (code other walks did not see: the blind rules judge reads of it)."""
    only = {o for s in summaries if s is not None for o in s.registered_only}
    if not only:
        return summaries
    built = {o for s in summaries if s is not None
             for o in (*(o for o in s.constructs if o not in s.registered_only), *s.call_stores, *s.escaped,
                       *s.this_builds, *s.guarded_builds, *(s.registered_only if not _proven(s) else ()))}
    constant = only - built
    return [s._replace(constructs={o: v for o, v in s.constructs.items() if o not in constant})
            if s is not None and constant & s.registered_only else s for s in summaries]


def _spliced_init(listing: dict[str, Any], walker: Walker | None) -> list[str]:
    """The note on a DT_INIT function named as crti's _init that runs code of another object spliced into
    .init (inits.crti), which runs before every init_array entry and is not walked."""
    if walker is None:
        return []
    return [f"DT_INIT function {e['symbol'] or hex(e['address'])} runs code spliced into .init besides crti's "
            f"(from {at:#x}), which is not analysed: what it reads and builds is not seen"
            for e in listing["init"] if e["kind"] == "init" and e["toolchain"] and e["address"] is not None
            and (at := spliced(walker.dis, e["address"])) is not None]


def _slots_interposed(elf: ElfFile, walker: Walker | None, entries: list[dict],
                      summaries: list[Summary | None]) -> list[Summary | None]:
    """The summaries, each entry whose array slot is relocated against this file's own exported name (a
    default-visibility ``constructor`` function) adding that name to what it may reach interposed: the loader
    binds the slot by lookup, so a program defining the name runs its own function there instead."""
    if walker is None or walker.own_word is None:
        return summaries
    out = list(summaries)
    for pos, slot in enumerate(slot_addresses(elf, entries)):
        name = walker.own_word(slot) if slot is not None else None
        s = out[pos]
        if name is not None and s is not None:
            out[pos] = s._replace(interposed=s.interposed | {name})
    return out


def _walks_done(image: Image | None, walker: Walker | None, entries: list[dict], notes: list[str]) -> list[int]:
    """Closes the walker (no walk follows) and returns the functions whose loops it cut short, noted in
    ``notes``."""
    if walker is None:
        return []
    walker.close()  # freed on return, not left to the collector (collector.no_collections)
    unsettled = walker.dis.unsettled
    if unsettled:  # never expected (see Disassembler.sweep); if it happens, the result must not claim complete
        assert image is not None  # the walker that found them reads the image
        notes.append(f"{len(unsettled)} function(s) whose loops were cut short, what they store may be missed: "
                     + ", ".join(image.function_name(a) or f"{a:#x}" for a in unsettled[:5]))
        for e in entries:
            if e.get("analysis"):
                e["analysis"]["complete"] = False
    return unsettled


# Walks of the entries that followed a pointer global by its load-time value, until none follows one that an
# initializer changes (each walk drops those; the last follows none).
MAX_INITIAL_WALKS = 3


def _walked(elf: ElfFile, image: Image | None, entries: list[dict],
            depth: int) -> tuple[Budget, Walker | None, list[Summary | None], int]:
    """The budget, walker, summaries and first cut position (see _walk_all) of a walk that follows a writable
    pointer global by its load-time value only where no initializer (nor ifunc resolver, run before them all)
    of this file stores into it or passes its address to another module: where one does, the entries that
    followed it are walked again with the pointer unknown (its reads unproven, never a finding through a value
    it may no longer hold). One budget for all."""
    budget = Budget()
    if image is None:
        return budget, None, [None] * len(entries), len(entries)
    dropped: set[int] | None = set()
    words = (ConstantPointers(elf), InitialPointers(elf))  # read once: a large library's relocations cost seconds
    walker = _walker(image, budget, words, dropped)
    summaries, cut_from = _walk_all(walker, entries, depth)
    unsettled: list[int] = []
    for n in range(1, MAX_INITIAL_WALKS):
        changed = resolver_stores(elf, walker, depth) \
            | {o for s in summaries if s is not None for o in (*s.constructs, *s.call_stores, *s.escaped)}
        bad = {o for s in summaries if s is not None for o in s.initial & changed}
        redo = [i for i, s in enumerate(summaries) if s is not None and s.initial & bad]
        if not redo or dropped is None:
            break
        dropped = dropped | bad if n + 1 < MAX_INITIAL_WALKS else None
        unsettled += walker.dis.unsettled
        walker.close()  # its caches, before the next walker builds its own
        walker = _walker(image, budget, words, dropped)
        again, cut = _walk_all(walker, [entries[i] for i in redo], depth)
        for i, s in zip(redo, again):
            summaries[i] = s
        cut_from = min(cut_from, redo[cut] if cut < len(redo) else cut_from)
    walker.dis.unsettled[:0] = unsettled
    return budget, walker, summaries, cut_from


def _walker(image: Image, budget: Budget, words: tuple[ConstantPointers, InitialPointers],
            dropped: set[int] | None) -> Walker:
    """The walker, whose loads through the GOT or constant data (RELRO) yield the address the word holds, as
    do loads of writable pointer globals but those in ``dropped`` (None: all dropped); its decoding bounded by
    ``budget`` and by the image's function extents."""
    consts, loaded = words
    elf = image.elf

    def initial(addr: int) -> Value | None:
        if dropped is None:
            return None
        value = loaded.word(addr)  # most words hold no pointer: asked first (the object lookup costs more)
        return None if value is None or image.object_start(addr) in dropped else value

    def pointer(addr: int) -> Value | None:
        value = image.got(addr)
        if value is None:
            value = consts.word(addr)
        return value if value is not None else initial(addr)

    def own_word(addr: int) -> str | None:
        return consts.own_name(addr) or loaded.own_name(addr)

    return Walker(image, Disassembler(elf.e_machine, image.read_code, pointer, image.object_start, budget,
                                      image.extent_known), pointer, initial, own_word)


def _limits(image: Image | None, budget: Budget, cut: list[dict]) -> list[str]:
    """The notes on what the image's facts and the budget left unseen; the entries in ``cut`` (walked after a
    function was cut short: they may reuse what it left unseen) are marked incomplete."""
    if image is None:
        return []
    for e in cut:
        if e.get("analysis"):
            e["analysis"]["complete"] = False
    return image.notes() + budget.notes(lambda a: image.function_name(a) or f"{a:#x}")


def _unbound_calls(elf: ElfFile, entries: list[dict], summaries: list,
                   loaded: frozenset[str] | None) -> list[tuple[dict, str]]:
    """Notes on calls of other modules' functions that no object of the load defines (``--deps``): a plugin's
    call of the program that dlopens it, whose code (and what it reads) is not seen; a weak reference none
    defines is null, not called."""
    if loaded is None:
        return []
    weak = {sym.name for t in elf.symbol_tables() if t.name == ".dynsym" for sym in t
            if sym.st_shndx == SHN_UNDEF and sym.bind == STB_WEAK}
    notes = []
    for e, s in zip(entries, summaries):
        unbound = sorted(n for n in s.foreign_calls if n not in loaded and n not in weak) if s is not None else []
        if unbound:
            notes.append((e, f"initializer {e['index']} ({e['symbol']}): calls function(s) no object of its load "
                          "defines (the program that loads it?), whose code is not seen: " + ", ".join(unbound[:3])))
    return notes


def _ordered(s: Summary | None, before: frozenset[str] | None) -> Summary | None:
    """The summary with its reads of other modules' objects proven when every one of them is defined by an
    object the load initializes before this one (its initializers have run: ``--deps``)."""
    if s is None or before is None or not s.foreign or not s.foreign <= before:
        return s
    return s._replace(unproven=s.unproven - s.foreign_unproven, foreign_unproven=0,
                      unproven_at=tuple(u for u in s.unproven_at if u.base is None))


def _walk_all(walker: Walker | None, entries: list[dict], depth: int) -> tuple[list[Summary | None], int]:
    """Each entry's summary (None where nothing is disassembled or its address is not in the file), and the
    position of the first entry whose walk met a function the budget cut (len(entries): none did)."""
    if walker is None:
        return [None] * len(entries), len(entries)
    out: list[Summary | None] = []
    cut_from = len(entries)
    for pos, e in enumerate(entries):
        before = len(walker.dis.budget.cut)
        out.append(walker.walk(e["address"], (), depth) if e["address"] is not None else None)
        if len(walker.dis.budget.cut) > before:
            cut_from = min(cut_from, pos)
    return out, cut_from


def _proven(s: Summary) -> bool:
    """"Complete is a proof": every call followed (within the depth), and every memory access reached has an
    address resolved to the frame, memory allocated, a named object, or a pointer derived from one of those
    (an access through the initializer's own argument registers is not)."""
    return s.indirect == 0 and s.depth_limited == 0 and s.unproven == 0 and not s.arg_derefs and not s.strange \
        and not s.interposed


def _where(image: Image, via: tuple, insn: int, e: dict[str, Any]) -> str:
    """function + address of an access (``via`` empty: the initializer's own code)."""
    fn = image.function_name(via[-1]) if via else e["symbol"]
    return f"{fn} at {insn:#x}" if fn else f"{insn:#x}"


def _unproven_notes(e: dict[str, Any], s: Summary, image: Image | None) -> list[str]:
    """Notes naming the accesses that keep an entry from being proven complete (the first few)."""
    if image is None:
        return []
    notes = []
    if s.unproven:
        first = "; ".join(_where(image, u.via, u.insn, e)
                          + (f" (another module's {u.base})" if u.base else "") for u in s.unproven_at)
        notes.append(f"initializer {e['index']} ({e['symbol']}): {s.unproven} memory access(es) through a "
                     f"pointer of unproven provenance, first: {first}")
    if s.arg_derefs:
        first = "; ".join(_where(image, via, insn, e) for via, insn, _w in list(s.arg_derefs.values())[:3])
        notes.append(f"initializer {e['index']} ({e['symbol']}): access(es) through its own arguments: {first}")
    return notes


def _unseen(e: dict[str, Any], s: Summary | None, depth: int, supported: bool, image: Image | None) -> list[str]:
    """The notes saying what one initializer's walk did not see."""
    if s is None:
        return [f"initializer {e['index']}: its address is not in this file: not seen"] if supported else []
    notes = _unproven_notes(e, s, image)
    if s.interposed:
        notes.append(f"initializer {e['index']} ({e['symbol']}): follows this file's own definition(s) of exported "
                     "name(s) it reaches through its GOT or a relocated data word (a vtable's slot, a function "
                     "pointer, its own array slot), which an object loaded before it may interpose (judged "
                     "by a program's load, --deps): " + ", ".join(sorted(s.interposed)[:3]))
    if s.indirect:
        notes.append(f"initializer {e['index']} ({e['symbol']}): {s.indirect} indirect call(s) not followed")
    if s.strange:
        notes.append(f"initializer {e['index']} ({e['symbol']}): {s.strange} call(s) to an address no function "
                     "starts at not followed")
    if s.depth_limited:
        notes.append(f"initializer {e['index']} ({e['symbol']}): {s.depth_limited} call(s) past depth "
                     f"{depth} not followed")
    if s.repeated:
        notes.append(f"initializer {e['index']} ({e['symbol']}): {s.repeated} registration site(s) reached again "
                     "(a helper called more than once, a call in a loop): each listed once, each call registers")
    if s.unresolved:
        notes.append(f"initializer {e['index']} ({e['symbol']}): {s.unresolved} registration(s) whose "
                     "destructor was not resolved")
    return notes


def _registration_key(r: Registration, initializer: int, guarded: Callable[[int], bool]) -> tuple:
    """What makes two registrations one. A guarded one runs once: one entry per destructor and object (its
    unit's own helper, ``__tcf_N`` with no object, is one per guard: each unit that inlines the
    initialization has its own copy), however many initializers reach it; so does a destructor registered on
    an object that has a guard variable (an inline or template variable, whose guarded initialization is
    inlined into each unit that uses it, the guard unnamed in a stripped file: any object there), and a
    thread_local's (its TLS guard runs it once per thread), per call instruction (or ordinal in an inlined
    copy of its initialization). Any other is one per call instruction and initializer: a helper's
    ``atexit(fn)`` called by two initializers registers twice (one initializer reaching it again is counted in
    Summary.repeated)."""
    if r.kind == "thread_atexit":  # whatever guard the initializer reaching it runs under
        return (r.site, r.at, r.kind, r.dtor, r.obj)
    if r.guard is not None:
        return (r.kind, r.dtor, r.obj) if r.obj else (r.kind, "guard", r.guard)  # no object: its helper
    if isinstance(r.obj, int) and r.obj and r.dtor is not None and guarded(r.obj):
        return (r.kind, r.dtor, r.obj)
    return (initializer, r.site, r.at, r.kind, r.dtor, r.obj)


def _registrations(image: Image | None, entries: list[dict], summaries: list) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if image is None:
        return out
    once: set[tuple] = set()

    def guarded(obj: int) -> bool:
        name = image.symbol_at(obj) if not image.stripped else None
        return image.stripped or bool(name and image.guarded(name))

    for e, s in zip(entries, summaries):
        if s is None:
            continue
        for r in s.registrations:
            assert isinstance(r, Registration)
            if isinstance(r.dtor, Ptr) or isinstance(r.obj, Ptr):  # the initializer's own argument: not known
                r = r._replace(dtor=None if isinstance(r.dtor, Ptr) else r.dtor,
                               obj=None if isinstance(r.obj, Ptr) else r.obj)
            key = _registration_key(r, e["index"], guarded)
            if key in once:
                continue
            once.add(key)
            obj = _obj(image, r.obj)
            guard_name = image.symbol_at(r.guard) if r.guard is not None else None
            local = bool((obj and (obj["symbol"] or "").startswith("_ZZ"))
                         or (guard_name and guard_name.startswith("_ZGVZ")))
            out.append({"kind": r.kind, "dtor": _obj(image, r.dtor) or
                        {"address": None, "symbol": None, "demangled": None, "section": None},
                        "object": obj, "initializer": e["index"], "function_local_static": local})
    return out


def _siof(image: Image | None, walker: Walker | None, entries: list[dict], summaries: list, listing: dict,
          lto: list, changed: list[list[str]]) -> list[str]:
    """Adds each entry's ``analysis`` and the file's ``findings``; returns the notes of what it could not prove."""
    notes: list[str] = []
    for e in listing["init"]:
        e["analysis"] = None  # the toolchain's own entries and DT_INIT: not analysed (replaced below otherwise)
    findings: list[dict[str, Any]] = []
    constructor = constructors(summaries)
    guards = _guards_run(image, summaries)
    # Objects some initializer builds for sure (a constructor call, a registered destructor): a reader whose
    # callee merely stores through their address (a registrar's insert) does not build them.
    strong = {o for s in summaries if s is not None for o, sure in s.constructs.items() if sure}
    sure = frozenset(strong)
    builders, inserters = _builders(summaries, "constructs"), _builders(summaries, "call_stores", "this_builds")
    handers = _builders(summaries, "escaped")  # they hand the object to another module's function
    # they store where the walk cannot see: through a pointer not known, or in code not followed (an indirect
    # call, a call past --depth or to no function start, a recursive call)
    blind = {entries[pos]["address"]: entries[pos] for pos, s in enumerate(summaries) if s is not None
             and (any(_may_point_here(w) for w in s.foreign_written) or s.indirect or s.depth_limited
                  or s.strange or s.cut)}
    for pos, (e, s) in enumerate(zip(entries, summaries)):
        if s is None or image is None:
            e["analysis"] = {"constructs": [], "reads": [], "complete": False,
                             "unanalyzed": {"indirect_calls": 0, "depth_limited": 0}}
            continue
        reads = []
        unseen_guard: list[str] = []
        skipped: list[str] = []
        built_elsewhere = strong | _others(builders, s.reads, entries, pos)
        for o, via in s.reads.items():
            if o in s.via_once and _ran_once(walker, s.via_once[o], entries[:pos], summaries[:pos]):
                continue  # read only in a thread_local's initialization an earlier initializer ran
            name = image.symbol_at(o) or ""
            c, status = read_status(o, name, pos, s, constructor, guards, entries, built_elsewhere, sure)
            if status == "constant" and image.guarded(name):
                status = "guarded"
                unseen_guard.append(name)  # no initializer here runs its guarded initialization: not proven
            if status == "function-local-static" and o in s.unguarded:
                skipped.append(name)  # used on a path that skips its guard: perhaps unbuilt
            reads.append({"object": _obj(image, o), "status": status})
            if status in VERDICTS and c is not None:  # a verdict always names its constructor
                findings.append(_finding(image, status, o, e, entries[c], s.early.get(o, via)))
        unsafe = _guard_notes(e, unseen_guard, skipped, notes)
        later = {o for o in s.reads if any(p > pos and entries[p]["address"] != e["address"]
                                           for p in builders.get(o, ()))}
        elsewhere = (_others(inserters, s.reads, entries, pos), _others(handers, s.reads, entries, pos), later)
        shared = _written_elsewhere(image, e, s, reads, elsewhere, notes)
        shared = _blind_builds(e, reads, [w for a, w in blind.items() if a != e["address"]], notes) or shared
        built = [o for o in s.constructs if constructor.get(o) == pos or s.constructs[o]]
        built += [o for o in s.call_stores if constructor.get(o) == pos and o not in s.constructs]
        e["analysis"] = {
            "constructs": [_obj(image, o) for o in built],
            "reads": reads,
            "complete": _proven(s) and not image.stripped and e not in lto and not unsafe and not shared
            and not changed[pos],
            "unanalyzed": {"indirect_calls": s.indirect, "depth_limited": s.depth_limited},
            "other_module_reads": sorted(s.foreign),  # judged by the whole load (inits.crossload, --deps)
            "other_module_calls": sorted(s.foreign_calls | s.held_calls),
            "other_module_writes": sorted(s.foreign_written),  # the load follows only words nothing wrote
            "own_interposable": sorted(s.interposed),  # the load says which object's definition they bind to
        }
    listing["findings"] = findings
    return notes


def _guard_notes(e: dict[str, Any], unseen_guard: list[str], skipped: list[str], notes: list[str]) -> bool:
    """Notes on reads a guard does not prove safe: of inline or template variables whose guarded
    initialization no initializer here runs, and of function-local statics used on a path that skips their
    guard's check (inits.localstatic); whether there is any."""
    if unseen_guard:
        notes.append(f"initializer {e['index']} ({e['symbol']}): reads inline or template variable(s) whose "
                     "guarded initialization no initializer of this file runs: " + ", ".join(unseen_guard[:3]))
    if skipped:
        notes.append(f"initializer {e['index']} ({e['symbol']}): uses function-local static(s) on a path that "
                     "passes no check of their guard (a goto or case label past the declaration: perhaps "
                     "unbuilt; or past a call of another module's function that never returns, not known as "
                     "one here): " + ", ".join(skipped[:3]))
    return bool(unseen_guard or skipped)


def _written_elsewhere(image: Image, e: dict[str, Any], s: Summary, reads: list[dict[str, Any]],
                       elsewhere: tuple[set[int], set[int], set[int]], notes: list[str]) -> bool:
    """Whether a read of the entry is not judged because another initializer may build its object in a way not
    told apart from an insert (a function storing through the address both pass), or from a store into one
    member (plain stores by this one and by a later one), or not seen at all (another module's function it is
    handed to); the notes say which (``elsewhere``: the objects other initializers pass to a function that
    stores through them, those they hand to another module's function, and those later ones store into)."""
    unjudged = False
    for names, why in ((_inserted_too(s, reads, elsewhere[0]),
                        "passes object(s) to a function that stores through their address, as another initializer "
                        "does (a registrar's insert or a construction: not told apart, so the order of the two is "
                        "not judged)"),
                       (_stored_too(s, reads, elsewhere[2]),
                        "stores into object(s) that a later initializer stores into too (a store into one member "
                        "or the build, not told apart: its reads after its own stores are not judged)"),
                       (_handed_on(image, reads, elsewhere[1]),
                        "reads object(s) that nothing here builds and that another initializer hands to another "
                        "module's function, which may store into them (snprintf(buf, ...): a build not seen)")):
        if names:
            notes.append(f"initializer {e['index']} ({e['symbol']}): {why}: " + ", ".join(names[:3]))
            unjudged = True
    return unjudged


def _may_point_here(written: str) -> bool:
    """Whether a store an initializer's walk lists (``Summary.foreign_written``) may land in this file's objects:
    through a pointer not known, one loaded from another module's word or one another module's function
    returned (any of those may hold an address of this file)."""
    return written == UNKNOWN_STORE or held_by(written) is not None or returned_by(written) is not None


def _blind_builds(e: dict[str, Any], reads: list[dict[str, Any]], writers: list[dict[str, Any]],
                  notes: list[str]) -> bool:
    """Whether the entry reads an object as ``constant`` (nothing here builds it) while another initializer
    (``writers``) stores through a pointer the walk does not know, which may build it; noted."""
    constant = [r["object"]["symbol"] or f"{r['object']['address']:#x}" for r in reads if r["status"] == "constant"]
    if not constant or not writers:
        return False
    notes.append(f"initializer {e['index']} ({e['symbol']}): reads object(s) nothing here builds, while "
                 f"initializer(s) {', '.join(str(w['index']) for w in writers[:3])} store through a pointer not "
                 "known or run code not followed, which may build them: " + ", ".join(constant[:3]))
    return True


def _handed_on(image: Image, reads: list[dict[str, Any]], elsewhere: set[int]) -> list[str]:
    """The objects read as ``constant`` (nothing here builds them) that another initializer hands to another
    module's function (``elsewhere``), whose stores into them the walk does not see."""
    return [image.symbol_at(r["object"]["address"]) or f"{r['object']['address']:#x}" for r in reads
            if r["status"] == "constant" and r["object"]["address"] in elsewhere]


def _inserted_too(s: Summary, reads: list[dict[str, Any]], elsewhere: set[int]) -> list[str]:
    """The objects read as the initializer's own only because a callee stores through the address it passes
    (``init(&g)``), which another initializer's callee does too (``elsewhere``): either may be the build, the
    other an insert, so the order of the two is not proven."""
    out = []
    for r in reads:
        o = r["object"]["address"]
        if r["status"] == "own" and o in elsewhere and o in s.call_stores and o not in s.constructs:
            out.append(r["object"]["symbol"] or f"{o:#x}")
    return out


def _stored_too(s: Summary, reads: list[dict[str, Any]], later: set[int]) -> list[str]:
    """The objects read as the initializer's own only because it stores into them (no constructor call), which
    an initializer run later stores into too (``later``): that one may be the build (an inlined constructor),
    this one a store into one member, whose other members it then reads unbuilt."""
    return [r["object"]["symbol"] or f"{r['object']['address']:#x}" for r in reads
            if r["status"] == "own" and r["object"]["address"] in later
            and s.constructs.get(r["object"]["address"]) is False]


def _builders(summaries: list, *fields: str) -> dict[int, set[int]]:
    """object -> the positions of the initializers whose summary lists it in one of ``fields``
    (``constructs``: they build it, by a constructor call or by a store; ``call_stores``, ``this_builds``: a
    callee stores through its address, building it or inserting into it)."""
    out: dict[int, set[int]] = {}
    for pos, s in enumerate(summaries):
        for o in (o for f in fields for o in getattr(s, f)) if s is not None else ():
            out.setdefault(o, set()).add(pos)
    return out


def _others(by: dict[int, set[int]], objects: Iterable[int], entries: list[dict], pos: int) -> set[int]:
    """Those of ``objects`` that ``by`` lists for an initializer other than the one at ``pos`` (another
    function: an entry listed twice is one initializer)."""
    mine = entries[pos]["address"]
    return {o for o in objects if any(entries[p]["address"] != mine for p in by.get(o, ()))}


def _ran_once(walker: Walker | None, functions: frozenset, earlier: list[dict], summaries: list) -> bool:
    """Whether the earlier initializers ran each of these thread_local initializations for sure: one of them
    runs it on every path to its return (inits.tlsonce); reaching it on some path proves nothing. Asked only of
    those whose walk reached it or whose own code sets its guard (the others cannot have run it surely)."""
    if walker is None:
        return False
    runs = walker.once_runs
    starts = [(e["address"], s) for e, s in zip(earlier, summaries) if e["address"] is not None and s is not None]
    return all(any((f in s.once or runs.sets_guard(a, f)) and runs.runs(a, f) for a, s in starts)
               for f in functions)


def _initial_changed(image: Image | None, summaries: list, constructor: dict[int, int]) -> list[list[str]]:
    """Per entry, the writable pointer globals whose load-time value its walk followed and that may no longer
    hold it when it runs (empty: proven to hold it). A global holds its load-time value when no other module
    can name it (not exported), no initializer up to this one stores into it or hands its address to another
    module's function, and every initializer before this one is proven complete (none stores through a
    pointer the walk does not know, or calls what it does not see)."""
    out: list[list[str]] = [[] for _ in summaries]
    if image is None:
        return out
    exported = image.exported()
    escaped: set[int] = set()
    sound = True  # every initializer before this one proven
    for pos, s in enumerate(summaries):
        if s is None:
            sound = False
            continue
        escaped |= s.escaped
        for o in sorted(s.initial):
            name = image.symbol_at(o) or f"{o:#x}"
            c = constructor.get(o)
            if not sound or (c is not None and c <= pos) or o in escaped or name in exported:
                out[pos].append(name)
        sound = sound and _proven(s) and not out[pos]
    return out


def _loaded_then_stored(image: Image | None, s: Summary | None) -> list[str]:
    """The objects an initializer loads before it first stores into them, with no constructor call: its own
    inlined constructor run after the read (a read before construction) or a flag checked before a build, a
    read-modify-write (safe) -- not told apart, so not proven (a constructor call makes it a finding)."""
    if image is None or s is None:
        return []
    return ["loaded before stored: " + (image.symbol_at(o) or f"{o:#x}")
            for o, (load, _via) in s.touched.items() if load and s.constructs.get(o) is False]


def _called_back(image: Image, entries: list[dict], summaries: list) -> list[tuple[int, str]]:
    """The entries another module may run code of this file for that their walks do not follow, with their
    notes: an entry that hands another module's function an object into which an earlier initializer stored a
    callback or vptr (it may call them now, or keep the object); and one that calls into another module, or
    traps, after an earlier one left a callback or vptr with another module (a signal or atfork handler, a
    printf specifier, a registry's entry: see Summary.hands_on, and such an object handed on); and every entry
    after one that started a thread (its code runs alongside). An entry not walked may have done any of these.
    Returns (position, note) pairs."""
    out = []
    left: dict[str, Any] | None = None
    thread: dict[str, Any] | None = None  # the first initializer that started a thread
    stored: dict[int, dict[str, Any]] = {}  # object -> the first earlier initializer storing a callback or vptr into it
    for pos, (e, s) in enumerate(zip(entries, summaries)):
        # handed on: its address, or (read, then a call into another module) a word loaded from it
        handed = sorted(o for o in stored if o in s.escaped or s.calls_out and o in s.reads) if s is not None else []
        if handed:
            by = stored[handed[0]]
            out.append((pos, f"initializer {e['index']} ({e['symbol']}): hands another module (its function, or "
                             f"memory it reads) object(s) into which initializer {by['index']} ({by['symbol']}) "
                             "stored a callback or vptr (or memory it allocated holding one), which it may call: "
                             "not followed: "
                             + ", ".join(image.symbol_at(o) or f"{o:#x}" for o in handed[:3])))
        if thread is not None:
            out.append((pos, f"initializer {e['index']} ({e['symbol']}): runs while the thread initializer "
                             f"{thread['index']} ({thread['symbol']}) started runs code not followed"))
        elif left is not None and (s is None or s.calls_out or s.traps):
            how = "calls into another module" if s is None or s.calls_out else "traps (a signal may be raised)"
            out.append((pos, f"initializer {e['index']} ({e['symbol']}): {how} after initializer {left['index']} "
                             f"({left['symbol']}) left a callback with another module, which may call it there: "
                             "not followed"))
        if left is None and (s is None or s.hands_on or handed):
            left = e
        if thread is None and (s is None or s.starts_thread):
            thread = e
        for o in s.stashed_objects if s is not None else ():
            stored.setdefault(o, e)
    return out


def _changed_note(e: dict[str, Any], names: list[str]) -> list[str]:
    """The note on what keeps an entry's reads unproven although every access was resolved."""
    pointers = [n for n in names if not n.startswith("loaded before stored: ")]
    loaded = [n.removeprefix("loaded before stored: ") for n in names if n not in pointers]
    notes = []
    if pointers:
        notes.append(f"initializer {e['index']} ({e['symbol']}): follows the load-time value of writable pointer "
                     "global(s) that an initializer or another module may have changed before: "
                     + ", ".join(pointers[:3]))
    if loaded:
        notes.append(f"initializer {e['index']} ({e['symbol']}): loads object(s) before it first stores into "
                     "them (an inlined constructor run after the read, or a flag checked before a build: not "
                     "told apart): " + ", ".join(loaded[:3]))
    return notes


def _guards_run(image: Image | None, summaries: list) -> dict[str, int]:
    """guard variable name -> position of the first initializer that runs its guarded initialization."""
    out: dict[str, int] = {}
    if image is None:
        return out
    for pos, s in enumerate(summaries):
        for g in s.guards if s is not None else ():
            name = image.symbol_at(g)
            if name:
                out.setdefault(name, pos)
    return out


def _finding(image: Image, verdict: str, o: int, reader: dict, ctor: dict, via: tuple) -> dict[str, Any]:
    return {"verdict": verdict, "object": _obj(image, o), "reader": _who(reader), "constructor": _who(ctor),
            "via": [image.function_name(a) or f"{a:#x}" for a in via]}


def _who(e: dict[str, Any]) -> dict[str, Any]:
    return {"index": e["index"], "symbol": e["symbol"], "source": e["source"]}


def walk_functions(path: str, addresses: list[int], depth: int) -> dict[int, tuple[set[int], int | None, bool,
                                                                                 set[int] | None, set[str]]]:
    """Per function of the file at ``path`` (its link-time address): the objects its walk reads, the object
    whose address it returns (a getter's), whether the walk is proven complete (another module's
    initializer calls it: inits.crossload), the objects of this file it may write (see _written; None: not
    known) and the other modules' functions it calls."""
    from capstone import CsError

    from elfpatch.fs.source import Source

    with Source(path) as src:
        elf = ElfFile(src.data, path)
        if elf.e_machine not in SUPPORTED_MACHINES:
            return {}
        image = Image(elf)
        budget = Budget()
        walker = _walker(image, budget, (ConstantPointers(elf), InitialPointers(elf)), set())
        try:
            summaries = {a: walker.walk(a, (), depth) for a in addresses}
        except CsError as exc:
            raise ParseError(f"disassembly failed: {exc}", path) from None
        returned = {a: walker.result(a, ()) for a in addresses}
        return {a: (_judged_reads(image, s), _start(image, returned[a]),
                    _proven(s) and not image.stripped and not budget.cut and not s.initial
                    and not walker.dis.unsettled, _written(s, returned[a]), set(s.foreign_calls))
                for a, s in summaries.items()}


def _written(s: Summary, returned: Value | None) -> set[int] | None:
    """The objects of this file a walk stores into, has a callee store into, or hands to another module's
    function (which may store into it); None when it stores into an object it names by a symbol (one its GOT
    holds: it may be one of this file's own), or returns such an address (its caller may store through it)."""
    if s.foreign_written or isinstance(returned, str):
        return None
    return set(s.constructs) | set(s.call_stores) | set(s.escaped) | set(s.guarded_builds) | set(s.this_builds)


def _start(image: Image, value: Value | None) -> int | None:
    """The start of the object of this file an address lies in (None: not an address of one; a stripped file's
    object without a symbol is its exact address, judged as _judged_reads says)."""
    a = address_of(value)  # Within an object: its start
    return image.object_start(a) if a is not None else None


def _judged_reads(image: Image, s: Summary) -> set[int]:
    """The objects a walk of a function another module calls reads, by which that module's initializer is
    judged: in a stripped file also those without a symbol, but a guard or what is built under one (a
    function-local static, an inline variable: built on first use, perhaps by this very walk). The judge keeps
    only those the file's own initializers build (inits.crossload), which their walks tell from guards."""
    if not image.stripped:
        return set(s.reads)
    return set(s.reads) - set(s.guards) - set(s.guarded_builds)


def analyze_path(path: str, listing: dict[str, Any], depth: int = DEFAULT_DEPTH, dtors: bool = True,
                 siof: bool = True, before: frozenset[str] | None = None,
                 loaded: frozenset[str] | None = None, imported: frozenset[str] | None = None) -> None:
    """analyze() for the file at ``path`` (``listing`` is its list_initializers() result)."""
    from capstone import CsError

    from elfpatch.fs.source import Source

    with Source(path) as src:
        try:
            analyze(ElfFile(src.data, path), listing, depth, dtors, siof, before, loaded, imported)
        except CsError as exc:  # the disassembler refused the bytes: a bad file, said in one line
            raise ParseError(f"disassembly failed: {exc}", path) from None
