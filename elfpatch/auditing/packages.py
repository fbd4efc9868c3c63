"""Which installed package owns a file: ``*.dist-info/RECORD`` (wheels, site-packages) and
``conda-meta/*.json`` ``files`` lists (conda environments).

A file is looked up in the directories above it, nearest first; a directory's index lists every file its
dist-info RECORDs and conda-meta records name (RECORD paths are relative to the directory that holds the
``.dist-info``, conda's to the environment's root). A file outside any site-packages that a RECORD names
through ``../`` (an executable in the environment's ``bin/``) is found through the site-packages directories
of the environments above it. Each directory is read once per ``Owners``. A wheel's
members belong to the wheel's own distribution, named in its file name (PEP 427). Unreadable or malformed
records simply own nothing: ownership is a label, never a reason to fail.
"""
from __future__ import annotations

import csv
import json
import os
from typing import Any, BinaryIO, Iterable, Iterator, NamedTuple

from elfpatch.errors import warn
from elfpatch.fs.regular import open_regular, read_regular

# A record larger than this is not read (a RECORD of a 100k-file package is ~10 MB).
MAX_RECORD = 64 << 20


class Package(NamedTuple):
    name: str
    version: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    def __str__(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name


def _lines(f: BinaryIO, limit: int) -> Iterator[str]:
    """The lines of ``f``, decoded, streamed: at most ``limit`` bytes in all (_TooLarge past that), so a file
    growing under us is bounded too."""
    budget = limit
    while True:
        line = f.readline(budget + 1)
        if not line:
            return
        budget -= len(line)
        if budget < 0:
            raise _TooLarge
        yield line.decode("utf-8", "replace")


class _TooLarge(Exception):
    pass


def _split_name(stem: str) -> Package:
    """``name-version`` of a ``.dist-info`` directory or a wheel file name (the version has no ``-``)."""
    name, sep, rest = stem.partition("-")
    version = rest.split("-", 1)[0] if sep else None
    return Package(name, version or None)


def dist_info_package(directory: str) -> Package:
    """Name and version from METADATA (the project's own spelling), else from the directory's name."""
    stem = os.path.basename(directory)[: -len(".dist-info")]
    fallback = _split_name(stem)
    name = version = None
    f = open_regular(os.path.join(directory, "METADATA"), MAX_RECORD)
    if f is None:
        return fallback
    with f:
        try:
            for line in _lines(f, MAX_RECORD):
                if not line.strip():
                    break  # the headers end at the first blank line
                key, _, value = line.partition(":")
                if key == "Name":
                    name = value.strip()
                elif key == "Version":
                    version = value.strip()
        except (_TooLarge, OSError):
            pass
    return Package(name or fallback.name, version or fallback.version)


def wheel_package(path: str) -> Package | None:
    base = os.path.basename(path)
    if not base.endswith(".whl") or "-" not in base:
        return None
    return _split_name(base[: -len(".whl")])


def _full(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


class Owners:
    """Owning packages of files, with every directory's records read once. Given ``paths`` (the files a run
    asks about), an index keeps only their rows: memory follows what is asked, not the records' sizes; a path
    asked about later is added, and the records are read again for it."""

    def __init__(self, paths: Iterable[str] | None = None) -> None:
        self._wanted: set[str] | None = None if paths is None else {_full(p) for p in paths}
        # Base names of the wanted files: most rows are passed over on a set lookup, before any path arithmetic.
        self._bases = None if self._wanted is None else {os.path.basename(p) for p in self._wanted}
        self._dirs: dict[str, _Index] = {}
        self._sites: dict[str, list[str]] = {}  # an environment's site-packages directories

    def of(self, path: str, member: str | None = None) -> Package | None:
        return self.lookup(path, member)[0]

    def lookup(self, path: str, member: str | None = None) -> tuple[Package | None, list[str]]:
        """The owner of ``path`` (None: no record names it), and what could not be read among the records
        that were consulted (one line each, naming the record)."""
        if member is not None or path.endswith(".whl"):
            wheel = wheel_package(path)
            if wheel is not None:
                return wheel, []
        full = _full(path)
        if self._wanted is not None and self._bases is not None and full not in self._wanted:
            self._wanted.add(full)
            self._bases.add(os.path.basename(full))
            self._dirs.clear()  # indexes built without this name
        notes: list[str] = []
        ancestors = []
        directory = os.path.dirname(full)
        while True:
            ancestors.append(directory)
            owner = self._consult(directory, full, notes)
            if owner is not None:
                return owner, notes
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        for env in ancestors:  # bin/tool, named in lib/pythonX.Y/site-packages/*.dist-info/RECORD as ../../../bin/tool
            for site in self._site_dirs(env):
                owner = self._consult(site, full, notes)
                if owner is not None:
                    return owner, notes
        return None, notes

    def _consult(self, directory: str, full: str, notes: list[str]) -> Package | None:
        index = self._index(directory)
        notes.extend(n for n in index.notes if n not in notes)
        return index.owners.get(full)

    def _site_dirs(self, env: str) -> list[str]:
        import glob

        sites = self._sites.get(env)
        if sites is None:
            sites = sorted(glob.glob(os.path.join(glob.escape(env), "lib*", "python*", "site-packages"))
                           + glob.glob(os.path.join(glob.escape(env), "Lib", "site-packages")))
            self._sites[env] = sites
        return sites

    def _index(self, directory: str) -> _Index:
        index = self._dirs.get(directory)
        if index is not None:
            return index
        index = _Index(self._wanted, self._bases)
        try:
            names = os.listdir(directory)
        except OSError:
            names = []
        # conda first, so that a dist-info RECORD in the same directory (pip inside the environment) wins.
        if "conda-meta" in names:
            _index_conda(directory, index)
        for name in sorted(names):
            if name.endswith(".dist-info"):
                _index_record(directory, name, index)
        self._dirs[directory] = index
        return index


class _Index:
    """One directory's records: the owner of each file they name (of the wanted ones, when some are), and a
    line for each record that could not be read."""

    def __init__(self, wanted: set[str] | None, bases: set[str] | None) -> None:
        self.owners: dict[str, Package] = {}
        self.notes: list[str] = []
        self.wanted = wanted
        self.bases = bases

    def note(self, path: str, why: str) -> None:
        message = f"{path}: {why}; the files it lists get no package"
        self.notes.append(message)
        warn(path, f"{why}; the files it lists get no package")

    def add(self, found: dict[str, Package], root: str, name: str, package: Package) -> None:
        """Record that ``package`` owns ``name`` (relative to ``root``), if it is wanted."""
        if self.bases is not None:
            base = os.path.basename(name.rstrip("/"))
            if base not in self.bases and base not in (".", "..", ""):  # "x/." and "x/.." need normpath
                return
        full = os.path.normpath(os.path.join(root, name))
        if self.wanted is None or full in self.wanted:
            found[full] = package


def _index_record(directory: str, dist_info: str, index: _Index) -> None:
    """The rows of ``dist_info``/RECORD, streamed: only the wanted ones are kept."""
    info = os.path.join(directory, dist_info)
    path = os.path.join(info, "RECORD")
    f = open_regular(path, MAX_RECORD)
    if f is None:
        if os.path.lexists(path):
            index.note(path, f"not a regular file of at most {MAX_RECORD} bytes")
        return
    package = dist_info_package(info)
    found: dict[str, Package] = {}
    with f:
        try:
            for row in csv.reader(_lines(f, MAX_RECORD)):
                if row and row[0]:
                    index.add(found, directory, row[0], package)
        except csv.Error as exc:
            return index.note(path, f"malformed ({exc})")
        except _TooLarge:
            return index.note(path, f"grew past {MAX_RECORD} bytes while read")
        except OSError as exc:
            return index.note(path, f"unreadable ({exc.strerror or exc})")
    index.owners.update(found)


# The only fields of a conda-meta record that are used; every other object is dropped as soon as it is read,
# so a record's size in memory is its file list, not its paths_data and the like.
_CONDA_FIELDS = frozenset(("name", "version", "files"))


def _conda_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {k: v for k, v in pairs if k in _CONDA_FIELDS}


def _conda_record(path: str) -> Any:
    """The parsed record (its used fields), or a line saying why there is none. Depth is bounded by the JSON
    reader itself, which raises RecursionError past the interpreter's recursion limit: a record nested that
    deep is malformed, not a crash; time and memory follow the file's size, which is capped."""
    data = read_regular(path, MAX_RECORD)
    if data is None:
        return f"not a regular file of at most {MAX_RECORD} bytes"
    try:
        return json.loads(data, object_pairs_hook=_conda_fields)
    except RecursionError:
        return "nested too deeply to read"
    except ValueError as exc:
        return f"not valid JSON ({str(exc).splitlines()[0]})"


def _index_conda(prefix: str, index: _Index) -> None:
    meta = os.path.join(prefix, "conda-meta")
    try:
        names = sorted(os.listdir(meta))
    except OSError:
        return
    for name in names:
        if not name.endswith(".json"):
            continue
        path = os.path.join(meta, name)
        doc = _conda_record(path)
        if isinstance(doc, str):
            index.note(path, doc)
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not isinstance(doc.get("files"), list):
            index.note(path, "not a conda package record (no name and files)")
            continue
        version = doc.get("version")
        package = Package(doc["name"], version if isinstance(version, str) else None)
        found: dict[str, Package] = {}
        for f in doc["files"]:
            if isinstance(f, str) and f:
                index.add(found, prefix, f, package)
        index.owners.update(found)


def annotate(reports: list[Any], owners: Owners | None = None) -> None:
    """Set ``package`` on every report (elfpatch.report.FileReport) whose file has a known owner; a record
    that could not be read among those consulted is a warning of the report."""
    owners = owners if owners is not None else Owners(r.path for r in reports)
    for r in reports:
        r.package, notes = owners.lookup(r.path, r.member)
        r.warnings.extend(n for n in notes if n not in r.warnings)
