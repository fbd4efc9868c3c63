"""A program's exported objects and functions, which another module's function its initializer calls may read
and call back.

The link editor puts a program's data object in ``.dynsym`` when a shared library of the link names it (or
``-rdynamic`` asks): the library's code reads it through its GOT, bound to the program's definition. A
program's initializers run after its libraries', so a library function a program's initializer calls (its
code not seen here) may read such an object before the initializer that builds it has run: the calling
entry is not proven. Copies (``R_*_COPY``) are excluded: they hold a library's object, which that library's
initializers build before the program's run. Likewise a function the program exports is bound by the
libraries that name it (a replacement ``operator new`` libstdc++ calls, a hook a library calls by name): a
call into another module may run it, so its walk must prove it reads nothing not yet built. A shared
library's exported names are not asked about: the functions its initializers call are its dependencies',
which name their dependents' objects only by a dependency cycle (the README names it as an assumption)."""
from __future__ import annotations

from typing import Any, Callable

from elfpatch.elf.const import SHN_UNDEF, STT_FUNC, STT_GNU_IFUNC, STT_OBJECT, st_type
from elfpatch.elf.file import ElfFile
from elfpatch.elf.relocs import copy_targets
from elfpatch.errors import ElfPatchError
from elfpatch.inits.siof import constructors
from elfpatch.inits.walk import GUARD_ACQUIRE, GUARD_RELEASE, SINKS, Summary, Walker

# The C++ ABI's and the C library's functions an initializer calls that read only what they are handed.
_HANDED_ONLY = frozenset({*SINKS, GUARD_ACQUIRE, GUARD_RELEASE, "__cxa_guard_abort", "__stack_chk_fail"})
_SHOWN = 3  # names listed in a note
# Exported functions walked as possible callbacks; a program exporting more (-rdynamic) is not walked: its
# initializers' calls into other modules are not proven.
MAX_CALLBACKS = 64
# The program's own entry points no other module calls back.
_NOT_CALLED_BACK = frozenset({"main", "_start", "_init", "_fini", "__libc_csu_init", "__libc_csu_fini"})


def _defined(elf: ElfFile) -> list[tuple[str, int, int]]:
    """(name, value, type) of the symbols ``.dynsym`` defines (an entry whose name is past the string table,
    which the symbolizer warns of, is no name another module can bind)."""
    out = []
    for t in elf.symbol_tables():
        if t.name != ".dynsym":
            continue
        for e in t.entries():
            if e.st_shndx == SHN_UNDEF:
                continue
            try:
                out.append((t.string(e.st_name), e.st_value, st_type(e.st_info)))
            except ElfPatchError:
                continue
    return out


def exported_unseen(elf: ElfFile, entries: list[dict[str, Any]], summaries: list, walker: Walker | None,
                    depth: int, proven: Callable[[Summary], bool],
                    imported: frozenset[str] | None = None) -> list[tuple[dict, str]]:
    """exported_reads and exported_callbacks of a program (``.dynsym`` read once); nothing for a library."""
    if not elf.is_executable():
        return []
    defined = _defined(elf)
    return exported_reads(elf, defined, entries, summaries, imported) \
        + exported_callbacks(defined, entries, summaries, walker, depth, proven, imported)


def exported_reads(elf: ElfFile, defined: list[tuple[str, int, int]], entries: list[dict[str, Any]],
                   summaries: list, imported: frozenset[str] | None = None) -> list[tuple[dict, str]]:
    """(entry, note) for each initializer of a program that calls another module's function while one of the
    program's exported objects is built by it or by a later initializer (by position in ``entries``);
    ``imported`` (``--deps``): the names the load's other objects import, the only exported objects their
    code can name (None: any, as ``-rdynamic`` exports every global for code the load does not show);
    ``defined``: the program's _defined symbols."""
    copies = copy_targets(elf)
    exported = {value: name for name, value, typ in defined if typ == STT_OBJECT and value not in copies
                and (imported is None or name in imported)}
    built = {o: pos for o, pos in constructors(summaries).items() if o in exported}
    if not built:
        return []
    out = []
    for pos, (e, s) in enumerate(zip(entries, summaries)):
        calls = sorted(s.foreign_calls - _HANDED_ONLY) if s is not None else []
        later = sorted(exported[o] for o, c in built.items() if c >= pos)
        if calls and later:
            out.append((e, f"initializer {e['index']} ({e['symbol']}): calls other modules' function(s) "
                        f"({', '.join(calls[:_SHOWN])}), whose code may read this program's exported object(s) "
                        f"that it or a later initializer builds: {', '.join(later[:_SHOWN])}"))
    return out


def exported_callbacks(defined: list[tuple[str, int, int]], entries: list[dict[str, Any]], summaries: list,
                       walker: Walker | None, depth: int, proven: Callable[[Summary], bool],
                       imported: frozenset[str] | None = None) -> list[tuple[dict, str]]:
    """(entry, note) for each initializer of a program that calls another module's function while a function
    the program exports (that another object of the load imports, with ``imported``) may be called back and
    its walk (``depth`` calls deep) is not proven or reads an object this or a later initializer builds."""
    if walker is None:
        return []
    functions = {name: value for name, value, typ in defined if typ in (STT_FUNC, STT_GNU_IFUNC) and value
                 and name not in _NOT_CALLED_BACK and (imported is None or name in imported)}
    calling = [(pos, e) for pos, (e, s) in enumerate(zip(entries, summaries))
               if s is not None and s.foreign_calls - _HANDED_ONLY]
    if not functions or not calling:
        return []
    if len(functions) > MAX_CALLBACKS:
        return [(e, f"initializer {e['index']} ({e['symbol']}): calls other modules' function(s), which may call "
                 f"back any of the {len(functions)} functions this program exports (more than {MAX_CALLBACKS}: "
                 "not walked)") for _pos, e in calling]
    built = constructors(summaries)
    walks = {name: walker.walk(a, (), depth) for name, a in sorted(functions.items())}
    out = []
    for pos, e in calling:
        bad = sorted(name for name, s in walks.items()
                     if not proven(s) or any(built.get(o, -1) >= pos for o in s.reads))
        if bad:
            out.append((e, f"initializer {e['index']} ({e['symbol']}): calls other modules' function(s), which may "
                        "call back this program's exported function(s) that read an object it or a later "
                        f"initializer builds, or whose walk is not proven: {', '.join(bad[:_SHOWN])}"))
    return out
