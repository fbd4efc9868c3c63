"""Symbol bindings, the rule for when binding 10 means STB_GNU_UNIQUE, name filters and demangling."""
from __future__ import annotations

from functools import lru_cache

from elfpatch.elf.const import (
    ELFOSABI_GNU,
    ELFOSABI_SYSV,
    STB_GLOBAL,
    STB_GNU_UNIQUE,
    STB_LOCAL,
    STB_WEAK,
    st_bind,
    st_info_of,
    st_type,
)
from elfpatch.elf.mangled import crude_bound, demangled_bound, respelled

TYPE_CHECKING = False  # typing is not imported on the read path
if TYPE_CHECKING:
    import re
    from typing import Any, Iterable

BIND_NAMES = {STB_LOCAL: "LOCAL", STB_GLOBAL: "GLOBAL", STB_WEAK: "WEAK", STB_GNU_UNIQUE: "UNIQUE"}
TARGET_BINDINGS = {"global": STB_GLOBAL, "weak": STB_WEAK}

OSABI_NAMES = {0: "SYSV", 1: "HPUX", 2: "NetBSD", 3: "GNU", 6: "Solaris", 7: "AIX", 8: "IRIX", 9: "FreeBSD",
               10: "Tru64", 11: "Modesto", 12: "OpenBSD", 64: "ARM EABI", 97: "ARM", 255: "Standalone"}

# st_info bytes whose binding nibble is 10, as a translate() table: 1 where unique, 0 elsewhere. Finding the
# unique entries of a 500k-symbol table is then one C-level translate and a few find() calls.
_UNIQUE_MASK = bytes(1 if st_bind(b) == STB_GNU_UNIQUE else 0 for b in range(256))


def binding_name(bind: int) -> str:
    return BIND_NAMES.get(bind, str(bind))


def osabi_name(osabi: int) -> str:
    return OSABI_NAMES.get(osabi, str(osabi))


def unique_applies(osabi: int) -> bool:
    """glibc reads binding 10 as STB_GNU_UNIQUE in ELFOSABI_SYSV and ELFOSABI_GNU files alike (Debian's
    libcc1.so.0 is SYSV-tagged and still marked NODELETE); other OSABIs give binding 10 other meanings."""
    return osabi in (ELFOSABI_SYSV, ELFOSABI_GNU)


def unique_indexes(info: bytes) -> list[int]:
    """Indexes of the entries whose st_info has binding 10, given every entry's st_info byte in order."""
    mask = info.translate(_UNIQUE_MASK)
    out = []
    pos = mask.find(1)
    while pos >= 0:
        out.append(pos)
        pos = mask.find(1, pos + 1)
    return out


def rebind(st_info: int, bind: int) -> int:
    """st_info with only its binding nibble replaced; the type nibble (and st_other) stay as they are."""
    return st_info_of(bind, st_type(st_info))


def _globs(globs: tuple[str, ...]) -> re.Pattern[str] | None:  # None for no globs
    import fnmatch
    import re

    return re.compile("|".join(fnmatch.translate(g) for g in globs)) if globs else None


class NameFilter:
    """``--symbol GLOB`` and ``--keep GLOB`` filters: a symbol is selected when its mangled or demangled name
    matches any ``--symbol`` glob (no globs: every symbol) and no ``--keep`` glob (kept symbols stay unique,
    for code that relies on one shared singleton)."""

    def __init__(self, globs: Iterable[str] = (), keep: Iterable[str] = ()) -> None:
        self.globs = tuple(globs)
        self.keep = tuple(keep)
        self._regex = _globs(self.globs)
        self._keep = _globs(self.keep)

    def __bool__(self) -> bool:
        return self._regex is not None or self._keep is not None

    def selects(self, name: str, demangled: str | None) -> bool:
        if self._keep is not None and _matches(self._keep, name, demangled):
            return False
        return self._regex is None or _matches(self._regex, name, demangled)

    def blind_spot(self, name: str, demangled: str | None) -> str | None:
        """A warning when ``name`` is a C++ name that was not demangled and a glob on its demangled form could
        have decided otherwise: such a name is matched on its mangled form only, never silently."""
        if demangled is not None or not name.startswith("_Z") or not self:
            return None
        kept = self._keep is not None and bool(self._keep.match(name))
        could_keep = self._keep is not None and not kept
        could_select = self._regex is not None and not kept and not self._regex.match(name)
        if not (could_keep or could_select):
            return None
        shown = name if len(name) <= 200 else name[:200] + "..."
        return (f"{shown}: not demangled ({why_not_demangled(name)}); --symbol/--keep globs were matched "
                "against its mangled name only")


def _matches(regex: re.Pattern[str], name: str, demangled: str | None) -> bool:
    return bool(regex.match(name) or (demangled is not None and regex.match(demangled)))


@lru_cache(maxsize=1)
def _cxa_demangle() -> tuple[Any, Any, Any] | None:  # pragma: no cover - depends on the machine's libstdc++
    import ctypes

    def find(name: str) -> str | None:
        import ctypes.util  # imports subprocess, tempfile, shutil: only when the usual soname is not there

        return ctypes.util.find_library(name)

    # find_library forks ldconfig/gcc: only when the usual soname is not there.
    candidates = ("libstdc++.so.6", lambda: find("stdc++"), lambda: find("c++"))
    for cand in candidates:
        lib = cand() if callable(cand) else cand
        if not lib:
            continue
        try:
            cxx = ctypes.CDLL(lib)
            fn = cxx.__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        libc = ctypes.CDLL(None)
        libc.free.argtypes = [ctypes.c_void_p]
        return ctypes, fn, libc.free
    return None


# A demangled name longer than this is of no use in a report: the mangled name is shown instead. A name whose
# demangled form might pass BOUND_LIMIT (elfpatch.elf.mangled: found before demangling, in linear time) is never
# handed to the demangler, which would build all of it in memory (267 mangled bytes can print 218 MB).
MAX_DEMANGLED = 64 << 10
BOUND_LIMIT = 16 * MAX_DEMANGLED


@lru_cache(maxsize=65536)
def demangle(name: str) -> str | None:
    """The demangled form of an Itanium C++ ABI name, or None when it is not one, when no demangler exists, or
    when it would be longer than MAX_DEMANGLED. Uses libstdc++'s own __cxa_demangle, so it agrees with
    `c++filt -i` (what `nm -C` prints) and costs no subprocess; a name that demanglers of different releases
    spell differently (elfpatch.elf.mangled.respelled) is not taken as demangled either."""
    if not name.startswith("_Z"):
        return None
    if crude_bound(name) > BOUND_LIMIT and demangled_bound(name) > BOUND_LIMIT:
        return None
    if respelled(name):
        return None
    out = _demangle_unbounded(name)
    return out.decode("utf-8", "replace") if out is not None and len(out) <= MAX_DEMANGLED else None


def why_not_demangled(name: str) -> str:
    """Why demangle(name) is None for a ``_Z`` name (only asked when it is)."""
    if _cxa_demangle() is None:
        return "no C++ demangler (libstdc++'s __cxa_demangle) on this machine"
    if crude_bound(name) > BOUND_LIMIT and demangled_bound(name) > BOUND_LIMIT:
        return f"its demangled form could be longer than {BOUND_LIMIT} bytes"
    if respelled(name):
        return ("demanglers of different releases spell it differently (a qualified template name as an "
                "operand: `std::begin(std::declval<T&>())` or `std::begin((std::declval<T&>)())`; or a qualified "
                "name in an expression, mangled the older way)")
    out = _demangle_unbounded(name)  # bounded: checked just above
    if out is None:
        return "the demangler does not read it"
    return f"its demangled form is longer than {MAX_DEMANGLED} bytes"


def _demangle_unbounded(name: str) -> bytes | None:
    """__cxa_demangle's output, however long: only for names whose bound was checked (and for tests)."""
    found = _cxa_demangle()
    if found is None:
        return None
    ctypes, fn, free = found
    status = ctypes.c_int(0)
    ptr = fn(name.encode("utf-8", "surrogateescape"), None, None, ctypes.byref(status))
    if status.value != 0 or not ptr:
        return None
    try:
        return bytes(ctypes.string_at(ptr))
    finally:
        free(ptr)


def guard_variable(name: str) -> str:
    """The name of the guard variable the Itanium C++ ABI gives the object ``name`` (an inline or template
    variable, a local static): ``_ZGV`` and its mangled name without ``_Z``; a name that is not mangled (an
    ``extern "C"`` object) is spelled as a source name, its length first."""
    return "_ZGV" + (name[2:] if name.startswith("_Z") else f"{len(name.encode())}{name}")
