"""Follow one initializer through its calls: the exit-time destructors it registers, in order, and the
global objects it constructs and reads, with the call path to each read.

Depth counts calls into other functions; the translation unit's own initializer helpers (GCC's
``__static_initialization_and_destruction_0``, clang's ``__cxx_global_var_init.N``) cost nothing, so that -O0
and -O2 builds look alike. Calls through the PLT or the GOT that bind to this file's own definitions are
followed like direct calls (a -fPIC library reaches its exported functions so).
"""
from __future__ import annotations

import functools
import re
from typing import Callable, NamedTuple

from elfpatch.elf.const import STT_OBJECT
from elfpatch.inits.budget import ARG_TUPLES, DEFAULT_DEPTH
from elfpatch.inits.disasm import Disassembler, direct_calls
from elfpatch.inits.events import Access, Call, Deref, Once, Ret, Stash, Trap
from elfpatch.inits.image import Image
from elfpatch.inits.isa import no_result
from elfpatch.inits.localstatic import checked_at, checked_on_exit, guarded_static
from elfpatch.inits.tlsonce import OnceRuns, once_blocks, once_key
from elfpatch.inits.values import (
    ALLOC,
    RETURNED,
    Ptr,
    Value,
    Within,
    address_of,
    held_by,
    named_address,
    plain,
    returned_by,
)

SINKS = {"__cxa_atexit": "atexit", "atexit": "atexit_c", "__cxa_thread_atexit": "thread_atexit",
         "__cxa_thread_atexit_impl": "thread_atexit"}
GUARD_ACQUIRE, GUARD_RELEASE = "__cxa_guard_acquire", "__cxa_guard_release"
# Calls that load an object and run its initializers (which may call back into this file): not followed.
RUNS_INITIALIZERS = frozenset({"dlopen", "dlmopen", "__libc_dlopen_mode"})
# exit() in an initializer runs the destructors and atexit functions registered so far, and the fini arrays,
# before the objects later initializers build: what they read is not followed (quick_exit: at_quick_exit's)
RUNS_EXIT_HANDLERS = frozenset({"exit", "quick_exit"})
# Functions that call the callbacks they are handed only while they run (a comparator, a once routine, a
# visitor), and keep none: the callback is an indirect call of that call alone (Summary.hands_on).
CALLS_BACK_WHILE_RUNNING = frozenset({
    "qsort", "qsort_r", "bsearch", "lfind", "lsearch", "tsearch", "tfind", "tdelete", "twalk", "twalk_r",
    "pthread_once", "dl_iterate_phdr", "ftw", "ftw64", "nftw", "nftw64", "scandir", "scandir64", "glob",
    "glob64"})
# Functions that start a thread running what they are handed: it runs alongside every later initializer.
STARTS_THREADS = frozenset({"pthread_create", "thrd_create", "clone", "clone3",
                            "_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE"})
_TU_HELPER = re.compile(r"__static_initialization_and_destruction_0|__cxx_global_var_init|_GLOBAL__sub_I_"
                        r"|_GLOBAL__I_\d|__tls_init|^_ZTH")  # _ZTH<var>: a thread_local's init, __tls_init's alias
_CTOR = re.compile(r"C[1-5]E")  # Itanium: <nested-name> C1/C2/... E <params>
_TLS_INIT = re.compile(r"^(?:__tls_init|_ZTH)")  # a thread_local's initialization (and its per-variable alias)
_SYMBOL_VERSION = re.compile(r"@.*$")
# Names the walk acts on contain one of these in their first bytes (SINKS, guards, the unit helpers, even
# mangled: _Z41__static_initialization_and_destruction_0ii); other defined functions' names are not decoded.
_NAME_MARKERS = (b"atexit", b"__cxa_", b"__static_initialization_and_destruction_0", b"__cxx_global_var_init",
                 b"_GLOBAL__", b"__tls_init", b"_ZTH")
# Helpers cost no depth: a file could chain thousands of them. Past this many nested calls, stop (and say so).
# Each level's summary holds its subtree's reads with their call paths, so memory grows with this bound times
# the objects read: 16 (real initializers nest 2-3 helpers, plus --depth calls) keeps that linear in practice.
MAX_CHAIN = 16
# A data object handed to another module is read for callbacks this many pointer hops deep, this many bytes each.
HELD_LEVELS = 2
MAX_HELD_SPAN = 4096
# Functions that never return (the C++ ABI's throws, libstdc++'s std::__throw_*, C's aborts): a call of one ends
# its block (disasm.Disassembler._no_return).
NO_RETURN = frozenset({"__cxa_throw", "__cxa_rethrow", "_Unwind_Resume", "abort", "exit", "_exit", "_Exit",
                       "__stack_chk_fail", "__assert_fail", "__cxa_pure_virtual", "__cxa_bad_cast",
                       "__cxa_bad_typeid", "__cxa_throw_bad_array_new_length", "_ZSt9terminatev",
                       "__cxa_call_terminate", "__cxa_call_unexpected"})
_STD_THROW = re.compile(r"^_ZSt\d+__throw_")  # std::__throw_length_error(char const*) and its kin
# How deep below an initializer a stripped file's unnamed local functions are taken for its unit's helpers.
UNNAMED_HELPER_LEVELS = 2


# The argument registers a call may keep (see Walker.kept), each with every name an operand can give it; the
# others have implicit users (rdx: mul, div, cqo; rcx: rep, shifts, loop) and are always taken as clobbered.
_KEPT_FORMS = {"rdi": frozenset({"rdi", "edi", "di", "dil"}), "rsi": frozenset({"rsi", "esi", "si", "sil"})}
_WORD = re.compile(r"[a-z0-9]+")


def _inside(op: str, start: int, end: int) -> bool:
    """Whether a jump's operand is an address inside [start, end)."""
    try:
        return start <= int(op, 0) < end
    except ValueError:
        return False


class Registration(NamedTuple):
    kind: str
    dtor: Value | None
    obj: Value | None
    guard: int | None  # the guard variable the registration runs under, if any
    site: int | None = None  # the function whose call registers: one site, one entry (see analysis)
    # the call instruction (in a thread_local's inlined or _ZTH initialization: its registrations' ordinal, the
    # same in every copy)
    at: int = -1


class Unproven(NamedTuple):
    """A memory access whose address the walk could not prove own or named (see Summary.unproven)."""

    via: tuple  # function addresses from the walked function down to the one that makes the access
    insn: int  # the instruction (or, for a pointer passed on, the call) that makes it
    base: str | None  # another module's object it reaches (a symbol), or None: a pointer of unknown provenance


class Summary(NamedTuple):
    registrations: list  # [Registration] in order
    constructs: dict  # object start -> strong (True: ctor call or __cxa_atexit object; False: a store)
    reads: dict  # object start -> via (tuple of function addresses from the walked function down)
    indirect: int
    depth_limited: int
    unresolved: int  # registrations whose destructor could not be told
    # "complete is a proof": accesses through a pointer that is not the function's frame, memory it allocated,
    # a named object or derived from one of those. unproven counts them; unproven_at keeps the first few.
    unproven: int
    unproven_at: tuple
    arg_derefs: dict  # argument register n -> (via, insn, write): accesses through what the caller passed there
    early: dict  # object start -> via: loaded before this walk touched it otherwise, and then built here
    touched: dict  # object start -> (by a load: bool, via): how this walk first touched it, in run order
    guards: frozenset  # guard variables this walk sets (the guarded initializations it runs)
    cut: frozenset  # functions on the call stack whose recursive calls this summary could not follow
    strange: int  # calls to an address no function starts at (bytes decoded as a call): not followed
    call_stores: frozenset  # objects a callee stores into through the address this walk passed it
    foreign: frozenset  # other modules' objects (symbols) read: the unproven accesses the load order may order
    foreign_unproven: int  # how many of ``unproven`` reach one of them
    # writable pointer globals whose load-time value the walk followed (an ``Obj* p = &g``, a function pointer, a
    # vptr): proven only when nothing can have changed them before (analysis._initial_held)
    initial: frozenset = frozenset()
    escaped: frozenset = frozenset()  # objects whose address this walk passed to another module's function
    # A thread_local's initialization (__tls_init, _ZTH<var>) runs once per thread: the first initializer to
    # reach it runs its reads. once: those functions this walk reaches; via_once: object -> the ones through
    # which alone this walk reads it (analysis drops such a read where earlier initializers ran them all on
    # every path: inits.tlsonce).
    once: frozenset = frozenset()
    via_once: dict = {}
    foreign_calls: frozenset = frozenset()  # other modules' functions called (names): the load may judge them
    # calls through a function pointer another module's object holds (values.held: "*<symbol>+<offset>"): each
    # an indirect call here, whose target the whole load can read in the other module (inits.crossload)
    held_calls: frozenset = frozenset()
    # other modules' objects (symbols) this walk may store into: through their GOT address, or handed to another
    # module's function (the load follows such an object's load-time word only where nothing wrote it)
    foreign_written: frozenset = frozenset()
    # objects built between __cxa_guard_acquire and its release (a function-local static: on first use)
    guarded_builds: frozenset = frozenset()
    # objects a local function without a name (stripped) stores into through its first argument: built there
    # unless an initializer builds them for sure (inits.unnamed)
    this_builds: frozenset = frozenset()
    # of those, the ones that callee loads through its first argument before it stores there: a read-modify-write
    # (a registrar's ``r->names[r->n++] = s``), not the first store a constructor makes
    this_loads: frozenset = frozenset()
    arg_loads: frozenset = frozenset()  # argument registers whose first access through them is a load
    # this file's own exported names the walk reached through its GOT (a call through the PLT, a load of the
    # slot) and followed to its own definition, which an object loaded before it may interpose (a library's)
    interposed: frozenset = frozenset()
    # A callback or vptr of this file stored where another module may reach it (a frame or heap object handed
    # to another module's function, an exported object, another module's object): its calls may call back.
    stashed_global: bool = False
    stash_args: frozenset = frozenset()  # argument registers through which the walk stored one (the caller's)
    stashed_objects: frozenset = frozenset()  # this file's objects (not exported) it stored one into
    calls_out: bool = False  # it (or a function it follows) calls another module's function
    # registration sites reached again (a helper that registers called twice): each listed once, each run
    # registers (a guarded one, and a thread_local's, register once: not counted)
    repeated: int = 0
    # the least --depth at which this walk follows every call it followed: with nothing cut by the depth
    # (depth_limited 0) it is the walk at every depth from there up (Walker.walk reuses it)
    height: int = 0
    # function-local statics some path uses without passing their guard's check (a goto past the declaration:
    # inits.localstatic): their reads are not proven safe
    unguarded: frozenset = frozenset()
    checked: frozenset = frozenset()  # guards (names) checked on every path to every return: a getter's
    # a callback or vptr of this file left where another module keeps it (handed to its function, stored in its
    # object or an exported one): any later call into another module, or a signal, may run it (analysis._called_back)
    hands_on: bool = False
    traps: bool = False  # it (or a function it follows) executes a Trap: a signal handler may run there
    # argument registers it hands on, as they came, to another module's function -> whether that one may keep
    # them (a wrapper's: libc_nonshared's pthread_atfork passes its handlers to __register_atfork)
    passes_on: dict = {}
    starts_thread: bool = False  # it calls a function of STARTS_THREADS: code not followed runs meanwhile
    # argument registers it accesses memory below of (Deref.below): a pointer one past an object's end reaches it
    arg_below: frozenset = frozenset()
    # objects it marks built only by registering their destructor: no store into them, no constructor call (a
    # constant-initialized object with a destructor: analysis._constant_initialized)
    registered_only: frozenset = frozenset()


EMPTY = Summary([], {}, {}, 0, 0, 0, 0, (), {}, {}, {}, frozenset(), frozenset(), 0, frozenset(), frozenset(), 0)
MAX_UNPROVEN_AT = 3
# In a walk's foreign_written: a store through a pointer the walk does not know, which may be another module's
UNKNOWN_STORE = "?"


# Calls whose result is memory they allocated (C and C++ allocation functions, Itanium-mangled).
ALLOCATORS = frozenset({"malloc", "calloc", "realloc", "aligned_alloc", "memalign", "strdup", "strndup",
                        "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
                        "_ZnamSt11align_val_t", "_Znwj", "_Znaj", "__cxa_allocate_exception"})
# How deep a chain of getters is followed to know what a call returns, and the largest function taken for a
# getter (a reference getter is a few instructions; with a function-local static's guard, about a hundred bytes).
MAX_RETURN_CHAIN = 4
MAX_GETTER = 256


def is_constructor(name: str) -> bool:
    return name.startswith("_ZN") and bool(_CTOR.search(name))


# GCC's clones of a function: IPA-CP (.constprop.N) may have dropped any parameter, `this` included (propagated
# when one object is built); IPA-SRA (.isra.N) rewrites parameters; .part.N is an outlined part; .cold the
# unlikely paths. Their arguments are not the source's.
_CLONE = re.compile(r"\.(?:constprop|isra|part)\.\d+|\.cold(?:\.\d+)?$")


_CLONE_MARKERS = (b".constprop.", b".isra.", b".part.", b".cold")


@functools.lru_cache(maxsize=1 << 16)  # asked at every call the walk follows, of a few thousand names
def is_constructor_clone(name: str | None) -> bool:
    """A GCC clone of a constructor: it builds its object, but which argument (if any) is ``this`` is not
    known, so what it builds is what its code stores into (Walker._credit)."""
    return name is not None and is_constructor(name) and _CLONE.search(name) is not None


# Placement new, operator new(size_t, void*) and new[] (size_t is m on LP64, j on ILP32): an out-of-line call at
# -O0, whose second argument is the storage an object is then built in (the constructor gets it back as the
# call's result, which the decoder does not follow).
_PLACEMENT_NEW = frozenset({"_ZnwmPv", "_ZnamPv", "_ZnwjPv", "_ZnajPv"})
# crtstuff's frame_dummy (a stripped file cannot tell it from a user initializer) hands these the bounds of
# .tm_clone_table, whose end is the next section's first object: the bounds of a table, never a read of it.
_TM_CLONES = frozenset({"_ITM_registerTMCloneTable", "_ITM_deregisterTMCloneTable"})


@functools.lru_cache(maxsize=1 << 16)  # asked at every call, of a few thousand names (regexes on long ones)
def constructed_argument(name: str | None) -> int | None:
    """Which argument of a call to ``name`` is the object it constructs: a constructor's ``this`` (0), placement
    new's storage (1); None for any other function (its global arguments are reads)."""
    if not name:
        return None
    if name in _PLACEMENT_NEW:
        return 1
    return 0 if is_constructor(name) and not is_constructor_clone(name) else None


class _Acc:
    """What one walk of one function gathers, in run order (see Walker._exact)."""

    def __init__(self, addr: int) -> None:
        self.addr = addr
        self.regs: list = []
        self.listed: set = set()  # the registrations in regs (kept as they come: no set built per merge)
        self.constructs: dict[int, bool] = {}
        self.reads: dict[int, tuple] = {}
        self.indirect = self.depth_limited = self.unresolved = self.unproven = self.strange = self.repeated = 0
        self.height = 0
        self.local_uses: list[tuple[int, int, str]] = []  # (instruction, object, name): function-local statics
        self.guard_checks: list[tuple[str, int]] = []  # (guard, call instruction): a callee checks it
        self.touches_guard = False  # some instruction touches a guard variable
        self.unguarded: set[int] = set()
        self.checked: set[str] = set()
        self.unproven_at: list = []
        self.arg_derefs: dict[int, tuple] = {}
        self.touched: dict[int, tuple] = {}  # object -> (first touched by a load, via)
        self.early: dict[int, tuple] = {}
        self.guards: set[int] = set()
        self.cut: set[int] = set()
        self.call_stores: set[int] = set()
        self.foreign: set[str] = set()
        self.foreign_unproven = 0
        self.foreign_calls: set[str] = set()
        self.held_calls: set[str] = set()
        self.foreign_written: set[str] = set()
        self.initial: set[int] = set()
        self.escaped: set[int] = set()
        self.once: set[int] = set()
        self.direct: set[int] = set()  # objects read other than through a once-per-thread initialization
        self.via_once: dict[int, set] = {}
        self.guard: int | None = None  # the guard what follows runs under
        self.guarded: set[int] = set()  # objects built between __cxa_guard_acquire and its release
        self.acquired = False  # between __cxa_guard_acquire and its release: a first use's initialization
        self.this_builds: set[int] = set()  # see Summary.this_builds
        self.this_loads: set[int] = set()
        self.arg_loads: set[int] = set()
        self.interposed: set[str] = set()
        self.stashed_local = False  # a callback or vptr stored in this function's frame or heap memory
        self.stashed_global = False
        self.stash_args: set[int] = set()
        self.stashed_objects: set[int] = set()
        self.calls_out = False
        self.hands_on = False  # see Summary.hands_on
        self.passes_on: dict[int, bool] = {}
        self.registered_only: set[int] = set()
        self.arg_below: set[int] = set()
        self.stashed_frame = False  # a callback or vptr stored in this function's own frame
        self.stashed_alloc = False  # ... in memory it allocated
        self.traps = False
        self.starts_thread = False
        self.region: int | None = None  # the inlined thread_local initialization what follows lies in (Once)

    def read(self, o: int, via: tuple, load: bool) -> None:
        """A read: a load of the object, or its address passed to a call (``load`` False: that call may well be
        part of building it, as an inlined constructor's helpers are)."""
        self.reads.setdefault(o, via)
        self.touched.setdefault(o, (load, via))
        if self.region is None:
            self.direct.add(o)
        else:  # only the first run of an inlined thread_local initialization reads it
            self.via_once.setdefault(o, set()).add(self.region)
            self.once.add(self.region)

    def construct(self, o: int, strong: bool) -> None:
        self.constructs[o] = strong or self.constructs.get(o, False)
        self.registered_only.discard(o)
        if self.acquired:
            self.guarded.add(o)
        self.touched.setdefault(o, (False, ()))

    def unprove(self, via: tuple, insn: int, base: str | None, count: int = 1) -> None:
        self.unproven += count
        if base is not None:
            self.foreign.add(str(base))  # a symbol moved (values.Inside): its name
            self.foreign_unproven += count
        if len(self.unproven_at) < MAX_UNPROVEN_AT:
            self.unproven_at.append(Unproven(via, insn, base))

    def deref(self, n: int, via: tuple, insn: int, write: bool, first_load: bool, below: bool = False) -> None:
        """An access through argument register ``n`` (``first_load``: the callee's first one there loads;
        ``below``: it may reach below the pointer)."""
        if below:
            self.arg_below.add(n)
        known = self.arg_derefs.get(n)
        if known is None and first_load:
            self.arg_loads.add(n)
        self.arg_derefs[n] = (via, insn, write) if known is None else (known[0], known[1], known[2] or write)

    def summary(self) -> Summary:
        early = dict(self.early)  # a unit's reader that loads the object before the unit builds it
        early.update((o, via) for o, (load, via) in self.touched.items() if load and self.constructs.get(o) is True)
        self.cut.discard(self.addr)
        return Summary(self.regs, self.constructs, self.reads, self.indirect, self.depth_limited,
                       self.unresolved, self.unproven, tuple(self.unproven_at), self.arg_derefs, early, self.touched,
                       frozenset(self.guards), frozenset(self.cut), self.strange, frozenset(self.call_stores),
                       frozenset(self.foreign), self.foreign_unproven, frozenset(self.initial),
                       frozenset(self.escaped), frozenset(self.once),
                       {o: frozenset(k) for o, k in self.via_once.items() if o not in self.direct},
                       frozenset(self.foreign_calls), frozenset(self.held_calls), frozenset(self.foreign_written),
                       frozenset(self.guarded), frozenset(self.this_builds), frozenset(self.this_loads),
                       frozenset(self.arg_loads), frozenset(self.interposed), self.stashed_global,
                       frozenset(self.stash_args), frozenset(self.stashed_objects), self.calls_out, self.repeated,
                       self.height, frozenset(self.unguarded), frozenset(self.checked),
                       self.hands_on or self.stashed_global, self.traps, self.passes_on or _NOTHING_PASSED,
                       self.starts_thread, frozenset(self.arg_below),
                       frozenset(self.registered_only))


_NOTHING_PASSED: dict = {}  # Summary.passes_on of nearly every walk: one empty dict, never written


def _registered(v: Value | None) -> Value | None:
    """What a registration's destructor or object is reported as: an address or another module's name; the
    walked function's own argument (Ptr "arg", for its caller to bind); None where not known."""
    if isinstance(v, Ptr):
        return v if v.kind == "arg" else None
    return None if returned_by(v) or held_by(v) is not None else v


def _passed(v: Value | None) -> bool:
    return isinstance(v, Ptr) and v.kind == "arg"


def _bound(v: Value | None, args: tuple) -> Value | None:
    """A registered value in the caller's terms: what it passed for the callee's argument (``args``)."""
    if not _passed(v):
        return v
    assert isinstance(v, Ptr)
    return _registered(plain(args[v.n])) if v.n < len(args) else None


def _first_via(sub: dict, where: int, acc: dict) -> None:
    """A callee's object -> path entries merged into its caller's, the caller's path first (made only for an
    object the caller has not met yet)."""
    for o, via in sub.items():
        if o not in acc:
            acc[o] = (where, *via)


class Walker:
    def __init__(self, image: Image, dis: Disassembler, pointer: Callable[[int], Value | None] | None = None,
                 initial: Callable[[int], Value | None] | None = None,
                 own_word: Callable[[int], str | None] | None = None) -> None:
        """``pointer``: what a GOT slot or a word of constant data holds once relocated (default: the GOT);
        ``initial``: the load-time value of a pointer word in writable data, where ``pointer`` answers with
        it (the walk then notes the global it relied on); ``own_word``: the own exported name a data word's
        relocation names (which another object may interpose, as a GOT slot's)."""
        self.image = image
        self.dis = dis
        self.pointer = pointer or image.got
        self.initial = initial
        self.own_word = own_word if image.may_interpose else None
        self._memo: dict[tuple, list[tuple[int, Summary]]] = {}  # (function, arguments) -> [(depth, walk)]
        self._callee: dict[Value, tuple[int | None, str | None]] = {}
        self._helper: dict[str, bool] = {}
        self._returns: dict[int, Value | None] = {}
        self._sweeps: dict[tuple, list] = {}
        self._returning: list[int] = []  # getters being swept for their result (a chain, bounded)
        self._foreign: frozenset[str] | None = None  # objects other modules define (undefined STT_OBJECT)
        self._foreign_names: dict[str, bool] = {}  # foreign_object's answers, by the name asked about
        self._tuples: dict[int, set] = {}  # function -> the argument tuples it was walked with (ARG_TUPLES)
        self._kept: dict[int, frozenset] = {}
        self._ifunc: set[int] = set()  # PLT stubs through an R_*_IRELATIVE slot (callee() finds them)
        self._interposed: dict[int, str] = {}  # PLT stubs through a slot of an own interposable name
        self._checked_getters: dict[int, frozenset[str]] = {}  # getter -> the guards it checks (_getter_checks)
        self._never: dict[int, bool] = {}  # call target -> whether it never returns (_never_returns)
        self._once_fn: dict[int, bool] = {}  # function -> whether it is a thread_local's initialization
        # whether a function surely ran a thread_local's initialization
        self.once_runs = OnceRuns(dis, image, lambda target: self.callee(target)[0])
        dis.arch.result = self.result
        dis.noreturn = self.no_return
        dis.once_blocks = functools.partial(once_blocks, machine=dis.machine)  # no reference back to dis
        dis.arch.handed = self.handed
        self._handed: dict[int, bool] = {}
        self._holds: dict[tuple[int, int], bool] = {}  # holds_handed's answers, by (object start, levels)
        self._no_return: dict[int, bool] = {}
        if hasattr(dis.arch, "kept"):
            dis.arch.kept = self.kept

    def is_helper(self, name: str | None) -> bool:
        """A translation unit's own initializer helper (followed without costing depth)."""
        if not name:
            return False
        hit = self._helper.get(name)
        if hit is None:
            hit = self._helper[name] = bool(_TU_HELPER.search(name))
        return hit

    def callee(self, target: int | str) -> tuple[int | None, str | None]:
        """(address here or None, symbol name) of a call target, seeing through PLT stubs. The name is "" for
        a function defined here whose name matters to no rule (decoding 100k long C++ names costs seconds)."""
        hit = self._callee.get(target)
        if hit is not None:
            return hit
        if isinstance(target, str):
            out: tuple[int | None, str | None] = (None, _SYMBOL_VERSION.sub("", target))
        else:
            image = self.image
            name = image.call_name(target, _NAME_MARKERS)
            out = (target, name)
            if name is None or not image.is_function(target):
                # Only a PLT stub jumps through a slot (any code when the file has no section headers to say).
                stub = image.in_plt(target) if image.plt else image.in_code(target)
                slot = self.dis.stub_slot(target, image.function_end(target)) if stub else None
                bound = image.got(slot) if slot is not None else None
                if slot is not None and image.ifunc_slot(slot):
                    self._ifunc.add(target)  # what the resolver picks at load: no call to follow
                own = image.interposable(slot) if slot is not None else None
                if own is not None:
                    self._interposed[target] = own
                if isinstance(bound, str):
                    out = (None, _SYMBOL_VERSION.sub("", bound))
                elif isinstance(bound, int) and bound != target:
                    out = (bound, image.call_name(bound, _NAME_MARKERS))
        self._callee[target] = out
        return out

    def handed(self, value: object) -> bool:
        """Whether a value stored is an address of this file's code (a callback) or inside one of its vtables (a
        vptr): what another module reaching that memory may call."""
        if not isinstance(value, int) or value <= 0:
            return False
        hit = self._handed.get(value)
        if hit is None:
            name = self.image.symbol_at(value) if not self._code(value) else None
            hit = self._handed[value] = self._code(value) or bool(name and name.startswith("_ZTV"))
        return hit

    def holds_handed(self, addr: int, levels: int = HELD_LEVELS) -> bool:
        """Whether the data object around ``addr`` holds, as the loader leaves it, a callback or vptr of this
        file (see handed), in its own words or in an object of this file a word of it points at (``levels``
        deep): what another module handed ``addr`` may load and call (answered once per object and depth)."""
        if self._code(addr):
            return False  # a function handed on: handed_function's
        start, end = self.image.data_extent(addr)
        key = (start, levels)
        hit = self._holds.get(key)
        if hit is None:
            self._holds[key] = False  # a cycle of pointers reaches nothing new
            step = self.image.elf.elfclass // 8
            words = [v for a in range(start, min(end, start + MAX_HELD_SPAN), step)
                     if (v := self.pointer(a)) is not None]
            hit = any(self.handed(w) for w in words) or levels > 0 and any(
                not self._code(w) and self.image.data_extent(w)[0] != start and self.holds_handed(w, levels - 1)
                for w in words if isinstance(w, int) and w > 0)
            self._holds[key] = hit
        return hit

    def handed_function(self, v: Value) -> bool:
        """Whether a call's argument is a function it may call back: one of this file's, or another module's
        function (a name that is no other module's data object, nor a word loaded from one or a result)."""
        if isinstance(v, int):
            return self._code(v)
        return named_address(v) and not self.foreign_object(v)

    def _stashed(self, ev: Stash, acc: _Acc) -> None:
        """A Stash event: the address of allocated memory stored counts once a callback is in that memory; an
        object's address stored where another module can reach it (that module's object, an exported one,
        through a pointer not known) escapes, as if handed to its function, and carries the callbacks stored into it."""
        c = ev.carried
        if c is None or c == ALLOC:
            if c is None or acc.stashed_alloc:
                self._stash(ev.dest, acc)
            return
        o = self.image.object_start(c) if isinstance(c, int) else None
        d = ev.dest
        if o and not isinstance(d, Ptr) and (not isinstance(d, int) or self._exported_at(d)):
            acc.escaped.add(o)
            if o in acc.stashed_objects:
                self._stash(d, acc)

    def _exported_at(self, addr: int) -> bool:
        """Whether ``addr`` lies in an object of this file another module can name (exported)."""
        o = self.image.object_at(addr)
        return o is not None and bool(o[1]) and o[1] in self.image.exported()

    def _stash(self, dest: object, acc: _Acc) -> None:
        """Notes where a callback or vptr was stored (see Summary.stashed_global)."""
        if isinstance(dest, Ptr):
            if dest.kind == "arg":
                acc.stash_args.add(dest.n)
            else:
                acc.stashed_local = True
                acc.stashed_frame |= dest.kind == "frame"
                acc.stashed_alloc |= dest.kind == "alloc"
        elif isinstance(dest, int):
            o = self.image.object_at(dest)
            if self._exported_at(dest):
                acc.stashed_global = True
            elif o is not None:
                acc.stashed_objects.add(o[0])
        else:  # another module's object, or a pointer not known
            acc.stashed_global = True

    def no_return(self, target: int) -> bool:
        """Whether a call to ``target`` never returns (NO_RETURN, std::__throw_*), by the name the PLT binds."""
        hit = self._no_return.get(target)
        if hit is None:
            if self.image.plt and not self.image.in_plt(target):
                hit = False  # a function of this file (another module's is called through a PLT stub)
            else:
                where, name = self.callee(target)  # a function of this file: not known never to return
                hit = where is None and name is not None and (name in NO_RETURN or _STD_THROW.match(name) is not None)
            self._no_return[target] = hit
        return hit

    def named(self, target: int | str) -> tuple[int | None, str | None]:
        """callee(), with the name of a function defined here even when no rule of the walk needed it (a
        constructor check does)."""
        where, name = self.callee(target)
        if name == "" and where is not None:
            name = self.image.function_name(where)
        return where, name


    def release(self) -> None:
        """Drops what this walker keeps for reuse (summaries, sweeps, decoded code): it walks no more."""
        self._memo.clear()
        self._sweeps.clear()
        self._returns.clear()
        self.dis.forget_all()

    def close(self) -> None:
        """release(), and what its decoder and once_runs hold of this walker (bound methods, a closure) dropped:
        nothing is then left in a cycle, so the walker and all it holds are freed by reference counting as soon
        as it is dropped, a large library's millions of objects not traversed by a collection (see
        collector.no_collections)."""
        self.release()
        self.dis.arch.result = no_result
        if hasattr(self.dis.arch, "kept"):
            self.dis.arch.kept = lambda _target: frozenset()
        self.once_runs.resolve = lambda target: target
        self.dis.noreturn = lambda _target: False
        self.dis.arch.handed = lambda _v: False

    def seed(self, args: tuple) -> dict:
        """The entry state of a walk: the argument registers known, the others pointers the caller passed."""
        regs = {}
        for i, r in enumerate(self.dis.arg_registers):
            v = args[i] if i < len(args) else None
            regs[r] = v if v is not None else Ptr("arg", i)
        return regs

    def result(self, target: Value | None, args: tuple) -> Value | None:
        """What a call returns, when the walk knows: memory an allocation function returned, placement new's
        storage, or a getter's result (a global, or one of its own arguments) -- else None (unknown)."""
        if target is None or isinstance(target, (Ptr, Within)):  # never Within: the ISAs call its start
            return None
        where, name = self.callee(target)
        if name in ALLOCATORS:
            return ALLOC
        if name in _PLACEMENT_NEW:
            return args[1] if len(args) > 1 else None
        if where is None and name:  # another module's function: its result is named by it (returned_by)
            return name + RETURNED
        if where is None or not self.image.function_start(where):
            return None
        value = self._returned(where)
        if isinstance(value, Ptr) and value.kind == "arg":
            return args[value.n] if value.n < len(args) else None
        return value

    def _returned(self, where: int) -> Value | None:
        """The one value every ``ret`` of a function returns (None: differs, unknown, or a tail call)."""
        if where in self._returns:
            return self._returns[where]
        end = self.image.function_end(where)
        if where in self._returning or len(self._returning) >= MAX_RETURN_CHAIN or end - where > MAX_GETTER:
            return None  # not cached when the chain is what stopped it
        self._returning.append(where)
        try:
            events = self._events(where, end, ())
        finally:
            self._returning.pop()
        values = {ev.value for ev in events if isinstance(ev, Ret)}  # Within(x) and x: two values, not one
        tail = any(isinstance(ev, Call) and ev.tail and not self._cold(ev.target) for ev in events)
        value = values.pop() if len(values) == 1 and not tail else None
        self._returns[where] = value
        return value

    def _cold(self, target: Value | None) -> bool:
        """A jump into a function's .cold part: its exception paths, which end in _Unwind_Resume (no return)."""
        return isinstance(target, int) and ".cold" in (self.image.function_name(target) or "")

    def walk(self, addr: int, args: tuple, depth: int, stack: frozenset = frozenset()) -> Summary:
        """What the function at ``addr`` (and what it calls, ``depth`` calls deep) registers, constructs and
        reads, decoded whole. A summary that could
        not follow a recursive call (its function still on the stack) is never final: the skipped call counts
        as unproven (``cut`` names it), so every entry that reuses it is incomplete."""
        hit = self._kept_walk(addr, args, depth)
        if hit is not None:
            return hit
        out = self._exact(addr, self.image.function_end(addr), args, depth, stack | {addr})
        self.dis.budget.kept += len(out.reads) + len(out.touched)
        self._memo.setdefault((addr, args), []).append((depth, out))  # Within an object and its start: two
        return out

    def _kept_walk(self, addr: int, args: tuple, depth: int) -> Summary | None:
        """A kept walk that stands for one at ``depth``: made at that depth, or one the depth cut nothing of
        whose calls go no deeper (None: none)."""
        for d, kept in self._memo.get((addr, args), ()):
            if d == depth or (kept.depth_limited == 0 and kept.height <= depth):
                return kept
        return None

    def _exact(self, addr: int, end: int, args: tuple, depth: int, stack: frozenset) -> Summary:
        acc = _Acc(addr)
        events = self._events(addr, end, args)
        for ev in events:
            kind = type(ev)  # the event types are final (NamedTuples): no isinstance chain per event
            if kind is Access:
                self._access(ev, acc)
            elif kind is Deref:
                self._deref(ev, acc)
            elif kind is Call:
                self._call(ev, acc, depth, stack)
            elif kind is Stash:
                self._stashed(ev, acc)
            elif kind is Once:
                acc.region = ev.key
            elif kind is Ret:
                self._returned_static(ev, acc)
            elif kind is Trap:
                self._trapped(ev, acc)
        if acc.local_uses or acc.guard_checks or acc.touches_guard:
            self._guards_checked(addr, end, events, acc)
        return acc.summary()

    def _trapped(self, ev: Trap, acc: _Acc) -> None:
        """A trap: a signal handler may run there; and a system call is handed its arguments as another
        module's function would be (the kernel may keep what it is handed: a signal handler in a sigaction
        struct), and may read or write the memory they point to, directly or from the frame (an iovec): this
        file's objects among them are read and escape."""
        acc.traps = True
        if ev.args:
            self._handed_on(ev.args, True, acc)
            self._held_read((*ev.args, *ev.held), acc)

    def _held_read(self, values: tuple, acc: _Acc) -> None:
        """This file's objects whose address another module (or the kernel) is handed, or finds in the frame it
        is handed a pointer into: it may read them, and they escape."""
        for v in values:
            a = address_of(v) if v is not None else None
            obj = self.image.object_at(a) if a is not None else None
            if obj is not None:
                acc.read(obj[0], (), False)
                acc.escaped.add(obj[0])

    def _returned_static(self, ev: Ret, acc: _Acc) -> None:
        """A return of a function-local static's address: a use of it (its caller reads it)."""
        a = address_of(ev.value)
        obj = self.image.object_at(a) if a is not None else None
        if obj is not None and obj[1].startswith("_ZZ"):
            acc.local_uses.append((ev.insn, obj[0], obj[1]))

    def _guards_checked(self, addr: int, end: int, events: list, acc: _Acc) -> None:
        """The function-local statics this function uses on a path that passes no check of their guard, and
        the guards it checks on every path to its return (inits.localstatic); only statics with a guard
        (dynamic initialization) count. A check is an instruction touching the guard, or a call of a function
        that checks it on every path to its return (``acc.guard_checks``)."""
        uses = [(at, o, g) for at, o, name in acc.local_uses
                if (g := guarded_static(name, self.image.guarded)) is not None]
        checks, exits = self._touches(events)
        for g, at in acc.guard_checks:
            checks.setdefault(g, []).append(at)
        dec = self.dis.decode(addr, end)
        checked = checked_at(dec, checks)
        if any(not checked(g, at, False) for at, _o, g in uses):  # again, knowing which calls never return
            ends = frozenset(dec.insns[n][0] for n, target in direct_calls(dec.insns).items()
                             if self._never_returns(target))
            checked = checked_at(dec, checks, ends) if ends else checked
        acc.unguarded.update(o for at, o, g in uses if not checked(g, at, False))
        acc.checked.update(checked_on_exit(checked, checks, exits))

    def _touches(self, events: list) -> tuple[dict[str, list[int]], list[int]]:
        """The instructions of a function's events that touch a guard variable (a load or store of it, its
        address passed to a call), by guard name; and its exits (returns, tail calls)."""
        image = self.image
        checks: dict[str, list[int]] = {}
        exits: list[int] = []
        for ev in events:
            kind = type(ev)
            if kind is Access:
                touched = [(address_of(ev.address), ev.insn)]
            elif kind is Call:
                touched = [(address_of(v), ev.at) for v in ev.args]
                if ev.tail:
                    exits.append(ev.at)
            elif kind is Ret:
                exits.append(ev.insn)
                continue
            else:
                continue
            for a, at in touched:
                g = image.guard_name(a) if a is not None and image.object_at(a) is None else None
                if g is not None:
                    checks.setdefault(g, []).append(at)
        return checks, exits

    def _never_returns(self, target: int) -> bool:
        """Whether a call of ``target`` never returns: by name (NO_RETURN), or a small function of this file
        (through its PLT stub too) whose whole sweep has no return and no tail call (``[[noreturn]]`` helpers
        that throw: c10's torchInternalAssertFail)."""
        if self.no_return(target):
            return True
        hit = self._never.get(target)
        if hit is None:
            where = self.callee(target)[0]
            end = self.image.function_end(where) if where is not None else 0
            hit = False
            if where is not None and self.image.function_start(where) and end - where <= MAX_GETTER:
                events = self._events(where, end, ())
                hit = bool(events) and where not in self.dis.budget.cut and not any(
                    type(ev) is Ret or (type(ev) is Call and ev.tail) for ev in events)
            self._never[target] = hit
        return hit

    def _getter_checks(self, where: int) -> frozenset[str]:
        """The guards a getter (a function whose every return gives a function-local static's address) checks on
        every path to its return, from its own code (its sweep with no argument known, as _returned made it)."""
        hit = self._checked_getters.get(where)
        if hit is None:
            events = self._sweeps.get((where, ()), [])
            checks, exits = self._touches(events)
            hit = frozenset()
            if checks and exits:
                checked = checked_at(self.dis.decode(where, self.image.function_end(where)), checks)
                hit = frozenset(checked_on_exit(checked, checks, exits))
            self._checked_getters[where] = hit
        return hit

    def _events(self, addr: int, end: int, args: tuple) -> list:
        """The function's events for these arguments: one sweep, whatever the depth it is reached at (shared
        with the getter check)."""
        events = self._sweeps.get((addr, args))
        if events is None:
            events = self._sweeps[(addr, args)] = self.dis.sweep(addr, end, self.seed(args))
            self.dis.forget(addr, end)  # its events are what the walk needs again, not its instructions
        return events

    def own_events(self, addr: int) -> list | None:
        """The events of the function at ``addr`` swept with no argument known (an init entry's own code, as
        its walk swept it); None when that sweep is not kept and the file's budget is spent (not swept again)."""
        if (addr, ()) not in self._sweeps and self.dis.budget.exhausted():
            return None
        return self._events(addr, self.image.function_end(addr), ())

    def _deref(self, ev: Deref, acc: _Acc) -> None:
        """A load or store through a pointer not resolved to an address: the caller's to prove when it came
        in an argument register, else unproven."""
        if isinstance(ev.base, Ptr) and ev.base.kind == "arg":
            acc.deref(ev.base.n, (), ev.insn, ev.write, not ev.write, ev.below)
        elif not isinstance(ev.base, Ptr):
            acc.unprove((), ev.insn, ev.base)
            self._written(ev.base, ev.write, acc)

    def _call(self, ev: Call, acc: _Acc, depth: int, stack: frozenset) -> None:
        target = self._call_target(ev, acc)
        if target is None:
            acc.indirect += 1  # a register or slot whose value is not known here: not a call we can follow
            return
        self._getter_call(ev, target, acc)
        if isinstance(target, int) and target in self._interposed:
            acc.interposed.add(self._interposed[target])
        where, name = self._entered(ev, *self.named(target), stack)
        if where == -1:
            acc.strange += 1  # a call no function starts at: not code a compiler calls
            return
        if name in SINKS:
            acc.unresolved += self._register(SINKS[name], ev.args, acc, ev.at)
            # a loop's registration may register many times (a guarded one, and a thread_local's, once)
            acc.repeated += ev.looped and acc.guard is None and SINKS[name] != "thread_atexit"
            return
        if name in (GUARD_ACQUIRE, GUARD_RELEASE):
            self._guard_call(ev, name == GUARD_ACQUIRE, acc)
            return
        self._arguments(name, ev.args, acc)
        if where is None:  # another object's function: it cannot see this file's globals but through us
            self._foreign_call(ev, name, acc)
            return
        if where in stack:
            acc.cut.add(where)
            acc.unprove((where,), where, None)  # a recursive call: what it touches this time is not followed
            return
        self._followed(ev, where, name, acc, depth, stack)

    def _getter_call(self, ev: Call, target: int | str, acc: _Acc) -> None:
        """A call of a getter that returns a function-local static's address (its caller may read it through
        the result, the call not followed past --depth): the guards it checks are checked at the call."""
        where = self.callee(target)[0] if isinstance(target, int) else None
        if where is None:
            return
        a = address_of(self._returns.get(where))  # result() asked it during the sweep
        obj = self.image.object_at(a) if a is not None else None
        if obj is not None and obj[1].startswith("_ZZ"):
            acc.guard_checks.extend((g, ev.at) for g in self._getter_checks(where))

    def _guard_call(self, ev: Call, acquire: bool, acc: _Acc) -> None:
        """``__cxa_guard_acquire(&g)`` (what follows runs once, under g) or its release."""
        acc.acquired = acquire
        guard = address_of(ev.args[0]) if acquire else None
        if guard is not None:
            acc.guard = guard
            acc.guards.add(guard)
            acc.touches_guard = True

    def _followed(self, ev: Call, where: int, name: str | None, acc: _Acc, depth: int, stack: frozenset) -> None:
        """Follows a call into this file's function ``where`` (within the depth) and merges what it does."""
        sub = self._follow(where, name, ev.args, depth, stack)
        if sub is None:
            acc.depth_limited += 1
            return
        acc.height = max(acc.height, sub.height + (not self._costs_nothing(where, name, stack)))
        acc.guard_checks.extend((g, ev.at) for g in sub.checked)
        for o in sub.unguarded:  # unchecked on a path from the callee's entry: a use at the call, here
            obj = self.image.object_at(o)
            if obj is not None:
                acc.local_uses.append((ev.at, o, obj[1]))
        stored = set(acc.call_stores)
        self._merge(sub, where, ev.args, acc, ev.looped, ev.at, ev.held)
        if is_constructor_clone(name):
            self._credit(sub, acc.call_stores - stored, acc)
        elif not name and self.image.stripped:
            self._built_through_first(sub, ev.args, acc)

    def _built_through_first(self, sub: Summary, args: tuple, acc: _Acc) -> None:
        """A constructor that a stripped file does not export has no name: a local function that stores into
        the object its first argument (``this``) points to may build it (or insert into it: a registrar), so
        a load of it before the call may be a read before construction (inits.unnamed decides)."""
        a = address_of(args[0]) if args else None
        o = self.image.object_at(a) if a is not None else None
        deref = sub.arg_derefs.get(0)
        if o is not None and (o[0] in sub.constructs or (deref is not None and deref[2])):
            acc.this_builds.add(o[0])  # stored through the argument, or by address (walked with it: a helper)
            if sub.touched[o[0]][0] if o[0] in sub.touched else (0 in sub.arg_loads):  # loads before it stores
                acc.this_loads.add(o[0])
            acc.touched.setdefault(o[0], (False, ()))
            if acc.acquired:
                acc.guarded.add(o[0])

    def kept(self, target: int) -> frozenset:
        """The argument registers a direct call to ``target`` leaves as they were (GCC's -fipa-ra: a caller
        keeps a value in a register its callee is known not to write, as an initializer keeps `this` in rdi
        for the next constructor clone). Only for a GCC clone of this file (.constprop, .isra, .part, .cold:
        local, never replaced) that calls nothing and whose code names no form of the register at all."""
        hit = self._kept.get(target)
        if hit is None:
            hit = self._kept[target] = self._untouched(target)
        return hit

    def _untouched(self, target: int) -> frozenset:
        name = self.image.call_name(target, _CLONE_MARKERS)  # not every name decoded: that costs seconds
        if not name or not _CLONE.search(name):
            return frozenset()  # a clone only (local: no other module replaces it)
        end = self.image.function_end(target)
        named: set[str] = set()
        for _a, _size, mnem, op in self.dis.decode(target, end).insns:
            word = mnem.rsplit(" ", 1)[-1]
            if word.startswith(("call", "sys", "int", "j")) and not (word[0] == "j" and _inside(op, target, end)):
                return frozenset()  # a call, a system call, or a jump out (a tail call): registers lost
            named.update(_WORD.findall(op))
        return frozenset(r for r, forms in _KEPT_FORMS.items() if not forms & named)

    @staticmethod
    def _credit(sub: Summary, passed: set, acc: _Acc) -> None:
        """A constructor clone builds what its code stores into: the objects it stores into by address (its
        `this` propagated) and those it stores into through the addresses this call passed it."""
        for o in (*sub.constructs, *passed):
            acc.construct(o, True)

    def _entered(self, ev: Call, where: int | None, name: str | None,
                 stack: frozenset) -> tuple[int | None, str | None]:
        """(where, name) of the code a call or jump enters; where -1 for a call no function starts at (a symbol
        or, stripped, an FDE). A jump into the middle of a function (a .cold part's landing pads) enters its whole
        code, swept once from its start: every block of it is swept, so what the entered part touches is among
        its events."""
        if where is None or self.image.is_call_target(where):
            return where, name
        if self.image.stripped:
            fde = self.image.extents.start_of(where)
            if fde is None:
                return where, name  # code no FDE covers (hand-written): entered where it is jumped to
            inside = fde if ev.tail else None  # the function its FDE covers, as a symbol's extent does
        else:
            inside = self.image.function_containing(where) if ev.tail else None
        if inside is None or inside in stack:
            return -1, None
        return inside, ""

    def _merge_registrations(self, sub: Summary, where: int, acc: _Acc, args: tuple, at: int) -> None:
        """The callee's registrations, under the guard this walk runs under; a thread_local's in an
        initialization (inlined around the call, or the callee itself) known by it (see _once_site); one that
        registers what this call passed (``args``) registers this caller's value, its site this call (``at``)."""
        guard = acc.guard
        listed = acc.listed  # one site once: a call tree reaching it 2^k ways
        once = self._once_site(where, acc)
        ordinal = 0
        for r in sub.registrations:
            r = r if r.guard is not None or guard is None else r._replace(guard=guard)
            if _passed(r.dtor) or _passed(r.obj):
                dtor, obj = _bound(r.dtor, args), _bound(r.obj, args)
                acc.unresolved -= dtor is not None and not isinstance(dtor, Ptr)  # resolved here
                r = r._replace(dtor=dtor, obj=obj, site=acc.addr, at=at)
                o = self.image.object_at(obj) if isinstance(obj, int) else None
                if o is not None:
                    acc.construct(o[0], True)
            if once is not None and r.kind == "thread_atexit":
                r = r._replace(site=once, at=ordinal)  # the same in an inlined copy of the initialization
                ordinal += 1
            if r not in listed:
                acc.regs.append(r)
                listed.add(r)
            elif r.guard is None and r.kind != "thread_atexit":
                acc.repeated += 1  # reached again: it registers again

    def _merge(self, sub: Summary, where: int, args: tuple, acc: _Acc, looped: bool = False, at: int = -1,
               held: tuple = ()) -> None:
        """Merges a callee's summary into its caller's, for a call passing ``args`` (``held``: what the caller's
        frame holds, when one of them points into it)."""
        if sub.registrations:
            self._merge_registrations(sub, where, acc, args, at)
            if looped:  # called in a loop: its registrations may run many times (but guarded ones)
                acc.repeated += sum(1 for r in sub.registrations if r.guard is None and r.kind != "thread_atexit")
        touched = acc.touched
        for o, (load, via) in sub.touched.items():  # first: in the callee's order (its path made if new)
            if o not in touched:
                touched[o] = (load, (where, *via))
        only = [o for o in sub.registered_only if o not in acc.constructs]
        for o, strong in sub.constructs.items():
            acc.construct(o, strong)
        acc.registered_only.update(only)
        _first_via(sub.reads, where, acc.reads)
        self._merge_once(sub, where, acc)
        _first_via(sub.early, where, acc.early)
        acc.indirect += sub.indirect
        acc.depth_limited += sub.depth_limited
        acc.unresolved += sub.unresolved
        acc.repeated += sub.repeated
        acc.strange += sub.strange
        if sub.unproven:
            for u in sub.unproven_at:
                acc.unprove((where, *u.via), u.insn, u.base, 0)
            acc.unproven += sub.unproven
            acc.foreign |= sub.foreign
            acc.foreign_unproven += sub.foreign_unproven
        acc.guards |= sub.guards
        acc.cut |= sub.cut
        acc.call_stores |= sub.call_stores
        acc.initial |= sub.initial
        acc.escaped |= sub.escaped
        acc.foreign_calls |= sub.foreign_calls
        acc.held_calls |= sub.held_calls
        acc.foreign_written |= sub.foreign_written
        acc.guarded |= sub.guarded_builds
        acc.this_builds |= sub.this_builds
        acc.this_loads |= sub.this_loads
        acc.interposed |= sub.interposed
        self._merge_stashes(sub, args, acc, held)
        for n, (via, insn, write) in sub.arg_derefs.items():
            self._passed(args[n] if n < len(args) else None, (where, *via), insn, write, acc, n in sub.arg_loads,
                         n in sub.arg_below)

    def _merge_stashes(self, sub: Summary, args: tuple, acc: _Acc, held: tuple = ()) -> None:
        """The callbacks and vptrs the callee stored, whether its calls into other modules can reach one this
        walk stored before the call (then they may call it back: an indirect call), and what the callee handed
        on of this walk's (a pointer into its frame: the addresses the frame holds, ``held``, are read)."""
        if sub.calls_out and self._stash_reached(sub, args, acc):
            acc.indirect += 1
            acc.hands_on = True
        acc.hands_on |= sub.hands_on
        acc.traps |= sub.traps
        acc.starts_thread |= sub.starts_thread
        for n, kept in sub.passes_on.items():  # handed on by the callee as this walk passed them
            v = args[n] if n < len(args) else None
            if type(v) is Ptr and v.kind == "arg":  # passed on as it came, again (most are, or not known)
                acc.passes_on[v.n] = acc.passes_on.get(v.n, False) or kept
            elif v is not None:
                self._handed_on((v,), kept, acc)
                if type(v) is Ptr and v.kind == "frame":
                    self._held_read(held, acc)
        acc.stashed_global |= sub.stashed_global
        acc.stashed_objects |= sub.stashed_objects
        acc.calls_out |= sub.calls_out
        for n in sub.stash_args:  # stored through what this function passed: its own frame, object, ...
            self._stash(args[n] if n < len(args) else None, acc)

    @staticmethod
    def _stash_reached(sub: Summary, args: tuple, acc: _Acc) -> bool:
        """Whether a callee that calls other modules' functions can reach a callback or vptr this walk stored
        (Summary.stashed_global): one another module can name; in this frame's or heap memory a pointer to
        which it is passed (it may load the callback and hand it on: a value loaded from memory is not known
        to the callee's walk); in what this function was passed, handed on; or in an object of this file it
        touches. (What the callee stores itself, its own walk checks.)"""
        if acc.stashed_global:
            return True
        if acc.stashed_local and any(isinstance(v, Ptr) and v.kind in ("frame", "alloc") for v in args):
            return True
        if acc.stash_args and any(isinstance(v, Ptr) and v.kind == "arg" and v.n in acc.stash_args for v in args):
            return True
        return any(o in sub.touched for o in acc.stashed_objects)

    def _once_function(self, where: int) -> bool:
        """Whether the function at ``where`` is a thread_local's initialization (``__tls_init``, ``_ZTH``)."""
        once = self._once_fn.get(where)
        if once is None:
            once = self._once_fn[where] = _TLS_INIT.search(self.image.function_name(where) or "") is not None
        return once

    def _once_site(self, where: int, acc: _Acc) -> int | None:
        """The site a thread_local's destructor registered by a call of ``where`` is known by: the once key of
        the initialization it runs in (inlined around the call, or ``where`` itself), one for every unit that
        reaches it; None: the call's own site."""
        if acc.region is not None:
            return acc.region
        guard = self.once_runs.guard(where) if self._once_function(where) else None
        return once_key(guard) if guard is not None else None

    def _merge_once(self, sub: Summary, where: int, acc: _Acc) -> None:
        """Which of the callee's reads come only through a once-per-thread initialization (see Summary.once)."""
        once = self._once_function(where)
        acc.once |= sub.once | ({where} if once else set())
        if acc.region is not None:  # called from an inlined thread_local initialization: its reads are once too
            acc.once.add(acc.region)
            for o in sub.reads:
                acc.via_once.setdefault(o, set()).add(acc.region)
            return
        if not once and not sub.via_once:  # the common case: every read a direct one
            acc.direct.update(sub.reads)
            return
        for o in sub.reads:
            if once or o in sub.via_once:
                acc.via_once.setdefault(o, set()).update({where} if once else sub.via_once[o])
            else:
                acc.direct.add(o)

    def _passed(self, v: Value | None, via: tuple, insn: int, write: bool, acc: _Acc,
                first_load: bool = False, below: bool = False) -> None:
        """A callee dereferences what this function passed it: proven when it is an address (its object is
        already a read, see _arguments; a store through it builds the object, as `init(&g)` does), this frame
        or memory allocated here; the caller's to prove when it is one of this function's own arguments;
        unproven otherwise. ``below``: the callee may reach below the pointer (``end[-1]``): an address one past
        an object's end reaches that object too."""
        if isinstance(v, Ptr):
            if v.kind == "arg":
                acc.deref(v.n, via, insn, write, first_load, below or v.below)
        elif (a := address_of(v)) is not None:
            o = self.image.object_at(a) if write or below else None
            ended = self.image.object_at(a - 1) if below and isinstance(v, int) else None
            if ended is not None and (o is None or o[0] != ended[0]):
                if write:
                    acc.call_stores.add(ended[0])
                else:
                    acc.read(ended[0], via, first_load)
            if o is not None and write:
                acc.call_stores.add(o[0])
                if acc.acquired:
                    acc.guarded.add(o[0])
        else:
            acc.unprove(via, insn, v if isinstance(v, str) else None)  # a symbol, or None
            self._written(v, write, acc)

    def _foreign_call(self, ev: Call, name: str | None, acc: _Acc) -> None:
        """A call into another module's function: its name, and what it may store into (this file's objects
        whose address it gets escape; another module's object handed on may be written)."""
        if name:
            acc.foreign_calls.add(name)
        acc.calls_out = True
        # A function of this file handed on (qsort's comparator, pthread_once's routine, a signal handler) may be
        # called back by it, now or later: an indirect call this walk does not follow. So may another module's
        # function handed on (std::call_once hands pthread_once libstdc++'s __once_proxy, which calls the
        # callable the caller stored in libstdc++'s TLS), and dlopen runs the opened object's initializers.
        kept = name not in CALLS_BACK_WHILE_RUNNING
        acc.starts_thread |= name in STARTS_THREADS
        # a callback stored in the frame: the call may read it from its stack arguments (a struct passed by value:
        # fopencookie's cookie_io_functions_t), which the walk does not tell from the frame's other slots
        if acc.stashed_frame:
            acc.indirect += 1
            acc.hands_on |= kept
        # the register the call goes through may still hold its target among the argument registers (AArch64's
        # `mov x16, x2; br x16` in crtstuff's register_tm_clones): the function itself is not handed to it
        self._handed_on(tuple(None if v is not None and v == ev.target else v for v in ev.args), kept, acc)
        if name in RUNS_INITIALIZERS or name in RUNS_EXIT_HANDLERS:
            acc.indirect += 1  # code this walk does not follow runs now: initializers, or exit-time code
        self._held_read(ev.held, acc)

    def _handed_on(self, args: tuple, kept: bool, acc: _Acc) -> None:
        """What another module's function is handed in ``args`` (known values, or the walk's own arguments
        passed through: Summary.passes_on): a function of this file or of another module, which it may call back
        now or later (an indirect call this walk does not follow), a callback in memory it can reach, this
        file's objects (they escape), another module's object (it may write it). ``kept``: the function may keep
        what it is handed past the call (Summary.hands_on)."""
        known = [v for v in args if v is not None]  # most argument registers are not known
        before = acc.indirect
        acc.indirect += sum(1 for v in known if self.handed_function(v))
        # a callback or vptr stored where this call can reach it: in memory it is handed (the frame, the heap, an
        # object of this file whose address it gets) or anywhere another module can name
        if acc.stashed_global or (acc.stashed_local or acc.stashed_objects or acc.stash_args) and any(
                isinstance(v, Ptr) and v.kind in ("frame", "alloc") and acc.stashed_local
                or isinstance(v, Ptr) and v.kind == "arg" and v.n in acc.stash_args
                or (a := address_of(v)) is not None and self.image.object_start(a) in acc.stashed_objects
                for v in known):
            acc.indirect += 1
        # ... or one its load-time words hold: `lib_register(&kOps)` with `static const ops kOps = {cb, 1};`
        if any((a := address_of(v)) is not None and self.holds_handed(a) for v in known):
            acc.indirect += 1
        # kept past the call (a signal handler, an atfork handler, a registry's entry) unless the function only
        # calls back while it runs (qsort)
        acc.hands_on |= kept and acc.indirect > before
        for v in known:
            if isinstance(v, Ptr) and v.kind == "arg":  # the caller's to judge (a wrapper: pthread_atfork's)
                acc.passes_on[v.n] = acc.passes_on.get(v.n, False) or kept
            elif named_address(v):
                acc.foreign_written.add(v)  # only another module's object handed on counts
        acc.escaped.update(o for v in known if (a := address_of(v)) is not None
                           and (o := self.image.object_start(a)))

    def _code(self, addr: int) -> bool:
        """Whether ``addr`` is code of this file (without section headers, whose executable segment may hold
        constant data too: a function's start)."""
        image = self.image
        return image.in_code(addr) and (bool(image.elf.sections) or image.function_start(addr))

    @staticmethod
    def _written(v: object, write: bool, acc: _Acc) -> None:
        """Notes a store through ``v`` that may land in another module's object: into the object itself (its
        symbol), or through a pointer loaded from one or returned by another module's function (its name:
        "*p+0", "f()"), or through a pointer not known (UNKNOWN_STORE): the last two may point at any module's
        word."""
        if write and isinstance(v, str):
            acc.foreign_written.add(str(v))
        elif write and v is None:
            acc.foreign_written.add(UNKNOWN_STORE)

    def _access(self, ev: Access, acc: _Acc) -> None:
        """Notes a load or store of a global, and the guard what follows runs under."""
        addr = address_of(ev.address)  # Within an object: the object's start
        assert addr is not None
        obj = self.image.object_at(addr)
        if not ev.write:
            own = self.image.interposable(addr) if obj is None else None
            if own is None and self.own_word is not None:
                own = self.own_word(addr)
            if own is not None:  # a load of a GOT slot or data word holding this file's own exported name
                acc.interposed.add(own)
        if obj is None:
            if self.image.guard_name(addr) is not None:
                acc.touches_guard = True
                if ev.write:
                    acc.guard = addr  # an inline variable's guard set: what follows runs once
                    acc.guards.add(addr)
            return
        if obj[1][:3] == "_ZZ":
            acc.local_uses.append((ev.insn, obj[0], obj[1]))
        if ev.write:
            acc.construct(obj[0], False)
        else:
            acc.read(obj[0], (), True)
            self._relied(addr, acc)

    def _relied(self, addr: int, acc: _Acc) -> None:
        """Notes the writable global whose load-time word at ``addr`` the sweep may have followed."""
        if self.initial is not None and self.initial(addr) is not None:
            o = self.image.object_start(addr)
            if o is not None:
                acc.initial.add(o)

    def _call_target(self, ev: Call, acc: _Acc) -> int | str | None:
        """Where a call goes, or None when it is not a call we can follow (an unknown register or slot)."""
        target = ev.target
        if target is None and ev.slot is not None:
            target = self.pointer(ev.slot)
            self._relied(ev.slot, acc)
            own = self.image.interposable(ev.slot)
            if own is None and self.own_word is not None:
                own = self.own_word(ev.slot)
            if own is not None:
                acc.interposed.add(own)
        if isinstance(target, str) and held_by(target) is not None:
            acc.held_calls.add(target)  # another module's function pointer: indirect here, the load may read it
            return None
        if isinstance(target, (Ptr, Within)) or target is None or (isinstance(target, int)
                                                                   and not self.image.in_code(target)):
            return None
        if isinstance(target, int):
            self.callee(target)  # finds the stubs of ifuncs
            if target in self._ifunc:
                return None  # the implementation an ifunc's resolver picks is not known here
        return None if returned_by(target) else target  # a pointer another module's function returned

    def _register(self, kind: str, args: tuple, acc: _Acc, at: int) -> int:
        """Records a call to a registration function (SINKS); returns 1 when its destructor is not known."""
        # as reported: Within's start; what the caller passed stays its argument (a registration wrapper's
        # ``atexit(fn)``: each call of the wrapper registers its caller's fn, _merge_registrations binds it)
        dtor, obj = _registered(plain(args[0])), _registered(plain(args[1] if kind != "atexit_c" else None))
        # a thread_local's destructor registered in an inlined initialization: one site, whichever unit runs it
        site, at = (acc.region, sum(1 for r in acc.regs if r.site == acc.region)) \
            if kind == "thread_atexit" and acc.region is not None else (acc.addr, at)
        reg = Registration(kind, dtor, obj, acc.guard, site, at)
        acc.regs.append(reg)
        acc.listed.add(reg)
        if isinstance(obj, int):
            o = self.image.object_at(obj)
            if o is not None:
                only = o[0] not in acc.constructs
                acc.construct(o[0], True)  # the object whose destructor is registered was just built
                if only:
                    acc.registered_only.add(o[0])
        return 1 if dtor is None or isinstance(dtor, Ptr) else 0

    def foreign_object(self, name: str) -> bool:
        """Whether ``name`` is a data object another module defines (an undefined STT_OBJECT symbol here)."""
        hit = self._foreign_names.get(name)
        if hit is None:
            if self._foreign is None:
                tables = [t for t in self.image.elf.symbol_tables() if t.name == ".dynsym"]
                self._foreign = frozenset(n for t in tables for n in t.names_of(False, STT_OBJECT))
            hit = self._foreign_names[name] = _SYMBOL_VERSION.sub("", name) in self._foreign
        return hit

    def _arguments(self, name: str | None, args: tuple, acc: _Acc) -> None:
        """Globals passed to a call: the object a constructor or placement new builds is constructed, any other
        one is read; another module's object passed on is a read this file cannot order (unproven)."""
        built = constructed_argument(name)
        if name in _TM_CLONES:
            return
        for i, v in enumerate(args):
            if v is None:
                continue  # not known (most argument registers)
            if isinstance(v, str) and self.foreign_object(v):
                acc.unprove((), acc.addr, v)
            a = address_of(v)
            if a is None:
                continue
            o = self.image.object_at(a)
            if o is None:
                continue
            if i == built:
                acc.construct(o[0], True)
            else:
                acc.read(o[0], (), False)

    def _costs_nothing(self, where: int, name: str | None, stack: frozenset) -> bool:
        """Whether following a call of ``where`` costs no depth (a unit's helper, named or not)."""
        return self.is_helper(name) or self._unnamed_callee(where, name, stack)

    def _follow(self, where: int, name: str | None, args: tuple, depth: int, stack: frozenset) -> Summary | None:
        """The callee's summary, or None when the depth (or the helper chain) ends here."""
        unit_helper = self.is_helper(name)
        helper = unit_helper or self._unnamed_callee(where, name, stack)
        if (depth <= 0 and not helper) or len(stack) >= MAX_CHAIN:
            return None
        # The unit's own helpers get the arguments (GCC -O0 passes the priority; a pointer of this function's
        # frame or allocation stays one), others are summarized once, whatever their caller passes; of a stripped
        # file's unnamed ones only the initializer's own callees (deeper, a registrar's stores through `this`
        # would become stores by address: a build).
        given = unit_helper or (helper and len(stack) == 1)
        passed = tuple(None if isinstance(v, Ptr) and v.kind == "arg" else v for v in args) if given else ()
        args, depth = self._capped(where, passed), depth if helper else depth - 1
        budget = self.dis.budget
        if budget.kept >= budget.entries and self._kept_walk(where, args, depth) is None:
            shallow = max(DEFAULT_DEPTH - len(stack), 0)  # as deep below the initializer as --depth 3 goes
            if depth > shallow:
                budget.cut_short(where, f"the file's budget of summary entries was spent: walked at most "
                                        f"{DEFAULT_DEPTH} calls deep")
                depth = shallow
        return self.walk(where, args, depth, stack)

    def _unnamed_callee(self, where: int, name: str | None, stack: frozenset) -> bool:
        """In a stripped file a unit's helpers have no name: a function that is not exported and that the
        initializer itself calls gets the arguments too (GCC -O0's ``__static_initialization_and_destruction_0(1,
        priority)`` then runs only its priority's branch; libc_nonshared's local ``atexit(fn)`` stub passes
        ``fn`` on to ``__cxa_atexit``). Like a named helper it costs no depth, so a stripped -O0 unit reaches as
        deep as with its symbols. GCC's LTO-merged initializer calls each unit's ``_GLOBAL__sub_I_`` function,
        which calls the unit's helper: the initializer's callees and theirs qualify (UNNAMED_HELPER_LEVELS), so
        this adds two levels at most; only the first get the arguments (_follow)."""
        return self.image.stripped and not name and len(stack) <= UNNAMED_HELPER_LEVELS \
            and not self.image.is_function(where)

    def _capped(self, where: int, args: tuple) -> tuple:
        """``args``, unless ``where`` was already walked with ARG_TUPLES others: then no argument is known (a
        superset of what each tuple runs), so a chain passing ``2a`` and ``2a+1`` costs linear work."""
        if not args:
            return args
        seen = self._tuples.setdefault(where, set())
        if args in seen or len(seen) < ARG_TUPLES:
            seen.add(args)
            return args
        self.dis.budget.widened.add(where)
        return ()
