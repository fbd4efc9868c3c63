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
import io
import json
import os
from typing import Any, NamedTuple

# A record larger than this is not read (a RECORD of a 100k-file package is ~10 MB).
MAX_RECORD = 64 << 20


class Package(NamedTuple):
    name: str
    version: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    def __str__(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_RECORD + 1)
    except OSError:
        return None
    if len(data) > MAX_RECORD:
        return None
    return data.decode("utf-8", "replace")


def _split_name(stem: str) -> Package:
    """``name-version`` of a ``.dist-info`` directory or a wheel file name (the version has no ``-``)."""
    name, sep, rest = stem.partition("-")
    version = rest.split("-", 1)[0] if sep else None
    return Package(name, version or None)


def dist_info_package(directory: str) -> Package:
    """Name and version from METADATA (the project's own spelling), else from the directory's name."""
    stem = os.path.basename(directory)[: -len(".dist-info")]
    fallback = _split_name(stem)
    meta = _read(os.path.join(directory, "METADATA"))
    if not meta:
        return fallback
    name = version = None
    for line in meta.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        key, _, value = line.partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Version":
            version = value.strip()
    return Package(name or fallback.name, version or fallback.version)


def wheel_package(path: str) -> Package | None:
    base = os.path.basename(path)
    if not base.endswith(".whl") or "-" not in base:
        return None
    return _split_name(base[: -len(".whl")])


class Owners:
    """Owning packages of files, with every directory's records read once."""

    def __init__(self) -> None:
        self._dirs: dict[str, dict[str, Package]] = {}
        self._sites: dict[str, list[str]] = {}  # an environment's site-packages directories

    def of(self, path: str, member: str | None = None) -> Package | None:
        if member is not None or path.endswith(".whl"):
            wheel = wheel_package(path)
            if wheel is not None:
                return wheel
        full = os.path.normpath(os.path.abspath(path))
        ancestors = []
        directory = os.path.dirname(full)
        while True:
            ancestors.append(directory)
            owner = self._index(directory).get(full)
            if owner is not None:
                return owner
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        for env in ancestors:  # bin/tool, named in lib/pythonX.Y/site-packages/*.dist-info/RECORD as ../../../bin/tool
            for site in self._site_dirs(env):
                owner = self._index(site).get(full)
                if owner is not None:
                    return owner
        return None

    def _site_dirs(self, env: str) -> list[str]:
        import glob

        sites = self._sites.get(env)
        if sites is None:
            sites = sorted(glob.glob(os.path.join(glob.escape(env), "lib*", "python*", "site-packages"))
                           + glob.glob(os.path.join(glob.escape(env), "Lib", "site-packages")))
            self._sites[env] = sites
        return sites

    def _index(self, directory: str) -> dict[str, Package]:
        index = self._dirs.get(directory)
        if index is not None:
            return index
        index = {}
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


def _index_record(directory: str, dist_info: str, index: dict[str, Package]) -> None:
    info = os.path.join(directory, dist_info)
    text = _read(os.path.join(info, "RECORD"))
    if text is None:
        return
    package = dist_info_package(info)
    try:
        for row in csv.reader(io.StringIO(text, newline="")):
            if row and row[0]:
                index[os.path.normpath(os.path.join(directory, row[0]))] = package
    except csv.Error:
        return


def _index_conda(prefix: str, index: dict[str, Package]) -> None:
    meta = os.path.join(prefix, "conda-meta")
    try:
        names = sorted(os.listdir(meta))
    except OSError:
        return
    for name in names:
        if not name.endswith(".json"):
            continue
        text = _read(os.path.join(meta, name))
        try:
            doc = json.loads(text) if text else None
        except ValueError:
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            continue
        version = doc.get("version")
        package = Package(doc["name"], version if isinstance(version, str) else None)
        files = doc.get("files")
        if not isinstance(files, list):
            continue
        for f in files:
            if isinstance(f, str) and f:
                index[os.path.normpath(os.path.join(prefix, f))] = package


def annotate(reports: list[Any], owners: Owners | None = None) -> None:
    """Set ``package`` on every report (elfpatch.report.FileReport) whose file has a known owner."""
    owners = owners if owners is not None else Owners()
    for r in reports:
        r.package = owners.of(r.path, r.member)
