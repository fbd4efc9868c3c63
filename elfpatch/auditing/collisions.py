"""`elfpatch audit`: which STB_GNU_UNIQUE names several files (and packages) define, before anything runs.

glibc keeps one table of unique symbols per namespace: the first definition loaded wins every later lookup,
RTLD_LOCAL or not, and the library that gets the entry is marked NODELETE. Two files that define the same
unique name therefore share one copy of it once both are loaded: harmless for one package built at once,
the PyTorch 1.8.0 bug when two packages carry two versions of a header-only library.

The scan is `unique --check`'s: the same targets (files, trees, archives, wheels), one read-only pass, with
``image_facts`` run on every ELF image (in the tree's worker processes). The loader's symbol table decides:
only ``.dynsym`` entries count, a definition being one with ``st_shndx != SHN_UNDEF``.
"""
from __future__ import annotations

import hashlib
import os
from itertools import combinations
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple

from elfpatch.auditing.packages import Owners, annotate
from elfpatch.elf.const import SHN_UNDEF, ST_SHNDX_OFFSET, STT_FUNC, STT_GNU_IFUNC, st_type
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import demangle, unique_indexes
from elfpatch.errors import EXIT_ERROR, EXIT_FOUND, EXIT_OK, ParseError
from elfpatch.fs.regular import open_at
from elfpatch.report import ERROR, SKIPPED, FileReport, envelope
from elfpatch.targets import CHECK, Exclude, Job
from elfpatch.targets.dispatch import process

if TYPE_CHECKING:
    from elfpatch.targets import ProgressEvents


class ImageFacts(NamedTuple):
    """What one ELF image contributes to the unique table and looks up in it."""

    defined: tuple[tuple[str, int], ...]  # unique names defined in .dynsym, with their st_size
    undefined: frozenset[str]  # data names .dynsym refers to without defining them
    size: int  # of the image
    digest: bytes | None  # of an archive or wheel member that defines unique names (its bytes are at hand)


def _digest(data: Any) -> bytes:
    return hashlib.blake2b(data, digest_size=20).digest()


def image_facts(elf: ElfFile, member: bool) -> ImageFacts:
    """The unique names ``elf`` defines and the data names it imports, from its dynamic symbol table(s)."""
    defined: dict[str, int] = {}
    undefined: set[str] = set()
    for table in elf.symbol_tables():
        if table.name != ".dynsym":
            continue
        info = table.info_bytes()
        for index in unique_indexes(info):
            sym = table.symbol(index)
            if sym.st_shndx != SHN_UNDEF:
                defined.setdefault(sym.name, sym.st_size)
            else:
                undefined.add(sym.name)
        # Undefined entries: st_shndx 0, found with two strided slices (one per byte) instead of a Python loop
        # over every symbol; functions are skipped by type (references of STT_FUNC/STT_GNU_IFUNC never bind to a
        # unique symbol, which is data).
        start = table.offset + ST_SHNDX_OFFSET[elf.elfclass]
        end = table.offset + table.count * table.entsize
        low = bytes(elf.data[start:end:table.entsize])
        high = bytes(elf.data[start + 1 : end : table.entsize])
        pos = low.find(0, 1)  # entry 0 is the null symbol
        while pos >= 0:
            if high[pos] == 0 and st_type(info[pos]) not in (STT_FUNC, STT_GNU_IFUNC):
                try:
                    name = table.symbol(pos).name
                except ParseError:
                    name = ""  # an unreadable reference: the loader fails on it; unique --check does not
                if name:
                    undefined.add(name)
            pos = low.find(0, pos + 1)
    digest = _digest(elf.data) if member and defined else None
    return ImageFacts(tuple(sorted(defined.items())), frozenset(undefined), elf.size, digest)


class Definition(NamedTuple):
    report: FileReport
    st_size: int


class Collision(NamedTuple):
    symbol: str
    demangled: str | None
    definitions: list[Definition]  # one per distinct image
    referenced_by: list[FileReport]
    differs: bool
    cross_package: bool

    @property
    def packages(self) -> list[str]:
        return sorted({d.report.package.name for d in self.definitions if d.report.package is not None})


class Audit:
    """The result of one audit: every report of the scan and what the unique tables would make of them."""

    def __init__(self, reports: list[FileReport], skipped: int, other: int,
                 run_warnings: list[str] | None = None) -> None:
        self.reports = reports
        self.skipped = skipped
        self.other = other
        self.run_warnings = run_warnings or []  # about no one file: an --exclude glob that matched nothing
        self.pinned = [r for r in reports if r.facts is not None and r.facts.defined]
        self.collisions = _collisions(reports)
        self.pairs = _pairs(self.collisions)

    @property
    def errors(self) -> list[FileReport]:
        return [r for r in self.reports if r.status == ERROR]

    @property
    def cross_package(self) -> list[Collision]:
        return [c for c in self.collisions if c.cross_package]

    def involved(self, names: set[str] | None = None) -> list[FileReport]:
        """Every file that defines a colliding name (of ``names``; identical copies included): what `unique`
        would fix."""
        seen: dict[int, FileReport] = {}
        names = names if names is not None else {c.symbol for c in self.collisions}
        for r in self.pinned:
            if any(n in names for n, _ in r.facts.defined):
                seen[id(r)] = r
        return list(seen.values())

    def exit_status(self) -> int:
        """0: no cross-package collision, 1: some (a CI gate), 2: a file could not be read."""
        if self.errors:
            return EXIT_ERROR
        return EXIT_FOUND if self.cross_package else EXIT_OK

    def summary(self) -> dict[str, Any]:
        return {
            "files": len(self.reports),
            "with_unique": len(self.pinned),
            "collisions": len(self.collisions),
            "cross_package_collisions": len(self.cross_package),
            "package_pairs": [{"packages": list(p), "names": names} for p, names in self.pairs],
            "errors": len(self.errors),
            "skipped": self.skipped + sum(r.status == SKIPPED for r in self.reports),
            "other": self.other,
        }

    def to_json(self) -> dict[str, Any]:
        """The ``audit --json`` document: ``errors`` and ``warnings`` repeat what ``files`` says, for
        compatibility; ``run_warnings`` are those about no one file (``warnings`` holds a file's)."""
        return envelope(
            "audit", [_entry_json(r) for r in self.reports], self.summary(),
            collisions=[_collision_json(c) for c in self.collisions],
            pinned=[dict(_file_json(r), unique=len(r.facts.defined)) for r in self.pinned],
            errors=[dict(_file_json(r), error=r.error) for r in self.errors],
            warnings=[dict(_file_json(r), warning=w) for r in self.reports for w in r.warnings],
            run_warnings=list(self.run_warnings),
        )


def _file_json(r: FileReport) -> dict[str, Any]:
    return {"path": r.path, "member": r.member, "package": r.package.to_json() if r.package else None}


def _entry_json(r: FileReport) -> dict[str, Any]:
    """One scanned file in ``files``: a failed or skipped one too."""
    doc = dict(_file_json(r), status=r.status, error=r.error, warnings=list(r.warnings),
               unique=len(r.facts.defined) if r.facts is not None else 0)
    if r.reason is not None:
        doc["reason"] = r.reason
    return doc


def _collision_json(c: Collision) -> dict[str, Any]:
    return {
        "symbol": c.symbol,
        "demangled": c.demangled,
        "definitions": [dict(_file_json(d.report), st_size=d.st_size) for d in c.definitions],
        "referenced_by": [_file_json(r) for r in c.referenced_by],
        "differs": c.differs,
        "cross_package": c.cross_package,
    }


def _file_digest(path: str, size: int) -> bytes | None:
    """The digest of the file at ``path`` if it is still a regular file of ``size`` bytes (open_at: a FIFO put
    there since the scan must not hang the run), else None."""
    h = hashlib.blake2b(digest_size=20)
    try:
        fd, st = open_at(path, follow=True)
    except OSError:  # NotRegular too
        return None
    try:
        if st.st_size != size:
            return None
        offset = 0
        while offset < size:
            chunk = os.pread(fd, min(1 << 20, size - offset), offset)
            if not chunk:
                return None  # truncated under us
            h.update(chunk)
            offset += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return h.digest()


def _identities(reports: Iterable[FileReport]) -> dict[int, object]:
    """One key per distinct image: identical copies (and hard links, and one file named twice) share a key.
    Only images of equal size are hashed; a plain file's bytes are read again for it, a member's digest was
    taken while its bytes were at hand."""
    keys: dict[int, object] = {}
    by_size: dict[int, list[FileReport]] = {}
    for r in reports:
        keys[id(r)] = (r.path, r.member)
        by_size.setdefault(r.facts.size, []).append(r)
    for size, same in by_size.items():
        if len(same) < 2:
            continue
        for r in same:
            digest = r.facts.digest if r.member is not None else _file_digest(r.path, size)
            if digest is not None:
                keys[id(r)] = (size, digest)
    return keys


def _collisions(reports: list[FileReport]) -> list[Collision]:
    distinct = _distinct(_shared(reports))
    users = _users(reports, distinct)
    out = []
    for name in sorted(distinct):
        defs = distinct[name]
        packages = {d.report.package.name for d in defs if d.report.package is not None}
        out.append(Collision(name, demangle(name), defs, users.get(name, []),
                             len({d.st_size for d in defs}) > 1, len(packages) > 1))
    return out


def _shared(reports: list[FileReport]) -> dict[str, list[Definition]]:
    """The names two or more images define, each with its definitions in report order."""
    by_name: dict[str, list[Definition]] = {}
    for r in reports:
        if r.facts is not None:
            for name, st_size in r.facts.defined:
                by_name.setdefault(name, []).append(Definition(r, st_size))
    return {name: defs for name, defs in by_name.items() if len(defs) > 1}


def _distinct(shared: dict[str, list[Definition]]) -> dict[str, list[Definition]]:
    """``shared`` without identical copies (the first of each stays), and without the names then left with one
    definition: copies of one image do not collide."""
    if not shared:
        return {}  # nothing to hash
    keys = _identities({id(d.report): d.report for defs in shared.values() for d in defs}.values())
    distinct: dict[str, list[Definition]] = {}
    for name, defs in shared.items():
        seen: set[object] = set()
        kept = []
        for d in defs:
            key = keys[id(d.report)]
            if key not in seen:
                seen.add(key)
                kept.append(d)
        if len(kept) > 1:
            distinct[name] = kept
    return distinct


def _users(reports: list[FileReport], names: dict[str, list[Definition]]) -> dict[str, list[FileReport]]:
    """For each of ``names``, the images that refer to it (undefined in their symbol table)."""
    users: dict[str, list[FileReport]] = {}
    for r in reports:
        if r.facts is not None and r.facts.undefined:
            for name in r.facts.undefined.intersection(names):
                users.setdefault(name, []).append(r)
    return users


def _pairs(collisions: list[Collision]) -> list[tuple[tuple[str, str], list[str]]]:
    """Every two packages that define a name in common, with those names; most names first."""
    pairs: dict[tuple[str, str], list[str]] = {}
    for c in collisions:
        if c.cross_package:
            for pair in combinations(c.packages, 2):
                pairs.setdefault(pair, []).append(c.symbol)
    return sorted(pairs.items(), key=lambda item: (-len(item[1]), item[0]))


def audit_job(exclude: Iterable[str] = (), progress: ProgressEvents | None = None) -> Job:
    """A read-only `unique --check` job that also collects each image's facts."""
    return Job(mode=CHECK, exclude=Exclude(exclude), inspect=image_facts, progress=progress)


def run_audit(paths: Iterable[str], job: Job | None = None, owners: Owners | None = None) -> Audit:
    """Scan ``paths`` with ``job`` (by default ``audit_job()``) into an Audit. Every warning logged meanwhile
    (a tree walk's too) is in its file's ``warnings``; one about no scanned file is in ``run_warnings``."""
    from elfpatch.warnlog import WarningLog, attach_warnings

    job = job if job is not None else audit_job()
    reports: list[FileReport] = []
    skipped = other = 0
    with WarningLog() as log:
        for path in paths:
            outcome = process(path, job)
            reports.extend(outcome.reports)
            skipped += outcome.skipped
            other += outcome.other
    annotate(reports, owners)
    rest = attach_warnings(reports, log)
    return Audit(reports, skipped, other, list(dict.fromkeys([*rest, *job.exclude.warn_unused(reports)])))
