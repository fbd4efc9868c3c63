"""Reads of another module's objects, judged by the whole load (`inits --siof --deps`).

A read in module M of a data object M does not define goes through M's GOT to the definition the loader's
lookup finds: the first object of the load's search order (the root, then its dependencies breadth-first)
that defines the name in ``.dynsym``. A program's copy of a library's object (``R_*_COPY``) holds the bytes
that library's initializers build, so the lookup passes over the copy to the library that defines it. The
defining module D is then placed in the load's initialization order: D initialized before M -> the read is
ordered (no finding); D after M (the program, whose initializers run last; a library that is not M's
dependency and sorts after it) and one of D's initializers constructs the object -> ``before-construction``;
D after M and nothing in D constructs it -> constant data when D's analysis is complete, else unjudged (a
note). A name no object of the load defines is a weak reference the loader leaves null: nothing to read.
A call from M's initializer into D's function (a getter D exports) is judged the same way for each object of D
that function's walk reads or whose address it returns (what M then loads through); a walk that is not proven
complete is a note.
"""
from __future__ import annotations

from typing import Any, Callable

from elfpatch.elf.const import (
    SHN_UNDEF,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_NOTYPE,
    STT_OBJECT,
)
from elfpatch.elf.file import ElfFile
from elfpatch.elf.relocs import copy_targets
from elfpatch.errors import ElfPatchError
from elfpatch.fs.source import Source
from elfpatch.inits.values import held_by, returned_by
from elfpatch.inits.walk import UNKNOWN_STORE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from elfpatch.elf.loadorder import Load

# Symbols the linker defines in each object it links (section bounds, its own _init/_fini): no other object's
# code reaches through them.
_MARKERS = frozenset({"_end", "_edata", "__bss_start", "_init", "_fini", "__data_start", "data_start",
                      "_IO_stdin_used"})


class Symbols:
    """One object's dynamic symbols: those it defines (name -> address), the data objects and functions it
    imports, and the names of what its copy relocations hold for another module."""

    def __init__(self, path: str) -> None:
        self.defined: dict[str, int] = {}
        self.imported: set[str] = set()
        self.copies: set[str] = set()
        self.named: set[str] = set()  # every name the object's .dynsym holds, defined or not (what it may bind)
        self.functions: set[str] = set()  # the functions it defines
        with Source(path) as src:
            elf = ElfFile(src.data, path)
            tables = [t for t in elf.symbol_tables() if t.name == ".dynsym"]
            for t in tables:
                for sym in t:
                    if not sym.name:
                        continue
                    self.named.add(sym.name)
                    if sym.st_shndx == SHN_UNDEF:
                        if sym.type in (STT_NOTYPE, STT_OBJECT, STT_FUNC):  # a -fPIC reference: no type
                            self.imported.add(sym.name)
                    else:
                        self.defined.setdefault(sym.name, sym.st_value)
                        if sym.type in (STT_FUNC, STT_GNU_IFUNC):
                            self.functions.add(sym.name)
            copied = copy_targets(elf)
            # a copy's aliases too (the program's `environ` where the relocation names `__environ`)
            self.copies = {n for n, a in self.defined.items() if a in copied}


def _definer(name: str, symbols: list[Symbols | None]) -> int | None:
    """The index (in load order) of the object whose definition the loader binds ``name`` to."""
    for i, s in enumerate(symbols):
        if s is not None and name in s.defined and name not in s.copies:
            return i
    return None


def load_symbols(load: Load) -> list[Symbols | None]:
    """Each object's Symbols, in the load's order (None: unreadable)."""
    symbols: list[Symbols | None] = []
    for o in load.objects:
        try:
            symbols.append(Symbols(o.info.path))
        except (ElfPatchError, OSError):
            symbols.append(None)
    return symbols


def cross_reads(load: Load) -> tuple[list[Symbols | None], dict[int, set[str]]]:
    """The objects' symbols (None: unreadable) and, per object M, the data objects it imports from one the
    load initializes after it (the reads the load order does not settle: what needs M's and D's analysis)."""
    symbols = load_symbols(load)
    rank = {obj: n for n, obj in enumerate(load.init_order)}
    wanted: dict[int, set[str]] = {}
    for m, s in enumerate(symbols):
        # what it imports, and what it defines itself but an object before it in the search order interposes
        # (its own GOT slots bind there: the program's get_port for the library's call of its own)
        for name in sorted(s.imported | s.defined.keys()) if s is not None else ():
            d = _definer(name, symbols)
            if d is not None and d != m and rank.get(d, -1) > rank.get(m, -1):  # none: a weak reference left null
                wanted.setdefault(m, set()).add(name)
    return symbols, wanted


# object i, function addresses -> per function (objects its walk reads, the object whose address it returns,
# proven, the objects of i it may write (None: not known), other modules' functions it calls); None: not walked
Walk = Callable[[int, list[int]], "dict[int, tuple[set[int], int | None, bool, set[int] | None, set[str]]] | None"]
_UNWALKED: tuple[set[int], int | None, bool, set[int] | None, set[str]] = (set(), None, False, None, set())


def judge(load: Load, symbols: list[Symbols | None], wanted: dict[int, set[str]],
          listing_of: Callable[[int], dict[str, Any] | None], walk: Walk | None = None) -> tuple[list[dict], list[str]]:
    """The findings (reader in M, object in D) and the notes on reads that could not be judged, for the reads
    and calls ``wanted`` names; ``listing_of(i)``: object i's ``--siof`` listing (None: not analysed);
    ``walk``: what functions of an object read."""
    findings: list[dict] = []
    notes: list[str] = []
    words = HeldWords(load, symbols, wanted, listing_of, walk)
    for m in sorted(wanted):
        reader = listing_of(m)
        for e in _entries(reader):
            own = _interposed(e, wanted[m], symbols, reader)
            for name in [*e["analysis"].get("other_module_reads", []), *(n for n, f in own if not f)]:
                if name in wanted[m] and not name.startswith("_ZZ"):
                    _judge_one(load, symbols, listing_of, m, e, name, findings, notes)
            # a load through what such a call returned is named "<function>()" (values.returned_by): a getter's
            calls = [n for n in e["analysis"].get("other_module_calls", []) if n in wanted[m]]
            calls += [n for n, f in own if f and n not in calls]
            through = {f for n in e["analysis"].get("other_module_reads", []) if (f := returned_by(n)) is not None}
            if calls and walk is not None:
                _judge_calls(load, symbols, listing_of, walk, m, e, (calls, through), findings, notes)
            words.judge(m, e, findings, notes)
    return findings, notes


def _interposed(e: dict, wanted: set[str], symbols: list[Symbols | None],
                reader: dict[str, Any] | None) -> list[tuple[str, bool]]:
    """(name, a function) for each of the entry's own exported names reached through its GOT that the load
    binds to an object initialized after it (``wanted``): judged as that object's function or data."""
    out = []
    # it builds the bound one itself, or its file's guarded initialization did before it
    built = {o["symbol"] for o in e["analysis"].get("constructs", []) if o} | _guarded_here(reader, e)
    for name in e["analysis"].get("own_interposable", []):
        d = _definer(name, symbols) if name in wanted and name not in built else None
        dsyms = symbols[d] if d is not None else None
        if dsyms is not None:
            out.append((name, name in dsyms.functions))
    return out


def _guarded_here(listing: dict[str, Any] | None, e: dict) -> set[str]:
    """The inline or template variables the entry reads ``guarded`` whose guarded initialization an entry of
    its file at or before it runs through the GOT (``own_interposable``): that initialization builds the copy
    the load binds the name to, whichever object's that is (clang's weak inline variables: the first in the
    lookup scope)."""
    guarded = {r["object"]["symbol"] for r in e["analysis"].get("reads", [])
               if r["status"] == "guarded" and r["object"] and r["object"]["symbol"]}
    out: set[str] = set()
    for c in _entries(listing) if guarded else ():
        out |= {o["symbol"] for o in c["analysis"]["constructs"]
                if o and o["symbol"] in guarded and o["symbol"] in c["analysis"].get("own_interposable", [])}
        if (c["kind"], c["index"]) == (e["kind"], e["index"]):
            break
    return out


def _judge_calls(load: Load, symbols: list[Symbols | None], listing_of: Callable[[int], dict[str, Any] | None],
                 walk: Walk, m: int, e: dict, called: tuple[list[str], set[str]], findings: list[dict],
                 notes: list[str]) -> None:
    """An initializer's calls into functions of objects the load initializes later: each object such a
    function reads, or whose address it returns when the initializer accesses memory through the result
    (``called``: the calls, and those whose result it accesses), that the definer's initializers construct is
    read before construction."""
    path = load.objects[m].info.path
    calls, through = called
    for name in calls:
        d = _definer(name, symbols)
        dsyms = symbols[d] if d is not None else None
        assert d is not None and dsyms is not None  # cross_reads wants only names an object defines
        dpath = load.objects[d].info.path
        walked = walk(d, [dsyms.defined[name]])
        read, returned, proven = (walked or {}).get(dsyms.defined[name], _UNWALKED)[:3]
        if returned is not None and name in through:
            read = read | {returned}
        built = {o["address"]: (o, c) for c in _entries(listing_of(d)) for o in c["analysis"]["constructs"]
                 if o and o["address"] is not None}
        for address in sorted(read & built.keys()):
            obj, ctor = built[address]
            findings.append(_finding(dict(obj, file=dpath), e, path, ctor, dpath, [name]))
        if not proven:
            notes.append(f"{path}: initializer {e['index']} calls {name} of {dpath}, initialized later, whose "
                         "walk is not proven complete: what it reads is not judged whole")


class HeldWords:
    """Reads and calls through a pointer word another module's object holds (values.held: a reference global,
    a pointer global, a pointer table's entry, a function pointer D defines and M loads through its GOT), where
    the load initializes D after M. D's initializers have not run when M's do, so the word holds what D's
    relocation put there: a word of D's RELRO for good, a word of D's writable data as long as no third object
    imports its name and M's initializers up to the reading one neither store into it nor run code that may
    (D's code has not run: see _unwritten). A word at an offset not known ("*<symbol>+?") is a note. Its
    target T, when D's initializers construct it, is read before construction (a read through the word), or
    is the function M calls, whose walk in D is judged as a getter's (a call through the word)."""

    def __init__(self, load: Load, symbols: list[Symbols | None], wanted: dict[int, set[str]],
                 listing_of: Callable[[int], dict[str, Any] | None], walk: Walk | None) -> None:
        self.load, self.symbols, self.wanted, self.listing_of, self.walk = load, symbols, wanted, listing_of, walk
        self._pointers: dict[int, tuple[Any, Any] | None] = {}
        self._reach: dict[int, set[int]] = {}
        self._bound: dict[str, int] = {}
        self._busy: set[tuple[str, int, int]] = set()  # the held words _runs is judging (a cycle: not known)
        self._walked: dict[tuple[int, int], tuple[set[int], int | None, bool, set[int] | None, set[str]]] = {}

    def judge(self, m: int, e: dict, findings: list[dict], notes: list[str]) -> None:
        """The findings (and notes) of entry ``e`` of object ``m`` through such words."""
        a = e["analysis"]
        for name, call in [(n, False) for n in a.get("other_module_reads", [])] + \
                          [(n, True) for n in a.get("other_module_calls", [])]:
            word = held_by(name)
            if word is None or word[0] not in self.wanted[m]:
                continue
            d = _definer(word[0], self.symbols)
            assert d is not None  # cross_reads wants only names an object defines
            target, first = self._target(m, d, (word[0], word[1]), e) if word[1] is not None else (None, False)
            if first:
                notes.append(f"{self.load.objects[m].info.path}: initializer {e['index']} calls through a pointer "
                             f"it loads from {word[0]} of {self.load.objects[d].info.path}, initialized later, "
                             "and that call may store into it: only its first load, at its load-time value, is "
                             "judged")
            if target is None:
                why = ("at an offset not known (through a pointer moved along it)" if word[1] is None else
                       "whose value is not known (not relocated to an address of it, or another module names "
                       "it, or code may have stored into it)")
                notes.append(f"{self.load.objects[m].info.path}: initializer {e['index']} loads a pointer from "
                             f"{word[0]} of {self.load.objects[d].info.path}, initialized later, {why}: "
                             "not judged")
            elif call:
                self._called(m, d, e, word[0], target, findings, notes)
            else:
                self._read(m, d, e, word[0], {target}, findings)

    def _target(self, m: int, d: int, word: tuple[str, int], e: dict) -> tuple[int | None, bool]:
        """The address of D the word holds while D's initializers have not run (None: not known so): a writable
        word only where no other object imports its name and no initializer of M up to ``e`` may store into
        it; and whether that holds for its first load alone (``e`` calls through the word itself)."""
        dsyms = self.symbols[d]
        assert dsyms is not None  # _definer found the name in it
        pointers = self._words(d)
        if pointers is None:
            return None, False
        constant, initial = pointers
        at = dsyms.defined[word[0]] + word[1]
        value, first = constant.word(at), False
        if value is None:
            unwritten = self._unwritten(m, d, word, e)
            first = unwritten is None
            if unwritten is not False:  # only D (not run yet) and M, which has not written it, name it
                value = initial.word(at)
        return (value, first) if isinstance(value, int) and value else (None, False)

    def _unwritten(self, m: int, d: int, word: tuple[str, int], e: dict) -> bool | None:
        """True: no object of the load but M and D imports the word's name, and no initializer of M up to ``e``
        stores into it (or hands it to another module's function) nor runs code that may: a call into a
        function of D or of a module that may reach D's code (see _reaches), or of an object the load misses,
        through a pointer word (its target may be D's), through a pointer not known or past --depth, or one it
        hands such a function to, which may call it back (the order of what ``e`` does is not known: ``e``
        counts too), but for calls proven to store nowhere (see _inert). None: so but for calls of ``e``
        through this very word (its first load comes before them). False: otherwise."""
        name = word[0]
        if any(s is not None and name in s.imported for i, s in enumerate(self.symbols) if i not in (m, d)):
            return False
        for x in _entries(self.listing_of(m)):  # in run order, up to e
            a = x["analysis"]
            calls = a.get("other_module_calls", [])
            own = {c for c in calls if x is e and held_by(c) == word}
            inert = {c for c in calls if c not in own and not self._runs(m, d, c, x, word)}
            unseen = a.get("unanalyzed", {})  # calls not followed: through a pointer (each own call is one), or
            if _may_write(name, a.get("other_module_writes", [])) or unseen.get("depth_limited", 1) \
                    or unseen.get("indirect_calls", 1) > len(own) + sum(1 for c in inert if held_by(c)) \
                    or any(c not in own and c not in inert for c in calls) \
                    or any(self._callback(d, w) for w in a.get("other_module_writes", [])):
                return False  # past --depth (what they call is not seen)
            if x is e:
                return None if own else True
        return True

    def _runs(self, m: int, d: int, called: str, x: dict, word: tuple[str, int]) -> bool:
        """Whether entry ``x``'s call of another module's function ``called`` may store into D's ``word``: it
        may run D's code, and is no call of D's function proven to store nowhere (directly, or through D's
        pointer word whose value at ``x`` is known, judged as this one is). In a cycle of such words (two
        calls through D's words in one entry) a word is taken at its load-time value: every call of the cycle
        is checked to reach a function that stores nowhere, so the first of them to run finds every word as
        loaded, and so on."""
        held = held_by(called)
        dsyms = self.symbols[d]
        assert dsyms is not None  # _definer found the word's name in it
        if held is None:
            return self._may_run(d, called) and not (_definer(called, self.symbols) == d
                                                     and self._inert(d, dsyms.defined[called], word[0]))
        if held[1] is None or _definer(held[0], self.symbols) != d:
            return True
        key = (held[0], held[1], x["index"])
        if key in self._busy:
            target = self._load_time(d, (held[0], held[1]))
        else:
            self._busy.add(key)
            try:
                target, _first = self._target(m, d, (held[0], held[1]), x)
            finally:
                self._busy.discard(key)
        return target is None or not self._inert(d, target, word[0])

    def _load_time(self, d: int, word: tuple[str, int]) -> int | None:
        """The address of D the word holds when D's initializers have not run and nothing stored into it."""
        dsyms, pointers = self.symbols[d], self._words(d)
        if dsyms is None or pointers is None:
            return None
        at = dsyms.defined[word[0]] + word[1]
        value = pointers[0].word(at)
        value = pointers[1].word(at) if value is None else value
        return value if isinstance(value, int) and value else None

    def _may_run(self, d: int, called: str) -> bool:
        """Whether a call of the other module's function ``called`` may run code of object ``d``."""
        if held_by(called) is not None:
            return True  # through a pointer word: its target may be anywhere
        by = _definer(called, self.symbols)  # None: a weak reference left null, or a missing object's
        return bool(self.load.missing) if by is None else d in self._reaches(by)

    def _inert(self, d: int, at: int, name: str) -> bool:
        """Whether D's function at ``at`` cannot repoint D's word ``name``: its walk in D is proven complete, it
        stores into no object of D and hands none on (so it neither writes the word nor leaves its address
        where a later store may reach it), does not return the word's address, and calls no other module's
        function (which may run D's code, or call back a function of D it is handed)."""
        dsyms = self.symbols[d]
        if self.walk is None or dsyms is None:
            return False
        if (d, at) not in self._walked:
            self._walked[d, at] = (self.walk(d, [at]) or {}).get(at, _UNWALKED)
        _read, returned, proven, written, calls = self._walked[d, at]
        return proven and written == set() and returned != dsyms.defined[name] and not calls

    def _callback(self, d: int, handed: str) -> bool:
        """Whether ``handed`` (another module's object the reader handed to another module's function) is a
        function that may run code of object ``d`` when that function calls it back."""
        by = _definer(handed, self.symbols)
        s = self.symbols[by] if by is not None else None
        return s is not None and by is not None and handed in s.functions and d in self._reaches(by)

    def _reaches(self, x: int) -> set[int]:
        """The objects whose code a function of object ``x`` may run: x, and those its names bind to (what it
        imports, and what it defines that an earlier object of the search order interposes), transitively
        (the markers the linker defines in every object are no code)."""
        if x not in self._reach:
            if not self._bound:  # name -> the object the loader binds it to (as _definer, for every name)
                for i, s in enumerate(self.symbols):
                    for n in s.defined.keys() - s.copies if s is not None else ():
                        self._bound.setdefault(n, i)
            out, todo = {x}, [x]
            while todo:
                s = self.symbols[todo.pop()]
                if s is None:  # unreadable: its code may run anything
                    out = set(range(len(self.symbols)))
                    break
                new = {self._bound[n] for n in s.named - _MARKERS if n in self._bound} - out
                out |= new
                todo.extend(new)
            self._reach[x] = out
        return self._reach[x]

    def _words(self, d: int) -> tuple[Any, Any] | None:
        if d not in self._pointers:
            from elfpatch.inits.constptr import ConstantPointers, InitialPointers

            path = self.load.objects[d].info.path
            try:
                with Source(path) as src:
                    elf = ElfFile(bytes(src.data), path)
                self._pointers[d] = (ConstantPointers(elf), InitialPointers(elf))
            except (ElfPatchError, OSError):
                self._pointers[d] = None
        return self._pointers[d]

    def _read(self, m: int, d: int, e: dict, name: str, read: set[int], findings: list[dict]) -> None:
        path, dpath = self.load.objects[m].info.path, self.load.objects[d].info.path
        built = _built(self.listing_of(d))
        for address in sorted(read & built.keys()):
            obj, ctor = built[address]
            findings.append(_finding(dict(obj, file=dpath), e, path, ctor, dpath, [name]))

    def _called(self, m: int, d: int, e: dict, name: str, target: int, findings: list[dict],
                notes: list[str]) -> None:
        walked = self.walk(d, [target]) if self.walk is not None else None
        read, _returned, proven = (walked or {}).get(target, _UNWALKED)[:3]
        self._read(m, d, e, name, read, findings)
        if not proven:
            notes.append(f"{self.load.objects[m].info.path}: initializer {e['index']} calls through {name} of "
                         f"{self.load.objects[d].info.path}, initialized later, a function whose walk is not "
                         "proven complete: what it reads is not judged whole")


def _may_write(name: str, writes: list[str]) -> bool:
    """Whether stores an entry made (its ``other_module_writes``) may land in the word of object ``name``: a
    store into it, or through a pointer loaded from another module's word or returned by its function, or not
    known at all, any of which may point at it."""
    return any(w == name or held_by(w) is not None or returned_by(w) or w == UNKNOWN_STORE for w in writes)


def _built(listing: dict[str, Any] | None) -> dict[int, tuple[dict, dict]]:
    """address -> (object, the entry that constructs it) of the objects a listing's initializers build: those
    its entries construct, and those whose destructor an entry registers (a stripped file's objects have no
    name to construct, but its registrations carry their addresses; with --dtors only)."""
    entries = _entries(listing)
    built = {o["address"]: (o, c) for c in entries for o in c["analysis"]["constructs"]
             if o and o["address"] is not None}
    by_index = {c["index"]: c for c in entries}
    for r in (listing or {}).get("exit_time_destructors", []):
        o = r["object"]
        if o and o["address"] is not None and not r["function_local_static"] and r["initializer"] in by_index:
            built.setdefault(o["address"], (o, by_index[r["initializer"]]))
    return built


def _finding(obj: dict, e: dict, path: str, ctor: dict, dpath: str, via: list[str]) -> dict:
    return {"verdict": "before-construction", "object": obj,
            "reader": {"index": e["index"], "symbol": e["symbol"], "source": e["source"], "file": path},
            "constructor": {"index": ctor["index"], "symbol": ctor["symbol"], "source": ctor["source"],
                            "file": dpath},
            "via": via}


def _entries(listing: dict[str, Any] | None) -> list[dict]:
    return [e for e in (listing or {}).get("init", []) if e.get("analysis")]


def _judge_one(load: Load, symbols: list[Symbols | None], listing_of: Callable[[int], dict[str, Any] | None],
               m: int, e: dict, name: str, findings: list[dict], notes: list[str]) -> None:
    path = load.objects[m].info.path
    d = _definer(name, symbols)
    assert d is not None  # cross_reads wants only names an object of the load defines
    definer = listing_of(d)
    dsyms = symbols[d]
    assert dsyms is not None  # _definer found the name in it
    address = dsyms.defined[name]
    ctor = next((c for c in _entries(definer) for o in c["analysis"]["constructs"]
                 if o and (o["symbol"] == name or o["address"] == address)), None)
    dpath = load.objects[d].info.path
    if ctor is not None:
        obj = {"address": address, "symbol": name, "demangled": _demangle(name), "section": None, "file": dpath}
        findings.append(_finding(obj, e, path, ctor, dpath, []))
    elif definer is None or not definer.get("analysis_complete"):
        notes.append(f"{path}: initializer {e['index']} reads {name} of {dpath}, initialized later, whose "
                     "constructor is not known (its analysis is incomplete): not judged")


def _demangle(name: str) -> str | None:
    from elfpatch.elf.symbols import demangle

    return demangle(name)
