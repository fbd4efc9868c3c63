"""`inits --dtors/--siof` for one file: exit-time destructors in registration order, what each initializer
constructs and reads, and the order verdicts.

A read of object O by initializer R is judged against O's constructor C, the first initializer (in this
file's run order) that calls a constructor on O or registers O's destructor, else the first that stores into
it (a constant-initialized global that an initializer overwrites):
``before-construction`` when R runs before C; ``order-dependent`` when R runs after C but only link order
decides it (same priority); ``priority-ordered`` when priorities fix it. Function-local statics, guarded
(inline and template) variables, objects R itself constructs and objects no initializer touches are safe.
"""
from __future__ import annotations

import re
from typing import Any

from elfpatch.elffile import ElfFile
from elfpatch.errors import ParseError
from elfpatch.initscan.budget import Budget, few_collections
from elfpatch.initscan.constptr import ConstantPointers
from elfpatch.initscan.disasm import SUPPORTED_MACHINES, Disassembler, Value
from elfpatch.initscan.image import Image
from elfpatch.initscan.walk import Registration, Summary, Walker
from elfpatch.symbols import demangle

DEFAULT_DEPTH = 3
VERDICTS = ("before-construction", "order-dependent")
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


@few_collections
def analyze(elf: ElfFile, listing: dict[str, Any], depth: int = DEFAULT_DEPTH, dtors: bool = True,
            siof: bool = True, before: frozenset[str] | None = None) -> None:
    """Adds ``exit_time_destructors`` (dtors), per-entry ``analysis`` and ``findings`` (siof) and
    ``analysis_notes`` to ``listing`` (one file's ``inits`` listing), in place. ``before`` (``--deps``): the
    symbols the objects initialized before this one define; reads of those are ordered by the load."""
    entries = [e for e in listing["init"] if not e["toolchain"] and e["kind"] != "init"]
    notes: list[str] = []
    supported = elf.e_machine in SUPPORTED_MACHINES
    if not supported:
        notes.append(f"machine {elf.e_machine} is not disassembled (x86-64 and AArch64 are): nothing seen")
    image = Image(elf) if supported else None
    if image is not None and image.stripped:
        notes.append("no .symtab (stripped): functions are known by their exported names and .eh_frame extents, "
                     "data objects mostly not at all")
    budget = Budget()
    walker = _walker(elf, image, budget) if image is not None else None
    summaries, cut_from = _walk_all(walker, entries, depth)
    summaries = [_ordered(s, before) for s in summaries]
    lto = [e for e in entries if e["symbol"] and _LTO_MERGED.search(e["symbol"])]
    if lto:
        notes.append("LTO-merged initializer(s): several translation units in one function, so order between "
                     "them is not seen: " + ", ".join(e["symbol"] for e in lto))
    if dtors:
        listing["exit_time_destructors"] = _registrations(image, entries, summaries)
    if siof:
        notes += _siof(image, walker, entries, summaries, listing, lto)
    unsettled = walker.dis.unsettled if walker is not None else []
    if unsettled:  # never expected (see Disassembler.sweep); if it happens, the result must not claim complete
        assert image is not None  # the walker that found them reads the image
        notes.append(f"{len(unsettled)} function(s) whose loops were cut short, what they store may be missed: "
                     + ", ".join(image.function_name(a) or f"{a:#x}" for a in unsettled[:5]))
        for e in entries:
            if e.get("analysis"):
                e["analysis"]["complete"] = False
    complete = supported and not notes and not (image and image.stripped) and not lto and not unsettled \
        and not budget.cut and all(s is not None and _proven(s) and s.unresolved == 0 for s in summaries)
    notes += _limits(image, budget, entries[cut_from:])  # after: the image's facts alone leave nothing unproven
    for e, s in zip(entries, summaries):
        notes += _unseen(e, s, depth, supported, image)
    listing["analysis_complete"] = complete
    listing["analysis_notes"] = notes


def _walker(elf: ElfFile, image: Image, budget: Budget) -> Walker:
    """The walker, whose loads through the GOT or constant data (RELRO) yield the address the word holds;
    its decoding bounded by ``budget`` and by the image's function extents."""
    consts = ConstantPointers(elf)

    def pointer(addr: int) -> Value | None:
        value = image.got(addr)
        return value if value is not None else consts.word(addr)

    return Walker(image, Disassembler(elf.e_machine, image.read_code, pointer, image.object_start, budget,
                                      image.extent_known), pointer)


def _limits(image: Image | None, budget: Budget, cut: list[dict]) -> list[str]:
    """The notes on what the image's facts and the budget left unseen; the entries in ``cut`` (walked after a
    function was cut short: they may reuse what it left unseen) are marked incomplete."""
    if image is None:
        return []
    for e in cut:
        if e.get("analysis"):
            e["analysis"]["complete"] = False
    return image.notes() + budget.notes(lambda a: image.function_name(a) or f"{a:#x}")


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
    return s.indirect == 0 and s.depth_limited == 0 and s.unproven == 0 and not s.arg_derefs and not s.strange


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
    if s.indirect:
        notes.append(f"initializer {e['index']} ({e['symbol']}): {s.indirect} indirect call(s) not followed")
    if s.strange:
        notes.append(f"initializer {e['index']} ({e['symbol']}): {s.strange} call(s) to an address no function "
                     "starts at not followed")
    if s.depth_limited:
        notes.append(f"initializer {e['index']} ({e['symbol']}): {s.depth_limited} call(s) past depth "
                     f"{depth} not followed")
    if s.unresolved:
        notes.append(f"initializer {e['index']} ({e['symbol']}): {s.unresolved} registration(s) whose "
                     "destructor was not resolved")
    return notes


def _registration_key(r: Registration) -> tuple:
    """What makes two registrations one. A destructor registered on an object of this file runs once per
    object (a second registration would destroy it twice): one entry, however many initializers reach it (a
    guarded variable's initialization inlined into each unit that uses it, its guard unnamed in a stripped
    file). Any other registration is one per site: a site reached again (a shared helper) is the same call."""
    if r.guard is not None or (isinstance(r.obj, int) and r.obj and r.dtor is not None):
        return (r.kind, r.dtor, r.obj)
    return (r.site, r.kind, r.dtor, r.obj)


def _registrations(image: Image | None, entries: list[dict], summaries: list) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if image is None:
        return out
    once: set[tuple] = set()
    for e, s in zip(entries, summaries):
        if s is None:
            continue
        for r in s.registrations:
            assert isinstance(r, Registration)
            key = _registration_key(r)
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
          lto: list) -> list[str]:
    """Adds each entry's ``analysis`` and the file's ``findings``; returns the notes of what it could not prove."""
    notes: list[str] = []
    for e in listing["init"]:
        e["analysis"] = None  # the toolchain's own entries and DT_INIT: not analysed (replaced below otherwise)
    findings: list[dict[str, Any]] = []
    constructor = _constructors(summaries)
    guards = _guards_run(image, summaries)
    # Objects some initializer builds for sure (a constructor call, a registered destructor): a reader whose
    # callee merely stores through their address (a registrar's insert) does not build them.
    strong = {o for s in summaries if s is not None for o, sure in s.constructs.items() if sure}
    for pos, (e, s) in enumerate(zip(entries, summaries)):
        if s is None or image is None:
            e["analysis"] = {"constructs": [], "reads": [], "complete": False,
                             "unanalyzed": {"indirect_calls": 0, "depth_limited": 0}}
            continue
        reads = []
        unseen_guard = []
        for o, via in s.reads.items():
            name = image.symbol_at(o) or ""
            c, status = _judge(o, name, pos, s, constructor, guards, entries, strong)
            if status == "constant" and image.guarded(name):
                status = "guarded"
                unseen_guard.append(name)  # no initializer here runs its guarded initialization: not proven
            reads.append({"object": _obj(image, o), "status": status})
            if status in VERDICTS and c is not None:  # a verdict always names its constructor
                findings.append(_finding(image, status, o, e, entries[c], s.early.get(o, via)))
        if unseen_guard:
            notes.append(
                f"initializer {e['index']} ({e['symbol']}): reads inline or template variable(s) whose guarded "
                "initialization no initializer of this file runs: " + ", ".join(unseen_guard[:3]))
        built = [o for o in s.constructs if constructor.get(o) == pos or s.constructs[o]]
        built += [o for o in s.call_stores if constructor.get(o) == pos and o not in s.constructs]
        e["analysis"] = {
            "constructs": [_obj(image, o) for o in built],
            "reads": reads,
            "complete": _proven(s) and not image.stripped and e not in lto and not unseen_guard,
            "unanalyzed": {"indirect_calls": s.indirect, "depth_limited": s.depth_limited},
        }
    listing["findings"] = findings
    return notes


def _constructors(summaries: list) -> dict[int, int]:
    """object -> position (in entries) of its constructor: the first initializer that constructs it strongly
    (a constructor call or a registered destructor), else the first that stores into it, else the first that
    passes its address to a function that stores through it (``init(&g)``)."""
    constructor: dict[int, int] = {}
    for pos, s in enumerate(summaries):
        for o, strong in s.constructs.items() if s is not None else ():
            if strong and o not in constructor:
                constructor[o] = pos
    for pos, s in enumerate(summaries):
        for o in s.constructs if s is not None else ():
            constructor.setdefault(o, pos)
    for pos, s in enumerate(summaries):  # else the first whose callee stores into it through its address
        for o in sorted(s.call_stores) if s is not None else ():
            constructor.setdefault(o, pos)
    return constructor


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


def _judge(o: int, name: str, pos: int, s: Summary, constructor: dict[int, int], guards: dict[str, int],
           entries: list[dict], strong: set[int]) -> tuple[int | None, str]:
    """(constructor position, status) of a read of ``o`` by the initializer at ``pos``."""
    c = constructor.get(o)
    if name.startswith("_ZZ"):
        return c, "function-local-static"
    if c == pos and o in s.early:
        return c, "before-construction"  # read, then built, by the same initializer (a unit read before it)
    if o in s.constructs or (o in s.call_stores and o not in strong):
        return c, "own"  # a shared helper that builds it on first use, whichever initializer runs first
    guard = "_ZGV" + (name[2:] if name.startswith("_Z") else f"{len(name.encode())}{name}")
    if guard in guards:  # an inline or template variable: safe once its guarded initialization has run
        g = guards[guard]
        return (g, "guarded") if g <= pos else (g, _order(pos, g, entries))
    if c is None:
        return c, "constant"
    if c == pos:
        return c, "own"
    return c, _order(pos, c, entries)


def _order(pos: int, c: int, entries: list[dict]) -> str:
    reader, ctor = entries[pos], entries[c]
    if entries[pos]["address"] == entries[c]["address"]:
        return "own"
    if pos < c:
        return "before-construction"
    if (reader["priority"] or 65535) != (ctor["priority"] or 65535):
        return "priority-ordered"
    return "order-dependent"


def analyze_path(path: str, listing: dict[str, Any], depth: int = DEFAULT_DEPTH, dtors: bool = True,
                 siof: bool = True, before: frozenset[str] | None = None) -> None:
    """analyze() for the file at ``path`` (``listing`` is its list_initializers() result)."""
    from capstone import CsError

    from elfpatch.source import Source

    with Source(path) as src:
        try:
            analyze(ElfFile(src.data, path), listing, depth, dtors, siof, before)
        except CsError as exc:  # the disassembler refused the bytes: a bad file, said in one line
            raise ParseError(f"disassembly failed: {exc}", path) from None
