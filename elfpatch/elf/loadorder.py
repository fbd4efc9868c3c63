"""Which files a load brings in and in what order glibc initializes and finalizes them (elf/dl-load.c,
dl-deps.c, dl-sort-maps.c), read from the files alone, without running anything.

Search, per DT_NEEDED name without a slash: the DT_RPATH of the object that needs it and of the objects that
loaded that one, up to the main program (only when the needing object has no DT_RUNPATH), LD_LIBRARY_PATH,
the needing object's DT_RUNPATH, /etc/ld.so.cache, then the default directories; $ORIGIN, $LIB and $PLATFORM
expand as ld.so expands them. A candidate of another class, byte order or machine is skipped, as ld.so does.
Objects are reused by name, by DT_SONAME and by file identity. Not modelled: glibc-hwcaps subdirectories,
LD_PRELOAD, secure (setuid) mode, and objects a running process has loaded already.

Order: the objects in breadth-first order of DT_NEEDED, sorted depth-first so that every object comes before
its dependencies (glibc's default dynamic_sort=2); initialization runs that list backwards (dependencies
first, the DF_1_INITFIRST object before all), finalization at exit and dlclose runs it forwards.
"""
from __future__ import annotations

import os
import re
import struct
from functools import lru_cache
from typing import Mapping, NamedTuple

from elfpatch.elf.const import (
    DF_1_INITFIRST,
    DF_1_NODEFLIB,
    DT_FLAGS_1,
    DT_NEEDED,
    DT_RPATH,
    DT_RUNPATH,
    DT_SONAME,
    EM_386,
    EM_AARCH64,
    EM_ARM,
    EM_LOONGARCH,
    EM_MIPS,
    EM_PPC,
    EM_PPC64,
    EM_RISCV,
    EM_S390,
    EM_SPARCV9,
    EM_X86_64,
    PT_INTERP,
)
from elfpatch.elf.file import ElfFile, parse_header
from elfpatch.errors import ElfPatchError
from elfpatch.fs.regular import open_at, read_regular

LD_SO_CACHE = "/etc/ld.so.cache"
MAX_LD_CACHE = 64 << 20  # a cache of every library of a large system is well under 1 MB

# Debian's multiarch directory per (e_machine, ELF class, little-endian); ld.so searches /lib/<triple> and
# /usr/lib/<triple> before /lib and /usr/lib, and expands $LIB to lib/<triple>.
MULTIARCH = {
    (EM_X86_64, 64, True): "x86_64-linux-gnu", (EM_X86_64, 32, True): "x86_64-linux-gnux32",
    (EM_386, 32, True): "i386-linux-gnu", (EM_AARCH64, 64, True): "aarch64-linux-gnu",
    (EM_ARM, 32, True): "arm-linux-gnueabihf",
    (EM_PPC64, 64, False): "powerpc64-linux-gnu", (EM_PPC64, 64, True): "powerpc64le-linux-gnu",
    (EM_PPC, 32, False): "powerpc-linux-gnu", (EM_S390, 64, False): "s390x-linux-gnu",
    (EM_RISCV, 64, True): "riscv64-linux-gnu", (EM_LOONGARCH, 64, True): "loongarch64-linux-gnu",
    (EM_MIPS, 32, True): "mipsel-linux-gnu", (EM_MIPS, 32, False): "mips-linux-gnu",
    (EM_SPARCV9, 64, False): "sparc64-linux-gnu",  # 64-bit SPARC is EM_SPARCV9 (EM_SPARC, 2: 32-bit)
}
# $PLATFORM (AT_PLATFORM) for files of the host's own machine.
PLATFORM = {EM_X86_64: "x86_64", EM_386: "i686", EM_AARCH64: "aarch64", EM_S390: "s390x"}


class ObjectInfo(NamedTuple):
    """What the search needs from one file's dynamic section."""

    path: str
    needed: tuple[str, ...]
    soname: str | None
    rpath: str | None
    runpath: str | None
    flags_1: int
    interp: str | None
    arch: tuple[int, int, bool]  # (e_machine, class, little-endian): what a dependency must match
    file_id: tuple[int, int]
    executable: bool  # a main program (PIE or not), as ElfFile.is_executable decides


def read_object(path: str) -> ObjectInfo:
    """DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS_1 and PT_INTERP of the file at ``path``."""
    from elfpatch.fs.source import Source

    with Source(path) as src:
        elf = ElfFile(src.data, path)
        interp = None
        for seg in elf.segments:
            if seg.p_type == PT_INTERP and seg.p_filesz:
                interp = elf.cstring(seg.p_offset, seg.p_offset + seg.p_filesz)
        strings = {tag: elf.dynamic_strings(tag) for tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH)}
        flags_1 = elf.dynamic_value(DT_FLAGS_1) or 0
        return ObjectInfo(path, tuple(strings[DT_NEEDED]), _first(strings, DT_SONAME),
                          _first(strings, DT_RPATH), _first(strings, DT_RUNPATH), flags_1, interp,
                          (elf.e_machine, elf.elfclass, elf.little), (src.stat.st_dev, src.stat.st_ino),
                          elf.is_executable())


def _first(strings: dict[int, list[str]], tag: int) -> str | None:
    values = strings[tag]
    return values[0] if values else None


def _arch_of(path: str) -> tuple[int, int, bool] | None:
    """(e_machine, class, little) of an ELF file, or None when it is not one (ld.so's open_verify)."""
    try:  # without blocking (a FIFO on a search path must not hang the search), following as ld.so does
        fd, _ = open_at(path, follow=True)
    except OSError:  # NotRegular too: ld.so skips what is not a regular file
        return None
    try:
        head = os.pread(fd, 64, 0)  # the ELF header, as ld.so's open_verify reads it
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        h = parse_header(head, path)
    except ElfPatchError:
        return None
    return h.e_machine, h.elfclass, h.little


class LdCache:
    """/etc/ld.so.cache (the "glibc-ld.so.cache1.1" format, with or without the old libc5 table before it)."""

    OLD_MAGIC = b"ld.so-1.7.0"
    NEW_MAGIC = b"glibc-ld.so.cache1.1"

    def __init__(self, path: str = LD_SO_CACHE) -> None:
        self.entries: dict[str, list[str]] = {}
        data = read_regular(path, MAX_LD_CACHE)
        if data is None:
            return
        try:
            self._parse(data)
        except (struct.error, ValueError, IndexError):  # a truncated cache is no cache, for ld.so too
            self.entries = {}

    def _parse(self, data: bytes) -> None:
        start = 0
        if data.startswith(self.OLD_MAGIC):
            (nlibs,) = struct.unpack_from("<I", data, 12)  # the old table: 12-byte entries, then the new one
            start = (16 + nlibs * 12 + 7) & ~7
            start = data.find(self.NEW_MAGIC, start - 8)
        if start < 0 or data[start:start + len(self.NEW_MAGIC)] != self.NEW_MAGIC:
            return
        endian = ">" if data[start + 28] == 3 else "<"  # cache_file_new_flags_endian_big
        nlibs, _strings = struct.unpack_from(endian + "II", data, start + 20)
        hwcap_entries: dict[str, list[str]] = {}
        for i in range(nlibs):
            _flags, key, value, _osv, hwcap = struct.unpack_from(endian + "iIIIQ", data, start + 48 + i * 24)
            name, target = self._string(data, start + key), self._string(data, start + value)
            (hwcap_entries if hwcap else self.entries).setdefault(name, []).append(target)
        for name, paths in hwcap_entries.items():  # glibc-hwcaps entries: after the plain ones
            self.entries.setdefault(name, []).extend(paths)

    @staticmethod
    def _string(data: bytes, offset: int) -> str:
        end = data.index(b"\0", offset)
        return data[offset:end].decode("utf-8", "surrogateescape")

    def lookup(self, name: str) -> list[str]:
        return self.entries.get(name, [])


class LoadedObject(NamedTuple):
    info: ObjectInfo
    name: str | None  # the DT_NEEDED string that brought it in (None for the root)
    needed_by: str | None  # path of the object whose DT_NEEDED brought it in
    deps: tuple[int, ...]  # indexes (in load order) of the objects its DT_NEEDED entries resolved to


class Missing(NamedTuple):
    name: str
    needed_by: str


class Load(NamedTuple):
    root: str
    objects: list[LoadedObject]  # load (breadth-first) order; objects[0] is the root
    missing: list[Missing]
    init_order: list[int]  # indexes into objects: the order their initializers run
    fini_order: list[int]  # at exit (or dlclose of the root)
    main_program: bool  # the root is an executable: its DT_PREINIT_ARRAY runs before every library
    initfirst: int | None  # the DF_1_INITFIRST object, initialized first of all (init_order[0])


_DST = re.compile(r"\$(?:\{(ORIGIN|LIB|PLATFORM)\}|(ORIGIN|LIB|PLATFORM)(?![A-Za-z0-9_]))")


def expand_dst(text: str, origin: str, arch: tuple[int, int, bool]) -> str | None:
    """``text`` with ld.so's dynamic string tokens ($ORIGIN, $LIB, $PLATFORM, or ${...}) replaced; None when
    one has no value here (ld.so then drops the path element). Other $ sequences stay as they are."""
    if "$" not in text:
        return text
    triple = MULTIARCH.get(arch)
    values = {"ORIGIN": origin, "LIB": f"lib/{triple}" if triple else ("lib64" if arch[1] == 64 else "lib"),
              "PLATFORM": PLATFORM.get(arch[0]) if _host_arch() == arch else None}
    unknown = False

    def replace(m: re.Match) -> str:
        nonlocal unknown
        value = values[m.group(1) or m.group(2)]
        if value is None:
            unknown = True
            return ""
        return value

    out = _DST.sub(replace, text)
    return None if unknown else out


def search_dirs(path_list: str | None, origin: str, arch: tuple[int, int, bool],
                separators: str = ":") -> list[str]:
    """The directories of a DT_RPATH/DT_RUNPATH (":") or LD_LIBRARY_PATH (":" or ";") string."""
    if not path_list:
        return []
    out = []
    for element in re.split(f"[{re.escape(separators)}]", path_list):
        expanded = expand_dst(element, origin, arch)
        if expanded is not None:
            out.append(expanded or ".")  # an empty element is the current directory
    return out


def default_dirs(arch: tuple[int, int, bool]) -> list[str]:
    """ld.so's built-in directories: Debian's multiarch pair, then lib64 (other distributions), then lib."""
    triple = MULTIARCH.get(arch)
    dirs = [f"/lib/{triple}", f"/usr/lib/{triple}"] if triple else []
    if arch[1] == 64:
        dirs += ["/lib64", "/usr/lib64"]
    return dirs + ["/lib", "/usr/lib"]


@lru_cache(maxsize=1)
def _host_arch() -> tuple[int, int, bool] | None:
    return _arch_of("/proc/self/exe")


def resolve(root: str, env: Mapping[str, str] | None = None, cache: LdCache | None = None) -> Load:
    """The objects loading ``root`` brings in, and their initialization and finalization order. A library
    as root is treated as a dlopen into a process that has none of its dependencies loaded yet."""
    env = os.environ if env is None else env
    info = read_object(root)
    graph = _LoadGraph(info, _Search(env.get("LD_LIBRARY_PATH"), cache))
    graph.walk()
    objects = [o._replace(deps=tuple(d)) for o, d in zip(graph.objects, graph.deps)]
    order = _sort_maps(objects)
    init_order, initfirst = _init_order(objects, order)
    return Load(root, objects, graph.missing, init_order, order, info.executable, initfirst)


def _init_order(objects: list[LoadedObject], order: list[int]) -> tuple[list[int], int | None]:
    """(initialization order, the DF_1_INITFIRST object or None): the finalization order backwards, with
    that object moved to the front."""
    init_order = list(reversed(order))
    first = [i for i, o in enumerate(objects) if o.info.flags_1 & DF_1_INITFIRST]
    initfirst = first[-1] if first else None  # glibc remembers the last one loaded
    if initfirst is not None:
        init_order.remove(initfirst)
        init_order.insert(0, initfirst)
    return init_order, initfirst


class _LoadGraph:
    """The objects a load brings in, breadth-first over DT_NEEDED (dl-deps.c), each loaded once, and the
    indexes each one's DT_NEEDED entries bound to."""

    def __init__(self, root: ObjectInfo, search: _Search) -> None:
        self.root = root
        self.search = search
        self.objects: list[LoadedObject] = []
        self.deps: list[list[int]] = []
        self.by_name: dict[str, int] = {}
        self.by_id: dict[tuple[int, int], int] = {}
        self.missing: list[Missing] = []
        self.add(root, None, None)
        self.interp: ObjectInfo | None = None
        if root.executable and root.interp:
            try:  # the dynamic linker is loaded already: DT_NEEDED on its soname binds to it
                self.interp = read_object(root.interp)
            except ElfPatchError:
                self.interp = None

    def add(self, obj_info: ObjectInfo, name: str | None, loader: int | None) -> int:
        index = len(self.objects)
        needed_by = self.objects[loader].info.path if loader is not None else None
        self.objects.append(LoadedObject(obj_info, name, needed_by, ()))
        self.deps.append([])
        self.search.add(obj_info, loader)
        # ld.so matches a DT_NEEDED string against each loaded object's name(s), its DT_SONAME and (for all
        # but the main program, whose name is "") the path it was opened by.
        for key in (name, obj_info.soname, obj_info.path if index or not self.root.executable else None):
            if key:
                self.by_name.setdefault(key, index)
        self.by_id.setdefault(obj_info.file_id, index)
        return index

    def walk(self) -> None:
        queue = 0
        while queue < len(self.objects):
            for name in self.objects[queue].info.needed:
                found = self._bind(name, queue)
                if found is not None:
                    self.deps[queue].append(found)
            queue += 1

    def _bind(self, name: str, loader: int) -> int | None:
        """The object DT_NEEDED ``name`` of object ``loader`` binds to: one loaded already, the dynamic
        linker, or a file the search finds; None (and a Missing) when there is none."""
        found = self.by_name.get(name)
        if found is None and self.interp is not None and name in (self.interp.soname, self.interp.path):
            found = self.add(self.interp, name, loader)
            self.interp = None
        if found is None:
            found = self._load(name, loader)
        return found

    def _load(self, name: str, loader: int) -> int | None:
        path = self.search.find(name, loader)
        if path is None:
            self.missing.append(Missing(name, self.objects[loader].info.path))
            return None
        dep_info = read_object(path)
        found = self.by_id.get(dep_info.file_id)
        if found is None:
            return self.add(dep_info, name, loader)
        self.by_name.setdefault(name, found)  # another name for a file loaded already
        return found


class _Search:
    """ld.so's search for one DT_NEEDED name (_dl_map_object), over the objects loaded so far."""

    def __init__(self, ld_library_path: str | None, cache: LdCache | None) -> None:
        self.ld_library_path = ld_library_path
        self._cache = cache
        self.infos: list[ObjectInfo] = []
        self.origins: list[str] = []
        self.loaders: list[int | None] = []
        self.listings = _Listings()
        self._paths: dict[int, tuple[str, ...]] = {}

    def add(self, info: ObjectInfo, loader: int | None) -> None:
        # ld.so takes the main program's directory from /proc/self/exe (symlinks resolved) and every other
        # object's from the path it was opened by.
        main = info.executable and not self.infos
        path = os.path.realpath(info.path) if main else os.path.abspath(info.path)
        self.infos.append(info)
        self.origins.append(os.path.dirname(path))
        self.loaders.append(loader)

    @property
    def cache(self) -> LdCache:
        if self._cache is None:
            self._cache = LdCache()
        return self._cache

    def find(self, name: str, loader: int) -> str | None:
        info, origin, arch = self.infos[loader], self.origins[loader], self.infos[loader].arch
        if "/" in name:
            path = expand_dst(name, origin, arch)
            return path if path is not None and _arch_of(path) == arch else None
        path = self.listings.first_match(self._search_path(loader), name, arch)
        return path if path is not None else self._find_system(name, info)

    def _search_path(self, loader: int) -> tuple[str, ...]:
        """The directories searched for every DT_NEEDED of object ``loader``, worked out once for all."""
        dirs = self._paths.get(loader)
        if dirs is None:
            info, origin, arch = self.infos[loader], self.origins[loader], self.infos[loader].arch
            found = self._rpath_dirs(loader) if info.runpath is None else []
            found += search_dirs(self.ld_library_path, self.origins[0], arch, separators=":;")
            found += search_dirs(info.runpath, origin, arch)
            dirs = self._paths[loader] = tuple(found)
        return dirs

    def _rpath_dirs(self, loader: int) -> list[str]:
        """DT_RPATH of the needing object, then of the object that loaded it, up to the root; an object
        with a DT_RUNPATH has its DT_RPATH ignored."""
        arch = self.infos[loader].arch
        dirs: list[str] = []
        chain: int | None = loader
        while chain is not None:
            if self.infos[chain].runpath is None:
                dirs += search_dirs(self.infos[chain].rpath, self.origins[chain], arch)
            chain = self.loaders[chain]
        return dirs

    def _find_system(self, name: str, info: ObjectInfo) -> str | None:
        """/etc/ld.so.cache, then the default directories; DF_1_NODEFLIB keeps both out of the default
        directories."""
        arch = info.arch
        nodeflib = bool(info.flags_1 & DF_1_NODEFLIB)
        defaults = default_dirs(arch)
        for path in self.cache.lookup(name):
            if nodeflib and os.path.dirname(path) in defaults:
                continue
            if _arch_of(path) == arch:
                return path
        return None if nodeflib else self.listings.first_match(tuple(defaults), name, arch)


# A directory holding more entries than this is probed by name instead of listed: the listing's memory stays
# bounded, and such a directory is rarely on a search path more than once.
MAX_LISTING = 1 << 16


def _listing(directory: str) -> frozenset[str] | None:
    """The names in ``directory`` (none when it does not exist); None when it is to be probed by name: it
    cannot be listed (searchable without read permission) or holds more than MAX_LISTING entries."""
    names = []
    try:
        with os.scandir(directory) as it:
            for entry in it:
                names.append(entry.name)
                if len(names) > MAX_LISTING:
                    return None
    except (FileNotFoundError, NotADirectoryError):
        return frozenset()
    except OSError:
        return None
    return frozenset(names)


class _Listings:
    """What each search directory holds, listed once per run, so that a search costs what the directories
    hold rather than names x directories opens (2,000 DT_NEEDED over 5,000 DT_RPATH directories were 10 M
    open() calls). A directory that cannot be listed but may be searchable (execute without read
    permission) is probed by name, as ld.so probes every directory. For each search path (the same list
    serves every DT_NEEDED of an object), the directories holding each name are found once."""

    def __init__(self) -> None:
        self._held: dict[str, frozenset[str] | None] = {}  # None: not listable, probe by name
        self._paths: dict[tuple[str, ...], tuple[dict[str, list[int]], list[int]]] = {}
        self._arch: dict[str, tuple[int, int, bool] | None] = {}

    def _list(self, directory: str) -> frozenset[str] | None:
        held = self._held.get(directory, ())
        if isinstance(held, tuple):  # () marks a directory not looked at yet
            held = self._held[directory] = _listing(directory)
        return held

    def _index(self, dirs: tuple[str, ...]) -> tuple[dict[str, list[int]], list[int]]:
        """(name -> positions of the directories listing it, positions of the directories to probe)."""
        index = self._paths.get(dirs)
        if index is None:
            where: dict[str, list[int]] = {}
            probe: list[int] = []
            for i, directory in enumerate(dirs):
                held = self._list(directory)
                if held is None:
                    probe.append(i)
                else:
                    for entry in held:
                        where.setdefault(entry, []).append(i)
            if len(self._paths) >= 8:  # an object's DT_NEEDED are searched one after another: a few suffice
                del self._paths[next(iter(self._paths))]
            index = self._paths[dirs] = (where, probe)
        return index

    def first_match(self, dirs: tuple[str, ...], name: str, arch: tuple[int, int, bool]) -> str | None:
        """The first ``directory/name`` that is an ELF file of ``arch`` (ld.so skips other classes and
        machines)."""
        where, probe = self._index(dirs)
        for i in sorted(where.get(name, []) + probe):
            path = os.path.join(dirs[i], name)
            if path not in self._arch:
                self._arch[path] = _arch_of(path)
            if self._arch[path] == arch:
                return path
        return None


def _sort_maps(objects: list[LoadedObject]) -> list[int]:
    """glibc's _dl_sort_maps_dfs: depth-first from the last object back to the first, each object placed
    before everything it depends on (reverse postorder); the root forced to the front."""
    visited = [False] * len(objects)
    rpo: list[int] = []

    def visit(start: int) -> None:
        # Iterative DFS (a deep dependency chain must not hit Python's recursion limit).
        visited[start] = True
        stack = [(start, iter(objects[start].deps))]
        while stack:
            node, it = stack[-1]
            for dep in it:
                if not visited[dep] and dep != 0:
                    visited[dep] = True
                    stack.append((dep, iter(objects[dep].deps)))
                    break
            else:
                stack.pop()
                rpo.append(node)

    for i in range(len(objects) - 1, -1, -1):
        if not visited[i]:
            visit(i)
    order = rpo[::-1]
    if order and order[0] != 0:
        order.remove(0)
        order.insert(0, 0)
    return order
