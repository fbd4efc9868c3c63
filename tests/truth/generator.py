"""Random multi-unit C++ programs whose globals read each other, and the truth their source carries.

A seed gives one program: a main module (a program, or a shared library behind a tiny `main`) and up to two
shared libraries (libA, libB), each made of units (``uN.cpp``). Every object is a ``Obj`` whose constructor sets
``built = 1``; every read prints ``OBS <context> <object> <built>`` through a small C runtime (libtruthrt.so, a
separate object so the analysed files hold only the program's own code), so ``built == 0`` is a read before
construction. The context is the init entry that runs the read: each unit starts with a marker object that
records its context first, each ``constructor`` function records its own.

Routes from a reader to an object: a direct read, one in a case of a switch compiled to a jump table
(``notrack jmp`` under -fcf-protection), a reference global, a pointer global, a constant pointer table, a
virtual call, a function pointer, a getter returning a reference, a function that reads it (``peek``; in
another module: a program's initializer calls a library function that reads the program's object), a
function-local static whose constructor reads, a ``thread_local`` whose constructor reads, a callback one
unit's initializer leaves with the runtime (another module) and a reader fires later (``hook``), an inline
variable, a template static member whose initialization one unit emits (explicit instantiation), across shared
libraries (with and without DT_NEEDED, and a library reading the program's global). Readers are objects'
initializers and ``__attribute__((constructor))`` functions (with and without a priority). Each program deals
every route once (in a random order) before choosing at random, so a small seed set covers them all.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

ROUTES = ("direct", "switch", "ref", "ptr", "table", "virtual", "fnptr", "getter", "peek", "local", "tls", "hook")
# across modules: plain objects only
CROSS_ROUTES = ("direct", "switch", "ref", "ptr", "table", "getter", "peek", "fnptr")


@dataclass
class Obj:
    oid: int
    module: str
    unit: str
    kind: str  # plain | inline | template
    dtor: bool
    reads: list[Read] = field(default_factory=list)

    @property
    def symbol(self) -> str:
        if self.kind == "template":
            name = f"TS{self.oid}"
            return f"_ZN{len(name)}{name}ILi{self.oid}EE1sE"
        return f"{'iv' if self.kind == 'inline' else 'g'}{self.oid}"

    @property
    def expr(self) -> str:
        if self.kind == "template":
            return f"TS{self.oid}<{self.oid}>::s"
        return self.symbol


@dataclass
class Read:
    target: Obj
    route: str
    home_unit: str  # the unit that defines the route's reference, pointer, getter, ... (the reader's own for `direct`)
    site: int = 0  # a number unique in the program, naming what the route defines


@dataclass
class Context:
    """An init entry that runs reads: a unit's initializer or a ``constructor`` function."""
    cid: int
    module: str
    unit: str
    function: str | None = None  # the constructor function's name (None: the unit's initializer)
    priority: int | None = None
    reads: list[Read] = field(default_factory=list)


@dataclass
class Program:
    seed: int
    modules: dict[str, list[str]]  # module -> its units, in source order
    b_needs_a: bool
    objects: list[Obj]
    contexts: list[Context]
    includes: dict[str, set[int]]  # unit -> inline objects whose definition it includes

    def unit_context(self, unit: str) -> Context:
        return next(c for c in self.contexts if c.unit == unit and c.function is None)

    def module_of_unit(self, unit: str) -> str:
        return next(m for m, units in self.modules.items() if unit in units)

    def static_reads(self, cid: int) -> set[int]:
        """The objects the code a context runs reads (the source's view): its own reads and, for a unit, the
        reads of every object it defines and of every inline variable whose guarded initialization it emits;
        a first use of a ``thread_local`` runs its unit's whole TLS initialization (every ``thread_local`` the
        unit defines is built then: GCC's and clang's ``__tls_init``), so its reads too."""
        ctx = next(c for c in self.contexts if c.cid == cid)
        reads = list(ctx.reads)
        if ctx.function is None:
            for o in self.objects:
                if o.unit == ctx.unit or (o.kind == "inline" and o.oid in self.includes[ctx.unit]):
                    reads.extend(o.reads)
        every = [r for o in self.objects for r in o.reads] + [r for c in self.contexts for r in c.reads]
        tls_units = {r.home_unit for r in reads if r.route == "tls"}
        reads += [r for r in every if r.route == "tls" and r.home_unit in tls_units]
        return {r.target.oid for r in reads}


def generate(seed: int) -> Program:
    rng = random.Random(seed)
    modules = {"main": [f"u{i}" for i in range(rng.randint(2, 4))]}
    nlibs = rng.choice((0, 1, 1, 2, 2))
    n = len(modules["main"])
    for lib in ("libA", "libB")[:nlibs]:
        count = rng.randint(1, 2)
        modules[lib] = [f"u{n + i}" for i in range(count)]
        n += count
    units = [u for us in modules.values() for u in us]
    prog = Program(seed, modules, rng.random() < 0.5, [], [], {u: set() for u in units})
    _objects(prog, rng, units)
    _contexts(prog, rng)
    _reads(prog, rng)
    return prog


def _objects(prog: Program, rng: random.Random, units: list[str]) -> None:
    oid = 0
    for unit in units:
        module = prog.module_of_unit(unit)
        for _ in range(rng.randint(1, 4)):
            oid += 1
            kind = "plain" if module != "main" else rng.choice(("plain",) * 6 + ("inline", "template"))
            prog.objects.append(Obj(oid, module, unit, kind, rng.random() < 0.5))
    for o in prog.objects:
        if o.kind == "inline":  # included by its home unit and by some others of the module
            mates = [u for u in prog.modules[o.module] if rng.random() < 0.4]
            for u in {o.unit, *mates}:
                prog.includes[u].add(o.oid)


def _contexts(prog: Program, rng: random.Random) -> None:
    cid = 0
    for units in prog.modules.values():
        for unit in units:
            cid += 1
            prog.contexts.append(Context(cid, prog.module_of_unit(unit), unit))
    for units in prog.modules.values():
        for unit in units:
            if rng.random() < 0.35:
                cid += 1
                prio = rng.choice((None, None, 101 + rng.randint(0, 200)))
                prog.contexts.append(Context(cid, prog.module_of_unit(unit), unit, f"truth_ctor_fn{cid}", prio))


def _reads(prog: Program, rng: random.Random) -> None:
    """Each plain object and each constructor function reads up to three objects, each by a random route."""
    site = 0
    deck = list(ROUTES)  # every route once first (in a random order), then at random
    rng.shuffle(deck)
    readers: list[Obj | Context] = [o for o in prog.objects if o.kind == "plain"]
    readers += [c for c in prog.contexts if c.function]
    for reader in readers:
        for _ in range(rng.randint(0 if isinstance(reader, Obj) else 1, 3)):
            site += 1
            read = _one_read(prog, rng, reader.module, reader.unit, site, deck)
            if read is not None:
                reader.reads.append(read)


def _one_read(prog: Program, rng: random.Random, module: str, unit: str, site: int,
              deck: list[str]) -> Read | None:
    target = rng.choice(prog.objects)
    if module == "libB" and "libA" in prog.modules and rng.random() < 0.4:  # the classic: libB reads libA
        target = rng.choice([o for o in prog.objects if o.module == "libA"])
    cross = target.module != module
    if cross and target.kind != "plain":  # inline and template objects stay in their module
        return None
    route = rng.choice(CROSS_ROUTES) if cross else deck.pop() if deck else rng.choice(ROUTES)
    if target.kind == "inline" and route in ("direct", "switch") and target.oid not in prog.includes[unit]:
        route = "getter"  # an inline variable is named only where its definition is included
    homes = [u for m in sorted({module, target.module}) for u in prog.modules[m]]
    if target.kind == "inline":
        homes = [u for u in homes if target.oid in prog.includes[u]]
    home = unit if route in ("direct", "switch") else rng.choice(homes)
    return Read(target, route, home, site)

